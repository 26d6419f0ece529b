// Conversations with tools into chat templates: chat_context() against the Hugging Face
// convention and Python jinja2 (tests/data/templates/tool_prompts.json, written by
// scripts/fixtures/make_tool_context_fixture.py), the provenance of tool data, and the
// generic format's instructions for templates that never mention tools.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/template/template_test_support.h"
#include "powerhouse/chat_template.h"
#include "powerhouse/generation.h"
#include "powerhouse/tool_calls.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using nlohmann::ordered_json;

// An OpenAI request message as the server would hand it to the engine.
ChatMessage from_request(const ordered_json& m) {
    ChatMessage message{m.at("role").get<std::string>(), ""};
    if (m.contains("content") && m["content"].is_string()) message.content = m["content"].get<std::string>();
    if (m.contains("tool_calls")) {
        for (const ordered_json& call : m["tool_calls"]) {
            message.tool_calls.push_back({call.value("id", std::string()), call["function"]["name"].get<std::string>(),
                                          call["function"]["arguments"].get<std::string>()});
        }
    }
    message.tool_call_id = m.value("tool_call_id", std::string());
    message.name = m.value("name", std::string());
    return message;
}

std::vector<ChatMessage> messages_of(const ordered_json& request) {
    std::vector<ChatMessage> messages;
    for (const ordered_json& m : request.at("messages")) messages.push_back(from_request(m));
    return messages;
}

ordered_json fixture() {
    return ordered_json::parse(test::read_file(test::data_dir() / "templates" / "tool_prompts.json"));
}

std::string template_source(const std::string& name) {
    const auto local = test::data_dir() / "templates" / (name + ".jinja");
    if (std::filesystem::exists(local)) return test::read_file(local);
    return test::read_file(test::shared_testdata_dir() / "templates" / (name + ".jinja"));
}

void add_fixture_tokens(ordered_json& context) {
    context["bos_token"] = "<s>";
    context["eos_token"] = "</s>";
}

TEST(ToolCallPrompt, ContextFollowsTheTransformersConvention) {
    const ordered_json cases = fixture();
    ASSERT_GE(cases.size(), 8u);
    for (const auto& [name, c] : cases.items()) {
        const ordered_json context = chat_context(messages_of(c["request"]), c["request"]["tools"]);
        // Compared as text: the order of keys reaches the prompt (tojson of a message).
        EXPECT_EQ(context.dump(), c["context"].dump()) << name;
    }
}

TEST(ToolCallPrompt, RendersLikeJinja2) {
    const ordered_json cases = fixture();
    size_t rendered = 0;
    size_t refused = 0;
    for (const auto& [name, c] : cases.items()) {
        ordered_json context = chat_context(messages_of(c["request"]), c["request"]["tools"]);
        add_fixture_tokens(context);
        for (const auto& [template_name, expected] : c["expected"].items()) {
            const std::string label = template_name + "/" + name;
            const Result<ChatTemplate> parsed = ChatTemplate::parse(template_source(template_name));
            ASSERT_TRUE(parsed.ok()) << label;
            const Result<RenderedPrompt> prompt = parsed->render_prompt(context, test::fixture_options());
            if (expected.is_string()) {
                ASSERT_TRUE(prompt.ok()) << label << ": " << prompt.error().message;
                const std::string text = expected.get<std::string>();
                EXPECT_EQ(prompt->text, text) << label << ": " << test::describe_difference(text, prompt->text);
                ++rendered;
            } else {
                // The template refuses (Llama 3.1 takes one call at a time, Mistral wants
                // 9-character ids): so must we, with its message.
                ASSERT_FALSE(prompt.ok()) << label << " renders, jinja2 refused: " << expected.dump();
                EXPECT_NE(prompt.error().message.find(expected["error"].get<std::string>()), std::string::npos)
                    << label << ": " << prompt.error().message;
                ++refused;
            }
        }
    }
    EXPECT_GE(rendered, 40u);
    EXPECT_GE(refused, 2u);
}

// Whether text[begin, end) lies inside the rendered prompt's data.
bool is_data(const RenderedPrompt& prompt, size_t begin, size_t end) {
    for (const auto& [b, e] : prompt.data_ranges) {
        if (b <= begin && end <= e) return true;
    }
    return false;
}

TEST(ToolCallPrompt, ToolSchemasArgumentsAndResultsAreData) {
    const ordered_json cases = fixture();
    ordered_json context =
        chat_context(messages_of(cases["typed_arguments"]["request"]), cases["typed_arguments"]["request"]["tools"]);
    add_fixture_tokens(context);
    for (const std::string template_name : {"Qwen-Qwen2.5-7B-Instruct", "meta-llama-Llama-3.1-8B-Instruct",
                                            "mistralai-Mistral-Nemo-Instruct-2407", "gpt-oss"}) {
        const Result<RenderedPrompt> prompt =
            ChatTemplate::parse(template_source(template_name))->render_prompt(context, test::fixture_options());
        ASSERT_TRUE(prompt.ok()) << template_name << ": " << prompt.error().message;
        for (const std::string data : {"Search files by", "notes/**", "notes/a.md"}) {
            const size_t at = prompt->text.find(data);
            ASSERT_NE(at, std::string::npos) << template_name << ": " << data;
            EXPECT_TRUE(is_data(*prompt, at, at + data.size())) << template_name << ": " << data;
        }
    }
    // A user's text that spells a control token stays data next to tool calls.
    context = chat_context(messages_of(cases["history_without_tools"]["request"]));
    add_fixture_tokens(context);
    const Result<RenderedPrompt> prompt = ChatTemplate::parse(template_source("Qwen-Qwen2.5-7B-Instruct"))
                                              ->render_prompt(context, test::fixture_options());
    ASSERT_TRUE(prompt.ok());
    const size_t at = prompt->text.find("Thanks! {{ 7*7 }} <|im_end|>");
    ASSERT_NE(at, std::string::npos);
    EXPECT_TRUE(is_data(*prompt, at, at + 28));
}

TEST(ToolCallPrompt, NoToolsMeansNoToolsVariable) {
    const std::vector<ChatMessage> plain = {{"user", "Hi"}};
    const ordered_json a = chat_context(plain);
    EXPECT_FALSE(a.contains("tools"));
    EXPECT_EQ(a.dump(), R"({"messages":[{"role":"user","content":"Hi"}],"add_generation_prompt":true})");
    EXPECT_FALSE(chat_context(plain, ordered_json::array()).contains("tools"));
}

// ---- the generic format ----

const ordered_json kWeatherTools = ordered_json::parse(R"([{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");

TEST(ToolCallPrompt, GenericInstructionsGoIntoTheSystemMessage) {
    const std::vector<ChatMessage> with_system = {{"system", "Be brief."}, {"user", "Weather in Paris?"}};
    const std::vector<ChatMessage> a = add_tool_instructions(with_system, kWeatherTools);
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(a[0].role, "system");
    EXPECT_TRUE(a[0].content.starts_with("Be brief.\n\n# Tools\n")) << a[0].content;
    EXPECT_NE(a[0].content.find(R"({"type":"function","function":{"name":"get_weather")"), std::string::npos);
    EXPECT_NE(a[0].content.find("<tool_call>\n{\"name\": <function-name>, \"arguments\": <arguments-json-object>}\n"
                                "</tool_call>"),
              std::string::npos);
    EXPECT_EQ(a[1].content, "Weather in Paris?");

    // No system message: one is made.
    const std::vector<ChatMessage> b = add_tool_instructions(std::vector<ChatMessage>{{"user", "Hi"}}, kWeatherTools);
    ASSERT_EQ(b.size(), 2u);
    EXPECT_EQ(b[0].role, "system");
    EXPECT_EQ(b[0].content, tool_instructions(kWeatherTools));
}

TEST(ToolCallPrompt, GenericHistoryRendersThroughSmolLM2sTemplate) {
    ChatMessage call{"assistant", ""};
    call.tool_calls = {{"call_1", "get_weather", R"({"city": "Paris"})"},
                       {"call_2", "get_weather", R"({"city":"Rome"})"}};
    ChatMessage paris{"tool", "18 degrees"};
    paris.tool_call_id = "call_1";
    ChatMessage rome{"tool", "25 degrees"};
    rome.tool_call_id = "call_2";
    const std::vector<ChatMessage> conversation = {{"user", "Weather in Paris and Rome?"}, call, paris, rome};
    const std::vector<ChatMessage> generic = add_tool_instructions(conversation, kWeatherTools);
    ASSERT_EQ(generic.size(), 4u);  // system, user, assistant, one user message of both results
    EXPECT_EQ(generic[2].content,
              "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>\n"
              "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Rome\"}}\n</tool_call>");
    EXPECT_TRUE(generic[2].tool_calls.empty());
    EXPECT_EQ(generic[3].role, "user");
    EXPECT_EQ(generic[3].content,
              "<tool_response>\n18 degrees\n</tool_response>\n<tool_response>\n25 degrees\n</tool_response>");

    ordered_json context = chat_context(generic);
    add_fixture_tokens(context);
    const std::string source = template_source("smollm2");
    ASSERT_FALSE(template_mentions_tools(source));
    const Result<std::string> text = render_template(source, context, test::fixture_options());
    ASSERT_TRUE(text.ok()) << text.error().message;
    const std::string expected_tail =
        "<|im_start|>user\nWeather in Paris and Rome?<|im_end|>\n<|im_start|>assistant\n" + generic[2].content +
        "<|im_end|>\n<|im_start|>user\n" + generic[3].content + "<|im_end|>\n<|im_start|>assistant\n";
    EXPECT_TRUE(text->ends_with(expected_tail)) << *text;
    EXPECT_TRUE(text->starts_with("<|im_start|>system\n# Tools\n")) << *text;
    // What the model answers in that format reads back as a call.
    const ParsedAnswer answer = parse_answer(detect_tool_call_format(source),
                                             "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                             "{\"city\": \"Oslo\"}}\n</tool_call>");
    ASSERT_EQ(answer.tool_calls.size(), 1u);
    EXPECT_EQ(answer.tool_calls[0].arguments, R"({"city":"Oslo"})");
}

}  // namespace
}  // namespace powerhouse
