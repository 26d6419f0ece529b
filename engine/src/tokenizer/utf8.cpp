#include "tokenizer/utf8.h"

namespace powerhouse {
namespace {

bool is_continuation(uint8_t b) {
    return (b & 0xC0) == 0x80;
}

// Well-formed sequences (Unicode Table 3-7): the length a lead byte announces and the range
// its second byte must fall in; 0 for bytes that cannot start a sequence.
struct LeadRule {
    uint8_t length;
    uint8_t second_min;
    uint8_t second_max;
};

LeadRule lead_rule(uint8_t b) {
    if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
    if (b == 0xE0) return {3, 0xA0, 0xBF};
    if (b == 0xED) return {3, 0x80, 0x9F};  // no surrogates
    if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
    if (b == 0xF0) return {4, 0x90, 0xBF};
    if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
    if (b == 0xF4) return {4, 0x80, 0x8F};  // nothing above U+10FFFF
    return {0, 0, 0};
}

void append_replacement(std::string& out) {
    out += "\xEF\xBF\xBD";
}

}  // namespace

uint32_t next_codepoint_lenient(std::string_view text, size_t& pos) {
    const auto* s = reinterpret_cast<const uint8_t*>(text.data());
    const size_t n = text.size();
    const size_t i = pos;
    const uint8_t b0 = s[i];
    if (b0 < 0x80) {
        pos += 1;
        return b0;
    }
    if ((b0 & 0xE0) == 0xC0) {
        if (i + 1 < n && is_continuation(s[i + 1])) {
            pos += 2;
            return (uint32_t{b0 & 0x1Fu} << 6) | (s[i + 1] & 0x3Fu);
        }
    } else if ((b0 & 0xF0) == 0xE0) {
        if (i + 2 < n && is_continuation(s[i + 1]) && is_continuation(s[i + 2])) {
            pos += 3;
            return (uint32_t{b0 & 0x0Fu} << 12) | (uint32_t{s[i + 1] & 0x3Fu} << 6) | (s[i + 2] & 0x3Fu);
        }
    } else if ((b0 & 0xF8) == 0xF0) {
        if (i + 3 < n && is_continuation(s[i + 1]) && is_continuation(s[i + 2]) && is_continuation(s[i + 3])) {
            const uint32_t value = (uint32_t{b0 & 0x07u} << 18) | (uint32_t{s[i + 1] & 0x3Fu} << 12) |
                                   (uint32_t{s[i + 2] & 0x3Fu} << 6) | (s[i + 3] & 0x3Fu);
            if (value <= 0x10FFFF) {
                pos += 4;
                return value;
            }
        }
    }
    pos += 1;  // this byte starts no complete sequence
    return kReplacementCharacter;
}

void decode_utf8_lenient(std::string_view text, std::vector<uint32_t>& out) {
    size_t pos = 0;
    while (pos < text.size()) out.push_back(next_codepoint_lenient(text, pos));
}

void append_utf8(std::string& out, uint32_t cpt) {
    if (cpt < 0x80) {
        out += static_cast<char>(cpt);
    } else if (cpt < 0x800) {
        out += static_cast<char>(0xC0 | (cpt >> 6));
        out += static_cast<char>(0x80 | (cpt & 0x3F));
    } else if (cpt < 0x10000) {
        out += static_cast<char>(0xE0 | (cpt >> 12));
        out += static_cast<char>(0x80 | ((cpt >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cpt & 0x3F));
    } else if (cpt <= 0x10FFFF) {
        out += static_cast<char>(0xF0 | (cpt >> 18));
        out += static_cast<char>(0x80 | ((cpt >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cpt >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cpt & 0x3F));
    } else {
        append_replacement(out);
    }
}

bool is_valid_utf8(std::string_view text) {
    const auto* s = reinterpret_cast<const uint8_t*>(text.data());
    const size_t n = text.size();
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            ++i;
            continue;
        }
        const LeadRule rule = lead_rule(s[i]);
        if (rule.length == 0 || i + rule.length > n) return false;
        if (s[i + 1] < rule.second_min || s[i + 1] > rule.second_max) return false;
        for (size_t k = 2; k < rule.length; ++k) {
            if (!is_continuation(s[i + k])) return false;
        }
        i += rule.length;
    }
    return true;
}

void Utf8Sanitizer::push(std::string_view bytes, std::string& out) {
    const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
    const size_t n = bytes.size();
    size_t i = 0;
    while (i < n) {
        const uint8_t b = s[i];
        if (pending_len_ == 0) {
            if (b < 0x80) {
                // Copy a whole ASCII run at once.
                size_t j = i + 1;
                while (j < n && s[j] < 0x80) ++j;
                out.append(bytes.data() + i, j - i);
                i = j;
                continue;
            }
            const LeadRule rule = lead_rule(b);
            if (rule.length == 0) {
                append_replacement(out);
            } else {
                pending_[0] = b;
                pending_len_ = 1;
                needed_ = rule.length;
            }
            ++i;
            continue;
        }
        bool fits = is_continuation(b);
        if (pending_len_ == 1) {
            const LeadRule rule = lead_rule(pending_[0]);
            fits = b >= rule.second_min && b <= rule.second_max;
        }
        if (!fits) {
            // The held bytes can no longer become a character: one U+FFFD for all of them,
            // and this byte starts afresh.
            append_replacement(out);
            pending_len_ = 0;
            continue;
        }
        pending_[pending_len_++] = b;
        ++i;
        if (pending_len_ == needed_) {
            out.append(reinterpret_cast<const char*>(pending_), pending_len_);
            pending_len_ = 0;
        }
    }
}

void Utf8Sanitizer::finish(std::string& out) {
    if (pending_len_ > 0) append_replacement(out);
    pending_len_ = 0;
}

std::string sanitize_utf8(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    Utf8Sanitizer sanitizer;
    sanitizer.push(bytes, out);
    sanitizer.finish(out);
    return out;
}

}  // namespace powerhouse
