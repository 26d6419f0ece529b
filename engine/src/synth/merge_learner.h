// Grows a vocabulary by pair merges, as BPE training does: first real merges learned from
// a small built-in English and code text (so common words become single tokens), then
// deterministic merges of existing tokens until the vocabulary has its real size. Used
// for both byte-level BPE (symbols are GPT-2 byte characters) and SPM (symbols are
// characters, "▁" marks a word start); every token it adds is the concatenation of two
// earlier ones, so every merge's parts and result are in the vocabulary.
//
// Thread-safety: one table per thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "powerhouse/result.h"

namespace powerhouse::synth {

class MergeTable {
public:
    // `marker` starts word-initial tokens ("Ġ" for BPE, "▁" for SPM); `reserved` holds
    // texts the table must never create (special tokens, SPM byte tokens).
    MergeTable(std::vector<std::string> base_symbols, std::string marker, std::unordered_set<std::string> reserved);

    // Learns up to `max_merges` merges from words given as base-symbol sequences with
    // counts; stops early when no pair occurs twice.
    struct Word {
        std::vector<uint32_t> symbols;
        int64_t count = 0;
    };
    void learn(std::vector<Word> words, size_t max_merges);

    // Adds merges of a word-like token and a short letters-only tail until there are
    // `n_symbols` symbols; `seed` fixes the choice.
    Result<void> fill(size_t n_symbols, uint64_t seed);

    const std::vector<std::string>& symbols() const { return symbols_; }
    size_t n_base() const { return n_base_; }
    // Merges in rank order, as (left, right) symbol ids; the result is their concatenation.
    const std::vector<std::pair<uint32_t, uint32_t>>& merges() const { return merges_; }
    // The id of a symbol text, or -1.
    int64_t find(std::string_view text) const;

private:
    // Returns the id of the concatenation (new or existing), or -1 when it is reserved.
    int64_t merge(uint32_t left, uint32_t right);

    std::vector<std::string> symbols_;
    size_t n_base_ = 0;
    std::string marker_;
    std::unordered_set<std::string> reserved_;
    std::unordered_map<std::string, uint32_t> by_text_;
    std::vector<std::pair<uint32_t, uint32_t>> merges_;
};

// Splits text into pre-tokens roughly as GPT-2's pre-tokenizer does: a letter, digit or
// punctuation run with at most one leading space; other whitespace runs stand alone.
std::vector<std::string> split_pretokens(std::string_view text);

// The built-in training text (corpus.cpp).
std::string_view training_corpus();

}  // namespace powerhouse::synth
