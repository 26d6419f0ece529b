// SentencePiece-style merging (tokenizer.ggml.model "llama"): text whose spaces are already
// spelled U+2581 is split into UTF-8 characters, then the adjacent pair whose concatenation
// is the vocabulary token with the highest score is merged, repeatedly (leftmost first among
// equal scores). Characters that end up in no token are emitted as byte-fallback tokens
// (<0xE2><0x96><0x81>). This is the merging llama.cpp does for these vocabularies.
//
// Thread-safety: pure function of an immutable Vocab; scratch memory is per call.
#pragma once

#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace powerhouse {

// U+2581, the character SentencePiece spells a space with.
inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";

// Appends the ids of `text` (spaces already replaced by U+2581, prefix space already added).
void spm_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out);

}  // namespace powerhouse
