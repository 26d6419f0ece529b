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

    // Whether [p, p + n) lies inside the mapping.
    bool contains(const std::byte* p, uint64_t n) const;
    // Gives the whole pages inside [p, p + n) (inside the mapping) back to the kernel: they
    // leave the process's resident memory and stay in the page cache, read again from there
    // if touched (for weights that were copied elsewhere, e.g. interleaved).
    void release_pages(const std::byte* p, uint64_t n) const;

private:
    void release();

    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    uint64_t size_ = 0;
};

}  // namespace powerhouse
