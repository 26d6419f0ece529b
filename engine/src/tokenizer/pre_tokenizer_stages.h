// The simple stages of the multi-regex pre-tokenizers (Falcon, StarCoder, DeepSeek LLM,
// llama.cpp's default). Each mirrors one regex as the reference applies it: the matches
// and the text between matches all become pieces; a regex never matches across the piece
// it is given.
//
// The reference runs these regexes with std::regex over a "collapsed" copy of the text in
// which every non-ASCII code point stands for its category (\p{..} stages) or over the raw
// code points with non-ASCII white space turned into '\v' (the others). The predicates
// here reproduce that: e.g. U+3000 (white space) never matches a class range containing it.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>

#include "tokenizer/pre_tokenizer.h"

namespace powerhouse {

// [\p{P}\$\+<=>\^~\|`]+ (Falcon) and [\p{P}\$\+<=>\^~\|]+ (default).
void split_punctuation_runs_falcon(const SplitText& text, size_t begin, size_t end, PieceSink sink);
void split_punctuation_runs_default(const SplitText& text, size_t begin, size_t end, PieceSink sink);
// \p{N}: each number code point on its own.
void split_each_number(const SplitText& text, size_t begin, size_t end, PieceSink sink);
// \p{N}+
void split_number_runs(const SplitText& text, size_t begin, size_t end, PieceSink sink);
// [0-9][0-9][0-9]
void split_ascii_digit_triples(const SplitText& text, size_t begin, size_t end, PieceSink sink);
// [\r\n]
void split_each_cr_lf(const SplitText& text, size_t begin, size_t end, PieceSink sink);
// \s?[A-Za-zµÀ-ÖØ-öø-ƺ...]+ (DeepSeek's cased-letter class)
void split_deepseek_letters(const SplitText& text, size_t begin, size_t end, PieceSink sink);
// \s?[!-/:-~！-／：-～‘-‟　-。]+
void split_deepseek_punctuation(const SplitText& text, size_t begin, size_t end, PieceSink sink);
// \s+$
void split_trailing_white_space(const SplitText& text, size_t begin, size_t end, PieceSink sink);
// [一-龥ࠀ-一가-퟿]+
void split_deepseek_cjk(const SplitText& text, size_t begin, size_t end, PieceSink sink);

}  // namespace powerhouse
