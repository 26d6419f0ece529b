// Memory that reads as zeros and costs resident memory only where it has been written: an
// anonymous private mapping, whose pages the kernel backs on first touch. For buffers sized
// for the worst case that a run seldom reaches (the KV cache of the whole context, the
// activations of a full batch), so that the process holds what its steps have used, not
// what they might use: a 4096-position cache for a conversation of 300 tokens costs the
// pages of 300 positions. std::vector would write every byte when it is sized.
//
// Pages once written stay resident until the buffer is released or reset.
//
// Thread-safety: as a plain array; moving, resetting or destroying needs exclusive access.
#pragma once

#include <cstddef>
#include <type_traits>

namespace powerhouse {

class ZeroedPages {
public:
    ZeroedPages() = default;
    // Throws std::bad_alloc when the address space cannot be had (as std::vector would).
    explicit ZeroedPages(size_t bytes);
    ~ZeroedPages();
    ZeroedPages(ZeroedPages&& other) noexcept;
    ZeroedPages& operator=(ZeroedPages&& other) noexcept;
    ZeroedPages(const ZeroedPages&) = delete;
    ZeroedPages& operator=(const ZeroedPages&) = delete;

    std::byte* data() { return data_; }
    const std::byte* data() const { return data_; }
    size_t size() const { return size_; }

    // Asks the kernel to back the buffer with 2 MiB pages where it can (transparent huge
    // pages, in "madvise" mode too): for large buffers written whole and then streamed (copied
    // weights), fewer page faults while writing and fewer TLB misses while reading. A huge
    // page is resident whole once touched, so not for buffers meant to stay sparse.
    void prefer_huge_pages();

    template <class T>
    T* as() {
        return reinterpret_cast<T*>(data_);
    }
    template <class T>
    const T* as() const {
        return reinterpret_cast<const T*>(data_);
    }

private:
    void release() noexcept;

    std::byte* data_ = nullptr;
    size_t size_ = 0;
};

// ZeroedPages as an array of n trivially copyable values, all zero until written.
template <class T>
class ZeroedArray {
    static_assert(std::is_trivially_copyable_v<T>);
public:
    ZeroedArray() = default;
    explicit ZeroedArray(size_t n) : pages_(n * sizeof(T)), size_(n) {}

    T* data() { return pages_.as<T>(); }
    const T* data() const { return pages_.as<T>(); }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    T* begin() { return data(); }
    T* end() { return data() + size_; }
    const T* begin() const { return data(); }
    const T* end() const { return data() + size_; }
    void clear() { *this = ZeroedArray(); }

private:
    ZeroedPages pages_;
    size_t size_ = 0;
};

}  // namespace powerhouse
