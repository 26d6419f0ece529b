// Splits a template into tokens the way jinja2's lexer does: text, {{ }}, {% %}, comments
// (dropped) and {% raw %}, with the whitespace control transformers enables —
// trim_blocks (the newline after a block tag or comment goes), lstrip_blocks (spaces and
// tabs before a block tag or comment on its own line go) — and the per-tag markers `{%-`
// and `-%}` (strip all whitespace on that side) and `{%+` / `+%}` (keep it).
//
// The lexer is a loop, never a recursion, so any input is safe; errors carry the offset.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace powerhouse::jinja {

enum class TokenKind : uint8_t {
    data,            // literal text
    variable_begin,  // {{
    variable_end,    // }}
    block_begin,     // {%
    block_end,       // %}
    name,
    string,  // text is the decoded value
    integer,
    floating,
    op,  // text is the operator: "+", "//", "(", ...
    eof,
};

struct Token {
    TokenKind kind = TokenKind::eof;
    uint32_t offset = 0;  // into the normalized source
    std::string text;
    int64_t int_value = 0;
    double float_value = 0.0;
};

struct LexerOptions {
    bool trim_blocks = true;
    bool lstrip_blocks = true;
};

// What jinja2 does to a source before lexing: "\r\n" and "\r" become "\n", and one
// trailing newline is dropped (keep_trailing_newline=False).
std::string normalize_source(std::string_view source);

// Tokens on demand: the parser asks for the token at an index and the stream lexes just
// far enough, so a template that fails early (nesting limit, syntax error) is never
// lexed to its end. Throws TemplateError (syntax) on malformed input: unclosed tags,
// comments or strings, unbalanced brackets, characters that cannot start a token.
class TokenStream {
public:
    TokenStream(std::string_view source, const LexerOptions& options = {});

    // The token at `index`; past the end, the eof token. References stay valid while the
    // stream grows.
    const Token& at(size_t index);

private:
    void lex_more();  // appends at least one token (the last is eof)
    size_t find_tag(size_t from) const;
    size_t skip_space(size_t at) const;
    std::string_view strip_before_tag(std::string_view text, char sign, bool lstrip_kind) const;
    void emit_data(size_t offset, std::string_view text);
    void emit(TokenKind kind, size_t offset, std::string text = {});
    bool match_raw_begin(size_t tag, size_t& raw_end) const;
    void lex_raw(size_t tag, size_t raw_end);
    void lex_comment(size_t tag, char sign);
    bool try_tag_end(bool block, size_t at);
    size_t lex_expression_token(size_t at);
    size_t lex_string(size_t at);
    size_t decode_escape(size_t i, std::string& out);
    size_t digits_with_underscores(size_t at) const;
    size_t lex_number(size_t at);

    std::string_view src_;
    LexerOptions options_;
    size_t pos_ = 0;
    bool line_starting_ = true;  // the last thing consumed ended a line (for lstrip_blocks)
    bool in_tag_ = false;        // between {{ / {% and its end
    bool block_ = false;         // the open tag is {% (else {{)
    size_t tag_start_ = 0;
    std::vector<std::pair<char, size_t>> brackets_;  // open ( [ { in the tag, with offsets
    bool done_ = false;
    std::deque<Token> tokens_;
};

// All tokens at once (tests, tools).
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options = {});

// A readable name for a token in messages: "'}}'", "name 'foo'", "end of template".
std::string describe_token(const Token& token);

}  // namespace powerhouse::jinja
