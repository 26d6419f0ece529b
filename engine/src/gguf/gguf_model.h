// A model stored in GGUF: one file, or a split model (`NAME-00001-of-00003.gguf`, ...)
// read as one. Metadata comes from the first part; tensors from all parts, each tensor
// pointing into the mapping of the part that holds it.
//
// Thread-safety: immutable after open; share it freely between threads.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/gguf_file.h"
#include "powerhouse/result.h"

namespace powerhouse {

// Split-model metadata keys, as llama.cpp's gguf-split writes them.
inline constexpr std::string_view kSplitNoKey = "split.no";
inline constexpr std::string_view kSplitCountKey = "split.count";
inline constexpr std::string_view kSplitTensorsCountKey = "split.tensors.count";

// Parts of a split model's file name: "/m/Llama-00002-of-00003.gguf" -> {"/m/Llama", 2, 3}.
struct SplitName {
    std::filesystem::path prefix;
    int index = 0;  // 1-based
    int count = 0;
};
std::optional<SplitName> parse_split_name(const std::filesystem::path& path);
std::filesystem::path split_path(const std::filesystem::path& prefix, int index, int count);

class GgufModel {
public:
    // Opens a single file, or all the parts of a split model given any one of them.
    static Result<GgufModel> open(const std::filesystem::path& path);
    // Wraps already parsed parts (in order); used by open() and by tests.
    static Result<GgufModel> from_parts(std::vector<GgufFile> parts);

    const GgufMetadata& metadata() const { return parts_.front().metadata(); }
    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
    const GgufTensorInfo* find_tensor(std::string_view name) const;
    const std::vector<GgufFile>& parts() const { return parts_; }
    uint64_t total_file_size() const;
    uint64_t total_tensor_bytes() const;
    // MappedFile::release_pages for weights inside one part's file mapping; nothing for
    // bytes that are not (a model parsed from memory).
    void release_pages(const std::byte* p, uint64_t n) const;

private:
    std::vector<GgufFile> parts_;
    std::vector<GgufTensorInfo> tensors_;
    std::unordered_map<std::string_view, size_t> by_name_;
};

}  // namespace powerhouse
