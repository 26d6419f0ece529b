// Values and text with Python's semantics: float repr, str/repr of containers, string
// helpers (Unicode whitespace, case mapping, splitting), dict keys (1 == 1.0 == True),
// operators. Expected values are what CPython 3 prints.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/template/template_test_support.h"
#include "powerhouse/chat_template.h"
#include "template/text.h"
#include "template/value.h"
#include "template/value_format.h"

namespace powerhouse::jinja {
namespace {

using test::render_empty;

TEST(TemplateValues, FloatReprIsPythons) {
    const std::pair<double, const char*> cases[] = {
        {0.0, "0.0"},
        {-0.0, "-0.0"},
        {1.0, "1.0"},
        {0.1, "0.1"},
        {1e-05, "1e-05"},
        {0.0001, "0.0001"},
        {1e16, "1e+16"},
        {1e15, "1000000000000000.0"},
        {123456789012345678.0, "1.2345678901234568e+17"},
        {1.5e300, "1.5e+300"},
        {5e-324, "5e-324"},
        {1.0 / 3, "0.3333333333333333"},
        {1e22, "1e+22"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {-1.25e-7, "-1.25e-07"},
        {12345.678, "12345.678"},
        {9007199254740993.0, "9007199254740992.0"},
        {0.1 + 0.2, "0.30000000000000004"},
        {HUGE_VAL, "inf"},
        {-HUGE_VAL, "-inf"},
        {std::nan(""), "nan"},
    };
    for (const auto& [value, expected] : cases) EXPECT_EQ(py_float_repr(value), expected);
}

TEST(TemplateValues, StrAndReprFollowPython) {
    EXPECT_EQ(render_empty("{{ [1, 'a', none, true, 1.5, (2,), {'k': [()]}] }}"),
              "[1, 'a', None, True, 1.5, (2,), {'k': [()]}]");
    std::string repr;
    append_py_string_repr(repr, "it's");
    EXPECT_EQ(repr, "\"it's\"");
    repr.clear();
    append_py_string_repr(repr, "both ' \"\n\\");
    EXPECT_EQ(repr, "'both \\' \"\\n\\\\'");
    repr.clear();
    append_py_string_repr(repr, "\xE2\x80\x8B\xEF\xBB\xBF\xE2\x80\xA8\xC2\x85\x1B\xF0\x9F\x98\x80");
    EXPECT_EQ(repr, "'\\u200b\\ufeff\\u2028\\x85\\x1b\xF0\x9F\x98\x80'");
}

TEST(TemplateValues, PythonWhitespaceAndLines) {
    EXPECT_EQ(py_strip("\xC2\xA0 x \xE2\x80\x83\xE3\x80\x80", nullptr), "x");  // NBSP, em space, ideographic space
    EXPECT_EQ(py_strip("\xE2\x80\x8Bx", nullptr), "\xE2\x80\x8Bx");            // zero-width space is not whitespace
    const std::vector<std::string> lines = py_splitlines(
        "a\xE2\x80\xA8"
        "b\xC2\x85"
        "c\r\nd",
        false);
    EXPECT_EQ(lines, (std::vector<std::string>{"a", "b", "c", "d"}));
    EXPECT_EQ(py_split_whitespace(" x y ", 1), (std::vector<std::string>{"x", "y "}));
    EXPECT_EQ(py_rsplit_whitespace("  a  b  ", 1), (std::vector<std::string>{"  a", "b"}));
    EXPECT_EQ(py_rsplit_whitespace("  a ", 0), (std::vector<std::string>{"  a"}));
    EXPECT_EQ(py_split("a,,b", ",", -1), (std::vector<std::string>{"a", "", "b"}));
    EXPECT_EQ(py_rsplit("a,b,c", ",", 1), (std::vector<std::string>{"a,b", "c"}));
}

TEST(TemplateValues, CaseMappingBeyondAscii) {
    EXPECT_EQ(py_upper("stra\xC3\x9F"
                       "e"),
              "STRASSE");                                                         // ß -> SS
    EXPECT_EQ(py_lower("\xCE\xA3\xCE\x91\xCE\xA3"), "\xCF\x83\xCE\xB1\xCF\x82");  // ΣΑΣ -> σας (final sigma)
    EXPECT_EQ(py_lower("\xCE\xA3"), "\xCF\x83");                                  // a lone Σ is not final
    EXPECT_EQ(py_upper("\xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82"),
              "\xD0\x9F\xD0\xA0\xD0\x98\xD0\x92\xD0\x95\xD0\xA2");
    EXPECT_EQ(py_title("they're bill's"), "They'Re Bill'S");
    EXPECT_EQ(py_capitalize("hELLO"), "Hello");
}

TEST(TemplateValues, CodePointsNotBytes) {
    EXPECT_EQ(code_point_count("h\xC3\xA9llo \xE2\x9C\x93"), 7u);
    EXPECT_EQ(render_empty("{{ 'h\xC3\xA9llo'|length }} {{ 'h\xC3\xA9llo'[1] }} {{ 'h\xC3\xA9llo'[::-1] }} {{ "
                     "'h\xC3\xA9llo'.find('l') }}"),
              "5 \xC3\xA9 oll\xC3\xA9h 2");
}

TEST(TemplateValues, DictKeysArePythonHashable) {
    // 1, 1.0 and True are one key; the first key object stays, the last value wins.
    EXPECT_EQ(render_empty("{{ {1: 'a', 1.0: 'b', true: 'c'} }}"), "{1: 'c'}");
    EXPECT_EQ(render_empty("{{ {(1, 2): 'tuple key'}[(1, 2)] }}"), "tuple key");
    EXPECT_EQ(render_empty("{{ {'a': 1} == {'a': 1.0} }} {{ [1, 2] == (1, 2) }}"), "True False");
    EXPECT_TRUE(render_empty("{{ {[1]: 2} }}").starts_with("ERROR: 1:5: unhashable type: 'list'"));
}

TEST(TemplateValues, IntegerOverflowIsAnErrorNotWraparound) {
    EXPECT_EQ(render_empty("{{ 2 ** 62 }}"), "4611686018427387904");
    EXPECT_TRUE(render_empty("{{ 2 ** 63 }}").starts_with("ERROR: 1:6: integer overflow")) << render_empty("{{ 2 ** 63 }}");
    EXPECT_TRUE(render_empty("{{ 9223372036854775807 + 1 }}").starts_with("ERROR:"));
    EXPECT_TRUE(render_empty("{{ 99999999999999999999 }}").starts_with("ERROR: 1:4: integer literal larger than 64 bits"));
    EXPECT_EQ(render_empty("{{ 2 ** 63.0 }}"), "9.223372036854776e+18");
}

TEST(TemplateValues, TojsonMatchesJsonDumps) {
    EXPECT_EQ(render_empty("{{ {'a': [1, 2.0, none, true], 'b': {}}|tojson }}"), "{\"a\": [1, 2.0, null, true], \"b\": {}}");
    EXPECT_EQ(render_empty("{{ {'a': [1]}|tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
    EXPECT_EQ(render_empty("{{ '\xC3\xA9\\u0001\x7f'|tojson }}"), "\"\xC3\xA9\\u0001\x7f\"");  // non-ASCII kept
    EXPECT_EQ(render_empty("{{ '\xC3\xA9'|tojson(true) }}"), "\"\\u00e9\"");
}

}  // namespace
}  // namespace powerhouse::jinja
