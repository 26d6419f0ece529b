// Finds special tokens in a text segment and cuts it into fragments: special tokens and the
// plain text between them, which the SentencePiece/BPE model then tokenizes.
//
// The result is the reference's (llama.cpp's) partition: special tokens are tried longest
// first, each taking its leftmost non-overlapping occurrences in the text still left over;
// tokens marked lstrip/rstrip swallow the white space next to them. Found in one pass with a
// trie instead of one search per special token, so a vocabulary with thousands of them
// (DeepSeek) still costs about one pass over the text.
//
// Which tokens count: with parse_special, control, unknown and user-defined tokens; without,
// only user-defined ones (which the models' tokenizers always split out; see tokenizer.h).
//
// Thread-safety: immutable after construction.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/vocab.h"

namespace powerhouse {

// A special token (token >= 0) or a piece of plain text (token == -1).
struct Fragment {
    TokenId token = -1;
    std::string_view text;
    bool is_token() const { return token >= 0; }
};

class SpecialTokenMatcher {
public:
    explicit SpecialTokenMatcher(const Vocab& vocab);

    // Appends the fragments of `text` to `out`; plain-text fragments are never empty.
    void partition(std::string_view text, bool parse_special, std::vector<Fragment>& out) const;

private:
    struct Special {
        TokenId id;
        uint32_t length;
        bool lstrip;
        bool rstrip;
        bool always;  // user-defined: recognised even without parse_special
    };
    struct Node {
        std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
        int32_t special = -1;                               // index into specials_ (its rank)
    };
    int32_t child(int32_t node, uint8_t byte) const;

    std::vector<Special> specials_;  // longest first, then by id: the order they are tried in
    std::vector<Node> nodes_;        // nodes_[0] is the root
    std::array<bool, 256> starts_any_{};
    std::array<bool, 256> starts_always_{};
};

}  // namespace powerhouse
