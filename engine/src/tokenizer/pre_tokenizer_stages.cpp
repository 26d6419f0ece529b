#include "tokenizer/pre_tokenizer_stages.h"

#include <algorithm>
#include <optional>
#include <span>
#include <utility>

namespace powerhouse {
namespace {

struct Range {
    uint32_t first;
    uint32_t last;
};

// DeepSeek LLM's letter class, from its tokenizer.json regex (cased letters of several
// scripts; not \p{L}: no CJK, no Arabic).
constexpr Range kDeepseekLetters[] = {
    {0x0041, 0x005A},   {0x0061, 0x007A},   {0x00B5, 0x00B5},   {0x00C0, 0x00D6},   {0x00D8, 0x00F6},
    {0x00F8, 0x01BA},   {0x01BC, 0x01BF},   {0x01C4, 0x0293},   {0x0295, 0x02AF},   {0x0370, 0x0373},
    {0x0376, 0x0377},   {0x037B, 0x037D},   {0x037F, 0x037F},   {0x0386, 0x0386},   {0x0388, 0x038A},
    {0x038C, 0x038C},   {0x038E, 0x03A1},   {0x03A3, 0x03F5},   {0x03F7, 0x0481},   {0x048A, 0x052F},
    {0x0531, 0x0556},   {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},
    {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},
    {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

// !-/ :-~ ！-／ ：-～ ‘-‟ 　-。 (ascending)
constexpr Range kDeepseekPunctuation[] = {
    {0x0021, 0x002F}, {0x003A, 0x007E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};

// 一-龥 ࠀ-一 가-퟿ (ascending; the first two ranges share U+4E00)
constexpr Range kDeepseekCjk[] = {{0x0800, 0x9FA5}, {0xAC00, 0xD7FF}};

bool in_ranges(std::span<const Range> ranges, uint32_t c) {
    const auto it =
        std::upper_bound(ranges.begin(), ranges.end(), c, [](uint32_t v, const Range& r) { return v < r.first; });
    return it != ranges.begin() && c <= (it - 1)->last;
}

bool is_ascii_punctuation(uint32_t c) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

// Membership in a bracket class of raw code points, as the reference's wide regex sees them
// (its non-ASCII white space reads as '\v', which no class here contains).
bool raw_member(const SplitText& t, size_t i, std::span<const Range> ranges) {
    const uint32_t c = t.cpts[i];
    if (c >= 0x80 && t.flags[i].is_white_space()) return false;
    return in_ranges(ranges, c);
}

// Membership of a non-ASCII code point in \p{cat} on the collapsed text: white space
// collapses to '\v' before its category is looked at.
bool collapsed_category(const SplitText& t, size_t i, CategoryClass cat) {
    return !t.flags[i].is_white_space() && t.flags[i].category() == cat;
}

// Emits the matches `find` reports, in order, and the text between and around them.
// find(pos) returns the leftmost non-empty match starting at or after pos, if any.
template <class Find>
void split_matches(size_t begin, size_t end, PieceSink sink, Find find) {
    size_t pos = begin;
    while (pos < end) {
        const std::optional<std::pair<size_t, size_t>> match = find(pos);
        if (!match) break;
        if (match->first > pos) sink(pos, match->first);
        sink(match->first, match->second);
        pos = match->second;
    }
    if (pos < end) sink(pos, end);
}

// [X]+
template <class Member>
void split_runs(size_t begin, size_t end, PieceSink sink, Member member) {
    split_matches(begin, end, sink, [&](size_t pos) -> std::optional<std::pair<size_t, size_t>> {
        while (pos < end && !member(pos)) ++pos;
        if (pos == end) return std::nullopt;
        size_t run_end = pos + 1;
        while (run_end < end && member(run_end)) ++run_end;
        return std::pair{pos, run_end};
    });
}

// [X]
template <class Member>
void split_each(size_t begin, size_t end, PieceSink sink, Member member) {
    split_matches(begin, end, sink, [&](size_t pos) -> std::optional<std::pair<size_t, size_t>> {
        while (pos < end && !member(pos)) ++pos;
        if (pos == end) return std::nullopt;
        return std::pair{pos, pos + 1};
    });
}

// \s?[X]+
template <class Member>
void split_space_then_runs(const SplitText& t, size_t begin, size_t end, PieceSink sink, Member member) {
    split_matches(begin, end, sink, [&](size_t pos) -> std::optional<std::pair<size_t, size_t>> {
        for (; pos < end; ++pos) {
            size_t start = pos;
            if (t.flags[pos].is_white_space() && pos + 1 < end && member(pos + 1)) {
                start = pos;
                ++pos;
            } else if (!member(pos)) {
                continue;
            }
            size_t run_end = pos + 1;
            while (run_end < end && member(run_end)) ++run_end;
            return std::pair{start, run_end};
        }
        return std::nullopt;
    });
}

}  // namespace

void split_punctuation_runs_falcon(const SplitText& text, size_t begin, size_t end, PieceSink sink) {
    split_runs(begin, end, sink, [&](size_t i) {
        const uint32_t c = text.cpts[i];
        return c < 0x80 ? is_ascii_punctuation(c) : collapsed_category(text, i, CategoryClass::punctuation);
    });
}

void split_punctuation_runs_default(const SplitText& text, size_t begin, size_t end, PieceSink sink) {
    split_runs(begin, end, sink, [&](size_t i) {
        const uint32_t c = text.cpts[i];
        return c < 0x80 ? (is_ascii_punctuation(c) && c != '`')
                        : collapsed_category(text, i, CategoryClass::punctuation);
    });
}

void split_each_number(const SplitText& text, size_t begin, size_t end, PieceSink sink) {
    split_each(begin, end, sink, [&](size_t i) {
        const uint32_t c = text.cpts[i];
        return c < 0x80 ? (c >= '0' && c <= '9') : collapsed_category(text, i, CategoryClass::number);
    });
}

void split_number_runs(const SplitText& text, size_t begin, size_t end, PieceSink sink) {
    split_runs(begin, end, sink, [&](size_t i) {
        const uint32_t c = text.cpts[i];
        return c < 0x80 ? (c >= '0' && c <= '9') : collapsed_category(text, i, CategoryClass::number);
    });
}

void split_ascii_digit_triples(const SplitText& text, size_t begin, size_t end, PieceSink sink) {
    const auto digit = [&](size_t i) { return i < end && text.cpts[i] >= '0' && text.cpts[i] <= '9'; };
    split_matches(begin, end, sink, [&](size_t pos) -> std::optional<std::pair<size_t, size_t>> {
        for (; pos + 2 < end; ++pos) {
            if (digit(pos) && digit(pos + 1) && digit(pos + 2)) return std::pair{pos, pos + 3};
        }
        return std::nullopt;
    });
}

void split_each_cr_lf(const SplitText& text, size_t begin, size_t end, PieceSink sink) {
    split_each(begin, end, sink, [&](size_t i) { return text.cpts[i] == '\r' || text.cpts[i] == '\n'; });
}

void split_deepseek_letters(const SplitText& text, size_t begin, size_t end, PieceSink sink) {
    split_space_then_runs(text, begin, end, sink, [&](size_t i) { return raw_member(text, i, kDeepseekLetters); });
}

void split_deepseek_punctuation(const SplitText& text, size_t begin, size_t end, PieceSink sink) {
    split_space_then_runs(text, begin, end, sink, [&](size_t i) { return raw_member(text, i, kDeepseekPunctuation); });
}

void split_trailing_white_space(const SplitText& text, size_t begin, size_t end, PieceSink sink) {
    size_t start = end;
    while (start > begin && text.flags[start - 1].is_white_space()) --start;
    if (start > begin) sink(begin, start);
    if (start < end) sink(start, end);
}

void split_deepseek_cjk(const SplitText& text, size_t begin, size_t end, PieceSink sink) {
    split_runs(begin, end, sink, [&](size_t i) { return raw_member(text, i, kDeepseekCjk); });
}

}  // namespace powerhouse
