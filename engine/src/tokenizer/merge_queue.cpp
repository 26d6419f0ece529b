#include "tokenizer/merge_queue.h"

namespace powerhouse {
namespace {

// Binary min-heap primitives, written out because std::push_heap with a comparator is many
// times slower in debug builds, where the tests run.
uint64_t key_of(const MergeCandidate& c) {
    return c.key;
}
uint64_t key_of(uint64_t k) {
    return k;
}

template <class T>
void sift_down(std::vector<T>& heap, size_t i) {
    T* h = heap.data();
    const size_t n = heap.size();
    const T item = h[i];
    while (true) {
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && key_of(h[child + 1]) < key_of(h[child])) ++child;
        if (key_of(item) <= key_of(h[child])) break;
        h[i] = h[child];
        i = child;
    }
    h[i] = item;
}

template <class T>
void heap_push(std::vector<T>& heap, const T& item) {
    heap.push_back(item);
    T* h = heap.data();
    size_t i = heap.size() - 1;
    while (i > 0) {
        const size_t parent = (i - 1) / 2;
        if (key_of(h[parent]) <= key_of(item)) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = item;
}

template <class T>
T heap_pop(std::vector<T>& heap) {
    const T top = heap.front();
    heap.front() = heap.back();
    heap.pop_back();
    if (!heap.empty()) sift_down(heap, 0);
    return top;
}

template <class T>
void heapify(std::vector<T>& heap) {
    for (size_t i = heap.size() / 2; i-- > 0;) sift_down(heap, i);
}

}  // namespace

void MergeQueue::clear() {
    heap_.clear();
    if (bucketed_) {
        for (Bucket& b : buckets_) {
            b.run.clear();
            b.head = 0;
            b.extra.clear();
        }
        free_buckets_.clear();
        for (uint32_t i = 0; i < buckets_.size(); ++i) free_buckets_.push_back(i);
        bucket_of_.clear();
        cache_.fill(CacheEntry{});
        order_.clear();
        bucketed_ = false;
    }
}

void MergeQueue::start() {
    if (heap_.size() < kBucketThreshold) {
        heapify(heap_);
        return;
    }
    bucketed_ = true;
    for (const MergeCandidate& c : heap_) bucket_push(c);
    heap_.clear();
}

void MergeQueue::push(const MergeCandidate& c) {
    if (bucketed_) {
        bucket_push(c);
        return;
    }
    heap_push(heap_, c);
    if (heap_.size() >= 4 * kBucketThreshold) {  // grew long after all: switch
        bucketed_ = true;
        for (const MergeCandidate& item : heap_) bucket_push(item);
        heap_.clear();
    }
}

uint32_t MergeQueue::bucket_for(uint32_t priority) {
    CacheEntry& cached = cache_[cache_slot(priority)];
    if (cached.index != kNoBucket && cached.priority == priority) return cached.index;
    uint32_t index;
    if (const auto found = bucket_of_.find(priority); found != bucket_of_.end()) {
        index = found->second;
    } else {
        if (free_buckets_.empty()) {
            index = static_cast<uint32_t>(buckets_.size());
            buckets_.emplace_back();
        } else {
            index = free_buckets_.back();
            free_buckets_.pop_back();
        }
        bucket_of_.emplace(priority, index);
        heap_push(order_, (uint64_t{priority} << 32) | index);
    }
    cached = CacheEntry{priority, index};
    return index;
}

void MergeQueue::bucket_push(const MergeCandidate& c) {
    Bucket& b = buckets_[bucket_for(c.priority())];
    if (b.head == b.run.size() || b.run.back().key < c.key) {
        b.run.push_back(c);
    } else {
        heap_push(b.extra, c);
    }
}

MergeCandidate MergeQueue::pop() {
    if (!bucketed_) return heap_pop(heap_);
    const auto index = static_cast<uint32_t>(order_.front());
    Bucket& b = buckets_[index];
    MergeCandidate c;
    if (b.head < b.run.size() && (b.extra.empty() || b.run[b.head].key < b.extra.front().key)) {
        c = b.run[b.head++];
    } else {
        c = heap_pop(b.extra);
    }
    if (b.empty()) {
        b.run.clear();
        b.head = 0;
        bucket_of_.erase(c.priority());
        CacheEntry& cached = cache_[cache_slot(c.priority())];
        if (cached.priority == c.priority()) cached = CacheEntry{};
        heap_pop(order_);
        free_buckets_.push_back(index);
    }
    return c;
}

}  // namespace powerhouse
