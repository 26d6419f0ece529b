#include "platform/zeroed_pages.h"

#include <sys/mman.h>

#include <new>
#include <utility>

namespace powerhouse {

ZeroedPages::ZeroedPages(size_t bytes) {
    if (bytes == 0) return;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<std::byte*>(p);
    size_ = bytes;
}

ZeroedPages::~ZeroedPages() { release(); }

void ZeroedPages::prefer_huge_pages() {
    // Advice only: a kernel without transparent huge pages refuses it, and 4 KiB pages serve.
    if (data_ != nullptr) (void)::madvise(data_, size_, MADV_HUGEPAGE);
}

ZeroedPages::ZeroedPages(ZeroedPages&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

ZeroedPages& ZeroedPages::operator=(ZeroedPages&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

void ZeroedPages::release() noexcept {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
}

}  // namespace powerhouse
