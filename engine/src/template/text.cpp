#include "template/text.h"

#include <algorithm>

namespace powerhouse::jinja {

char32_t next_code_point(std::string_view s, size_t& i) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int extra = 0;
    char32_t cp = b0;
    if (b0 >= 0xF0 && b0 < 0xF8) {
        extra = 3;
        cp = b0 & 0x07;
    } else if (b0 >= 0xE0) {
        extra = 2;
        cp = b0 & 0x0F;
    } else if (b0 >= 0xC0) {
        extra = 1;
        cp = b0 & 0x1F;
    }
    const bool bad_lead = b0 >= 0xF8 || (b0 >= 0x80 && b0 < 0xC0);
    if (bad_lead || (extra > 0 && i + static_cast<size_t>(extra) >= s.size())) {
        ++i;  // not a valid lead byte or truncated: take the byte alone
        return b0;
    }
    for (int k = 1; k <= extra; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    i += static_cast<size_t>(extra) + 1;
    return cp;
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

bool is_valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto b0 = static_cast<unsigned char>(s[i]);
        size_t extra = 0;
        char32_t min = 0;
        if (b0 < 0x80) {
            ++i;
            continue;
        } else if (b0 >= 0xC2 && b0 < 0xE0) {
            extra = 1;
            min = 0x80;
        } else if (b0 >= 0xE0 && b0 < 0xF0) {
            extra = 2;
            min = 0x800;
        } else if (b0 >= 0xF0 && b0 < 0xF5) {
            extra = 3;
            min = 0x10000;
        } else {
            return false;
        }
        if (i + extra >= s.size()) return false;
        char32_t cp = b0 & (0x3F >> extra);
        for (size_t k = 1; k <= extra; ++k) {
            const auto b = static_cast<unsigned char>(s[i + k]);
            if ((b & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (b & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += extra + 1;
    }
    return true;
}

bool is_ascii(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

size_t code_point_count(std::string_view s) {
    size_t n = 0;
    for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
    return n;
}

std::vector<size_t> code_point_offsets(std::string_view s) {
    std::vector<size_t> offsets;
    offsets.reserve(s.size() + 1);
    size_t i = 0;
    while (i < s.size()) {
        offsets.push_back(i);
        next_code_point(s, i);
    }
    offsets.push_back(s.size());
    return offsets;
}

bool py_isspace(char32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

bool py_is_line_break(char32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 ||
           cp == 0x2028 || cp == 0x2029;
}

namespace {

// Pairs laid out as (upper, lower) alternating from `first` to `last`, upper on even
// offsets (e.g. U+0100 Ā / U+0101 ā).
bool in_alternating(char32_t cp, char32_t first, char32_t last) {
    return cp >= first && cp <= last;
}

}  // namespace

char32_t to_upper(char32_t cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
    if ((cp >= 0xE0 && cp <= 0xFE && cp != 0xF7)) return cp - 32;
    if (cp == 0xFF) return 0x178;
    if (cp == 0xB5) return 0x39C;
    if (in_alternating(cp, 0x100, 0x137) || in_alternating(cp, 0x14A, 0x177)) return (cp & 1) ? cp - 1 : cp;
    if (in_alternating(cp, 0x139, 0x148) || in_alternating(cp, 0x179, 0x17E)) return (cp & 1) ? cp : cp - 1;
    if (cp == 0x131) return 'I';
    if (cp == 0x17F) return 'S';
    if (cp >= 0x3B1 && cp <= 0x3C9 && cp != 0x3C2) return cp - 32;
    if (cp == 0x3C2) return 0x3A3;
    if (cp == 0x3AC) return 0x386;
    if (cp >= 0x3AD && cp <= 0x3AF) return cp - 37;
    if (cp == 0x3CC) return 0x38C;
    if (cp == 0x3CD || cp == 0x3CE) return cp - 63;
    if (cp >= 0x430 && cp <= 0x44F) return cp - 32;
    if (cp >= 0x450 && cp <= 0x45F) return cp - 80;
    if (in_alternating(cp, 0x460, 0x481) || in_alternating(cp, 0x48A, 0x4BF) || in_alternating(cp, 0x4D0, 0x52F)) {
        return (cp & 1) ? cp - 1 : cp;
    }
    if (in_alternating(cp, 0x4C1, 0x4CE)) return (cp & 1) ? cp : cp - 1;
    if (cp == 0x4CF) return 0x4C0;
    return cp;
}

char32_t to_lower(char32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7)) return cp + 32;
    if (cp == 0x178) return 0xFF;
    if (in_alternating(cp, 0x100, 0x137) || in_alternating(cp, 0x14A, 0x177)) return (cp & 1) ? cp : cp + 1;
    if (in_alternating(cp, 0x139, 0x148) || in_alternating(cp, 0x179, 0x17E)) return (cp & 1) ? cp + 1 : cp;
    if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 32;
    if (cp == 0x386) return 0x3AC;
    if (cp >= 0x388 && cp <= 0x38A) return cp + 37;
    if (cp == 0x38C) return 0x3CC;
    if (cp == 0x38E || cp == 0x38F) return cp + 63;
    if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
    if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
    if (in_alternating(cp, 0x460, 0x481) || in_alternating(cp, 0x48A, 0x4BF) || in_alternating(cp, 0x4D0, 0x52F)) {
        return (cp & 1) ? cp : cp + 1;
    }
    if (in_alternating(cp, 0x4C1, 0x4CE)) return (cp & 1) ? cp + 1 : cp;
    if (cp == 0x4C0) return 0x4CF;
    return cp;
}

bool is_cased_upper(char32_t cp) {
    return to_lower(cp) != cp || cp == 0x130;
}
bool is_cased_lower(char32_t cp) {
    return to_upper(cp) != cp || cp == 0xDF;
}

namespace {

bool is_cased(char32_t cp) {
    return is_cased_upper(cp) || is_cased_lower(cp);
}

// Appends the upper case of cp; U+00DF (sharp s) becomes "SS" as in Python.
void append_upper(std::string& out, char32_t cp) {
    if (cp == 0xDF) {
        out += "SS";
    } else {
        append_utf8(out, to_upper(cp));
    }
}

// Appends the lower case of s's code point at [start, i); Greek capital sigma becomes the
// final form at the end of a word, as Python's str.lower does.
void append_lower(std::string& out, std::string_view s, size_t start, size_t i, char32_t cp) {
    if (cp == 0x130) {
        out += "i\xCC\x87";  // i + combining dot above
        return;
    }
    if (cp == 0x3A3) {
        bool cased_before = false;
        if (start > 0) {
            size_t j = start - 1;
            while (j > 0 && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) --j;
            cased_before = is_cased(next_code_point(s, j));
        }
        bool cased_after = false;
        if (i < s.size()) {
            size_t j = i;
            cased_after = is_cased(next_code_point(s, j));
        }
        append_utf8(out, cased_before && !cased_after ? char32_t{0x3C2} : char32_t{0x3C3});
        return;
    }
    append_utf8(out, to_lower(cp));
}

}  // namespace

std::string py_upper(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) append_upper(out, next_code_point(s, i));
    return out;
}

std::string py_lower(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const size_t start = i;
        const char32_t cp = next_code_point(s, i);
        append_lower(out, s, start, i, cp);
    }
    return out;
}

std::string py_capitalize(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    bool first = true;
    for (size_t i = 0; i < s.size();) {
        const size_t start = i;
        const char32_t cp = next_code_point(s, i);
        if (first) {
            append_upper(out, cp);
        } else {
            append_lower(out, s, start, i, cp);
        }
        first = false;
    }
    return out;
}

std::string py_title(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    bool previous_cased = false;
    for (size_t i = 0; i < s.size();) {
        const size_t start = i;
        const char32_t cp = next_code_point(s, i);
        if (is_cased(cp)) {
            if (previous_cased) {
                append_lower(out, s, start, i, cp);
            } else {
                append_upper(out, cp);
            }
            previous_cased = true;
        } else {
            append_utf8(out, cp);
            previous_cased = false;
        }
    }
    return out;
}

std::string py_swapcase(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const size_t start = i;
        const char32_t cp = next_code_point(s, i);
        if (is_cased_upper(cp)) {
            append_lower(out, s, start, i, cp);
        } else if (is_cased_lower(cp)) {
            append_upper(out, cp);
        } else {
            append_utf8(out, cp);
        }
    }
    return out;
}

std::string_view py_strip(std::string_view s, const std::string* chars, StripSide side) {
    std::vector<char32_t> set;
    if (chars != nullptr) {
        for (size_t i = 0; i < chars->size();) set.push_back(next_code_point(*chars, i));
    }
    auto strippable = [&](char32_t cp) {
        return chars == nullptr ? py_isspace(cp) : std::find(set.begin(), set.end(), cp) != set.end();
    };
    size_t begin = 0;
    if (side != StripSide::right) {
        while (begin < s.size()) {
            size_t next = begin;
            if (!strippable(next_code_point(s, next))) break;
            begin = next;
        }
    }
    size_t end = s.size();
    if (side != StripSide::left) {
        while (end > begin) {
            size_t start = end - 1;
            while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
            size_t probe = start;
            if (!strippable(next_code_point(s, probe))) break;
            end = start;
        }
    }
    return s.substr(begin, end - begin);
}

std::vector<std::string> py_split_whitespace(std::string_view s, int64_t max_split) {
    std::vector<std::string> parts;
    size_t i = 0;
    while (i < s.size()) {
        // skip whitespace
        size_t word = i;
        while (word < s.size()) {
            size_t next = word;
            if (!py_isspace(next_code_point(s, next))) break;
            word = next;
        }
        if (word >= s.size()) break;
        if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
            parts.emplace_back(s.substr(word));  // the rest, trailing whitespace included
            return parts;
        }
        size_t end = word;
        while (end < s.size()) {
            size_t next = end;
            if (py_isspace(next_code_point(s, next))) break;
            end = next;
        }
        parts.emplace_back(s.substr(word, end - word));
        i = end;
    }
    return parts;
}

std::vector<std::string> py_rsplit_whitespace(std::string_view s, int64_t max_split) {
    if (max_split < 0) return py_split_whitespace(s, -1);
    // Split everything, then glue the leftmost words back with their original spacing.
    std::vector<std::pair<size_t, size_t>> words;  // [begin, end) byte ranges
    size_t i = 0;
    while (i < s.size()) {
        size_t start = i;
        const bool space = py_isspace(next_code_point(s, i));
        if (!space) {
            if (words.empty() || words.back().second != start) {
                words.emplace_back(start, i);
            } else {
                words.back().second = i;
            }
        }
    }
    std::vector<std::string> parts;
    if (words.empty()) return parts;
    const size_t n_split = std::min<size_t>(static_cast<size_t>(max_split), words.size() - 1);
    const size_t n_head = words.size() - n_split;
    parts.emplace_back(s.substr(0, words[n_head - 1].second));  // leading whitespace included
    for (size_t w = n_head; w < words.size(); ++w) {
        parts.emplace_back(s.substr(words[w].first, words[w].second - words[w].first));
    }
    return parts;
}

std::vector<std::string> py_split(std::string_view s, std::string_view sep, int64_t max_split) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
        const size_t at = s.find(sep, start);
        if (at == std::string_view::npos) break;
        parts.emplace_back(s.substr(start, at - start));
        start = at + sep.size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
}

std::vector<std::string> py_rsplit(std::string_view s, std::string_view sep, int64_t max_split) {
    std::vector<std::string> parts;
    size_t end = s.size();
    while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
        if (end < sep.size()) break;
        const size_t at = s.rfind(sep, end - sep.size());
        if (at == std::string_view::npos) break;
        parts.emplace_back(s.substr(at + sep.size(), end - at - sep.size()));
        end = at;
    }
    parts.emplace_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keep_ends) {
    std::vector<std::string> lines;
    size_t line_start = 0;
    size_t i = 0;
    while (i < s.size()) {
        const size_t at = i;
        const char32_t cp = next_code_point(s, i);
        if (!py_is_line_break(cp)) continue;
        if (cp == '\r' && i < s.size() && s[i] == '\n') ++i;
        lines.emplace_back(s.substr(line_start, (keep_ends ? i : at) - line_start));
        line_start = i;
    }
    if (line_start < s.size()) lines.emplace_back(s.substr(line_start));
    return lines;
}

std::string py_replace(std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count) {
    std::string out;
    if (old_text.empty()) {
        int64_t done = 0;
        size_t i = 0;
        while (i < s.size()) {
            if (count < 0 || done < count) {
                out += new_text;
                ++done;
            }
            const size_t start = i;
            next_code_point(s, i);
            out.append(s.substr(start, i - start));
        }
        if (count < 0 || done < count) out += new_text;
        return out;
    }
    size_t start = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
        const size_t at = s.find(old_text, start);
        if (at == std::string_view::npos) break;
        out.append(s.substr(start, at - start));
        out += new_text;
        start = at + old_text.size();
        ++done;
    }
    out.append(s.substr(start));
    return out;
}

namespace {

bool is_digit_cp(char32_t cp) {
    return (cp >= '0' && cp <= '9') || (cp >= 0x660 && cp <= 0x669) || (cp >= 0x6F0 && cp <= 0x6F9) ||
           (cp >= 0x966 && cp <= 0x96F) || (cp >= 0xFF10 && cp <= 0xFF19) || cp == 0xB2 || cp == 0xB3 || cp == 0xB9 ||
           cp == 0x2070 || (cp >= 0x2074 && cp <= 0x2079);
}

// Letters: cased letters plus the large uncased scripts (CJK, kana, Hangul, Arabic,
// Hebrew, Devanagari). An approximation of Python's str.isalpha.
bool is_alpha_cp(char32_t cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    return is_cased(cp) || cp == 0xAA || cp == 0xBA || cp == 0xDF || (cp >= 0x5D0 && cp <= 0x5EA) ||
           (cp >= 0x620 && cp <= 0x64A) || (cp >= 0x904 && cp <= 0x939) || (cp >= 0x3041 && cp <= 0x3096) ||
           (cp >= 0x30A1 && cp <= 0x30FA) || (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7A3);
}

template <class Pred>
bool all_code_points(std::string_view s, Pred pred) {
    if (s.empty()) return false;
    for (size_t i = 0; i < s.size();) {
        if (!pred(next_code_point(s, i))) return false;
    }
    return true;
}

}  // namespace

bool py_isdigit(std::string_view s) {
    return all_code_points(s, is_digit_cp);
}
bool py_isalpha(std::string_view s) {
    return all_code_points(s, is_alpha_cp);
}
bool py_isalnum(std::string_view s) {
    return all_code_points(s, [](char32_t cp) { return is_alpha_cp(cp) || is_digit_cp(cp); });
}
bool py_isspace_str(std::string_view s) {
    return all_code_points(s, py_isspace);
}

bool py_isupper(std::string_view s) {
    bool any_cased = false;
    for (size_t i = 0; i < s.size();) {
        const char32_t cp = next_code_point(s, i);
        if (is_cased_lower(cp)) return false;
        any_cased = any_cased || is_cased_upper(cp);
    }
    return any_cased;
}

bool py_islower(std::string_view s) {
    bool any_cased = false;
    for (size_t i = 0; i < s.size();) {
        const char32_t cp = next_code_point(s, i);
        if (is_cased_upper(cp)) return false;
        any_cased = any_cased || is_cased_lower(cp);
    }
    return any_cased;
}

}  // namespace powerhouse::jinja
