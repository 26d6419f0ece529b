#include "template/lexer.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "template/limits.h"
#include "template/text.h"

namespace powerhouse::jinja {

std::string normalize_source(std::string_view source) {
    std::string out;
    out.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out.push_back('\n');
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            out.push_back(source[i]);
        }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

std::string describe_token(const Token& token) {
    switch (token.kind) {
        case TokenKind::data:
            return "text";
        case TokenKind::variable_begin:
            return "'{{'";
        case TokenKind::variable_end:
            return "end of print statement '}}'";
        case TokenKind::block_begin:
            return "'{%'";
        case TokenKind::block_end:
            return "end of statement block '%}'";
        case TokenKind::name:
            return fmt::format("'{}'", token.text);
        case TokenKind::string:
            return "string";
        case TokenKind::integer:
            return "integer";
        case TokenKind::floating:
            return "float";
        case TokenKind::op:
            return fmt::format("'{}'", token.text);
        case TokenKind::eof:
            return "end of template";
    }
    return "token";
}

namespace {

bool is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
    return is_name_start(c) || (c >= '0' && c <= '9');
}
bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

}  // namespace

TokenStream::TokenStream(std::string_view source, const LexerOptions& options) : src_(source), options_(options) {}

const Token& TokenStream::at(size_t index) {
    while (tokens_.size() <= index && !done_) lex_more();
    return index < tokens_.size() ? tokens_[index] : tokens_.back();
}

void TokenStream::lex_more() {
    const size_t before = tokens_.size();
    while (tokens_.size() == before && !done_) {
        if (in_tag_) {
            pos_ = skip_space(pos_);
            if (pos_ >= src_.size()) {
                fail_at(ErrorKind::syntax, SourcePos{static_cast<uint32_t>(tag_start_)},
                        block_ ? "unclosed block tag: '{%' without '%}'" : "unclosed print tag: '{{' without '}}'");
            }
            if (brackets_.empty() && try_tag_end(block_, pos_)) {
                in_tag_ = false;
            } else {
                pos_ = lex_expression_token(pos_);
            }
            continue;
        }
        if (pos_ >= src_.size()) {
            tokens_.push_back(Token{TokenKind::eof, static_cast<uint32_t>(src_.size()), {}, 0, 0.0});
            done_ = true;
            break;
        }
        const size_t tag = find_tag(pos_);
        if (tag == std::string_view::npos) {
            emit_data(pos_, src_.substr(pos_));
            pos_ = src_.size();
            continue;
        }
        const char kind = src_[tag + 1];
        char sign = 0;
        if (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')) sign = src_[tag + 2];
        size_t raw_end = 0;
        const bool raw = kind == '%' && match_raw_begin(tag, raw_end);
        std::string_view text = src_.substr(pos_, tag - pos_);
        text = strip_before_tag(text, sign, kind != '{');
        emit_data(pos_, text);
        if (raw) {
            lex_raw(tag, raw_end);
        } else if (kind == '#') {
            lex_comment(tag, sign);
        } else {
            block_ = kind == '%';
            emit(block_ ? TokenKind::block_begin : TokenKind::variable_begin, tag);
            in_tag_ = true;
            tag_start_ = tag;
            brackets_.clear();
            pos_ = tag + 2 + (sign != 0 ? 1 : 0);
        }
    }
}

size_t TokenStream::find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string_view::npos; i = src_.find('{', i + 1)) {
        if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string_view::npos;
}

size_t TokenStream::skip_space(size_t at) const {
    while (at < src_.size()) {
        size_t next = at;
        if (!py_isspace(next_code_point(src_, next))) break;
        at = next;
    }
    return at;
}

// jinja2's OptionalLStrip: `{%-` strips all whitespace before the tag; lstrip_blocks
// strips spaces and tabs back to the start of the line for blocks and comments.
std::string_view TokenStream::strip_before_tag(std::string_view text, char sign, bool lstrip_kind) const {
    if (sign == '-') return py_strip(text, nullptr, StripSide::right);
    if (sign == '+' || !options_.lstrip_blocks || !lstrip_kind) return text;
    const size_t newline = text.rfind('\n');
    const size_t line = newline == std::string_view::npos ? 0 : newline + 1;
    if (line == 0 && !line_starting_) return text;
    const std::string_view rest = text.substr(line);
    if (!rest.empty() && py_strip(rest, nullptr, StripSide::left).empty()) return text.substr(0, line);
    return text;
}

void TokenStream::emit_data(size_t offset, std::string_view text) {
    if (text.empty()) return;
    tokens_.push_back(Token{TokenKind::data, static_cast<uint32_t>(offset), std::string(text), 0, 0.0});
}

void TokenStream::emit(TokenKind kind, size_t offset, std::string text) {
    tokens_.push_back(Token{kind, static_cast<uint32_t>(offset), std::move(text), 0, 0.0});
}

// Matches "{%[-+]? raw [-]%}" at `tag`; raw_end is where the raw text starts.
bool TokenStream::match_raw_begin(size_t tag, size_t& raw_end) const {
    size_t at = tag + 2;
    if (at < src_.size() && (src_[at] == '-' || src_[at] == '+')) ++at;
    at = skip_space(at);
    if (src_.compare(at, 3, "raw") != 0 || (at + 3 < src_.size() && is_name_char(src_[at + 3]))) return false;
    at = skip_space(at + 3);
    if (src_.compare(at, 3, "-%}") == 0) {
        raw_end = skip_space(at + 3);
        return true;
    }
    if (src_.compare(at, 2, "%}") == 0) {
        raw_end = at + 2;
        return true;
    }
    return false;
}

void TokenStream::lex_raw(size_t tag, size_t raw_end) {
    for (size_t at = src_.find("{%", raw_end); at != std::string_view::npos; at = src_.find("{%", at + 1)) {
        size_t p = at + 2;
        char sign = 0;
        if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
        p = skip_space(p);
        if (src_.compare(p, 6, "endraw") != 0 || (p + 6 < src_.size() && is_name_char(src_[p + 6]))) continue;
        p = skip_space(p + 6);
        size_t end = 0;
        char end_sign = 0;
        if (src_.compare(p, 3, "-%}") == 0) {
            end = skip_space(p + 3);
            end_sign = '-';
        } else if (src_.compare(p, 3, "+%}") == 0) {
            end = p + 3;
            end_sign = '+';
        } else if (src_.compare(p, 2, "%}") == 0) {
            end = p + 2;
        } else {
            continue;
        }
        line_starting_ = raw_end > 0 && src_[raw_end - 1] == '\n';
        const std::string_view text = strip_before_tag(src_.substr(raw_end, at - raw_end), sign, true);
        emit_data(raw_end, text);
        if (end_sign == 0 && options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
        line_starting_ = end > 0 && src_[end - 1] == '\n';
        pos_ = end;
        return;
    }
    fail_at(ErrorKind::syntax, SourcePos{static_cast<uint32_t>(tag)}, "missing end of raw directive");
}

void TokenStream::lex_comment(size_t tag, char sign) {
    const size_t body = tag + 2 + (sign != 0 ? 1 : 0);
    const size_t close = src_.find("#}", body);
    if (close == std::string_view::npos) {
        fail_at(ErrorKind::syntax, SourcePos{static_cast<uint32_t>(tag)}, "missing end of comment tag '#}'");
    }
    const char end_sign = close > body && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    size_t end = close + 2;
    if (end_sign == '-') {
        end = skip_space(end);
    } else if (end_sign == 0 && options_.trim_blocks && end < src_.size() && src_[end] == '\n') {
        ++end;
    }
    line_starting_ = end > 0 && src_[end - 1] == '\n';
    pos_ = end;
}

bool TokenStream::try_tag_end(bool block, size_t at) {
    const std::string_view close = block ? "%}" : "}}";
    size_t end = 0;
    if (src_.compare(at, 1, "-") == 0 && src_.compare(at + 1, 2, close) == 0) {
        end = skip_space(at + 3);
    } else if (block && src_.compare(at, 1, "+") == 0 && src_.compare(at + 1, 2, close) == 0) {
        end = at + 3;
    } else if (src_.compare(at, 2, close) == 0) {
        end = at + 2;
        if (block && options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
    } else {
        return false;
    }
    emit(block ? TokenKind::block_end : TokenKind::variable_end, at);
    line_starting_ = src_[end - 1] == '\n';
    pos_ = end;
    return true;
}

size_t TokenStream::lex_expression_token(size_t at) {
    auto& brackets = brackets_;
    const char c = src_[at];
    if (c == '\'' || c == '"') return lex_string(at);
    if (is_digit(c)) return lex_number(at);
    if (is_name_start(c)) {
        size_t end = at;
        while (end < src_.size() && is_name_char(src_[end])) ++end;
        emit(TokenKind::name, at, std::string(src_.substr(at, end - at)));
        return end;
    }
    static constexpr std::string_view two_char[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : two_char) {
        if (src_.compare(at, 2, op) == 0) {
            emit(TokenKind::op, at, std::string(op));
            return at + 2;
        }
    }
    static constexpr std::string_view one_char = "+-/*%~[](){}><=.:|,;";
    if (one_char.find(c) == std::string_view::npos) {
        size_t next = at;
        std::string shown;
        append_utf8(shown, next_code_point(src_, next));
        fail_at(ErrorKind::syntax, SourcePos{static_cast<uint32_t>(at)},
                fmt::format("unexpected character '{}'", shown));
    }
    if (c == '(' || c == '[' || c == '{') {
        brackets.emplace_back(c, at);
    } else if (c == ')' || c == ']' || c == '}') {
        const char open = c == ')' ? '(' : c == ']' ? '[' : '{';
        if (brackets.empty()) {
            fail_at(ErrorKind::syntax, SourcePos{static_cast<uint32_t>(at)}, fmt::format("unexpected '{}'", c));
        }
        if (brackets.back().first != open) {
            const char expected = brackets.back().first == '(' ? ')' : brackets.back().first == '[' ? ']' : '}';
            fail_at(ErrorKind::syntax, SourcePos{static_cast<uint32_t>(at)},
                    fmt::format("unexpected '{}', expected '{}'", c, expected));
        }
        brackets.pop_back();
    }
    emit(TokenKind::op, at, std::string(1, c));
    return at + 1;
}

size_t TokenStream::lex_string(size_t at) {
    const char quote = src_[at];
    std::string value;
    size_t i = at + 1;
    while (i < src_.size() && src_[i] != quote) {
        if (src_[i] != '\\') {
            value.push_back(src_[i++]);
            continue;
        }
        if (i + 1 >= src_.size()) break;
        i = decode_escape(i, value);
    }
    if (i >= src_.size()) fail_at(ErrorKind::syntax, SourcePos{static_cast<uint32_t>(at)}, "unterminated string");
    emit(TokenKind::string, at, std::move(value));
    return i + 1;
}

// Python's unicode-escape decoding of one backslash sequence at src_[i].
size_t TokenStream::decode_escape(size_t i, std::string& out) {
    const char e = src_[i + 1];
    auto hex_escape = [&](size_t digits) {
        if (i + 2 + digits > src_.size()) {
            fail_at(ErrorKind::syntax, SourcePos{static_cast<uint32_t>(i)}, "truncated escape in string");
        }
        char32_t cp = 0;
        for (size_t k = 0; k < digits; ++k) {
            const char h = src_[i + 2 + k];
            int v = -1;
            if (h >= '0' && h <= '9') v = h - '0';
            if (h >= 'a' && h <= 'f') v = h - 'a' + 10;
            if (h >= 'A' && h <= 'F') v = h - 'A' + 10;
            if (v < 0) fail_at(ErrorKind::syntax, SourcePos{static_cast<uint32_t>(i)}, "truncated escape in string");
            cp = cp * 16 + static_cast<char32_t>(v);
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            fail_at(ErrorKind::unsupported, SourcePos{static_cast<uint32_t>(i)},
                    "escape for a surrogate or out-of-range code point in string");
        }
        append_utf8(out, cp);
        return i + 2 + digits;
    };
    switch (e) {
        case '\n':
            return i + 2;  // line continuation
        case '\\':
            out.push_back('\\');
            return i + 2;
        case '\'':
            out.push_back('\'');
            return i + 2;
        case '"':
            out.push_back('"');
            return i + 2;
        case 'a':
            out.push_back('\a');
            return i + 2;
        case 'b':
            out.push_back('\b');
            return i + 2;
        case 'f':
            out.push_back('\f');
            return i + 2;
        case 'n':
            out.push_back('\n');
            return i + 2;
        case 'r':
            out.push_back('\r');
            return i + 2;
        case 't':
            out.push_back('\t');
            return i + 2;
        case 'v':
            out.push_back('\v');
            return i + 2;
        case 'x':
            return hex_escape(2);
        case 'u':
            return hex_escape(4);
        case 'U':
            return hex_escape(8);
        case 'N':
            fail_at(ErrorKind::unsupported, SourcePos{static_cast<uint32_t>(i)}, "\\N{...} escapes are not supported");
        default:
            break;
    }
    if (e >= '0' && e <= '7') {
        char32_t cp = 0;
        size_t k = i + 1;
        while (k < src_.size() && k < i + 4 && src_[k] >= '0' && src_[k] <= '7') cp = cp * 8 + (src_[k++] - '0');
        append_utf8(out, cp);
        return k;
    }
    out.push_back('\\');  // unknown escapes stay as written
    return i + 1;
}

size_t TokenStream::digits_with_underscores(size_t at) const {
    while (at < src_.size() && is_digit(src_[at])) {
        ++at;
        if (at + 1 < src_.size() && src_[at] == '_' && is_digit(src_[at + 1])) ++at;
    }
    return at;
}

size_t TokenStream::lex_number(size_t at) {
    const SourcePos pos{static_cast<uint32_t>(at)};
    auto clean = [&](size_t from, size_t to) {
        std::string s;
        for (size_t k = from; k < to; ++k) {
            if (src_[k] != '_') s.push_back(src_[k]);
        }
        return s;
    };
    // Float: digits then a fraction and/or an exponent (not right after a '.', so that
    // `a.0.1` is attribute 0 then 1).
    const bool after_dot = at > 0 && src_[at - 1] == '.';
    size_t end = digits_with_underscores(at);
    if (!after_dot) {
        size_t f = end;
        bool is_float = false;
        if (f + 1 < src_.size() && src_[f] == '.' && is_digit(src_[f + 1])) {
            f = digits_with_underscores(f + 1);
            is_float = true;
        }
        if (f < src_.size() && (src_[f] == 'e' || src_[f] == 'E')) {
            size_t x = f + 1;
            if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
            if (x < src_.size() && is_digit(src_[x])) {
                f = digits_with_underscores(x);
                is_float = true;
            }
        }
        if (is_float) {
            Token token{TokenKind::floating, pos.offset, {}, 0, 0.0};
            const std::string text = clean(at, f);
            // from_chars, not strtod: the result must not depend on the process locale.
            const auto parsed = std::from_chars(text.data(), text.data() + text.size(), token.float_value);
            if (parsed.ec == std::errc::result_out_of_range) {
                // As Python: 1e400 is inf, 1e-400 is 0.0.
                const size_t e = text.find_first_of("eE");
                const bool tiny = e != std::string::npos && e + 1 < text.size() && text[e + 1] == '-';
                token.float_value = tiny ? 0.0 : HUGE_VAL;
            }
            tokens_.push_back(std::move(token));
            return f;
        }
    }
    int base = 10;
    size_t digits_at = at;
    if (src_[at] == '0' && at + 1 < src_.size()) {
        const char b = static_cast<char>(src_[at + 1] | 0x20);
        if (b == 'x' || b == 'o' || b == 'b') {
            base = b == 'x' ? 16 : b == 'o' ? 8 : 2;
            digits_at = at + 2;
            end = digits_at;
            while (end < src_.size() && (std::isxdigit(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) {
                ++end;
            }
        }
    }
    const std::string digits = clean(digits_at, end);
    if (digits.empty()) fail_at(ErrorKind::syntax, pos, "invalid number literal");
    uint64_t value = 0;
    for (char d : digits) {
        const int v = is_digit(d) ? d - '0' : (d | 0x20) - 'a' + 10;
        if (v >= base) fail_at(ErrorKind::syntax, pos, "invalid digit in number literal");
        if (value > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - static_cast<uint64_t>(v)) /
                        static_cast<uint64_t>(base)) {
            fail_at(ErrorKind::unsupported, pos, "integer literal larger than 64 bits");
        }
        value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(v);
    }
    Token token{TokenKind::integer, pos.offset, {}, static_cast<int64_t>(value), 0.0};
    tokens_.push_back(std::move(token));
    return end;
}

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
    TokenStream stream(source, options);
    std::vector<Token> tokens;
    for (size_t i = 0;; ++i) {
        tokens.push_back(stream.at(i));
        if (tokens.back().kind == TokenKind::eof) return tokens;
    }
}

}  // namespace powerhouse::jinja
