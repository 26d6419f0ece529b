// One GGUF file (v2 or v3), parsed and validated, with zero-copy views of its metadata
// and tensor data.
//
// Every count, length, offset, dimension and type is checked against the file before it
// is used: a malformed file yields an Error naming the field and its byte offset, never a
// crash, a hang or an allocation larger than the file. See DESIGN.md section 7.
//
// Thread-safety: immutable after parsing; share it freely between threads.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_value.h"
#include "gguf/mapped_file.h"
#include "powerhouse/result.h"
#include "tensor/dtype.h"

namespace powerhouse {

inline constexpr uint32_t kGgufDefaultAlignment = 32;
// Larger alignments are refused: no writer uses them, and they only serve to push the
// data section past the end of the file.
inline constexpr uint32_t kGgufMaxAlignment = 1u << 20;
inline constexpr uint32_t kGgufMaxDims = 4;

struct GgufTensorInfo {
    std::string_view name;
    GgmlType type = GgmlType::f32;
    uint32_t n_dims = 0;
    std::array<int64_t, kGgufMaxDims> ne{1, 1, 1, 1};  // ne[0] is the row length
    uint64_t offset = 0;    // from the start of its file's data section
    uint64_t n_bytes = 0;
    int64_t n_elements = 0;
    uint32_t file_index = 0;  // which part of a split model holds the data
    const std::byte* data = nullptr;

    int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
    std::span<const std::byte> bytes() const { return {data, static_cast<size_t>(n_bytes)}; }
};

class GgufFile {
public:
    // Maps and parses a file.
    static Result<GgufFile> open(const std::filesystem::path& path);
    // Parses bytes the caller keeps alive (fuzzing, tests). `name` prefixes error messages.
    static Result<GgufFile> parse(std::span<const std::byte> bytes, std::string name);
    // Parses only the header (metadata and tensor index) from the first bytes of a file of
    // `file_size` bytes, e.g. fetched over HTTP before a download; the tensors' places are
    // checked against `file_size` and their `data` is null. nullopt: `prefix` ends inside
    // the header (fetch more and call again). The caller keeps `prefix` alive.
    static Result<std::optional<GgufFile>> parse_header(std::span<const std::byte> prefix, uint64_t file_size,
                                                        std::string name);

    uint32_t version() const { return version_; }
    uint32_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // start of the data section
    uint64_t file_size() const { return header_only_size_ ? *header_only_size_ : bytes_.size(); }
    const std::string& name() const { return name_; }
    const std::filesystem::path& path() const { return mapping_.path(); }
    const GgufMetadata& metadata() const { return metadata_; }
    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
    // The file's mapping (empty when parsed from caller-owned bytes).
    const MappedFile& mapping() const { return mapping_; }

private:
    friend class GgufParser;

    MappedFile mapping_;  // empty when parsed from caller-owned bytes
    std::span<const std::byte> bytes_;
    std::string name_;
    uint32_t version_ = 0;
    uint32_t alignment_ = kGgufDefaultAlignment;
    uint64_t data_offset_ = 0;
    GgufMetadata metadata_;
    std::vector<GgufTensorInfo> tensors_;
    std::optional<uint64_t> header_only_size_;  // parse_header: the whole file's size
};

}  // namespace powerhouse
