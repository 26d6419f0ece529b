// Tool calls read out of answers (powerhouse/tool_calls.h): every format, whole and
// streamed in every split, and the format detected from real templates.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "answer_stream_check.h"
#include "powerhouse/chat_template.h"
#include "powerhouse/tool_calls.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using F = ToolCallFormat;

struct Expected {
    std::string name;
    std::string arguments;
};

void expect_calls(const ParsedAnswer& answer, const std::vector<Expected>& expected) {
    ASSERT_EQ(answer.tool_calls.size(), expected.size()) << "content: " << answer.content;
    for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(answer.tool_calls[i].name, expected[i].name) << i;
        EXPECT_EQ(answer.tool_calls[i].arguments, expected[i].arguments) << i;
        EXPECT_FALSE(answer.tool_calls[i].id.empty()) << i;
    }
}

const std::string kHermesCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris, France\", \"unit\": "
    "\"celsius\"}}\n</tool_call>";
const std::string kWeatherArgs = R"({"location":"Paris, France","unit":"celsius"})";

// ---- hermes and generic ----

TEST(ToolCallParse, HermesOneCall) {
    const ParsedAnswer a = parse_answer(F::hermes, kHermesCall);
    expect_calls(a, {{"get_weather", kWeatherArgs}});
    EXPECT_EQ(a.content, "");
    EXPECT_EQ(a.reasoning, "");
    EXPECT_TRUE(a.tool_calls[0].id.starts_with("call_"));
    EXPECT_EQ(a.tool_calls[0].id.size(), 21u);
}

TEST(ToolCallParse, HermesContentBeforeAndAfterCalls) {
    const ParsedAnswer a = parse_answer(
        F::hermes, "Let me check both.\n" + kHermesCall +
                       "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\nOne moment.\n");
    expect_calls(a, {{"get_weather", kWeatherArgs}, {"get_time", "{}"}});
    EXPECT_EQ(a.content, "Let me check both.\n\n\nOne moment.");
    EXPECT_NE(a.tool_calls[0].id, a.tool_calls[1].id);
}

TEST(ToolCallParse, HermesArgumentsAsTextParametersKeyAndMissingCloseTag) {
    expect_calls(
        parse_answer(F::hermes, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": [1, 2.5]}\"}</tool_call>"),
        {{"f", R"({"a":[1,2.5]})"}});
    expect_calls(parse_answer(F::hermes, "<tool_call>\n{\"name\": \"f\", \"parameters\": {\"b\": null}}\n</tool_call>"),
                 {{"f", R"({"b":null})"}});
    // Cut off before </tool_call> (a stop string, the token limit): still one whole call.
    expect_calls(parse_answer(F::hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": \"é\"}}\n"),
                 {{"f", "{\"x\":\"é\"}"}});
    // No arguments at all inside the tags: a call without arguments.
    expect_calls(parse_answer(F::hermes, "<tool_call>{\"name\": \"now\"}</tool_call>"), {{"now", "{}"}});
}

TEST(ToolCallParse, ArgumentsMaySpellTheMarkers) {
    expect_calls(parse_answer(F::hermes,
                              "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": \"a "
                              "</tool_call> b\"}}\n</tool_call>"),
                 {{"echo", R"({"text":"a </tool_call> b"})"}});
    expect_calls(parse_answer(F::harmony,
                              "<|channel|>commentary to=functions.echo <|constrain|>json<|message|>"
                              "{\"text\": \"<|call|> and <|end|>\"}<|call|>"),
                 {{"echo", R"({"text":"<|call|> and <|end|>"})"}});
    expect_calls(parse_answer(F::mistral, R"([TOOL_CALLS][{"name": "echo", "arguments": {"text": "[TOOL_CALLS]]}"}}])"),
                 {{"echo", R"({"text":"[TOOL_CALLS]]}"})"}});
}

TEST(ToolCallParse, HermesMalformedCallsStayContent) {
    const std::vector<std::string> broken = {
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>",  // bad JSON
        "<tool_call>\n{\"arguments\": {}}\n</tool_call>",                         // no name
        "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",       // arguments not an object
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}",               // cut off mid-call
        "I will use <tool_c",                                                     // part of a tag
        std::string(300, '[') + "<tool_call>" + std::string(300, '['),            // hostile nesting
    };
    for (const std::string& text : broken) {
        const ParsedAnswer a = parse_answer(F::hermes, text);
        EXPECT_TRUE(a.tool_calls.empty()) << text;
        EXPECT_EQ(a.content, text) << "the text must stay as it was";
    }
    // One good call next to a broken one: the good one is read, the broken one is content.
    const ParsedAnswer mixed = parse_answer(F::hermes, "<tool_call>{oops}</tool_call>" + kHermesCall);
    expect_calls(mixed, {{"get_weather", kWeatherArgs}});
    EXPECT_EQ(mixed.content, "<tool_call>{oops}</tool_call>");
}

TEST(ToolCallParse, GenericReadsHermesBlocksAndNoneLeavesTextAlone) {
    expect_calls(parse_answer(F::generic, "Sure.\n" + kHermesCall), {{"get_weather", kWeatherArgs}});
    EXPECT_EQ(parse_answer(F::generic, "Sure.\n" + kHermesCall).content, "Sure.");
    const ParsedAnswer none = parse_answer(F::none, "  " + kHermesCall + " ");
    EXPECT_TRUE(none.tool_calls.empty());
    EXPECT_EQ(none.content, "  " + kHermesCall + " ");
}

TEST(ToolCallParse, PlainAnswersAreTrimmedContent) {
    for (const F format : {F::generic, F::hermes, F::llama3, F::mistral, F::harmony}) {
        const ParsedAnswer a = parse_answer(format, "\n  Paris is the capital of France.\n\nIt is big. \n");
        EXPECT_TRUE(a.tool_calls.empty()) << tool_call_format_name(format);
        EXPECT_EQ(a.content, "Paris is the capital of France.\n\nIt is big.") << tool_call_format_name(format);
    }
}

// ---- llama3 ----

TEST(ToolCallParse, Llama3BareObjectAndPythonTag) {
    const std::string call =
        R"({"name": "get_weather", "parameters": {"location": "Paris, France", "unit": "celsius"}})";
    expect_calls(parse_answer(F::llama3, call), {{"get_weather", kWeatherArgs}});
    expect_calls(parse_answer(F::llama3, "\n" + call + "<|eom_id|>"), {{"get_weather", kWeatherArgs}});
    const ParsedAnswer tagged = parse_answer(F::llama3, "Checking.<|python_tag|>" + call + "<|eot_id|>");
    expect_calls(tagged, {{"get_weather", kWeatherArgs}});
    EXPECT_EQ(tagged.content, "Checking.");
    // {"type": "function", "name": ...} and "arguments" in place of "parameters".
    expect_calls(parse_answer(F::llama3, R"({"type": "function", "name": "f", "arguments": {"n": 1}})"),
                 {{"f", R"({"n":1})"}});
}

TEST(ToolCallParse, Llama3SeveralCalls) {
    const ParsedAnswer a = parse_answer(
        F::llama3, R"(<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": true}};)");
    expect_calls(a, {{"a", "{}"}, {"b", R"({"x":true})"}});
    EXPECT_EQ(a.content, "");
    const ParsedAnswer b = parse_answer(F::llama3,
                                        "{\"name\": \"a\", \"parameters\": {}}\n{\"name\": \"b\", "
                                        "\"parameters\": {}}\nDone.");
    expect_calls(b, {{"a", "{}"}, {"b", "{}"}});
    EXPECT_EQ(b.content, "Done.");
}

TEST(ToolCallParse, Llama3JsonThatIsNotACallStaysContent) {
    const std::vector<std::string> texts = {
        R"({"name": "Bob", "age": 42})",                   // no parameters: JSON the user asked for
        R"({"name": "f", "parameters": {"a":)",            // cut off
        R"(Here it is: {"name": "f", "parameters": {}})",  // a call only at the start or after the tag
        R"({"parameters": {}, "name": "f"})",              // not how a call opens
        R"([{"name": "f", "parameters": {}}])",            // an array
    };
    for (const std::string& text : texts) {
        const ParsedAnswer a = parse_answer(F::llama3, text);
        EXPECT_TRUE(a.tool_calls.empty()) << text;
        EXPECT_EQ(a.content, text);
    }
    // The tag is a control token: without a call after it, it is dropped, the rest kept.
    const ParsedAnswer a = parse_answer(F::llama3, "Hello<|python_tag|>print(1)<|eot_id|>");
    EXPECT_TRUE(a.tool_calls.empty());
    EXPECT_EQ(a.content, "Helloprint(1)");
}

// ---- mistral ----

TEST(ToolCallParse, MistralArrayKeepsTheModelsIds) {
    const ParsedAnswer a = parse_answer(
        F::mistral,
        R"(Let me see.[TOOL_CALLS][{"name": "get_weather", "arguments": {"location": "Paris, France", "unit": "celsius"}, "id": "abc123XYZ"}, {"name": "get_time", "arguments": {}}])");
    expect_calls(a, {{"get_weather", kWeatherArgs}, {"get_time", "{}"}});
    EXPECT_EQ(a.content, "Let me see.");
    EXPECT_EQ(a.tool_calls[0].id, "abc123XYZ");
    // Ids made here are what Mistral's template takes back: 9 letters and digits.
    ASSERT_EQ(a.tool_calls[1].id.size(), 9u);
    for (const char c : a.tool_calls[1].id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << c;
}

TEST(ToolCallParse, MistralNewStyleCallsAndHiddenMarker) {
    const ParsedAnswer a = parse_answer(
        F::mistral,
        R"([TOOL_CALLS]get_weather[ARGS]{"location": "Paris, France", "unit": "celsius"}[TOOL_CALLS]get_time[CALL_ID]x1y2z3w4v[ARGS]{})");
    expect_calls(a, {{"get_weather", kWeatherArgs}, {"get_time", "{}"}});
    EXPECT_EQ(a.tool_calls[1].id, "x1y2z3w4v");
    EXPECT_EQ(a.content, "");
    // [TOOL_CALLS] hidden (render_special off, or a grammar): the bare array at the start.
    expect_calls(parse_answer(F::mistral, R"( [{"name": "f", "arguments": {"a": "b"}}])"), {{"f", R"({"a":"b"})"}});
}

TEST(ToolCallParse, MistralMalformedStaysContentWithoutTheMarker) {
    const ParsedAnswer a = parse_answer(F::mistral, R"(Hmm [TOOL_CALLS][{"name": "f", "arguments": {]})");
    EXPECT_TRUE(a.tool_calls.empty());
    EXPECT_EQ(a.content, R"(Hmm [{"name": "f", "arguments": {]})");
    const ParsedAnswer b = parse_answer(F::mistral, R"([TOOL_CALLS][{"name": "f", "arguments": {}}, {"name": 3}])");
    EXPECT_TRUE(b.tool_calls.empty()) << "all of an array's calls or none";
    const ParsedAnswer c = parse_answer(F::mistral, R"([{"name": "Ann", "age": 3}])");
    EXPECT_TRUE(c.tool_calls.empty());
    EXPECT_EQ(c.content, R"([{"name": "Ann", "age": 3}])");
}

// ---- harmony ----

TEST(ToolCallParse, HarmonyCallAfterReasoning) {
    const ParsedAnswer a = parse_answer(
        F::harmony,
        "<|channel|>analysis<|message|>The user wants the weather. Call get_weather.<|end|><|start|>assistant"
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Paris, France\", "
        "\"unit\": \"celsius\"}<|call|>");
    expect_calls(a, {{"get_weather", kWeatherArgs}});
    EXPECT_EQ(a.reasoning, "The user wants the weather. Call get_weather.");
    EXPECT_EQ(a.content, "");
}

TEST(ToolCallParse, HarmonyFinalAnswerAndRecipientBeforeChannel) {
    const ParsedAnswer a = parse_answer(
        F::harmony,
        "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Paris.<|return|>");
    EXPECT_TRUE(a.tool_calls.empty());
    EXPECT_EQ(a.content, "Paris.");
    EXPECT_EQ(a.reasoning, "Easy.");
    // As the template writes calls back, and with the end tokens hidden.
    const ParsedAnswer b =
        parse_answer(F::harmony, "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}");
    expect_calls(b, {{"get_time", "{}"}});
    // A preamble on the commentary channel is for the user; two calls in a row.
    const ParsedAnswer c = parse_answer(
        F::harmony,
        "<|channel|>commentary<|message|>Checking both.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.a<|message|>{\"x\": 1}<|call|><|start|>assistant<|channel|>commentary to=functions.b "
        "<|constrain|>json<|message|>{}<|call|>");
    expect_calls(c, {{"a", R"({"x":1})"}, {"b", "{}"}});
    EXPECT_EQ(c.content, "Checking both.");
}

TEST(ToolCallParse, HarmonyMalformedAndUnstructured) {
    const ParsedAnswer a =
        parse_answer(F::harmony, "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"x\": <|call|>");
    EXPECT_TRUE(a.tool_calls.empty());
    EXPECT_EQ(a.content, "{\"x\":");
    EXPECT_EQ(parse_answer(F::harmony, "Just text, no channels.").content, "Just text, no channels.");
    // Built-in tools (browser) are the model's own: reasoning, not calls.
    const ParsedAnswer b =
        parse_answer(F::harmony, "<|channel|>analysis to=browser.search<|message|>{\"query\": \"x\"}<|call|>");
    EXPECT_TRUE(b.tool_calls.empty());
    EXPECT_EQ(b.reasoning, "{\"query\": \"x\"}");
    // A header cut off says nothing; an unknown special stays text.
    EXPECT_EQ(parse_answer(F::harmony, "<|channel|>final<|message|>a <|x|> b<|end|><|start|>assist").content,
              "a <|x|> b");
}

// ---- ids ----

TEST(ToolCallParse, IdsAreStablePerAnswerAndSalt) {
    const std::string text = kHermesCall + kHermesCall;
    const ParsedAnswer a = parse_answer(F::hermes, text, "request-1");
    const ParsedAnswer b = parse_answer(F::hermes, text, "request-1");
    const ParsedAnswer c = parse_answer(F::hermes, text, "request-2");
    ASSERT_EQ(a.tool_calls.size(), 2u);
    EXPECT_NE(a.tool_calls[0].id, a.tool_calls[1].id) << "the same call twice still gets two ids";
    EXPECT_EQ(a.tool_calls[0].id, b.tool_calls[0].id);
    EXPECT_NE(a.tool_calls[0].id, c.tool_calls[0].id);
}

// ---- streaming ----

struct StreamCase {
    F format;
    std::string text;
};

std::vector<StreamCase> stream_cases() {
    return {
        {F::hermes, kHermesCall},
        {F::hermes, "Let me check.\n" + kHermesCall + "\nAnd then some.  "},
        {F::hermes, "  Plain answer with <b>tags</b> and a < sign, <tool and <tool_c at the end <tool_c"},
        {F::hermes, "<tool_call>{oops}</tool_call>" + kHermesCall + " tail"},
        {F::generic, "Sure. " + kHermesCall},
        {F::llama3, R"(  {"name": "get_weather", "parameters": {"location": "Paris"}}<|eom_id|>)"},
        {F::llama3, R"(Okay.<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "parameters": {}})"},
        {F::llama3, R"({"name": "Bob", "age": 42} is JSON.)"},
        {F::llama3, "{ no call here }"},
        {F::llama3, "Plain <|eot_id"},
        {F::mistral, R"(Let me see. [TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abc123XYZ"}])"},
        {F::mistral, R"([TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[ARGS]{})"},
        {F::mistral, R"( [ {"name": "f", "arguments": {}}])"},
        {F::mistral, "[1, 2, 3] is a list. [TOOL_"},
        {F::harmony,
         "<|channel|>analysis<|message|>Think first.<|end|><|start|>assistant<|channel|>commentary "
         "to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Paris\"}<|call|>"},
        {F::harmony,
         "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|> Paris is "
         "the capital.\n\n<b>Yes</b> < and <| stay.<|return|>"},
        {F::harmony,
         "<|channel|>commentary<|message|>Preamble.<|end|><|start|>assistant<|channel|>final<|message|>Answer.<|end|>"
         "<|start|>assistant<|channel|>final<|message|>More.<|end|><|start|>assistant to=functions.f<|channel|>"
         "commentary json<|message|>{\"x\": 1}"},
        {F::harmony, "No format at all <"},
        {F::none, "  raw <tool_call> text "},
        {F::hermes, "<tool_call>{\"name\": \"echo\", \"arguments\": {\"t\": \"</tool_call>\"}}</tool_call> after"},
        {F::harmony, "<|channel|>commentary to=functions.echo<|message|>{\"t\": \"<|end|>\"}<|call|>"},
    };
}

// Streamed content never shows call syntax (it comes, if at all, from finish()).
void expect_no_call_syntax(F format, const std::string& streamed, const std::string& label) {
    if (format == F::none) return;
    for (const char* syntax :
         {"<tool_call>", "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>", "<|channel|>", "<|message|>", "{\"name\""}) {
        EXPECT_EQ(streamed.find(syntax), std::string::npos) << label << ": shows " << syntax << " in " << streamed;
    }
}

TEST(ToolCallStream, EverySplitGivesTheWholeAnswer) {
    for (const StreamCase& c : stream_cases()) {
        const test::StreamedAnswer streamed =
            test::expect_every_split_reads_the_whole(c.format, c.text, test::salted("salt"), 50);
        expect_no_call_syntax(c.format, streamed.content, std::string(tool_call_format_name(c.format)) + ": " + c.text);
    }
}

TEST(ToolCallStream, ContentStreamsBeforeTheCall) {
    ToolCallStream stream(F::hermes);
    std::string streamed;
    const std::string text = "Let me check the weather.\n" + kHermesCall;
    for (const char byte : text) streamed += stream.feed(std::string_view(&byte, 1));
    EXPECT_EQ(streamed, "Let me check the weather.");
    const ParsedAnswer rest = stream.finish();
    EXPECT_EQ(rest.content, "");
    expect_calls(rest, {{"get_weather", kWeatherArgs}});

    // gpt-oss: the final channel streams, the reasoning does not.
    ToolCallStream harmony(F::harmony);
    std::string shown;
    for (const std::string_view piece : {"<|channel|>analysis<|message|>Hmm", ".<|end|><|start|>assistant<|channel|>",
                                         "final<|message|>Hel", "lo", " there.<|return|>"}) {
        shown += harmony.feed(piece);
    }
    EXPECT_EQ(shown, "Hello there.");
    const ParsedAnswer end = harmony.finish();
    EXPECT_EQ(end.content, "");
    EXPECT_EQ(end.reasoning, "Hmm.");

    // A plain answer is shown as it comes, but for trailing whitespace.
    ToolCallStream plain(F::llama3);
    EXPECT_EQ(plain.feed("The answer"), "The answer");
    EXPECT_EQ(plain.feed(" is 42. "), " is 42.");
    EXPECT_EQ(plain.finish().content, "");
}

// ---- detection ----

std::string shared_template(const std::string& name) {
    return test::read_file(test::shared_testdata_dir() / "templates" / (name + ".jinja"));
}

std::string local_template(const std::string& name) {
    return test::read_file(test::data_dir() / "templates" / (name + ".jinja"));
}

TEST(ToolCallDetect, RealTemplates) {
    EXPECT_EQ(detect_tool_call_format(shared_template("NousResearch-Hermes-3-Llama-3.1-8B-tool_use")), F::hermes);
    EXPECT_EQ(detect_tool_call_format(shared_template("Qwen-Qwen2.5-7B-Instruct")), F::hermes);
    EXPECT_EQ(detect_tool_call_format(shared_template("meta-llama-Llama-3.1-8B-Instruct")), F::llama3);
    EXPECT_EQ(detect_tool_call_format(shared_template("mistralai-Mistral-Nemo-Instruct-2407")), F::mistral);
    EXPECT_EQ(detect_tool_call_format(local_template("gpt-oss")), F::harmony);
    // Templates that never render tools: Powerhouse describes them itself.
    EXPECT_EQ(detect_tool_call_format(local_template("smollm2")), F::generic);
    EXPECT_EQ(detect_tool_call_format(shared_template("google-gemma-2-2b-it")), F::generic);
    EXPECT_EQ(detect_tool_call_format(shared_template("microsoft-Phi-3.5-mini-instruct")), F::generic);
    // DeepSeek-R1's template prints earlier tool_calls but never the tools themselves.
    EXPECT_EQ(detect_tool_call_format(shared_template("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B")), F::generic);
    EXPECT_FALSE(template_mentions_tools(local_template("smollm2")));
    EXPECT_TRUE(template_mentions_tools(local_template("gpt-oss")));
    // A variable named tools, in a format Powerhouse does not know.
    EXPECT_EQ(detect_tool_call_format("{% for t in tools %}{{ t.name }}{% endfor %}"), F::none);
    EXPECT_EQ(detect_tool_call_format("{{ builtin_tools }}{{ message.tool_calls }}"), F::generic);
}

TEST(ToolCallDetect, FromModelTemplateInfo) {
    ModelTemplateInfo info;
    info.chat_template = shared_template("Qwen-Qwen2.5-7B-Instruct");
    EXPECT_EQ(detect_tool_call_format(info), F::hermes);
    info.chat_template = local_template("gpt-oss");
    EXPECT_EQ(detect_tool_call_format(info), F::harmony);
    // No template: the built-in ChatML one, which renders no tools.
    info.chat_template.reset();
    info.family = TemplateFamily::chatml;
    EXPECT_EQ(detect_tool_call_format(info), F::generic);
    // A template that does not parse falls back the same way.
    info.chat_template = "{% for tools in %}";
    EXPECT_EQ(detect_tool_call_format(info), F::generic);
}

}  // namespace
}  // namespace powerhouse
