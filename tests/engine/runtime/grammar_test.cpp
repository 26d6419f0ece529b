// Constrained sampling (powerhouse/grammar.h): the GBNF parser and its errors, the matcher
// over characters and over tokens (UTF-8 split across tokens, ends, masks over a small
// byte-level vocabulary), JSON schemas against the verdicts of Python's jsonschema
// (tests/data/grammar, made by scripts/fixtures/make_json_schema_fixture.py), and SmolLM2
// sampling under a schema whose every answer must parse and fit.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "gguf/gguf_value.h"
#include "powerhouse/generation.h"
#include "powerhouse/grammar.h"
#include "powerhouse/model.h"
#include "powerhouse/sampler.h"
#include "runtime/grammar_internal.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer_impl.h"

namespace powerhouse {
namespace {

using Json = nlohmann::ordered_json;

// GPT-2's byte-to-character map: how a byte-level BPE vocabulary stores raw bytes.
std::string byte_level(std::string_view bytes) {
    std::string out;
    for (char ch : bytes) {
        const auto b = static_cast<uint8_t>(ch);
        uint32_t cp = b;
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        if (!printable) {
            uint32_t n = 0;
            for (uint32_t x = 0; x < b; ++x) {
                const bool p = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
                if (!p) ++n;
            }
            cp = 256 + n;
        }
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }
    return out;
}

// A small byte-level vocabulary; each token's bytes, then two control tokens.
const std::vector<std::string> kPieces = {"{",   "}",   "\"", "a",        "b",        "ab",   " ",
                                          "\":", "1",   "12", ",",        "\xC3\xA9", "\xC3", "\xA9",
                                          "\n",  "{\"", "x",  "\xE2\x82", "\xAC",     "a\"",  "\xE2\x82\xAC"};
const TokenId kEnd = static_cast<TokenId>(kPieces.size());  // <|end|>: control, end of generation
const TokenId kCtl = kEnd + 1;                              // <|ctl|>: control, not an end

TokenId id_of(std::string_view piece) {
    for (size_t i = 0; i < kPieces.size(); ++i) {
        if (kPieces[i] == piece) return static_cast<TokenId>(i);
    }
    ADD_FAILURE() << "no token " << piece;
    return -1;
}

Tokenizer tiny_tokenizer() {
    GgufMetadata m;
    m.set_string("tokenizer.ggml.model", "gpt2");
    m.set_string("tokenizer.ggml.pre", "gpt-2");
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    for (const std::string& p : kPieces) {
        tokens.push_back(byte_level(p));
        types.push_back(1);
    }
    tokens.push_back("<|end|>");
    types.push_back(3);
    tokens.push_back("<|ctl|>");
    types.push_back(3);
    m.set_string_array("tokenizer.ggml.tokens", tokens);
    m.set_array<int32_t>("tokenizer.ggml.token_type", GgufValueType::i32, std::span<const int32_t>(types));
    m.set_string_array("tokenizer.ggml.merges", {"a b"});
    m.set("tokenizer.ggml.eos_token_id", GgufValue{static_cast<uint32_t>(kEnd)});
    Result<Tokenizer> t = tokenizer_from_metadata(m);
    EXPECT_TRUE(t.ok()) << t.error().message;
    return std::move(t).value();
}

const std::shared_ptr<const GrammarVocabulary>& tiny_vocabulary() {
    static const std::shared_ptr<const GrammarVocabulary> v = GrammarVocabulary::build(tiny_tokenizer());
    return v;
}

Grammar must_parse(std::string_view text, std::string_view root = "root") {
    Result<Grammar> g = Grammar::parse(text, root);
    EXPECT_TRUE(g.ok()) << g.error().message << "\n" << text;
    if (!g) return Grammar::parse("root ::= \"\"").value();
    return std::move(g).value();
}

std::string parse_error(std::string_view text) {
    Result<Grammar> g = Grammar::parse(text);
    return g ? std::string("(parsed)") : g.error().message;
}

// The whole text is a sentence of the grammar.
bool matches(const Grammar& g, std::string_view text) {
    GrammarMatcher m(g, tiny_vocabulary());
    return m.accept_text(text) && m.can_end();
}
bool matches(std::string_view grammar, std::string_view text) {
    return matches(must_parse(grammar), text);
}

// The tokens mask() leaves open, in id order.
std::vector<TokenId> allowed(const GrammarMatcher& m) {
    const int32_t n = tiny_vocabulary()->impl().n_vocab;
    std::vector<float> logits(static_cast<size_t>(n), 0.0f);
    m.mask(logits);
    std::vector<TokenId> out;
    for (int32_t i = 0; i < n; ++i) {
        if (std::isfinite(logits[static_cast<size_t>(i)])) out.push_back(i);
    }
    return out;
}

std::vector<TokenId> ids(std::initializer_list<std::string_view> pieces) {
    std::vector<TokenId> out;
    for (std::string_view p : pieces) out.push_back(id_of(p));
    std::sort(out.begin(), out.end());
    return out;
}

TEST(GrammarParse, ErrorsSayLineAndColumn) {
    EXPECT_EQ(parse_error("root ::= \"a\" value\n"), "1:14: undefined rule 'value'");
    EXPECT_EQ(parse_error("root ::= x\nx ::= (\"a\" | \"b\"\n"), "2:7: '(' is never closed");
    EXPECT_EQ(parse_error("root ::= \"abc\n"), "1:10: '\"' is never closed");
    EXPECT_EQ(parse_error("root ::= [a-z\n"), "1:10: '[' is never closed");
    EXPECT_EQ(parse_error("root ::= \"a\"\nroot ::= \"b\""), "2:1: rule 'root' is defined twice (first at 1:1)");
    EXPECT_EQ(parse_error("x ::= \"a\""), "1:1: the grammar has no rule 'root' to start from");
    EXPECT_EQ(parse_error("root ::= \"\\q\""), "1:11: unknown escape '\\q'");
    EXPECT_EQ(parse_error("root ::= \"a\"{3,2}"), "1:13: repetition {3,2}: the maximum is below the minimum");
    EXPECT_EQ(parse_error("root ::= * \"a\""), "1:10: '*' has nothing to repeat");
    EXPECT_EQ(parse_error("root ::= [z-a]"), "1:11: range U+007A-U+0061 is backwards");
    EXPECT_EQ(parse_error("root ::= []"), "1:10: empty character class");
    EXPECT_EQ(parse_error("root \"a\""), "1:6: expected '::=' after the rule name 'root', found '\"'");
    EXPECT_EQ(parse_error("root ::= \"a\")"), "1:13: ')' without a matching '('");
    // Columns count characters, not bytes.
    EXPECT_EQ(parse_error("root ::= \"é\" nope"), "1:14: undefined rule 'nope'");
}

TEST(GrammarParse, LeftRecursionIsRefused) {
    EXPECT_EQ(parse_error("root ::= root \"a\" | \"b\""),
              "1:1: left recursion: root can refer back to itself before matching any character (root -> root)");
    // Through a rule that may match nothing.
    const std::string indirect = "root ::= a\na ::= b \"x\"\nb ::= c\nc ::= \"y\"? a\n";
    EXPECT_NE(parse_error(indirect).find("left recursion"), std::string::npos) << parse_error(indirect);
    // A repetition of something that may be empty would loop the same way.
    EXPECT_EQ(parse_error("root ::= (\"a\"?)*"),
              "1:16: this repeats something that can match empty text (left recursion)");
    // Right recursion is fine.
    EXPECT_TRUE(matches("root ::= \"a\" root | \"b\"", "aaab"));
}

TEST(GrammarParse, HeaderExampleParsesAndMatches) {
    const char* text = R"(
root   ::= "{" ws pair ("," ws pair)* "}"      # rules: name ::= alternatives
pair   ::= string ":" ws value                 # sequences, | alternatives, ( groups )
string ::= "\"" [^"\\]* "\""
value  ::= string | digit+
digit  ::= [0-9]  ws ::= [ \t\n]{0,4}          # two rules on one line
)";
    const Grammar g = must_parse(text);
    EXPECT_TRUE(matches(g, R"({"a":1,  "b":"x"})"));
    EXPECT_TRUE(matches(g, "{\n\t\"k\": 42}"));
    EXPECT_FALSE(matches(g, R"({"a":1,      "b":2})"));  // five spaces: above {0,4}
    EXPECT_FALSE(matches(g, R"({"a":1)"));
}

TEST(GrammarMatch, RepetitionForms) {
    EXPECT_TRUE(matches("root ::= \"a\"{3}", "aaa"));
    EXPECT_FALSE(matches("root ::= \"a\"{3}", "aa"));
    EXPECT_FALSE(matches("root ::= \"a\"{3}", "aaaa"));
    for (int n = 0; n <= 5; ++n) {
        const std::string s(static_cast<size_t>(n), 'a');
        EXPECT_EQ(matches("root ::= \"a\"{2,}", s), n >= 2) << n;
        EXPECT_EQ(matches("root ::= \"a\"{1,3}", s), n >= 1 && n <= 3) << n;
        EXPECT_EQ(matches("root ::= \"a\"{0,2}", s), n <= 2) << n;
        EXPECT_EQ(matches("root ::= \"a\"*", s), true) << n;
        EXPECT_EQ(matches("root ::= \"a\"+", s), n >= 1) << n;
        EXPECT_EQ(matches("root ::= \"a\"?", s), n <= 1) << n;
    }
    // A repeated literal repeats as a whole; so do groups.
    EXPECT_TRUE(matches("root ::= \"ab\"*", "abab"));
    EXPECT_FALSE(matches("root ::= \"ab\"*", "aba"));
    EXPECT_TRUE(matches("root ::= (\"x\" | \"yz\"){2} \"!\"", "yzx!"));
    EXPECT_FALSE(matches("root ::= (\"x\" | \"yz\"){2} \"!\"", "x!"));
    EXPECT_TRUE(matches("root ::= \"a\"{ 1 , 2 }", "aa"));
    EXPECT_TRUE(matches("root ::= \"\"* \"a\"", "a"));  // nothing repeated is still nothing
}

TEST(GrammarMatch, CharacterClasses) {
    EXPECT_TRUE(matches("root ::= [a-cx]+", "abcx"));
    EXPECT_FALSE(matches("root ::= [a-cx]+", "abd"));
    EXPECT_TRUE(matches("root ::= [^a-c]+", "xyz\xC3\xA9"));
    EXPECT_FALSE(matches("root ::= [^a-c]+", "xa"));
    EXPECT_TRUE(matches("root ::= [\\x41-\\x43] [\\u00e9] [\\]\\-]", "B\xC3\xA9]"));
    EXPECT_TRUE(matches("root ::= [\\]\\-]", "-"));
    EXPECT_TRUE(matches("root ::= . . .", "a\xE2\x82\xAC\xF0\x9F\x98\x80"));  // a, U+20AC, U+1F600
    EXPECT_FALSE(matches("root ::= . .", "a"));
    EXPECT_TRUE(matches("root ::= [é-ü]", "\xC3\xB1"));  // U+00F1 between U+00E9 and U+00FC
    EXPECT_FALSE(matches("root ::= [é-ü]", "\xC3\xA8"));
    EXPECT_TRUE(matches("root ::= \"\\\"\\\\\\n\\t\\x7e\\u20AC\\U0001F600\"", "\"\\\n\t~\xE2\x82\xAC\xF0\x9F\x98\x80"));
    // Ill-formed UTF-8 never matches, even where any character may come.
    EXPECT_FALSE(matches("root ::= .*", "\xC0\x80"));          // overlong
    EXPECT_FALSE(matches("root ::= .*", "\xED\xA0\x80"));      // a surrogate
    EXPECT_FALSE(matches("root ::= .*", "\xF4\x90\x80\x80"));  // above U+10FFFF
    EXPECT_FALSE(matches("root ::= .*", "\xA9"));              // a lone continuation byte
}

TEST(GrammarMatch, EndsAndFailedStepsChangeNothing) {
    GrammarMatcher m(must_parse("root ::= \"a\" \"b\"?"), tiny_vocabulary());
    EXPECT_FALSE(m.can_end());
    EXPECT_FALSE(m.accept_text("x"));
    EXPECT_TRUE(m.accept_text("a"));
    EXPECT_TRUE(m.can_end());
    EXPECT_FALSE(m.must_end());
    EXPECT_FALSE(m.accept_text("bb"));  // nothing of it is taken
    EXPECT_TRUE(m.accept_text("b"));
    EXPECT_TRUE(m.must_end());
    EXPECT_FALSE(m.accept_text("b"));
    EXPECT_TRUE(m.accept(kEnd));
    EXPECT_TRUE(m.must_end());

    GrammarMatcher empty(must_parse("root ::= \"\" | \"a\""), tiny_vocabulary());
    EXPECT_TRUE(empty.can_end());
    EXPECT_FALSE(empty.must_end());
}

TEST(GrammarMatch, Utf8AcrossTokens) {
    GrammarMatcher m(must_parse("root ::= \"\\\"\" [^\"]* \"\\\"\""), tiny_vocabulary());
    EXPECT_TRUE(m.accept(id_of("\"")));
    EXPECT_TRUE(m.accept(id_of("\xC3")));
    EXPECT_FALSE(m.can_end());
    // Mid-character, only bytes that continue it (A9: é, AC: ì), not a new character.
    EXPECT_EQ(allowed(m), ids({"\xA9", "\xAC"}));
    EXPECT_FALSE(m.accept(id_of("a")));
    EXPECT_TRUE(m.accept(id_of("\xA9")));
    EXPECT_TRUE(m.accept(id_of("\xE2\x82")));
    EXPECT_EQ(allowed(m), ids({"\xA9", "\xAC"}));  // U+20A9 and U+20AC
    EXPECT_TRUE(m.accept(id_of("\xAC")));
    EXPECT_TRUE(m.accept(id_of("a\"")));
    EXPECT_TRUE(m.must_end());

    // The code points a partial character may still become must meet the grammar: only the
    // euro sign here, so C3 (U+00C0..U+00FF) is out, E2 82 in, and E2 82 A9 (U+20A9) out.
    GrammarMatcher euro(must_parse("root ::= \"€\""), tiny_vocabulary());
    EXPECT_EQ(allowed(euro), ids({"\xE2\x82", "\xE2\x82\xAC"}));
    EXPECT_TRUE(euro.accept_text("\xE2\x82"));
    EXPECT_FALSE(euro.accept_text("\xA9"));
    EXPECT_TRUE(euro.accept_text("\xAC"));
    EXPECT_TRUE(euro.can_end());
}

TEST(GrammarMask, SmallVocabulary) {
    const Grammar g = must_parse(R"(root ::= "{" "\"" [a-b]+ "\":" " "? [0-9]+ "}")");
    GrammarMatcher m(g, tiny_vocabulary());
    EXPECT_EQ(allowed(m), ids({"{", "{\""}));  // never a control token, no end yet
    ASSERT_TRUE(m.accept(id_of("{\"")));
    // a" is open too: its quote begins the "\":" that may follow.
    EXPECT_EQ(allowed(m), ids({"a", "b", "ab", "a\""}));
    ASSERT_TRUE(m.accept(id_of("ab")));
    EXPECT_EQ(allowed(m), ids({"a", "b", "ab", "a\"", "\"", "\":"}));
    EXPECT_FALSE(m.accept(id_of("}")));
    EXPECT_FALSE(m.accept(id_of("1")));
    ASSERT_TRUE(m.accept(id_of("\":")));
    EXPECT_EQ(allowed(m), ids({" ", "1", "12"}));
    ASSERT_TRUE(m.accept(id_of("12")));
    EXPECT_EQ(allowed(m), ids({"}", "1", "12"}));
    EXPECT_FALSE(m.accept(kEnd));
    EXPECT_FALSE(m.accept(kCtl));
    ASSERT_TRUE(m.accept(id_of("}")));
    EXPECT_TRUE(m.must_end());
    EXPECT_EQ(allowed(m), std::vector<TokenId>{kEnd});  // only the end
    // Logits past the vocabulary (a padded output layer) are masked too.
    std::vector<float> padded(static_cast<size_t>(kCtl) + 5, 1.0f);
    m.mask(padded);
    for (size_t i = 0; i < padded.size(); ++i)
        EXPECT_EQ(std::isfinite(padded[i]), static_cast<TokenId>(i) == kEnd) << i;

    // can_end but not must_end: the end and more text are both open.
    GrammarMatcher digits(must_parse("root ::= [0-9]+"), tiny_vocabulary());
    ASSERT_TRUE(digits.accept(id_of("1")));
    EXPECT_EQ(allowed(digits), (std::vector<TokenId>{id_of("1"), id_of("12"), kEnd}));
}

TEST(GrammarMask, ExplodingStackSetsAreCappedNotFatal) {
    // After n a's the stacks are every string of n b/c continuations: 2^n of them. Past the
    // cap the step is refused (the token masked), instead of eating memory.
    const Grammar g = must_parse("root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\"");
    GrammarMatcher m(g, tiny_vocabulary());
    EXPECT_TRUE(m.accept_text(std::string(8, 'a')));
    EXPECT_TRUE(m.accept_text("bcbcbbcc"));
    EXPECT_TRUE(m.can_end());
    // 3 * 2^n stacks after n a's: 1536 after 9, 3072 (above the cap of 2048) after 10.
    GrammarMatcher deep(g, tiny_vocabulary());
    EXPECT_TRUE(deep.accept_text(std::string(9, 'a')));
    EXPECT_FALSE(deep.accept_text("a"));
    EXPECT_EQ(allowed(deep), ids({"b"}));  // b (and c) still close the 9 a's; a is masked
    EXPECT_TRUE(deep.accept_text("bcbbcccbb"));
    EXPECT_TRUE(deep.must_end());
}

// mask() walks the vocabulary's trie; accept() steps through one token's bytes. They must agree
// on every token, here over SmolLM2's real vocabulary (multi-byte pieces, byte tokens, controls).
TEST(GrammarMask, AgreesWithAcceptOnRealVocabulary) {
    const std::filesystem::path path = test::test_model_path();
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "no test model at " << path << " (scripts/fetch-test-model)";
    Result<Tokenizer> tokenizer = Tokenizer::load(path);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
    const auto vocabulary = GrammarVocabulary::build(*tokenizer);
    const Grammar g = must_parse(json_object_grammar());
    const int32_t n = tokenizer->n_vocab();
    size_t checked_open = 0;
    for (const std::string prefix :
         {"", "{\"k\": ", "{\"k\": \"caf", "{\"k\": \"caf\xC3", "{\"k\": [1, 2", "{\"k\": -0.5e", "{\"k\": {}"}) {
        GrammarMatcher m(g, vocabulary);
        ASSERT_TRUE(m.accept_text(prefix)) << prefix;
        std::vector<float> logits(static_cast<size_t>(n), 0.0f);
        m.mask(logits);
        // Every token where few are open; a stride through them where nearly all are.
        const int32_t stride = prefix == "{\"k\": " ? 1 : 7;
        for (TokenId id = 0; id < n; id += stride) {
            const bool open = std::isfinite(logits[static_cast<size_t>(id)]);
            GrammarMatcher fresh(g, vocabulary);
            ASSERT_TRUE(fresh.accept_text(prefix));
            const bool ok = fresh.accept(id);
            ASSERT_EQ(open, ok) << "prefix " << prefix << ", token " << id << " '" << tokenizer->token_piece(id, true)
                                << "'";
            checked_open += open;
            if (ok && tokenizer->is_eog(id)) {
                ADD_FAILURE() << "an end before the object closed";
            }
        }
    }
    EXPECT_GT(checked_open, 1000u);
}

// The matcher's caches are rebuilt past their limits; a long, deeply nested answer crosses them
// many times and must still be followed exactly.
TEST(GrammarMatch, LongAnswersSurviveCacheRebuilds) {
    const Grammar g = must_parse(json_object_grammar());
    GrammarMatcher m(g, tiny_vocabulary());
    const size_t depth = 3000;
    ASSERT_TRUE(m.accept_text("{\"a\": "));
    for (size_t i = 0; i < depth; ++i) {
        ASSERT_TRUE(m.accept_text(i % 2 ? "[" : "{\"k\":")) << i;
        if (i % 500 == 0) {
            EXPECT_FALSE(allowed(m).empty());
        }
    }
    ASSERT_TRUE(m.accept_text("1"));
    for (size_t i = depth; i-- > 0;) ASSERT_TRUE(m.accept_text(i % 2 ? "]" : "}")) << i;
    EXPECT_FALSE(m.can_end());
    EXPECT_FALSE(m.accept_text("]"));
    ASSERT_TRUE(m.accept_text("}"));
    EXPECT_TRUE(m.must_end());
    // A long string: one state over and over, no growth, no rebuild needed.
    GrammarMatcher s(g, tiny_vocabulary());
    ASSERT_TRUE(s.accept_text("{\"k\": \""));
    for (int i = 0; i < 20000; ++i) ASSERT_TRUE(s.accept_text("x\xC3\xA9 "));
    ASSERT_TRUE(s.accept_text("\"}"));
    EXPECT_TRUE(s.must_end());
}

TEST(JsonGrammar, AnyObject) {
    const Grammar g = must_parse(json_object_grammar());
    EXPECT_TRUE(matches(g, "{}"));
    EXPECT_TRUE(matches(g, R"({"a": [1, -2.5e+3, "x\u00e9\n", null, true, {"b": {}}], "c": false})"));
    EXPECT_TRUE(matches(g, "{\n  \"a\": [\n    1\n  ]\n}"));
    EXPECT_TRUE(matches(g, "{\"k\": \"caf\xC3\xA9 \xF0\x9F\x98\x80\"}"));
    for (const char* bad : {"[1]", "\"x\"", "{\"a\": }", "{\"a\":1,}", "{\"a\":01}", "{\"a\":1.}", "{a:1}",
                            "{\"a\":\"\x01\"}", "{\"a\":\"\\x\"}", "{   \"a\":1}", "{\"a\":NaN}", " {}"}) {
        EXPECT_FALSE(matches(g, bad)) << bad;
    }
    // With a prefix, every rule but the root carries it, so the text pastes into a bigger grammar.
    const std::string text = json_object_grammar("args", "call-");
    std::smatch m;
    std::regex rule_line(R"(^([A-Za-z0-9_-]+) ::=)", std::regex::multiline);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), rule_line); it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1];
        EXPECT_TRUE(name == "args" || name.rfind("call-", 0) == 0) << name;
    }
    const Grammar tool = must_parse("root ::= \"<call>\" args \"</call>\"\n" + text);
    EXPECT_TRUE(matches(tool, "<call>{\"x\": 1}</call>"));
}

Result<Grammar> schema_grammar(const Json& schema) {
    Result<std::string> text = json_schema_to_grammar(schema);
    if (!text) return std::move(text).error();
    return Grammar::parse(*text);
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
    const std::vector<std::pair<Json, std::string>> cases = {
        {{{"type", "string"}, {"pattern", "^a+$"}}, "'pattern'"},
        {{{"type", "object"}, {"patternProperties", {{"^x", {{"type", "string"}}}}}}, "'patternProperties'"},
        {{{"not", {{"type", "string"}}}}, "'not'"},
        {{{"if", {{"type", "string"}}}, {"then", {{"minLength", 1}}}}, "'if'"},
        {{{"type", "integer"}, {"multipleOf", 3}}, "'multipleOf'"},
        {{{"type", "array"}, {"uniqueItems", true}}, "'uniqueItems'"},
        {{{"type", "object"}, {"minProperties", 1}}, "'minProperties'"},
        {{{"type", "string"}, {"format", "email"}}, "format 'email'"},
        {{{"type", "number"}, {"minimum", 0}}, "'minimum'"},
        {{{"$ref", "https://example.com/schema.json"}}, "$ref 'https://example.com/schema.json'"},
        {{{"type", "array"}, {"items", Json::array({{{"type", "string"}}})}}, "'items' as a list"},
        {{{"type", "object"}, {"properties", {{"a", {{"type", "string"}, {"pattern", "x"}}}}}},
         "at /properties/a: unsupported keyword 'pattern'"},
    };
    for (const auto& [schema, expected] : cases) {
        Result<std::string> text = json_schema_to_grammar(schema);
        ASSERT_FALSE(text.ok()) << schema.dump();
        EXPECT_EQ(text.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(text.error().message.find(expected), std::string::npos) << text.error().message;
    }
}

// Where the grammar is deliberately narrower than JSON Schema (see json_schema_grammar.cpp),
// so the fixture cannot speak for it.
TEST(JsonSchema, DocumentedNarrowings) {
    const Json schema = {{"type", "object"},
                         {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "string"}}}}},
                         {"required", {"a"}}};
    Result<Grammar> g = schema_grammar(schema);
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_TRUE(matches(*g, R"({"a": 1, "b": "x"})"));
    EXPECT_TRUE(matches(*g, R"({"a": 1})"));
    EXPECT_FALSE(matches(*g, R"({"b": "x", "a": 1})"));  // declaration order
    EXPECT_FALSE(matches(*g, R"({"a": 1, "c": 2})"));    // additionalProperties defaults to false
    EXPECT_FALSE(matches(*g, std::string("{\"a\": ") + std::string(20, '7') + "}"));  // 20 digits
    // Extra properties come after the declared ones and may not reuse their names.
    Json open = schema;
    open["additionalProperties"] = {{"type", "integer"}};
    Result<Grammar> o = schema_grammar(open);
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_TRUE(matches(*o, R"({"a": 1, "c": 2, "bb": 3, "": 4})"));
    EXPECT_FALSE(matches(*o, R"({"a": 1, "b": 2})"));  // b is declared: a string, not an extra
    EXPECT_FALSE(matches(*o, R"({"a": 1, "c": "x"})"));
}

struct FixtureCase {
    std::string name;
    Json schema;
    std::vector<std::pair<std::string, bool>> instances;  // text, valid per jsonschema
};

std::vector<FixtureCase> load_fixture() {
    const std::string text = test::read_file(test::data_dir() / "grammar" / "json_schema_cases.json");
    const Json root = Json::parse(text);
    std::vector<FixtureCase> out;
    for (const Json& c : root["cases"]) {
        FixtureCase fc;
        fc.name = c["name"].get<std::string>();
        fc.schema = c["schema"];
        for (const Json& i : c["instances"])
            fc.instances.emplace_back(i["text"].get<std::string>(), i["valid"].get<bool>());
        out.push_back(std::move(fc));
    }
    return out;
}

TEST(JsonSchema, AgreesWithPythonJsonschema) {
    const std::vector<FixtureCase> cases = load_fixture();
    ASSERT_GE(cases.size(), 20u);
    size_t n_valid = 0;
    size_t n_invalid = 0;
    for (const FixtureCase& c : cases) {
        Result<Grammar> g = schema_grammar(c.schema);
        ASSERT_TRUE(g.ok()) << c.name << ": " << g.error().message;
        for (const auto& [text, valid] : c.instances) {
            EXPECT_EQ(matches(*g, text), valid) << c.name << (valid ? ": should accept " : ": should refuse ") << text;
            (valid ? n_valid : n_invalid) += 1;
        }
    }
    EXPECT_GE(n_valid, 100u);
    EXPECT_GE(n_invalid, 100u);
}

// The schema of the sampling test: an object with a string, a bounded integer, an enum and an
// array of enums, all required.
Json person_schema() {
    return Json::parse(R"({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 16},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "color": {"type": "string", "enum": ["red", "green", "blue"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "maxItems": 3}
        },
        "required": ["name", "age", "color", "tags"],
        "additionalProperties": false
    })");
}

TEST(GrammarSampling, SmolLm2AnswersFollowTheSchema) {
    const std::filesystem::path path = test::test_model_path();
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "no test model at " << path << " (scripts/fetch-test-model)";
    ModelOptions options;
    options.n_ctx = 512;
    options.n_threads = 2;
    options.max_sequences = 1;
    Result<Model> loaded = Model::load(path, options);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    Model& model = *loaded;
    Result<Grammar> grammar = schema_grammar(person_schema());
    ASSERT_TRUE(grammar.ok()) << grammar.error().message;
    const auto vocabulary = GrammarVocabulary::build(model.tokenizer());

    const std::vector<ChatMessage> messages = {
        {"user", "Describe a person as JSON with a name, an age, a favourite color and some tags."}};
    Result<std::vector<TokenId>> prompt = chat_prompt(model, messages);
    ASSERT_TRUE(prompt.ok()) << prompt.error().message;

    double mask_seconds = 0;
    size_t n_masks = 0;
    for (uint64_t seed = 1; seed <= 5; ++seed) {
        SamplingParams params;
        params.temperature = 1.0f;
        params.seed = seed;
        Sampler sampler(params);
        GrammarMatcher matcher(*grammar, vocabulary);
        model.truncate(0);
        Result<std::span<const float>> logits = model.decode(*prompt);
        ASSERT_TRUE(logits.ok()) << logits.error().message;
        std::string text;
        bool ended = false;
        for (int step = 0; step < 60 && !ended; ++step) {
            std::vector<float> scratch(logits->begin(), logits->end());
            const auto t0 = std::chrono::steady_clock::now();
            matcher.mask(scratch);
            mask_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            ++n_masks;
            const TokenId id = sampler.sample(scratch);
            ASSERT_NE(id, kNoToken) << "seed " << seed << ": the mask left nothing after " << text;
            ASSERT_TRUE(matcher.accept(id)) << "seed " << seed << ": the sampled token does not fit after " << text;
            if (model.tokenizer().is_eog(id)) {
                ended = true;
                break;
            }
            text += model.tokenizer().token_piece(id, false);
            const TokenId next[] = {id};
            logits = model.decode(next);
            ASSERT_TRUE(logits.ok()) << logits.error().message;
        }
        EXPECT_TRUE(ended || matcher.must_end()) << "seed " << seed << ": unfinished after 60 tokens: " << text;
        const Json answer = Json::parse(text, nullptr, false);
        ASSERT_FALSE(answer.is_discarded()) << "seed " << seed << ": not JSON: " << text;
        ASSERT_TRUE(answer.is_object()) << text;
        const std::vector<std::string> keys = {"name", "age", "color", "tags"};
        ASSERT_EQ(answer.size(), keys.size()) << text;
        for (const std::string& k : keys) ASSERT_TRUE(answer.contains(k)) << k << " missing: " << text;
        EXPECT_TRUE(answer["name"].is_string()) << text;
        EXPECT_LE(answer["name"].get<std::string>().size(), 16u * 4) << text;
        ASSERT_TRUE(answer["age"].is_number_integer()) << text;
        EXPECT_GE(answer["age"].get<int64_t>(), 0) << text;
        EXPECT_LE(answer["age"].get<int64_t>(), 120) << text;
        const std::string color = answer["color"].is_string() ? answer["color"].get<std::string>() : "";
        EXPECT_TRUE(color == "red" || color == "green" || color == "blue") << text;
        ASSERT_TRUE(answer["tags"].is_array()) << text;
        EXPECT_LE(answer["tags"].size(), 3u) << text;
        for (const Json& t : answer["tags"]) EXPECT_TRUE(t == "a" || t == "b" || t == "c") << text;
        std::printf("[ seed %llu ] %s\n", static_cast<unsigned long long>(seed), text.c_str());
    }
    std::printf("[ mask ] %.3f ms per call over %zu calls (SmolLM2, %d tokens)\n", 1e3 * mask_seconds / n_masks,
                n_masks, vocabulary->impl().n_vocab);
}

}  // namespace
}  // namespace powerhouse
