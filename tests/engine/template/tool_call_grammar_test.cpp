// tool_call_grammar() (powerhouse/tool_calls.h) with the grammar engine (powerhouse/grammar.h):
// a call written in each format is accepted, text by text and token by token (GPT-2's
// vocabulary), wrong calls are not, and every text the grammar accepts, walked at random
// token by token, reads back through parse_answer() as exactly one call to an offered
// function with a JSON object of arguments (the XML formats' values typed by the tools).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "powerhouse/grammar.h"
#include "powerhouse/tokenizer.h"
#include "powerhouse/tool_calls.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using F = ToolCallFormat;
using nlohmann::ordered_json;

const ordered_json kTools = ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather.",
    "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "description": "A city"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
      "required": ["city"]}}},
  {"type": "function", "function": {"name": "set_alarm", "description": "An alarm.",
    "parameters": {"type": "object", "properties": {
      "hour": {"type": "integer", "minimum": 0, "maximum": 23},
      "days": {"type": "array", "items": {"type": "string"}},
      "loud": {"type": "boolean"}},
      "required": ["hour", "loud"]}}},
  {"type": "function", "function": {"name": "get_time", "description": "No arguments."}}
])");

const F kFormats[] = {F::generic, F::hermes, F::llama3, F::mistral, F::harmony, F::qwen3_coder, F::seed_oss, F::glm45};

// The XML formats' parameters: strings as they are, other values as JSON.
std::string xml_parameters(F format, const std::string& arguments) {
    std::string out;
    const ordered_json parsed = ordered_json::parse(arguments);
    for (const auto& [key, value] : parsed.items()) {
        const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
        if (format == F::qwen3_coder) out += "<parameter=" + key + ">\n" + text + "\n</parameter>\n";
        if (format == F::seed_oss) out += "<parameter=" + key + ">" + text + "</parameter>\n";
        if (format == F::glm45) out += "<arg_key>" + key + "</arg_key>\n<arg_value>" + text + "</arg_value>\n";
    }
    return out;
}

// A call as each model writes it.
std::string call_text(F format, const std::string& name, const std::string& arguments) {
    switch (format) {
        case F::generic:
        case F::hermes:
            return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + arguments + "}\n</tool_call>";
        case F::llama3:
            return "{\"name\": \"" + name + "\", \"parameters\": " + arguments + "}";
        case F::mistral:
            return "[{\"name\": \"" + name + "\", \"arguments\": " + arguments + "}]";
        case F::harmony:
            return "<|channel|>analysis<|message|>The user wants it.<|end|><|start|>assistant<|channel|>commentary "
                   "to=functions." +
                   name + " <|constrain|>json<|message|>" + arguments;
        case F::qwen3_coder:
            return "<tool_call>\n<function=" + name + ">\n" + xml_parameters(format, arguments) +
                   "</function>\n</tool_call>";
        case F::seed_oss:
            return "<seed:think>The user wants it.</seed:think>\n<seed:tool_call>\n<function=" + name + ">\n" +
                   xml_parameters(format, arguments) + "</function>\n</seed:tool_call>";
        case F::glm45:
            return "\n<think>The user wants it.</think>\n<tool_call>" + name + "\n" +
                   xml_parameters(format, arguments) + "</tool_call>";
        case F::none:
            break;
    }
    return {};
}

const Tokenizer& gpt2() {
    static const Tokenizer tokenizer = [] {
        Result<Tokenizer> t = Tokenizer::load(test::shared_testdata_dir() / "vocab" / "ggml-vocab-gpt-2.gguf");
        EXPECT_TRUE(t.ok()) << t.error().message;
        return std::move(t).value();
    }();
    return tokenizer;
}

const std::shared_ptr<const GrammarVocabulary>& vocabulary() {
    static const std::shared_ptr<const GrammarVocabulary> v = GrammarVocabulary::build(gpt2());
    return v;
}

Grammar grammar_for(F format, std::string_view only = {}) {
    const Result<std::string> text = tool_call_grammar(format, kTools, only);
    EXPECT_TRUE(text.ok()) << text.error().message;
    Result<Grammar> grammar = Grammar::parse(text.ok() ? *text : std::string("root ::= \"\""));
    EXPECT_TRUE(grammar.ok()) << grammar.error().message << "\n" << (text.ok() ? *text : "");
    return std::move(grammar).value();
}

bool accepts(const Grammar& grammar, const std::string& text) {
    GrammarMatcher matcher(grammar, vocabulary());
    return matcher.accept_text(text) && matcher.can_end();
}

TEST(ToolCallGrammar, AcceptsACallInEachFormatAndReadsItBack) {
    const std::vector<std::pair<std::string, std::string>> calls = {
        {"get_weather", R"({"city": "Paris", "unit": "celsius"})"},
        {"get_weather", R"({"city": "東京"})"},
        {"set_alarm", R"({"hour": 7, "days": ["mon", "tue"], "loud": true})"},
        {"get_time", "{}"},
    };
    for (const F format : kFormats) {
        const Grammar grammar = grammar_for(format);
        for (const auto& [name, arguments] : calls) {
            const std::string text = call_text(format, name, arguments);
            EXPECT_TRUE(accepts(grammar, text)) << tool_call_format_name(format) << ": " << text;
            // Token by token, as the sampler feeds it.
            GrammarMatcher matcher(grammar, vocabulary());
            for (const TokenId id : gpt2().tokenize(text, false, false)) {
                ASSERT_TRUE(matcher.accept(id))
                    << tool_call_format_name(format) << ": " << text << " at token " << gpt2().token_text(id);
            }
            EXPECT_TRUE(matcher.can_end());
            const ParsedAnswer answer = parse_answer(format, text, {}, kTools);
            ASSERT_EQ(answer.tool_calls.size(), 1u) << text;
            EXPECT_EQ(answer.tool_calls[0].name, name);
            EXPECT_EQ(ordered_json::parse(answer.tool_calls[0].arguments), ordered_json::parse(arguments));
        }
    }
}

TEST(ToolCallGrammar, RefusesWrongCalls) {
    for (const F format : kFormats) {
        const Grammar grammar = grammar_for(format);
        const std::string label(tool_call_format_name(format));
        EXPECT_FALSE(accepts(grammar, call_text(format, "get_wether", R"({"city": "Paris"})"))) << label;
        EXPECT_FALSE(accepts(grammar, call_text(format, "get_weather", R"({"unit": "celsius"})"))) << label;
        EXPECT_FALSE(accepts(grammar, call_text(format, "get_weather", R"({"city": "Paris", "unit": "kelvin"})")))
            << label;
        EXPECT_FALSE(accepts(grammar, call_text(format, "set_alarm", R"({"hour": 24, "loud": true})"))) << label;
        EXPECT_FALSE(accepts(grammar, call_text(format, "get_time", R"({"extra": 1})"))) << label;
        EXPECT_FALSE(accepts(grammar, "Sure! " + call_text(format, "get_time", "{}"))) << label;
        EXPECT_FALSE(accepts(grammar, call_text(format, "get_time", "{}") + call_text(format, "get_time", "{}")))
            << label << ": exactly one call";
        EXPECT_FALSE(accepts(grammar, "")) << label;
    }
    // A named function only.
    const Grammar only = grammar_for(F::hermes, "set_alarm");
    EXPECT_TRUE(accepts(only, call_text(F::hermes, "set_alarm", R"({"hour": 7, "loud": false})")));
    EXPECT_FALSE(accepts(only, call_text(F::hermes, "get_time", "{}")));
}

TEST(ToolCallGrammar, Errors) {
    EXPECT_FALSE(tool_call_grammar(F::none, kTools).ok());
    EXPECT_FALSE(tool_call_grammar(F::hermes, ordered_json::array()).ok());
    EXPECT_FALSE(tool_call_grammar(F::hermes, ordered_json()).ok());
    const Result<std::string> unknown = tool_call_grammar(F::hermes, kTools, "get_wether");
    ASSERT_FALSE(unknown.ok());
    EXPECT_NE(unknown.error().message.find("get_weather, set_alarm, get_time"), std::string::npos)
        << unknown.error().message;
    EXPECT_FALSE(
        tool_call_grammar(F::hermes,
                          ordered_json::parse(
                              R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}])"))
            .ok());
    EXPECT_FALSE(tool_call_grammar(F::hermes, ordered_json::parse(R"([{"type": "function", "function": {}}])")).ok());
    // Names the XML formats cannot write between their tags.
    const ordered_json bad_name = ordered_json::parse(R"([{"type": "function", "function": {"name": "a>b"}}])");
    const ordered_json bad_key = ordered_json::parse(
        R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
            "properties": {"a\nb": {"type": "string"}}}}}])");
    for (const F format : {F::qwen3_coder, F::seed_oss, F::glm45}) {
        EXPECT_FALSE(tool_call_grammar(format, bad_name).ok()) << tool_call_format_name(format);
        EXPECT_FALSE(tool_call_grammar(format, bad_key).ok()) << tool_call_format_name(format);
        EXPECT_TRUE(tool_call_grammar(F::hermes, bad_key).ok());
    }
    EXPECT_FALSE(
        tool_call_grammar(F::glm45, ordered_json::parse(R"([{"type": "function", "function": {"name": "a b"}}])"))
            .ok());
}

// A string parameter of an XML format is free text up to its closing tag, lines and tags
// included; the closing tag itself cannot be in it.
TEST(ToolCallGrammar, XmlStringValuesAreTextWithoutTheirClosingTag) {
    const Grammar qwen = grammar_for(F::qwen3_coder);
    const std::string open = "<tool_call>\n<function=get_weather>\n<parameter=city>\n";
    const std::string close = "\n</parameter>\n</function>\n</tool_call>";
    for (const std::string value : {"Paris", "two\nlines", "a <b> tag", "<parameter=x>", "</parameter", "x\n<", ""}) {
        EXPECT_TRUE(accepts(qwen, open + value + close)) << value;
        const ParsedAnswer answer = parse_answer(F::qwen3_coder, open + value + close, {}, kTools);
        ASSERT_EQ(answer.tool_calls.size(), 1u) << value;
        EXPECT_EQ(ordered_json::parse(answer.tool_calls[0].arguments)["city"], value);
    }
    EXPECT_FALSE(accepts(qwen, open + "a</parameter>b" + close));
    const Grammar glm = grammar_for(F::glm45);
    EXPECT_TRUE(accepts(
        glm, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>a\n</arg_key></arg_value>\n</tool_call>"));
    EXPECT_FALSE(accepts(
        glm, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>a</arg_value>b</arg_value>\n</tool_call>"));
    // A named function only, in an XML format.
    const Grammar only = grammar_for(F::seed_oss, "get_time");
    EXPECT_TRUE(accepts(only, call_text(F::seed_oss, "get_time", "{}")));
    EXPECT_FALSE(accepts(only, call_text(F::seed_oss, "get_weather", R"({"city": "Paris"})")));
}

// The first token of what closes the XML formats' innermost open tag in `text`, if any.
std::optional<TokenId> closing_token(const std::string& text) {
    static const std::pair<std::string, std::string> kTags[] = {{"<parameter=", "</parameter>"},
                                                                {"<arg_value>", "</arg_value>"},
                                                                {"<seed:think>", "</seed:think>"},
                                                                {"<think>", "</think>"}};
    size_t best = std::string::npos;
    std::string close;
    for (const auto& [open, end] : kTags) {
        const size_t at = text.rfind(open);
        if (at != std::string::npos && (best == std::string::npos || at > best) &&
            text.find(end, at) == std::string::npos) {
            best = at;
            close = end;
        }
    }
    if (close.empty()) return std::nullopt;
    size_t done = std::min(close.size() - 1, text.size());
    while (done > 0 && !text.ends_with(close.substr(0, done))) --done;
    const std::vector<TokenId> ids = gpt2().tokenize(close.substr(done), false, false);
    if (ids.empty()) return std::nullopt;
    return ids.front();
}

// Random walks through the grammar over GPT-2's tokens: whatever it lets a model write is
// one call, as parse_answer() reads it.
TEST(ToolCallGrammar, EveryAcceptedTextIsExactlyOneCall) {
    const int32_t n_vocab = gpt2().n_vocab();
    std::mt19937 random(11);
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    for (const F format : kFormats) {
        const Grammar grammar = grammar_for(format);
        int finished = 0;
        for (int walk = 0; walk < 12; ++walk) {
            GrammarMatcher matcher(grammar, vocabulary());
            std::string text;
            bool ended = false;
            for (int step = 0; step < 160 && !ended; ++step) {
                if (matcher.can_end() &&
                    (matcher.must_end() || std::uniform_int_distribution<int>(0, 2)(random) == 0)) {
                    ended = true;
                    break;
                }
                std::fill(logits.begin(), logits.end(), 0.0f);
                matcher.mask(logits);
                std::vector<TokenId> allowed;
                for (int32_t id = 0; id < n_vocab; ++id) {
                    if (!std::isinf(logits[static_cast<size_t>(id)]) && !gpt2().is_eog(id)) allowed.push_back(id);
                }
                ASSERT_FALSE(allowed.empty()) << "a dead end after: " << text;
                // Half the time a token with punctuation, so that walks close their strings
                // and leave gpt-oss's analysis instead of wandering in them.
                std::vector<TokenId> closing;
                for (const TokenId id : allowed) {
                    if (gpt2().token_piece(id, false).find_first_of("\"}],:<|") != std::string::npos)
                        closing.push_back(id);
                }
                const std::vector<TokenId>& pool =
                    !closing.empty() && std::uniform_int_distribution<int>(0, 1)(random) == 0 ? closing : allowed;
                TokenId id = pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(random)];
                // In the XML formats' free text, half the time the next token of its closing tag.
                if (const std::optional<TokenId> close = closing_token(text);
                    close && std::uniform_int_distribution<int>(0, 1)(random) == 0 &&
                    std::find(allowed.begin(), allowed.end(), *close) != allowed.end()) {
                    id = *close;
                }
                ASSERT_TRUE(matcher.accept(id));
                text += gpt2().token_piece(id, false);
            }
            if (!ended) continue;
            ++finished;
            const ParsedAnswer answer = parse_answer(format, text, {}, kTools);
            ASSERT_EQ(answer.tool_calls.size(), 1u) << tool_call_format_name(format) << ": " << text;
            const std::string& name = answer.tool_calls[0].name;
            EXPECT_TRUE(name == "get_weather" || name == "set_alarm" || name == "get_time") << name;
            EXPECT_TRUE(ordered_json::parse(answer.tool_calls[0].arguments).is_object());
            EXPECT_EQ(answer.content, "") << text;
        }
        EXPECT_GT(finished, 0) << tool_call_format_name(format) << ": no walk reached the end";
    }
}

}  // namespace
}  // namespace powerhouse
