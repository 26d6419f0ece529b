// Byte-level BPE merging (tokenizer.ggml.model "gpt2"): one pre-tokenized word, as raw
// bytes, to token ids. Each byte starts as its GPT-2-alphabet symbol; adjacent symbols are
// merged lowest merge rank first (leftmost first among equals) until no listed merge applies.
//
// Symbols are identified by interned ids (token ids, plus ids for the rare merge strings
// that are not tokens), so a merge step is one hash lookup of an integer pair, and a word is
// merged with a heap in O(n log n): a 10 MB word is fine.
//
// Thread-safety: a BpeModel is immutable after build(); BpeScratch is per call.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_value.h"
#include "powerhouse/result.h"
#include "tokenizer/merge_queue.h"
#include "tokenizer/token_lookup.h"
#include "tokenizer/vocab.h"

namespace powerhouse {

// Working memory for encode_word(), reused across the words of one text.
struct BpeScratch {
    struct Symbol {
        uint32_t id;     // interned symbol id
        uint32_t start;  // first byte in the word
        uint32_t len;    // bytes; 0 once merged into its left neighbour
        int32_t prev;
        int32_t next;
    };
    std::vector<Symbol> symbols;
    MergeQueue queue;
    std::string spelled;  // the word in the GPT-2 alphabet (exact-token lookups)
};

class BpeModel {
public:
    // Reads tokenizer.ggml.merges ("left right" strings, in rank order).
    static Result<BpeModel> build(const Vocab& vocab, const GgufMetadata& metadata);

    // Appends the ids of one word. `word` holds the raw bytes of the word.
    void encode_word(const Vocab& vocab, std::string_view word, std::vector<TokenId>& out, BpeScratch& scratch) const;

    size_t n_merges() const { return merges_.size(); }

private:
    void emit_symbol(const Vocab& vocab, std::string_view word, const BpeScratch::Symbol& symbol,
                     std::vector<TokenId>& out, BpeScratch& scratch) const;

    uint32_t n_vocab_ = 0;
    PairTable merges_;                         // (left, right) -> rank, interned id of left + right
    std::array<uint32_t, 256> byte_symbol_{};  // interned id of each byte's GPT-2 spelling
};

}  // namespace powerhouse
