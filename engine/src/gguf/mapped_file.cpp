#include "gguf/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace powerhouse {

Result<MappedFile> MappedFile::open(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        std::string hint = err == ENOENT ? " (check the path)" : err == EACCES ? " (check the file's permissions)" : "";
        return make_error(ErrorCode::io, fmt::format("cannot open {}: {}{}", path.string(), std::strerror(err), hint));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        return make_error(ErrorCode::io, fmt::format("cannot stat {}: {}", path.string(), std::strerror(err)));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return make_error(ErrorCode::invalid_argument, fmt::format("{} is not a regular file", path.string()));
    }
    MappedFile file;
    file.path_ = path;
    file.size_ = static_cast<uint64_t>(st.st_size);
    if (file.size_ == 0) {
        ::close(fd);
        return make_error(ErrorCode::format, fmt::format("{} is empty (0 bytes)", path.string()));
    }
    void* addr = ::mmap(nullptr, static_cast<size_t>(file.size_), PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);  // the mapping keeps the file alive
    if (addr == MAP_FAILED) {
        return make_error(ErrorCode::io, fmt::format("cannot map {} ({} bytes) into memory: {}", path.string(),
                                                     file.size_, std::strerror(err)));
    }
    file.data_ = static_cast<const std::byte*>(addr);
    return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        release();
        path_ = std::move(other.path_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
    if (data_ != nullptr) {
        ::munmap(const_cast<std::byte*>(data_), static_cast<size_t>(size_));
        data_ = nullptr;
        size_ = 0;
    }
}

bool MappedFile::contains(const std::byte* p, uint64_t n) const {
    return data_ != nullptr && p >= data_ && n <= size_ && static_cast<uint64_t>(p - data_) <= size_ - n;
}

void MappedFile::release_pages(const std::byte* p, uint64_t n) const {
    if (!contains(p, n)) return;
    const auto page = static_cast<uintptr_t>(std::max(4096L, sysconf(_SC_PAGESIZE)));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) & ~(page - 1);
    // A read-only private file mapping: dropped pages come back from the file unchanged.
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace powerhouse
