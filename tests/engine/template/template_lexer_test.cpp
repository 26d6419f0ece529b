// The lexer alone: tokens, whitespace control (trim_blocks, lstrip_blocks, {%- -%},
// {%+ +%}), comments, raw blocks, newline normalization, and errors with their position.
#include <gtest/gtest.h>

#include "engine/template/template_test_support.h"
#include "powerhouse/chat_template.h"
#include "template/lexer.h"
#include "template/limits.h"
#include "template/parser.h"

namespace powerhouse::jinja {
namespace {

std::string kinds(const std::vector<Token>& tokens) {
    std::string out;
    for (const Token& t : tokens) {
        switch (t.kind) {
            case TokenKind::data:
                out += "D(" + t.text + ")";
                break;
            case TokenKind::variable_begin:
                out += "{{";
                break;
            case TokenKind::variable_end:
                out += "}}";
                break;
            case TokenKind::block_begin:
                out += "{%";
                break;
            case TokenKind::block_end:
                out += "%}";
                break;
            case TokenKind::name:
                out += "N(" + t.text + ")";
                break;
            case TokenKind::string:
                out += "S(" + t.text + ")";
                break;
            case TokenKind::integer:
                out += "I(" + std::to_string(t.int_value) + ")";
                break;
            case TokenKind::floating:
                out += "F";
                break;
            case TokenKind::op:
                out += "O(" + t.text + ")";
                break;
            case TokenKind::eof:
                out += "$";
                break;
        }
    }
    return out;
}

std::string lex(std::string_view source) {
    return kinds(tokenize(normalize_source(source)));
}

using test::render_empty;

TEST(TemplateLexer, SplitsTextExpressionsAndBlocks) {
    EXPECT_EQ(lex("a{{ x.y[0] }}b{% if not z %}c{% endif %}"),
              "D(a){{N(x)O(.)N(y)O([)I(0)O(])}}D(b){%N(if)N(not)N(z)%}D(c){%N(endif)%}$");
    EXPECT_EQ(lex("{{ 'it\\'s' ~ \"q\" }}"), "{{S(it's)O(~)S(q)}}$");
    EXPECT_EQ(lex("{{ a // b ** c != d }}"), "{{N(a)O(//)N(b)O(**)N(c)O(!=)N(d)}}$");
    EXPECT_EQ(lex("{{ 1_000 + 0x10 }}"), "{{I(1000)O(+)I(16)}}$");
    EXPECT_EQ(lex("{{ a.0.1 }}"), "{{N(a)O(.)I(0)O(.)I(1)}}$");  // not the float 0.1
}

TEST(TemplateLexer, BracesInsideExpressionsDoNotEndTheTag) {
    EXPECT_EQ(lex("{{ {'a': {'b': 1}} }}"), "{{O({)S(a)O(:)O({)S(b)O(:)I(1)O(})O(})}}$");
}

TEST(TemplateLexer, TrimBlocksRemovesOneNewlineAfterBlockTags) {
    EXPECT_EQ(lex("{% if x %}\n\nA"), "{%N(if)N(x)%}D(\nA)$");
    EXPECT_EQ(lex("{{ x }}\nA"), "{{N(x)}}D(\nA)$");  // not after {{ }}
    EXPECT_EQ(lex("{# c #}\nA"), "D(A)$");            // after comments too
}

TEST(TemplateLexer, LstripBlocksRemovesIndentationBeforeBlockTags) {
    EXPECT_EQ(lex("A\n    {% if x %}"), "D(A\n){%N(if)N(x)%}$");
    EXPECT_EQ(lex("A\n  x {% if x %}"), "D(A\n  x ){%N(if)N(x)%}$");  // text before the tag on its line
    EXPECT_EQ(lex("A\n    {{ x }}"), "D(A\n    ){{N(x)}}$");          // not for {{ }}
    EXPECT_EQ(lex("    {% if x %}"), "{%N(if)N(x)%}$");               // start of template
    EXPECT_EQ(lex("\t \t{%+ if x %}"), "D(\t \t){%N(if)N(x)%}$");     // {%+ keeps it
}

TEST(TemplateLexer, MinusStripsAllWhitespaceOnItsSide) {
    EXPECT_EQ(lex("A \n\t {%- if x -%} \n\n B"), "D(A){%N(if)N(x)%}D(B)$");
    EXPECT_EQ(lex("A  {{- x -}}  B"), "D(A){{N(x)}}D(B)$");
    EXPECT_EQ(lex("A {#- c -#} B"), "D(A)D(B)$");
    EXPECT_EQ(lex("{{ 5 -}} x"), "{{I(5)}}D(x)$");  // '-' before the closer is whitespace control
}

TEST(TemplateLexer, PlusKeepsTheNewlineAfterABlock) {
    EXPECT_EQ(lex("{% if x +%}\nA"), "{%N(if)N(x)%}D(\nA)$");
}

TEST(TemplateLexer, RawBlocksAreText) {
    EXPECT_EQ(lex("{% raw %}{{ x }}{% endraw %}"), "D({{ x }})$");
    EXPECT_EQ(lex("{%- raw -%}  {% if %}  {%- endraw %}"), "D({% if %})$");
}

TEST(TemplateLexer, NormalizesNewlinesAndDropsOneTrailingNewline) {
    EXPECT_EQ(normalize_source("a\r\nb\rc\n"), "a\nb\nc");
    EXPECT_EQ(normalize_source("a\n\n"), "a\n");
    EXPECT_EQ(render_empty("x\r\n{% if true %}\r\ny{% endif %}\r\n"), "x\ny");
}

TEST(TemplateLexer, DecodesPythonStringEscapes) {
    EXPECT_EQ(render_empty("{{ '\\n\\t\\\\\\x41\\u00e9\\U0001F600\\101\\q' }}"),
              "\n\t\\A\xC3\xA9\xF0\x9F\x98\x80"
              "A\\q");
}

TEST(TemplateLexer, ErrorsCarryLineAndColumn) {
    const auto error = [](std::string_view source) {
        Result<ChatTemplate> parsed = ChatTemplate::parse(source);
        return parsed.ok() ? std::string("parsed") : parsed.error().message;
    };
    EXPECT_EQ(error("ab\ncd {{ x"), "2:4: unclosed print tag: '{{' without '}}'");
    EXPECT_EQ(error("{% if x"), "1:1: unclosed block tag: '{%' without '%}'");
    EXPECT_EQ(error("a\n{# never closed"), "2:1: missing end of comment tag '#}'");
    EXPECT_EQ(error("{{ 'abc }}"), "1:4: unterminated string");
    EXPECT_EQ(error("{{ (1 ] }}"), "1:7: unexpected ']', expected ')'");
    EXPECT_EQ(error("{{ 1 ) }}"), "1:6: unexpected ')'");
    EXPECT_EQ(error("{{ a @ b }}"), "1:6: unexpected character '@'");
    EXPECT_EQ(error("é{{ a § b }}"), "1:7: unexpected character '\xC2\xA7'");  // columns count characters
    EXPECT_EQ(error("{% raw %}x"), "1:1: missing end of raw directive");
}

}  // namespace
}  // namespace powerhouse::jinja
