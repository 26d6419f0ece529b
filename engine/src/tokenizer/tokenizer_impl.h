// The data behind a powerhouse::Tokenizer, and the engine-internal way to build one from
// metadata that is already open (the engine's model loader has the GgufModel at hand).
//
// Thread-safety: immutable after construction; shared by every copy of a Tokenizer.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "gguf/gguf_value.h"
#include "powerhouse/result.h"
#include "powerhouse/tokenizer.h"
#include "tokenizer/bpe.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/special_partition.h"
#include "tokenizer/vocab.h"

namespace powerhouse {

struct TokenizerImpl {
    TokenizerImpl(Vocab vocab_in, std::optional<BpeModel> bpe_in)
        : vocab(std::move(vocab_in)), bpe(std::move(bpe_in)), specials(vocab), pieces(vocab) {}

    // Appends the ids of one run of plain text. `after_special`: the text starts the input
    // or follows a special token (SentencePiece then puts a space before it).
    void encode_text(std::string_view text, bool after_special, std::vector<TokenId>& out) const;

    Vocab vocab;
    std::optional<BpeModel> bpe;  // byte-level BPE vocabularies only
    SpecialTokenMatcher specials;
    TokenPieces pieces;
};

Result<Tokenizer> tokenizer_from_metadata(const GgufMetadata& metadata);

}  // namespace powerhouse
