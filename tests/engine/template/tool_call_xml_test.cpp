// The XML tool-call formats (powerhouse/tool_calls.h): Qwen3-Coder's, Seed-OSS's and
// GLM-4.5's. Detection from the real templates (tests/data/templates, see the README there),
// answers read whole and streamed in every split, values typed by the tools' schemas,
// reasoning blocks, broken blocks left as text, and a round trip: calls written by each
// model's own template with Python jinja2 (tests/data/templates/tool_roundtrips.json, made by
// scripts/fixtures/make_tool_roundtrip_fixture.py) read back as the calls that went in.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "answer_stream_check.h"
#include "powerhouse/tool_calls.h"
#include "support/test_support.h"

namespace powerhouse {
// A namespace of its own: the test files are compiled together (a unity build).
namespace xml_tool_tests {
namespace {

using F = ToolCallFormat;
using nlohmann::ordered_json;

std::string local_template(const std::string& name) {
    return test::read_file(test::data_dir() / "templates" / (name + ".jinja"));
}

const ordered_json kTools = ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "set", "parameters": {"type": "object", "properties": {
      "flag": {"type": "boolean"}, "code": {"type": "string"}, "ratio": {"type": "number"},
      "tags": {"type": "array"}, "opts": {"type": "object"}, "label": {"type": ["string", "null"]},
      "level": {"anyOf": [{"type": "integer"}, {"type": "string"}]}, "mode": {"enum": ["a", "b"]},
      "any": {}}}}}
])");

struct Call {
    std::string name;
    std::string arguments;  // compact JSON
};

void expect_calls(const ParsedAnswer& answer, const std::vector<Call>& expected, const std::string& label = {}) {
    ASSERT_EQ(answer.tool_calls.size(), expected.size()) << label << " content: " << answer.content;
    for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(answer.tool_calls[i].name, expected[i].name) << label << " " << i;
        EXPECT_EQ(answer.tool_calls[i].arguments, expected[i].arguments) << label << " " << i;
        EXPECT_TRUE(answer.tool_calls[i].id.starts_with("call_")) << label << " " << i;
    }
}

// ---- detection ----

TEST(ToolCallXmlDetect, RealTemplates) {
    EXPECT_EQ(detect_tool_call_format(local_template("Qwen3-Coder")), F::qwen3_coder);
    EXPECT_EQ(detect_tool_call_format(local_template("Qwen3.5-4B")), F::qwen3_coder);
    EXPECT_EQ(detect_tool_call_format(local_template("ByteDance-Seed-OSS")), F::seed_oss);
    EXPECT_EQ(detect_tool_call_format(local_template("GLM-4.6")), F::glm45);
    EXPECT_EQ(detect_tool_call_format(local_template("GLM-4.7-Flash")), F::glm45);
    // Qwen3's own template keeps Hermes' JSON blocks.
    EXPECT_EQ(detect_tool_call_format(local_template("Qwen-Qwen3-0.6B")), F::hermes);
    EXPECT_EQ(tool_call_format_name(F::qwen3_coder), "qwen3_coder");
    EXPECT_EQ(tool_call_format_name(F::seed_oss), "seed_oss");
    EXPECT_EQ(tool_call_format_name(F::glm45), "glm45");
}

TEST(ToolCallXmlDetect, Glm4_0414WritesCallsAsMetadataAndStaysUnknown) {
    // GLM-4-0414's template (THUDM/GLM-4-32B-0414, the lines that matter): a call is an
    // assistant turn whose "metadata" is the function's name and whose content is the
    // arguments, a result is an "observation" turn. OpenAI-style tool_calls and tool
    // messages would not reach its prompt, so tools stay refused.
    const std::string glm4 =
        "[gMASK]<sop>{%- if tools -%}<|system|>\n# 可用工具\n{% for tool in tools %}{%- set function = tool.function "
        "if tool.get(\"function\") else tool %}\n\n## {{ function.name }}\n\n{{ function | tojson(indent=4, "
        "ensure_ascii=False) }}\n在调用上述函数时，请使用 Json 格式表示调用的参数。{%- endfor %}{%- endif -%}"
        "{%- for message in messages if message.role != 'system' %}{%- set role = message['role'] %}"
        "{%- set content = message['content'] %}{%- set meta = message.get(\"metadata\", \"\") %}"
        "{%- if role == 'user' %}<|user|>\n{{ content }}{%- elif role == 'assistant' and not meta %}<|assistant|>\n"
        "{{ content }}{%- elif role == 'assistant' and meta %}<|assistant|>{{ meta }} \n{{ content }}"
        "{%- elif role == 'observation' %}<|observation|>\n{{ content }}{%- endif %}{%- endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}";
    EXPECT_EQ(detect_tool_call_format(glm4), F::none);
}

// ---- reading whole answers ----

TEST(ToolCallXmlParse, QwenCoderCalls) {
    const std::string call =
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis, France\n</parameter>\n<parameter=days>\n3\n"
        "</parameter>\n</function>\n</tool_call>";
    const ParsedAnswer a = parse_answer(F::qwen3_coder, "Let me check.\n\n" + call, "", kTools);
    expect_calls(a, {{"get_weather", R"({"city":"Paris, France","days":3})"}});
    EXPECT_EQ(a.content, "Let me check.");
    EXPECT_EQ(a.reasoning, "");
    // Two blocks, and two functions in one block; no closing tag at the very end.
    const ParsedAnswer b = parse_answer(F::qwen3_coder,
                                        call +
                                            "\n<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n"
                                            "</parameter>\n</function>\n<function=set>\n</function>\n",
                                        "", kTools);
    expect_calls(b, {{"get_weather", R"({"city":"Paris, France","days":3})"},
                     {"get_weather", R"({"city":"Rome"})"},
                     {"set", "{}"}});
    EXPECT_EQ(b.content, "");
    // Values keep their lines and markup; only the newline next to each tag goes.
    expect_calls(parse_answer(F::qwen3_coder,
                              "<tool_call><function=get_weather><parameter=city>\n\n<b>x</b>\n y\n\n</parameter>"
                              "</function></tool_call>",
                              "", kTools),
                 {{"get_weather", R"({"city":"\n<b>x</b>\n y\n"})"}});
}

TEST(ToolCallXmlParse, ValuesTypedByTheSchema) {
    const std::string call =
        "<tool_call>\n<function=set>\n"
        "<parameter=flag>\nTrue\n</parameter>\n<parameter=code>\n007\n</parameter>\n"
        "<parameter=ratio>\n0.25\n</parameter>\n<parameter=tags>\n['a', \"b\"]\n</parameter>\n"
        "<parameter=opts>\n{'x': None, 'y': (1, -2.5e3), 'z': 'it\\'s\\n\\u00e9'}\n</parameter>\n"
        "<parameter=label>\nNone\n</parameter>\n<parameter=level>\n42\n</parameter>\n"
        "<parameter=mode>\na\n</parameter>\n<parameter=any>\n[1, 2]\n</parameter>\n"
        "<parameter=unknown>\n{\"k\": true}\n</parameter>\n</function>\n</tool_call>";
    expect_calls(parse_answer(F::qwen3_coder, call, "", kTools),
                 {{"set", R"({"flag":true,"code":"007","ratio":0.25,"tags":["a","b"],"opts":{"x":null,"y":[1,-2500.0],)"
                          R"("z":"it's\né"},"label":null,"level":42,"mode":"a","any":[1,2],"unknown":{"k":true}})"}});
    // Strings that look like other things stay strings where the schema says string; a
    // value a type cannot read stays text; without tools, only JSON other than a string is.
    const std::string second =
        "<tool_call>\n<function=set>\n<parameter=label>\n42\n</parameter>\n<parameter=level>\nhigh\n</parameter>\n"
        "<parameter=flag>\nmaybe\n</parameter>\n<parameter=any>\nTrue\n</parameter>\n"
        "<parameter=unknown>\n\"quoted\"\n</parameter>\n</function>\n</tool_call>";
    expect_calls(parse_answer(F::qwen3_coder, second, "", kTools),
                 {{"set", R"({"label":"42","level":"high","flag":"maybe","any":true,"unknown":"\"quoted\""})"}});
    expect_calls(parse_answer(F::qwen3_coder, second),
                 {{"set", R"({"label":42,"level":"high","flag":"maybe","any":"True","unknown":"\"quoted\""})"}});
}

TEST(ToolCallXmlParse, JsonValuesMayHoldTheClosingTag) {
    // As a grammar's JSON may: the value runs to the end of its brackets when the tag
    // follows them; a string parameter still ends at the first tag.
    expect_calls(parse_answer(F::qwen3_coder,
                              "<tool_call>\n<function=set>\n<parameter=tags>\n[\"a</parameter>b\", {\"c\": \"]\"}]\n"
                              "</parameter>\n</function>\n</tool_call>",
                              "", kTools),
                 {{"set", R"({"tags":["a</parameter>b",{"c":"]"}]})"}});
    expect_calls(
        parse_answer(F::glm45,
                     "<tool_call>set\n<arg_key>opts</arg_key>\n<arg_value>{\"x\": \"</arg_value>\"}</arg_value>\n"
                     "<arg_key>code</arg_key>\n<arg_value>[1</arg_value>\n</tool_call>",
                     "", kTools),
        {{"set", R"({"opts":{"x":"</arg_value>"},"code":"[1"})"}});
    const ParsedAnswer a = parse_answer(F::seed_oss,
                                        "<seed:tool_call><function=get_weather><parameter=city>[\"a</parameter>\"]"
                                        "</parameter></function></seed:tool_call>",
                                        "", kTools);
    EXPECT_TRUE(a.tool_calls.empty()) << "a string ends at the first tag";
}

TEST(ToolCallXmlParse, SeedCallsAndReasoning) {
    const std::string text =
        "<seed:think>The user wants the weather.\nI could write <seed:tool_call> here, it is only a "
        "thought.</seed:think>\nChecking.\n<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris\n"
        "</parameter>\n<parameter=days>2</parameter>\n</function>\n</seed:tool_call>";
    const ParsedAnswer a = parse_answer(F::seed_oss, text, "", kTools);
    expect_calls(a, {{"get_weather", R"({"city":"Paris\n","days":2})"}});
    EXPECT_EQ(a.content, "Checking.");
    EXPECT_EQ(a.reasoning, "The user wants the weather.\nI could write <seed:tool_call> here, it is only a thought.");
    // A call written only inside a thought is no call; an answer cut off while thinking is
    // all reasoning.
    const ParsedAnswer b = parse_answer(
        F::seed_oss,
        "<seed:think>Maybe <seed:tool_call>\n<function=get_weather>\n</function>\n</seed:tool_call></seed:think>No.");
    EXPECT_TRUE(b.tool_calls.empty());
    EXPECT_EQ(b.content, "No.");
    const ParsedAnswer c = parse_answer(F::seed_oss, "<seed:think>Hmm, let me think <seed:tool_call>");
    EXPECT_TRUE(c.tool_calls.empty());
    EXPECT_EQ(c.content, "");
    EXPECT_EQ(c.reasoning, "Hmm, let me think <seed:tool_call>");
    // Hermes' tag is text to Seed-OSS.
    EXPECT_EQ(parse_answer(F::seed_oss, "<tool_call>\n<function=f>\n</function>\n</tool_call>").content,
              "<tool_call>\n<function=f>\n</function>\n</tool_call>");
}

TEST(ToolCallXmlParse, GlmCallsAndReasoning) {
    const std::string text =
        "\n<think>Two lookups.</think>\nSure.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris"
        "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n<tool_call>set\n"
        "<arg_key>opts</arg_key><arg_value>{\"a\": [1, {\"b\": null}]}</arg_value><arg_key>code</arg_key>"
        "<arg_value> 12 </arg_value></tool_call><tool_call>set</tool_call>";
    const ParsedAnswer a = parse_answer(F::glm45, text, "", kTools);
    expect_calls(a, {{"get_weather", R"({"city":"Paris","days":3})"},
                     {"set", R"({"opts":{"a":[1,{"b":null}]},"code":" 12 "})"},
                     {"set", "{}"}});
    EXPECT_EQ(a.content, "Sure.");
    EXPECT_EQ(a.reasoning, "Two lookups.");
    // Cut off after the last value, or after a name's line: still whole calls.
    expect_calls(
        parse_answer(F::glm45, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n", "",
                     kTools),
        {{"get_weather", R"({"city":"Oslo"})"}});
    expect_calls(parse_answer(F::glm45, "<tool_call>set\n"), {{"set", "{}"}});
    // The empty think block of GLM's history.
    const ParsedAnswer b = parse_answer(F::glm45, "\n<think></think>\nParis is in France.");
    EXPECT_EQ(b.content, "Paris is in France.");
    EXPECT_EQ(b.reasoning, "");
}

TEST(ToolCallXmlParse, BrokenBlocksStayContent) {
    const std::vector<std::pair<F, std::string>> broken = {
        {F::qwen3_coder, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>"},
        {F::qwen3_coder, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>"},
        {F::qwen3_coder, "<tool_call>\n<function=>\n</function>\n</tool_call>"},
        {F::qwen3_coder, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"},
        {F::qwen3_coder, "<tool_call>\n<function=f>\n</function>\ntrailing words</tool_call>"},
        {F::qwen3_coder, "I will use <tool_c"},
        {F::seed_oss, "<seed:tool_call>\n<function=f>\n<parameter=a>1</parameter>"},
        {F::seed_oss, "<seed:tool_call>\n<function=f\n<parameter=a>1</parameter></function></seed:tool_call>"},
        {F::glm45, "<tool_call>get weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"},
        {F::glm45, "<tool_call>get_weather\n<arg_key>city</arg_key>\nParis\n</tool_call>"},
        {F::glm45, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris\n</tool_call>"},
        {F::glm45, "<tool_call>{\"name\": \"f\"}</tool_call>"},
        {F::glm45, "<tool_call>get_wea"},
        {F::glm45, "<tool_call>\n</tool_call>"},
    };
    for (const auto& [format, text] : broken) {
        const ParsedAnswer a = parse_answer(format, text, "", kTools);
        EXPECT_TRUE(a.tool_calls.empty()) << text;
        EXPECT_EQ(a.content, text) << "the text must stay as it was";
    }
    // A good block after a broken one is read; the broken one is text.
    const ParsedAnswer mixed = parse_answer(
        F::qwen3_coder, "<tool_call>oops</tool_call> <tool_call>\n<function=set>\n</function>\n</tool_call>");
    expect_calls(mixed, {{"set", "{}"}});
    EXPECT_EQ(mixed.content, "<tool_call>oops</tool_call>");
}

TEST(ToolCallXmlParse, PythonLiteralsThatAreNotValuesStayText) {
    for (const std::string text : {"{'a': }", "[1, 2", "'open", "{[1]: 2}", "True False", "(1,, 2)", "0x1F"}) {
        const ParsedAnswer a = parse_answer(
            F::seed_oss,
            "<seed:tool_call><function=set><parameter=opts>" + text + "</parameter></function></seed:tool_call>", "",
            kTools);
        ASSERT_EQ(a.tool_calls.size(), 1u) << text;
        EXPECT_EQ(ordered_json::parse(a.tool_calls[0].arguments)["opts"], text) << text;
    }
    const std::string deep = std::string(300, '[') + std::string(300, ']');
    const ParsedAnswer d = parse_answer(
        F::seed_oss,
        "<seed:tool_call><function=set><parameter=tags>" + deep + "</parameter></function></seed:tool_call>", "",
        kTools);
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(ordered_json::parse(d.tool_calls[0].arguments)["tags"], deep) << "too deep to be a value";
}

// ---- streaming ----

struct StreamCase {
    F format;
    std::string text;
};

std::vector<StreamCase> stream_cases() {
    return {
        {F::qwen3_coder,
         "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
         "</tool_call>"},
        {F::qwen3_coder, "Plain answer with <b>tags</b>, <tool and <tool_c at the end <tool_c"},
        {F::qwen3_coder, "<tool_call>oops</tool_call> then <tool_call><function=set></function></tool_call> tail"},
        {F::seed_oss,
         "<seed:think>Weather, so call get_weather. <seed:tool_call></seed:think>\n\nOn it.\n<seed:tool_call>\n"
         "<function=get_weather>\n<parameter=city>Rome</parameter>\n</function>\n</seed:tool_call>"},
        {F::seed_oss, "<seed:think>First.</seed:think>Answer part one <seed:think>Second.</seed:think> and two.  "},
        {F::seed_oss, "  Before <seed:think>cut off while thinking <seed:"},
        {F::seed_oss, "Text with <seed:tool and </seed:think> and <seed:th"},
        {F::glm45,
         "\n<think>Look it up.</think>\nSure.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo"
         "</arg_value>\n</tool_call>"},
        {F::glm45, "\n<think></think>\nParis is the capital. <thin"},
        {F::glm45, "<think>a <tool_call>set\n</tool_call></think>Done. <tool_call>get weather</tool_call>"},
    };
}

TEST(ToolCallXmlStream, EverySplitGivesTheWholeAnswer) {
    for (const StreamCase& c : stream_cases()) {
        const test::StreamedAnswer streamed =
            test::expect_every_split_reads_the_whole(c.format, c.text, test::salted("salt", kTools), 30);
        // Streamed text never shows call or reasoning syntax.
        for (const char* syntax : {"<tool_call>", "<seed:tool_call>", "<seed:think>", "<think>", "<function="}) {
            EXPECT_EQ(streamed.content.find(syntax), std::string::npos) << c.text << ": shows " << syntax;
        }
    }
}

TEST(ToolCallXmlStream, ContentAfterReasoningStreams) {
    ToolCallStream stream(F::seed_oss, "", kTools);
    std::string shown;
    for (const std::string_view piece : {"<seed:think>Hm", "m.</seed:", "think>\nThe ans", "wer is 4", "2. "}) {
        shown += stream.feed(piece);
    }
    EXPECT_EQ(shown, "The answer is 42.");
    const ParsedAnswer rest = stream.finish();
    EXPECT_EQ(rest.content, "");
    EXPECT_EQ(rest.reasoning, "Hmm.");
}

// ---- round trip through the models' own templates ----

TEST(ToolCallXmlRoundTrip, CallsWrittenByTheTemplatesReadBack) {
    const ordered_json fixture =
        ordered_json::parse(test::read_file(test::data_dir() / "templates" / "tool_roundtrips.json"));
    const ordered_json& tools = fixture.at("tools");
    size_t read = 0;
    for (const auto& [name, c] : fixture.at("cases").items()) {
        const ordered_json& request = c.at("request");
        for (const auto& [format_name, answer] : c.at("answers").items()) {
            const F format = format_name == "qwen3_coder" ? F::qwen3_coder
                             : format_name == "seed_oss"  ? F::seed_oss
                                                          : F::glm45;
            const std::string label = format_name + "/" + name;
            const ParsedAnswer parsed = parse_answer(format, answer.get<std::string>(), "", tools);
            const ordered_json& calls = request.at("tool_calls");
            ASSERT_EQ(parsed.tool_calls.size(), calls.size()) << label << ": " << answer;
            for (size_t i = 0; i < calls.size(); ++i) {
                EXPECT_EQ(parsed.tool_calls[i].name, calls[i].at("name")) << label;
                // Compared as text: the keys' order is the call's.
                EXPECT_EQ(parsed.tool_calls[i].arguments, calls[i].at("arguments").dump()) << label;
                ++read;
            }
            EXPECT_EQ(parsed.content, request.at("content")) << label;
            // Qwen3-Coder's template writes no reasoning.
            if (format != F::qwen3_coder) {
                EXPECT_EQ(parsed.reasoning, request.at("reasoning_content")) << label;
            }
        }
    }
    EXPECT_GE(read, 20u);
}

}  // namespace
}  // namespace xml_tool_tests
}  // namespace powerhouse
