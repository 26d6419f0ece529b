// The bookkeeping of a KV cache shared by sequences (powerhouse/sequences.h): which blocks
// of the pool each sequence holds, in order (its block table), how many holders each block
// has, and the finished sequences kept as cached prefixes. Pure host data: the stages hold
// the keys and values themselves, block b of every layer at rows b * block_size ...
//
// Blocks are shared, never written by two holders: a sequence that adopts another's prefix
// shares its whole blocks and gets a copy of the block the prefix ends in; a sequence about
// to write into a block it shares gets its own copy first (copy on write). The copies are
// queued (take_copies) for the stages to make before the next batch runs, in order.
//
// Contiguous mode is for a stage whose kernels read the cache by position (the CUDA stage
// until its attention reads block tables): one live sequence, whose block i is block i of
// the pool, and at most one cached prefix, which a new sequence takes over rather than shares.
//
// Thread-safety: none; used by the backend's thread.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <set>
#include <span>
#include <vector>

#include "powerhouse/result.h"
#include "powerhouse/sequences.h"
#include "powerhouse/tokenizer.h"

namespace powerhouse {

struct KvBlockCopy {
    int32_t from = 0;
    int32_t to = 0;
};

struct KvBlocksOptions {
    uint32_t n_blocks = 0;
    uint32_t block_size = 32;
    uint32_t max_length = 0;     // positions of one sequence (the model's context)
    uint32_t max_sequences = 1;  // live at once
    uint32_t max_cached = 0;     // finished sequences kept as prefixes
    bool contiguous = false;
};

class KvBlocks {
public:
    explicit KvBlocks(const KvBlocksOptions& options);

    const KvBlocksOptions& options() const { return options_; }
    uint32_t block_size() const { return options_.block_size; }

    // A new, empty sequence. Fails when max_sequences are live; `spare` allows one more (the
    // backend's own single sequence, so that it never takes a scheduler's place).
    Result<SeqId> open(bool spare = false);
    // Ends a sequence. With `keep`, its blocks stay as a cached prefix (dropping the least
    // recently used beyond max_cached, and any cached prefix of it).
    void close(SeqId seq, bool keep);
    bool contains(SeqId seq) const { return live_.count(seq) != 0; }
    uint32_t length(SeqId seq) const;
    std::span<const TokenId> tokens(SeqId seq) const;
    // Block ids covering positions 0 .. length (and what reserve() added).
    std::span<const int32_t> table(SeqId seq) const;

    // For an empty sequence: takes the longest beginning of `prompt`, up to `limit` positions,
    // that another sequence (live or cached) holds, and returns its length.
    uint32_t adopt_prefix(SeqId seq, std::span<const TokenId> prompt, uint32_t limit);
    // Forgets positions n and later.
    void truncate(SeqId seq, uint32_t n);

    // Blocks that growing `seq` by n positions takes from the pool (new ones and copies).
    uint32_t blocks_needed(SeqId seq, uint32_t n) const;
    // Blocks that can be handed out: free, or held only by cached prefixes.
    uint32_t available_blocks() const;
    // Gives `seq` the blocks for n more positions. Fails, changing nothing, when the pool
    // lacks them even after dropping every cached prefix, or the sequence would pass
    // max_length.
    Result<void> reserve(SeqId seq, uint32_t n);
    // Records the tokens just decoded at the end of `seq` (within what reserve() gave).
    void append(SeqId seq, std::span<const TokenId> tokens);

    // The copies to make before the next batch, in order; clears the queue.
    std::vector<KvBlockCopy> take_copies();
    // Drops every cached prefix.
    void drop_cached();
    KvStats stats() const;

private:
    struct Seq {
        std::vector<TokenId> tokens;  // one per position held
        std::vector<int32_t> table;
    };

    Seq& live(SeqId seq);
    const Seq& live(SeqId seq) const;
    // A block from the free list (the lowest), dropping cached prefixes when it is empty.
    // -1 when none is left.
    int32_t allocate();
    void release(int32_t block);
    void hold(int32_t block) { ++refs_[static_cast<size_t>(block)]; }
    void evict_oldest();
    void release_all(Seq& s);

    KvBlocksOptions options_;
    std::vector<uint32_t> refs_;         // holders per block
    std::vector<uint32_t> cached_refs_;  // of which cached prefixes
    std::set<int32_t> free_;
    std::map<SeqId, Seq> live_;
    std::list<Seq> cached_;  // most recently used first
    std::vector<KvBlockCopy> copies_;
    SeqId next_id_ = 0;
};

}  // namespace powerhouse
