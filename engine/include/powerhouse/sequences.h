// Several sequences in one model: the ids, the rows of a batch that mixes them, and what the
// shared KV cache holds. A model keeps one pool of KV blocks (block_size positions each) for
// all its sequences; a sequence takes blocks as it grows and gives them back when it ends.
// A finished sequence may stay cached (its blocks kept, least recently used dropped first)
// so that a later prompt with the same beginning reuses its keys and values.
#pragma once

#include <cstdint>

#include "powerhouse/tokenizer.h"

namespace powerhouse {

using SeqId = uint32_t;

// What a row of a batch asks back.
enum class RowOutput : uint8_t {
    none,    // only keys and values (a prompt token that is not the last)
    logits,  // the logits (n_vocab floats)
    argmax,  // only the index of the largest logit (greedy; a GPU picks it on the device)
    hidden,  // the last layer's output after the final norm (n_embd floats): embeddings
};

// One token of a batch: it goes after the positions its sequence already holds, and after
// the earlier rows of the same sequence in the batch.
struct BatchRow {
    SeqId seq = 0;
    TokenId token = 0;
    RowOutput output = RowOutput::none;
};

struct KvStats {
    uint32_t block_size = 0;      // positions per block
    uint32_t total_blocks = 0;    // the pool
    uint32_t free_blocks = 0;     // held by nothing
    uint32_t cached_blocks = 0;   // held only by cached prefixes (handed out when needed)
    uint32_t shared_blocks = 0;   // held by more than one sequence or prefix
    uint32_t sequences = 0;       // live sequences
    uint32_t cached_prefixes = 0; // finished sequences kept for reuse
    uint64_t block_bytes = 0;     // one block of every layer, keys and values, all devices
};

}  // namespace powerhouse
