#include "synth/merge_learner.h"

#include <fmt/format.h>

#include <algorithm>

#include "synth/random.h"

namespace powerhouse::synth {
namespace {

enum class CharClass { letter, digit, space, other_space, punct };

CharClass char_class(unsigned char c) {
    if (c == ' ') return CharClass::space;
    if (c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f') return CharClass::other_space;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return CharClass::letter;
    if (c >= '0' && c <= '9') return CharClass::digit;
    return CharClass::punct;
}

bool is_space(CharClass c) {
    return c == CharClass::space || c == CharClass::other_space;
}

bool all_letters(std::string_view s) {
    if (s.empty()) return false;
    return std::all_of(s.begin(), s.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); });
}

bool all_lowercase(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

uint64_t pair_key(uint32_t left, uint32_t right) {
    return (static_cast<uint64_t>(left) << 32) | right;
}

// Tokens the filler builds stay short enough to look like words.
constexpr size_t kMaxFillBytes = 16;
constexpr size_t kMaxHeadBytes = 12;
constexpr size_t kMaxTailBytes = 3;

}  // namespace

MergeTable::MergeTable(std::vector<std::string> base_symbols, std::string marker,
                       std::unordered_set<std::string> reserved)
    : symbols_(std::move(base_symbols)),
      n_base_(symbols_.size()),
      marker_(std::move(marker)),
      reserved_(std::move(reserved)) {
    by_text_.reserve(symbols_.size() * 2);
    for (size_t i = 0; i < symbols_.size(); ++i) by_text_.emplace(symbols_[i], static_cast<uint32_t>(i));
}

int64_t MergeTable::find(std::string_view text) const {
    auto it = by_text_.find(std::string(text));
    return it == by_text_.end() ? -1 : static_cast<int64_t>(it->second);
}

int64_t MergeTable::merge(uint32_t left, uint32_t right) {
    std::string text = symbols_[left] + symbols_[right];
    if (reserved_.count(text) != 0) return -1;
    merges_.emplace_back(left, right);
    // Two merges may spell the same token ("ab c" and "a bc"), as in real vocabularies;
    // the token itself is kept once.
    auto [it, added] = by_text_.emplace(text, static_cast<uint32_t>(symbols_.size()));
    if (added) symbols_.push_back(std::move(text));
    return it->second;
}

void MergeTable::learn(std::vector<Word> words, size_t max_merges) {
    std::unordered_map<uint64_t, int64_t> counts;
    auto count_pairs = [&counts](const Word& w, int64_t sign) {
        for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
            const uint64_t key = pair_key(w.symbols[i], w.symbols[i + 1]);
            int64_t& c = counts[key];
            c += sign * w.count;
            if (c <= 0) counts.erase(key);
        }
    };
    for (const Word& w : words) count_pairs(w, +1);

    std::unordered_set<uint64_t> banned;
    size_t learned = 0;
    while (learned < max_merges) {
        uint64_t best = 0;
        int64_t best_count = 0;
        for (const auto& [key, c] : counts) {
            // The smaller key wins ties, so the result does not depend on hash order.
            if ((c > best_count || (c == best_count && key < best)) && banned.count(key) == 0) {
                best = key;
                best_count = c;
            }
        }
        if (best_count < 2) break;
        const auto left = static_cast<uint32_t>(best >> 32);
        const auto right = static_cast<uint32_t>(best & 0xFFFFFFFFu);
        const int64_t id = merge(left, right);
        if (id < 0) {
            banned.insert(best);
            continue;
        }
        ++learned;
        for (Word& w : words) {
            bool has_pair = false;
            for (size_t i = 0; i + 1 < w.symbols.size() && !has_pair; ++i) {
                has_pair = w.symbols[i] == left && w.symbols[i + 1] == right;
            }
            if (!has_pair) continue;
            count_pairs(w, -1);
            std::vector<uint32_t> merged;
            merged.reserve(w.symbols.size());
            for (size_t i = 0; i < w.symbols.size(); ++i) {
                if (i + 1 < w.symbols.size() && w.symbols[i] == left && w.symbols[i + 1] == right) {
                    merged.push_back(static_cast<uint32_t>(id));
                    ++i;
                } else {
                    merged.push_back(w.symbols[i]);
                }
            }
            w.symbols = std::move(merged);
            count_pairs(w, +1);
        }
    }
}

Result<void> MergeTable::fill(size_t n_symbols, uint64_t seed) {
    if (symbols_.size() > n_symbols) {
        return make_error(ErrorCode::internal,
                          fmt::format("vocabulary overfull: {} symbols for {} places", symbols_.size(), n_symbols));
    }
    std::vector<uint32_t> heads;  // word-like: an optional marker, then letters
    std::vector<uint32_t> tails;  // short lowercase runs that continue a word
    for (size_t i = 0; i < symbols_.size(); ++i) {
        std::string_view s = symbols_[i];
        if (all_lowercase(s) && s.size() <= kMaxTailBytes) tails.push_back(static_cast<uint32_t>(i));
        if (s.substr(0, marker_.size()) == marker_) s.remove_prefix(marker_.size());
        if (all_letters(s) && symbols_[i].size() <= kMaxHeadBytes) heads.push_back(static_cast<uint32_t>(i));
    }
    if (heads.empty() || tails.empty()) {
        return make_error(ErrorCode::internal, "vocabulary has no letter tokens to build on");
    }
    symbols_.reserve(n_symbols);
    by_text_.reserve(n_symbols * 2);
    merges_.reserve(merges_.size() + (n_symbols - symbols_.size()));

    Xoshiro256 rng(seed);
    // Collisions are rare (the space of letter strings is vast), so this bound is never
    // reached in practice; it only guarantees termination.
    const size_t max_attempts = 64 * (n_symbols - symbols_.size()) + 1'000'000;
    std::string text;
    for (size_t attempt = 0; symbols_.size() < n_symbols; ++attempt) {
        if (attempt >= max_attempts) {
            return make_error(ErrorCode::internal,
                              fmt::format("could not grow the vocabulary past {} tokens", symbols_.size()));
        }
        // The shorter of two random heads: words grow a few pieces at a time, as in real
        // vocabularies, rather than into ever longer chains.
        uint32_t left = heads[rng.below(static_cast<uint32_t>(heads.size()))];
        const uint32_t other = heads[rng.below(static_cast<uint32_t>(heads.size()))];
        if (symbols_[other].size() < symbols_[left].size()) left = other;
        const uint32_t right = tails[rng.below(static_cast<uint32_t>(tails.size()))];
        if (symbols_[left].size() + symbols_[right].size() > kMaxFillBytes) continue;
        text.assign(symbols_[left]).append(symbols_[right]);
        if (reserved_.count(text) != 0 || by_text_.count(text) != 0) continue;
        const auto id = static_cast<uint32_t>(symbols_.size());
        by_text_.emplace(text, id);
        symbols_.push_back(text);
        merges_.emplace_back(left, right);
        if (text.size() <= kMaxHeadBytes) heads.push_back(id);
    }
    return {};
}

std::vector<std::string> split_pretokens(std::string_view text) {
    std::vector<std::string> out;
    const size_t n = text.size();
    auto cls = [&](size_t i) { return char_class(static_cast<unsigned char>(text[i])); };
    size_t i = 0;
    while (i < n) {
        const size_t start = i;
        if (cls(i) == CharClass::space && i + 1 < n && !is_space(cls(i + 1))) ++i;  // one leading space
        const CharClass c = cls(i);
        size_t j = i + 1;
        if (is_space(c)) {
            while (j < n && is_space(cls(j))) ++j;
            // A space right before a word goes with the word.
            if (j < n && j - i > 1 && text[j - 1] == ' ') --j;
        } else {
            const size_t cap = c == CharClass::digit ? 3 : n;  // digits in groups of up to 3
            while (j < n && cls(j) == c && j - i < cap) ++j;
        }
        out.emplace_back(text.substr(start, j - start));
        i = j;
    }
    return out;
}

}  // namespace powerhouse::synth
