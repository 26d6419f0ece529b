// A reasoning model's thinking read apart from its answer (powerhouse/tool_calls.h): a think
// block that opens the answer in every marker format, one the prompt opened (DeepSeek-R1's
// distills, Qwen3.5: checked on their real templates), streamed as it is written, and calls
// read only when tools were offered.
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

AnswerOptions opened_by_prompt() {
    AnswerOptions options;
    options.in_reasoning = true;
    return options;
}

AnswerOptions without_tools() {
    AnswerOptions options;
    options.calls = false;
    return options;
}

struct Tags {
    F format;
    std::string open, close;
};

const std::vector<Tags> kThinkingFormats = {
    {F::generic, "<think>", "</think>"}, {F::hermes, "<think>", "</think>"},
    {F::llama3, "<think>", "</think>"},  {F::qwen3_coder, "<think>", "</think>"},
    {F::mistral, "[THINK]", "[/THINK]"}, {F::seed_oss, "<seed:think>", "</seed:think>"},
    {F::glm45, "<think>", "</think>"},
};

TEST(Reasoning, AThinkBlockThatOpensTheAnswerIsReasoningInEveryMarkerFormat) {
    for (const Tags& t : kThinkingFormats) {
        const std::string label(tool_call_format_name(t.format));
        const ParsedAnswer a = parse_answer(t.format, "\n" + t.open + "\nShort question.\n" + t.close + "\n\nParis.");
        EXPECT_EQ(a.content, "Paris.") << label;
        EXPECT_EQ(a.reasoning, "Short question.") << label;
        // Cut off while thinking: all of it is reasoning.
        const ParsedAnswer cut = parse_answer(t.format, t.open + "Still thinking");
        EXPECT_EQ(cut.content, "") << label;
        EXPECT_EQ(cut.reasoning, "Still thinking") << label;
    }
    // Formats that do not reason keep the text as written.
    EXPECT_EQ(parse_answer(F::none, "<think>x</think>y").content, "<think>x</think>y");
    EXPECT_EQ(parse_answer(F::harmony, "<think>x</think>y").content, "<think>x</think>y");
}

TEST(Reasoning, LaterThinkTagsAreTextButForSeedOssAndGlm) {
    // An answer that talks about the tags is not reasoning; Seed-OSS and GLM think between calls.
    const ParsedAnswer hermes = parse_answer(F::hermes, "Qwen writes <think>notes</think> first.");
    EXPECT_EQ(hermes.content, "Qwen writes <think>notes</think> first.");
    EXPECT_EQ(hermes.reasoning, "");
    const ParsedAnswer glm = parse_answer(F::glm45, "Sure. <think>notes</think> Done.");
    EXPECT_EQ(glm.content, "Sure.  Done.");
    EXPECT_EQ(glm.reasoning, "notes");
}

TEST(Reasoning, ABlockThePromptOpenedRunsToItsClosingTag) {
    const ParsedAnswer a = parse_answer(F::generic, "Let me see.\n</think>\n\nParis.", opened_by_prompt());
    EXPECT_EQ(a.reasoning, "Let me see.");
    EXPECT_EQ(a.content, "Paris.");
    const ParsedAnswer cut = parse_answer(F::qwen3_coder, "Still thinking", opened_by_prompt());
    EXPECT_EQ(cut.reasoning, "Still thinking");
    EXPECT_EQ(cut.content, "");
    // Not opened by the prompt, the closing tag is text.
    EXPECT_EQ(parse_answer(F::generic, "Let me see.</think>Paris.").content, "Let me see.</think>Paris.");
    // A think block after a prompt-opened one is the answer's business.
    const ParsedAnswer twice = parse_answer(F::hermes, "a</think>b <think>c</think>", opened_by_prompt());
    EXPECT_EQ(twice.reasoning, "a");
    EXPECT_EQ(twice.content, "b <think>c</think>");
}

TEST(Reasoning, WithoutToolsACallsMarkupIsText) {
    const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
    const ParsedAnswer text = parse_answer(F::hermes, "Like this: " + call, without_tools());
    EXPECT_TRUE(text.tool_calls.empty());
    EXPECT_EQ(text.content, "Like this: " + call);
    EXPECT_EQ(parse_answer(F::hermes, "Like this: " + call).tool_calls.size(), 1u);
    // Control tokens that open calls are dropped, as when they are hidden; a bare object is text.
    const ParsedAnswer llama =
        parse_answer(F::llama3, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", without_tools());
    EXPECT_TRUE(llama.tool_calls.empty());
    EXPECT_EQ(llama.content, "{\"name\": \"f\", \"parameters\": {}}");
    EXPECT_TRUE(parse_answer(F::llama3, "{\"name\": \"f\", \"parameters\": {}}", without_tools()).tool_calls.empty());
    const ParsedAnswer mistral =
        parse_answer(F::mistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]", without_tools());
    EXPECT_TRUE(mistral.tool_calls.empty());
    EXPECT_EQ(mistral.content, "[{\"name\": \"f\", \"arguments\": {}}]");
}

TEST(ReasoningStream, EverySplitGivesTheWholeAnswer) {
    struct Case {
        F format;
        std::string text;
        AnswerOptions options;
    };
    const std::vector<Case> cases = {
        {F::hermes, " <think>\nThe user wants the weather. </think>\n\nIt is sunny.  ", {}},
        {F::hermes, "<think>Check.</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", {}},
        {F::hermes, "<think>Check.</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
         without_tools()},
        {F::llama3, "<think>Hmm.</think>{\"name\": \"f\", \"parameters\": {\"x\": 1}}", {}},
        {F::llama3, "<thin k> is not a tag", {}},
        {F::generic, "Reasoning that the prompt began.</thi", opened_by_prompt()},
        {F::generic, "Reasoning.</think>\n\nThe answer. <think>stays</think>", opened_by_prompt()},
        {F::mistral, "[THINK]Magistral thinks.[/THINK]Answer.[TOOL_CALLS]f[ARGS]{\"a\": 1}", {}},
        {F::qwen3_coder, "Thinking <think> inside.</think>\n\n<tool_call>\n<function=f>\n</function>\n</tool_call>",
         opened_by_prompt()},
        {F::glm45, "<think>One.</think>Part <think>Two.</think> end.", {}},
        {F::harmony,
         "<|channel|>analysis<|message|>Think first.<|end|><|start|>assistant<|channel|>final<|message|>Paris.",
         {}},
    };
    for (const Case& c : cases) test::expect_every_split_reads_the_whole(c.format, c.text, c.options, 20);
}

TEST(ReasoningStream, ReasoningStreamsAsItIsWritten) {
    ToolCallStream stream(F::hermes, AnswerOptions{});
    EXPECT_EQ(stream.feed("<thi"), "");
    EXPECT_EQ(stream.take_reasoning(), "");
    EXPECT_EQ(stream.feed("nk>\nLet me"), "");
    EXPECT_EQ(stream.take_reasoning(), "Let me");
    // A possible closing tag waits; the whitespace before it too (reasoning is trimmed).
    EXPECT_EQ(stream.feed(" think. </thi"), "");
    EXPECT_EQ(stream.take_reasoning(), " think.");
    EXPECT_EQ(stream.feed("nk>\n\nParis"), "Paris");
    EXPECT_EQ(stream.take_reasoning(), "");
    const ParsedAnswer rest = stream.finish();
    EXPECT_EQ(rest.content, "");
    EXPECT_EQ(rest.reasoning, "");

    // gpt-oss's analysis channel too.
    ToolCallStream harmony(F::harmony, AnswerOptions{});
    EXPECT_EQ(harmony.feed("<|channel|>analysis<|message|>Hmm, a capital"), "");
    EXPECT_EQ(harmony.take_reasoning(), "Hmm, a capital");
}

// The real templates: which prompts leave the model inside a think block.
std::string rendered_prompt(const std::string& source, bool thinking_off = false) {
    nlohmann::ordered_json context = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                      {"add_generation_prompt", true},
                                      {"bos_token", "<s>"},
                                      {"eos_token", "</s>"}};
    if (thinking_off) context["enable_thinking"] = false;
    Result<std::string> text = render_template(source, context);
    EXPECT_TRUE(text) << text.error().message;
    return text ? *text : std::string();
}

TEST(Reasoning, PromptsThatOpenABlockInRealTemplates) {
    const std::string r1 =
        test::read_file(test::shared_testdata_dir() / "templates" / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja");
    const std::string qwen35 = test::read_file(test::data_dir() / "templates" / "Qwen3.5-4B.jinja");
    const std::string qwen3 = test::read_file(test::data_dir() / "templates" / "Qwen-Qwen3-0.6B.jinja");
    const std::string gpt_oss = test::read_file(test::data_dir() / "templates" / "gpt-oss.jinja");
    const std::string smollm2 = test::read_file(test::data_dir() / "templates" / "smollm2.jinja");
    const std::string magistral =
        test::read_file(test::data_dir() / "templates" / "mistralai-Ministral-3-14B-Reasoning-2512.jinja");

    EXPECT_TRUE(prompt_opens_reasoning(detect_tool_call_format(r1), rendered_prompt(r1)));
    EXPECT_TRUE(prompt_opens_reasoning(detect_tool_call_format(qwen35), rendered_prompt(qwen35)));
    // Thinking turned off: the template writes an empty, closed block.
    EXPECT_FALSE(prompt_opens_reasoning(detect_tool_call_format(qwen35), rendered_prompt(qwen35, true)));
    EXPECT_FALSE(prompt_opens_reasoning(detect_tool_call_format(qwen3), rendered_prompt(qwen3)));
    EXPECT_FALSE(prompt_opens_reasoning(detect_tool_call_format(qwen3), rendered_prompt(qwen3, true)));
    EXPECT_FALSE(prompt_opens_reasoning(detect_tool_call_format(gpt_oss), rendered_prompt(gpt_oss)));
    EXPECT_FALSE(prompt_opens_reasoning(detect_tool_call_format(smollm2), rendered_prompt(smollm2)));
    // Which switches each template reads (ModelSummary::has_thinking_switch and
    // has_reasoning_effort); a longer identifier is not the variable.
    EXPECT_TRUE(template_uses_variable(qwen3, "enable_thinking"));
    EXPECT_TRUE(template_uses_variable(qwen35, "enable_thinking"));
    EXPECT_FALSE(template_uses_variable(r1, "enable_thinking"));
    EXPECT_TRUE(template_uses_variable(gpt_oss, "reasoning_effort"));
    EXPECT_FALSE(template_uses_variable(gpt_oss, "enable_thinking"));
    EXPECT_FALSE(template_uses_variable("{{ enable_thinking_x }}", "enable_thinking"));
    EXPECT_FALSE(template_uses_variable("{{ my_enable_thinking }}", "enable_thinking"));
    // Magistral opens its [THINK] block itself.
    EXPECT_EQ(detect_tool_call_format(magistral), F::mistral);
    EXPECT_FALSE(prompt_opens_reasoning(F::mistral, rendered_prompt(magistral)));
    EXPECT_TRUE(prompt_opens_reasoning(F::mistral, "[INST]Hi[/INST][THINK]"));
}

}  // namespace
}  // namespace powerhouse
