#include "tokenizer/detokenizer.h"

#include <string>

#include "tokenizer/byte_level.h"
#include "tokenizer/spm.h"

namespace powerhouse {
namespace {

void append_spm_text(std::string_view text, std::string& out) {
    size_t pos = 0;
    while (true) {
        const size_t found = text.find(kSpmSpace, pos);
        if (found == std::string_view::npos) break;
        out.append(text.substr(pos, found - pos));
        out += ' ';
        pos = found + kSpmSpace.size();
    }
    out.append(text.substr(pos));
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// "<0xAB>" -> 0xAB; -1 for anything else.
int byte_token_value(std::string_view text) {
    if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
    const int hi = hex_value(text[3]);
    const int lo = hex_value(text[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

TokenPieces::TokenPieces(const Vocab& vocab) {
    const auto n = static_cast<size_t>(vocab.n_tokens);
    offsets_.reserve(n + 1);
    hidden_.resize(n, false);
    std::string piece;
    offsets_.push_back(0);
    for (TokenId id = 0; id < vocab.n_tokens; ++id) {
        piece.clear();
        const std::string_view text = vocab.text(id);
        if (vocab.has_attr(id, token_attr::control | token_attr::unknown)) {
            piece = text;
            hidden_[static_cast<size_t>(id)] = true;
        } else if (vocab.has_attr(id, token_attr::user_defined)) {
            piece = text;
        } else if (vocab.has_attr(id, token_attr::normal)) {
            if (vocab.is_spm || vocab.is_wpm) {  // WordPiece: "▁" starts a word with a space
                append_spm_text(text, piece);
            } else {
                append_gpt2_decoded(text, piece);
            }
        } else if (vocab.has_attr(id, token_attr::byte)) {
            const int value = byte_token_value(text);
            if (value >= 0) piece += static_cast<char>(value);
        }
        storage_.insert(storage_.end(), piece.begin(), piece.end());
        offsets_.push_back(storage_.size());
    }
}

}  // namespace powerhouse
