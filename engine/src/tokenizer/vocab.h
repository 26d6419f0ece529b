// The vocabulary of a tokenizer as read from GGUF metadata (tokenizer.ggml.*): token texts,
// types, scores, the special token ids and the flags that steer tokenization. The token
// texts are copied out of the file so that a Tokenizer outlives the GgufModel it came from.
//
// Token attributes follow llama.cpp's (a token type from the file, plus flags it infers:
// e.g. "<|im_end|>" is made a control token even when the file says "normal"), because the
// reference's tokenization depends on them.
//
// Thread-safety: immutable after load_vocab(); share freely.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "gguf/gguf_value.h"
#include "powerhouse/result.h"
#include "powerhouse/tokenizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/token_lookup.h"

namespace powerhouse {

// Token types as stored in tokenizer.ggml.token_type.
enum class GgufTokenType : int32_t {
    undefined = 0,
    normal = 1,
    unknown = 2,
    control = 3,
    user_defined = 4,
    unused = 5,
    byte = 6,
};

// Attribute bits of a token.
namespace token_attr {
inline constexpr uint16_t undefined = 0;
inline constexpr uint16_t unknown = 1 << 0;
inline constexpr uint16_t unused = 1 << 1;
inline constexpr uint16_t normal = 1 << 2;
inline constexpr uint16_t control = 1 << 3;
inline constexpr uint16_t user_defined = 1 << 4;
inline constexpr uint16_t byte = 1 << 5;
inline constexpr uint16_t lstrip = 1 << 6;  // white space before it is dropped when it is matched
inline constexpr uint16_t rstrip = 1 << 7;  // white space after it is dropped when it is matched
}  // namespace token_attr

struct Vocab {
    bool is_spm = false;  // tokenizer.ggml.model "llama"; else "gpt2" (byte-level BPE) or "bert"
    bool is_wpm = false;  // tokenizer.ggml.model "bert" (WordPiece, tokenizer/wpm.h)
    std::string model_name;
    std::string pre_name;
    PreTokenizerSpec pre;  // BPE only

    int32_t n_tokens = 0;
    std::vector<char> text_storage;      // all token texts, back to back
    std::vector<uint32_t> text_offsets;  // [n_tokens + 1] into text_storage
    std::vector<uint16_t> attrs;         // [n_tokens] token_attr bits
    std::vector<float> scores;           // [n_tokens] SPM merge priority (0 when absent)
    TokenLookup token_to_id;             // text -> id; a later duplicate wins

    std::optional<TokenId> bos, eos, eot, eom, unk, pad;
    std::optional<TokenId> sep;  // WordPiece: closes a prompt (tokenizer.ggml.seperator_token_id)
    std::optional<TokenId> fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    std::unordered_set<TokenId> eog;  // end-of-generation tokens

    bool add_bos = false;
    bool add_eos = false;
    bool add_space_prefix = false;  // SPM: a space is put before the text (and dropped again on output)
    bool wpm_lowercase = true;      // WordPiece: tokenizer.ggml.normalizer.lowercase
    bool wpm_strip_accents = true;  // WordPiece: tokenizer.ggml.normalizer.strip_accents
    size_t max_token_bytes = 0;     // the longest token text

    // The token that stands for each raw byte: SPM "<0xAB>" (or the one-byte token), BPE the
    // GPT-2 spelling of the byte. -1 when the vocabulary has none.
    std::array<TokenId, 256> byte_token{};

    std::string_view text(TokenId id) const {
        return {text_storage.data() + text_offsets[static_cast<size_t>(id)],
                text_offsets[static_cast<size_t>(id) + 1] - text_offsets[static_cast<size_t>(id)]};
    }
    bool valid(TokenId id) const { return id >= 0 && id < n_tokens; }
    bool has_attr(TokenId id, uint16_t bits) const { return (attrs[static_cast<size_t>(id)] & bits) != 0; }
    std::optional<TokenId> find(std::string_view text) const {
        return token_to_id.find(text, [this](TokenId id) { return this->text(id); });
    }
    // A token that plain text may turn into: control and unknown tokens are reachable only
    // through special-token parsing, never by merging ordinary characters.
    std::optional<TokenId> find_mergeable(std::string_view text) const {
        const auto id = find(text);
        if (!id || has_attr(*id, token_attr::control | token_attr::unknown)) return std::nullopt;
        return id;
    }
};

// Reads the vocabulary; refuses tokenizer models and pre-tokenizers it cannot reproduce.
Result<Vocab> load_vocab(const GgufMetadata& metadata);

}  // namespace powerhouse
