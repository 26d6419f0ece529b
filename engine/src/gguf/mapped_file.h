// A read-only memory mapping of a whole file. Model weights are used in place from the
// mapping: nothing is copied, and pages the engine never touches are never read.
//
// Thread-safety: immutable after open; the bytes may be read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

#include "powerhouse/result.h"

namespace powerhouse {

class MappedFile {
public:
    static Result<MappedFile> open(const std::filesystem::path& path);

    MappedFile() = default;
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    const std::byte* data() const { return data_; }
    uint64_t size() const { return size_; }
    std::span<const std::byte> bytes() const { return {data_, static_cast<size_t>(size_)}; }
    const std::filesystem::path& path() const { return path_; }

private:
    void release();

    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    uint64_t size_ = 0;
};

}  // namespace powerhouse
