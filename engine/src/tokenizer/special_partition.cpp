#include "tokenizer/special_partition.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace powerhouse {
namespace {

// The C locale's isspace, which the reference uses for lstrip/rstrip.
bool is_c_space(char c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

struct Occurrence {
    int32_t rank;  // index of the special token in trial order
    size_t pos;
};

}  // namespace

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab) {
    constexpr uint16_t kSpecial = token_attr::control | token_attr::user_defined | token_attr::unknown;
    for (TokenId id = 0; id < vocab.n_tokens; ++id) {
        if (!vocab.has_attr(id, kSpecial) || vocab.text(id).empty()) continue;
        const bool always = !vocab.has_attr(id, token_attr::control | token_attr::unknown);
        specials_.push_back(Special{id, static_cast<uint32_t>(vocab.text(id).size()),
                                    vocab.has_attr(id, token_attr::lstrip), vocab.has_attr(id, token_attr::rstrip),
                                    always});
    }
    std::stable_sort(specials_.begin(), specials_.end(),
                     [](const Special& a, const Special& b) { return a.length > b.length; });

    nodes_.emplace_back();
    for (size_t rank = 0; rank < specials_.size(); ++rank) {
        const std::string_view text = vocab.text(specials_[rank].id);
        const auto first = static_cast<uint8_t>(text[0]);
        starts_any_[first] = true;
        if (specials_[rank].always) starts_always_[first] = true;
        int32_t node = 0;
        for (char c : text) {
            const auto byte = static_cast<uint8_t>(c);
            int32_t next = child(node, byte);
            if (next < 0) {
                next = static_cast<int32_t>(nodes_.size());
                nodes_.emplace_back();
                auto& children = nodes_[static_cast<size_t>(node)].children;
                children.insert(
                    std::upper_bound(children.begin(), children.end(), std::pair<uint8_t, int32_t>{byte, -1},
                                     [](const auto& a, const auto& b) { return a.first < b.first; }),
                    {byte, next});
            }
            node = next;
        }
        // Two tokens with the same text: the first in trial order is the one that matches.
        if (nodes_[static_cast<size_t>(node)].special < 0)
            nodes_[static_cast<size_t>(node)].special = static_cast<int32_t>(rank);
    }
}

int32_t SpecialTokenMatcher::child(int32_t node, uint8_t byte) const {
    const auto& children = nodes_[static_cast<size_t>(node)].children;
    const auto it = std::lower_bound(children.begin(), children.end(), byte,
                                     [](const std::pair<uint8_t, int32_t>& a, uint8_t b) { return a.first < b; });
    return it != children.end() && it->first == byte ? it->second : -1;
}

void SpecialTokenMatcher::partition(std::string_view text, bool parse_special, std::vector<Fragment>& out) const {
    if (text.empty()) return;
    const std::array<bool, 256>& starts = parse_special ? starts_any_ : starts_always_;

    // Every occurrence of every eligible special token.
    std::vector<Occurrence> found;
    for (size_t i = 0; i < text.size(); ++i) {
        if (!starts[static_cast<uint8_t>(text[i])]) continue;
        int32_t node = 0;
        for (size_t j = i; j < text.size(); ++j) {
            node = child(node, static_cast<uint8_t>(text[j]));
            if (node < 0) break;
            const int32_t rank = nodes_[static_cast<size_t>(node)].special;
            if (rank >= 0 && (parse_special || specials_[static_cast<size_t>(rank)].always)) {
                found.push_back(Occurrence{rank, i});
            }
        }
    }
    if (found.empty()) {
        out.push_back(Fragment{-1, text});
        return;
    }
    std::sort(found.begin(), found.end(), [](const Occurrence& a, const Occurrence& b) {
        return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
    });

    // Taken intervals: begin -> (end, token id or -1 for white space an lstrip/rstrip dropped).
    std::map<size_t, std::pair<size_t, TokenId>> taken;
    for (const Occurrence& occ : found) {
        const Special& special = specials_[static_cast<size_t>(occ.rank)];
        const size_t begin = occ.pos;
        const size_t end = begin + special.length;
        auto next = taken.lower_bound(begin);
        if (next != taken.end() && next->first < end) continue;
        size_t free_begin = 0;
        if (next != taken.begin()) {
            const auto prev = std::prev(next);
            if (prev->second.first > begin) continue;
            free_begin = prev->second.first;
        }
        const size_t free_end = next == taken.end() ? text.size() : next->first;
        taken.emplace(begin, std::pair{end, special.id});
        if (special.rstrip) {
            size_t stop = end;
            while (stop < free_end && is_c_space(text[stop])) ++stop;
            if (stop > end) taken.emplace(end, std::pair{stop, TokenId{-1}});
        }
        if (special.lstrip) {
            size_t start = begin;
            while (start > free_begin && is_c_space(text[start - 1])) --start;
            if (start < begin) taken.emplace(start, std::pair{begin, TokenId{-1}});
        }
    }

    size_t pos = 0;
    for (const auto& [begin, value] : taken) {
        if (begin > pos) out.push_back(Fragment{-1, text.substr(pos, begin - pos)});
        if (value.second >= 0) out.push_back(Fragment{value.second, text.substr(begin, value.first - begin)});
        pos = value.first;
    }
    if (pos < text.size()) out.push_back(Fragment{-1, text.substr(pos)});
}

}  // namespace powerhouse
