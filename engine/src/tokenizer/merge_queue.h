// The priority queue of merge candidates shared by BPE and SentencePiece merging. Each
// candidate has one 64-bit key: the merge's priority in the high half, the left symbol's
// index in the low half, so equal priorities pop leftmost first.
//
// Short words use a plain binary heap. Long ones (a 10 MB word is tens of millions of
// candidates) would spend their time sifting a huge heap, so past a threshold candidates go
// to one bucket per priority instead: candidates of one priority mostly arrive left to
// right, so a bucket keeps them in an append-only run popped from the front, with a small
// heap for the few that arrive out of order; a heap of the non-empty buckets' priorities
// picks the next bucket. Both modes pop exactly the same sequence.
//
// Thread-safety: one queue per tokenize call.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace powerhouse {

struct MergeCandidate {
    uint64_t key;    // (priority << 32) | left; smaller pops first
    uint32_t right;  // index of the right symbol when proposed
    uint32_t size;   // bytes of left + right when proposed: tells a stale candidate apart

    uint32_t left() const { return static_cast<uint32_t>(key); }
    uint32_t priority() const { return static_cast<uint32_t>(key >> 32); }
};

class MergeQueue {
public:
    void clear();
    bool empty() const { return bucketed_ ? order_.empty() : heap_.empty(); }
    // Adds without ordering; call start() once before the first pop. Appending in increasing
    // `left` order (as the first scan of a word does) keeps long words cheap.
    void append(const MergeCandidate& c) { heap_.push_back(c); }
    void start();
    void push(const MergeCandidate& c);
    MergeCandidate pop();

private:
    struct Bucket {
        std::vector<MergeCandidate> run;  // increasing keys, popped from run[head]
        size_t head = 0;
        std::vector<MergeCandidate> extra;  // min-heap of the ones that arrived out of order
        bool empty() const { return head == run.size() && extra.empty(); }
    };
    static constexpr size_t kBucketThreshold = 4096;

    void bucket_push(const MergeCandidate& c);
    uint32_t bucket_for(uint32_t priority);  // creates the bucket when needed
    static size_t cache_slot(uint32_t priority) { return (priority * 0x9E3779B1u) >> 26; }

    bool bucketed_ = false;
    std::vector<MergeCandidate> heap_;  // heap mode: min-heap; before start(): unordered
    std::vector<Bucket> buckets_;
    std::vector<uint32_t> free_buckets_;
    std::unordered_map<uint32_t, uint32_t> bucket_of_;  // priority -> index, non-empty buckets only
    // A few recent priority -> index answers in front of bucket_of_ (long runs reuse a few buckets).
    static constexpr uint32_t kNoBucket = UINT32_MAX;
    struct CacheEntry {
        uint32_t priority = 0;
        uint32_t index = kNoBucket;
    };
    std::array<CacheEntry, 64> cache_{};
    std::vector<uint64_t> order_;  // min-heap of (priority << 32) | bucket index
};

}  // namespace powerhouse
