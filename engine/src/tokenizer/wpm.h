// WordPiece (tokenizer.ggml.model "bert"): BERT's tokenizer as llama.cpp runs it on a
// converted vocabulary, for encoder embedding models (bge, all-MiniLM, nomic-embed-text).
//  1. Normalize and split (BERT's BasicTokenizer): with strip_accents, every code point
//     becomes the first code point of its canonical decomposition ("é" -> "e") and marks
//     (\p{M}) are dropped; control and format characters (\p{C}), NUL and U+FFFD (invalid
//     UTF-8) are dropped; with lowercase, letters are lowercased. White space ends a word;
//     punctuation (\p{P}), ASCII symbols ("$", "+", "<", "^", "|", ...) and CJK ideographs
//     are words of their own.
//  2. Each word, with "▁" (U+2581) put before it, is split greedily into the longest
//     vocabulary entries from left to right; word-start pieces carry the "▁", continuation
//     pieces are stored without BERT's "##". A word that cannot be split completely becomes
//     the unknown token, whole.
// Both normalizer switches come from tokenizer.ggml.normalizer.lowercase (default true) and
// .strip_accents (default: the lowercase setting), as in llama.cpp.
//
// Thread-safety: pure functions over an immutable Vocab.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace powerhouse {

// Step 1: the words of `text`, normalized, without the "▁".
std::vector<std::string> wpm_words(std::string_view text, bool lowercase, bool strip_accents);

// Appends the ids of one run of plain text (no special tokens in it).
void wpm_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out);

// llama.cpp's clean-up of detokenized WordPiece text (clean_up_tokenization_spaces), which
// undoes the spaces the tokenizer's splitting implies: " ?", " !", " .", " ," lose the space;
// " ' " between two spaces becomes "'"; " 's", " 'm", " 're", " 've" lose the space.
std::string wpm_clean_up_spaces(std::string_view text);

// The first code point of the canonical decomposition of `cpt` (itself when it has none).
uint32_t nfd_first(uint32_t cpt);

namespace wpm_tables {
struct NfdRange {
    uint32_t first, last, value;
};
extern const NfdRange kNfdRanges[];  // generated: wpm_nfd_table.cpp
extern const size_t kNfdRangeCount;
}  // namespace wpm_tables

}  // namespace powerhouse
