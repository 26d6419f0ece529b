// The internals of constrained sampling (powerhouse/grammar.h): the compiled grammar that the
// parser (grammar_parser.cpp) produces and the matcher (grammar_matcher.cpp) walks, the
// vocabulary's byte trie, and the UTF-8 arithmetic both sides share.
//
// A compiled grammar is a list of rules; a rule is a list of alternatives; an alternative is
// a run of elements in one flat array, closed by an `end` element. An element matches one code
// point from a set (a literal is a set of one) or refers to another rule. Repetitions and
// groups were turned into helper rules by the parser, so the matcher knows only these three.
// No rule can reach itself without consuming a character (the parser refuses left recursion),
// which is what lets the matcher expand rule references eagerly.
//
// Thread-safety: GrammarImpl and GrammarVocabularyImpl are immutable once built.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "powerhouse/grammar.h"

namespace powerhouse {

enum class GrammarOp : uint8_t {
    end,    // closes an alternative
    chars,  // one code point out of char_sets[value]
    rule,   // the rule rules[value]
};

struct GrammarElement {
    GrammarOp op = GrammarOp::end;
    uint32_t value = 0;
};

// A character class. The ranges are sorted, disjoint and not adjacent (merged), so a negated
// class is just the gaps between them. ASCII is also kept as a bitmap, negation applied,
// because nearly every character a JSON grammar meets is ASCII.
struct CharSet {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive [first, second]
    bool negated = false;
    uint64_t ascii[2] = {0, 0};

    // Sorts and merges `ranges`, then fills the bitmap. Call once after filling ranges.
    void finish();
    bool matches(uint32_t cp) const {
        if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
        return contains(cp) != negated;
    }
    // Whether some code point in [lo, hi] is in the class (lo, hi >= 128: the code points a
    // partial UTF-8 sequence may still become).
    bool intersects(uint32_t lo, uint32_t hi) const;

private:
    bool contains(uint32_t cp) const;  // in the ranges, ignoring `negated`
};

struct GrammarImpl {
    std::vector<GrammarElement> elements;  // every alternative of every rule, each closed by `end`
    std::vector<CharSet> char_sets;
    std::vector<std::vector<uint32_t>> rules;  // per rule: the index in `elements` where each alternative starts
    std::vector<std::string> rule_names;       // generated helper rules are named "<rule>~N"
    uint32_t root = 0;
};

// The vocabulary as a byte trie in pre-order: a subtree is a contiguous run of nodes, so the
// matcher skips a rejected subtree by jumping to `subtree_end`. The root (the empty prefix) is
// not stored; nodes of depth 1 are the first bytes.
struct GrammarTrieNode {
    uint32_t subtree_end = 0;   // index of the first node after this node's subtree
    uint32_t tokens_begin = 0;  // [tokens_begin, tokens_end) in GrammarVocabularyImpl::trie_tokens:
    uint32_t tokens_end = 0;    // the tokens that spell exactly this node's bytes
    uint32_t depth = 0;         // 1 for a first byte
    uint8_t byte = 0;
};

struct GrammarVocabularyImpl {
    int32_t n_vocab = 0;
    std::vector<std::string> pieces;  // [n_vocab] each token's bytes; empty: never text (control tokens)
    std::vector<uint8_t> eog;         // [n_vocab] 1 for end-of-generation tokens (never text)
    std::vector<TokenId> eog_ids;
    std::vector<GrammarTrieNode> trie;
    std::vector<TokenId> trie_tokens;
    uint32_t max_depth = 0;  // the longest piece, in bytes
};

// UTF-8 as the matcher reads it: strictly (no overlong forms, no surrogates, nothing above
// U+10FFFF), since the text must stay valid UTF-8.
inline int utf8_sequence_length(uint8_t lead) {
    if (lead < 0x80) return 1;
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
    if (lead >= 0xE0 && lead <= 0xEF) return 3;
    if (lead >= 0xF0 && lead <= 0xF4) return 4;
    return 0;  // a continuation byte, C0, C1 or F5..FF: never starts a character
}

// The code points whose encoding (length `length`) begins with bytes[0, n): UTF-8 keeps code
// point order, so they form one interval. False when no valid code point begins so.
bool utf8_prefix_interval(const uint8_t* bytes, int n, int length, uint32_t& lo, uint32_t& hi);

}  // namespace powerhouse
