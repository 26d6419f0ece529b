// Token ids back to bytes: what each token stands for, computed once per vocabulary.
//  - normal tokens: SentencePiece (and WordPiece) "▁" becomes a space; byte-level BPE texts are mapped back
//    from the GPT-2 alphabet to raw bytes;
//  - byte tokens "<0xAB>": the byte;
//  - control and unknown tokens: their text, shown only when rendering specials;
//  - user-defined tokens: their text as is; unused tokens: nothing.
// The UTF-8 assembly of these pieces (held bytes, U+FFFD) is StreamingDetokenizer's job.
//
// Thread-safety: immutable after construction.
#pragma once

#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace powerhouse {

class TokenPieces {
public:
    explicit TokenPieces(const Vocab& vocab);

    // The bytes of token `id` (valid id required); empty for a hidden special token.
    std::string_view piece(TokenId id, bool render_special) const {
        if (!render_special && hidden_[static_cast<size_t>(id)]) return {};
        return {storage_.data() + offsets_[static_cast<size_t>(id)],
                offsets_[static_cast<size_t>(id) + 1] - offsets_[static_cast<size_t>(id)]};
    }

private:
    std::vector<char> storage_;
    std::vector<size_t> offsets_;  // [n_tokens + 1]
    std::vector<bool> hidden_;     // control/unknown: shown only when rendering specials
};

// SentencePiece puts a space before the text (add_space_prefix); it is not part of the text,
// so the first token's leading space is dropped, looking past a leading BOS that shows
// nothing (as llama.cpp does). Tracks that across the tokens of one text.
struct LeadingSpaceRule {
    bool pending = true;
    size_t n_seen = 0;

    // The piece of token `id` with the rule applied. `enabled`: the caller wants the rule.
    std::string_view apply(const Vocab& vocab, bool enabled, TokenId id, std::string_view piece) {
        if (pending) {
            const bool applies = enabled && vocab.is_spm && vocab.add_space_prefix;
            const bool skip_bos = n_seen == 0 && vocab.bos == id && piece.empty();
            if (!applies) {
                pending = false;
            } else if (!skip_bos) {
                if (!piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
                pending = false;
            }
        }
        ++n_seen;
        return piece;
    }
};

}  // namespace powerhouse
