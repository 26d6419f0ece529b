#include "tokenizer/spm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "tokenizer/merge_queue.h"
#include "tokenizer/utf8.h"

namespace powerhouse {
namespace {

struct Symbol {
    uint32_t start;
    uint32_t len;  // 0 once merged into its left neighbour
    int32_t prev;
    int32_t next;
};

// Highest score first, then leftmost: the key orders the score's bits descending.
uint64_t priority_key(float score, uint32_t left) {
    uint32_t bits;
    std::memcpy(&bits, &score, sizeof bits);
    // Map floats to unsigned integers in ascending order, then invert for "highest first".
    bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    return (uint64_t{~bits} << 32) | left;
}

void emit_bytes(const Vocab& vocab, std::string_view bytes, std::vector<TokenId>& out) {
    for (char c : bytes) {
        const TokenId id = vocab.byte_token[static_cast<uint8_t>(c)];
        if (id >= 0) {
            out.push_back(id);
        } else if (vocab.unk) {  // a vocabulary without byte fallback
            out.push_back(*vocab.unk);
        }
    }
}

}  // namespace

void spm_tokenize(const Vocab& vocab, std::string_view text, std::vector<TokenId>& out) {
    if (text.empty()) return;
    std::vector<Symbol> symbols;
    for (size_t offset = 0; offset < text.size();) {
        const size_t len = std::min(utf8_length_from_lead(static_cast<uint8_t>(text[offset])), text.size() - offset);
        const auto index = static_cast<int32_t>(symbols.size());
        symbols.push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(len), index - 1,
                           offset + len < text.size() ? index + 1 : -1});
        offset += len;
    }

    MergeQueue queue;
    const auto candidate = [&](int32_t left, int32_t right, MergeCandidate& c) {
        const Symbol& l = symbols[static_cast<size_t>(left)];
        const Symbol& r = symbols[static_cast<size_t>(right)];
        const auto id = vocab.find_mergeable(text.substr(l.start, l.len + r.len));
        if (!id) return false;
        c = {priority_key(vocab.scores[static_cast<size_t>(*id)], static_cast<uint32_t>(left)),
             static_cast<uint32_t>(right), l.len + r.len};
        return true;
    };
    MergeCandidate c{};
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        if (candidate(static_cast<int32_t>(i), static_cast<int32_t>(i + 1), c)) queue.append(c);
    }
    queue.start();
    const auto propose = [&](int32_t left, int32_t right) {
        if (left >= 0 && right >= 0 && candidate(left, right, c)) queue.push(c);
    };

    while (!queue.empty()) {
        const MergeCandidate best = queue.pop();
        Symbol& left = symbols[best.left()];
        if (left.len == 0 || left.next != static_cast<int32_t>(best.right)) continue;
        Symbol& right = symbols[best.right];
        if (left.len + right.len != best.size) continue;
        left.len += right.len;
        right.len = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = static_cast<int32_t>(best.left());
        propose(left.prev, static_cast<int32_t>(best.left()));
        propose(static_cast<int32_t>(best.left()), left.next);
    }

    for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
        const Symbol& s = symbols[static_cast<size_t>(i)];
        const std::string_view piece = text.substr(s.start, s.len);
        if (const auto id = vocab.find_mergeable(piece)) {
            out.push_back(*id);
        } else {
            emit_bytes(vocab, piece, out);
        }
    }
}

}  // namespace powerhouse
