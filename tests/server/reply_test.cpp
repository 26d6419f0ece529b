// The API server's request parsing and answers for a model whose answers carry reasoning
// (app/server/requests.h, replies.h), without a model or a socket: gpt-oss's channels and
// Seed-OSS's think blocks never reach `content`, tools or not, and the reasoning comes back
// as `reasoning_content`, as llama.cpp's server returns it. The whole server, with a real
// model, is tested through the official `openai` package (openai_client_test.py).
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "replies.h"
#include "requests.h"

namespace powerhouse::server {
namespace {

const char* const kHarmonyAnswer =
    "<|channel|>analysis<|message|>The user asks for a capital. Easy.<|end|><|start|>assistant<|channel|>final"
    "<|message|>Paris.";

GenRequest chat_request(ToolCallFormat format, bool stream) {
    const json body = {
        {"model", "m"}, {"messages", {{{"role", "user"}, {"content", "The capital of France?"}}}}, {"stream", stream}};
    std::variant<GenRequest, ApiError> r = parse_chat(body, ServedModel{"m", 4096, 0, format});
    EXPECT_TRUE(std::holds_alternative<GenRequest>(r));
    return std::get<GenRequest>(std::move(r));
}

DoneEvent done_with(std::string text) {
    DoneEvent done;
    done.text = std::move(text);
    done.stats.stop_reason = StopReason::eos;
    return done;
}

// The content and reasoning of a stream's events.
struct Streamed {
    std::string content, reasoning;
};

Streamed read_stream(const std::string& events) {
    Streamed out;
    size_t at = 0;
    while ((at = events.find("data: ", at)) != std::string::npos) {
        const size_t end = events.find("\n\n", at);
        const std::string data = events.substr(at + 6, end - at - 6);
        at = end;
        if (data == "[DONE]") break;
        const json chunk = json::parse(data);
        const json& delta = chunk["choices"][0]["delta"];
        if (delta.contains("content") && delta["content"].is_string()) out.content += delta["content"];
        if (delta.contains("reasoning_content")) out.reasoning += delta["reasoning_content"];
    }
    return out;
}

TEST(ServerReasoning, ChatsInAFormatWithReasoningAskForTheMarkersWithoutTools) {
    EXPECT_TRUE(chat_request(ToolCallFormat::harmony, false).settings.render_special);
    EXPECT_TRUE(chat_request(ToolCallFormat::seed_oss, false).settings.render_special);
    EXPECT_TRUE(chat_request(ToolCallFormat::glm45, false).settings.render_special);
    EXPECT_FALSE(chat_request(ToolCallFormat::hermes, false).settings.render_special);
    EXPECT_FALSE(chat_request(ToolCallFormat::generic, false).settings.render_special);
}

TEST(ServerReasoning, GptOssAnswersWithoutToolsKeepTheChannelsOutOfTheContent) {
    const GenRequest request = chat_request(ToolCallFormat::harmony, false);
    const Reply reply(true, "chatcmpl-1", "m", 0, request, ToolCallFormat::harmony);
    const json message = reply.complete(done_with(kHarmonyAnswer))["choices"][0]["message"];
    EXPECT_EQ(message["content"], "Paris.");
    EXPECT_EQ(message["reasoning_content"], "The user asks for a capital. Easy.");
    EXPECT_FALSE(message.contains("tool_calls"));
}

TEST(ServerReasoning, AStreamedGptOssAnswerSendsTheFinalChannelAndTheReasoning) {
    const GenRequest request = chat_request(ToolCallFormat::harmony, true);
    Reply reply(true, "chatcmpl-2", "m", 0, request, ToolCallFormat::harmony);
    std::string events = reply.stream_start();
    const std::string answer = kHarmonyAnswer;
    for (size_t i = 0; i < answer.size(); i += 5) {  // pieces that cut the markers anywhere
        TokenEvent token;
        token.text = answer.substr(i, 5);
        events += reply.stream_text(token);
    }
    events += reply.stream_end(done_with(answer));
    const Streamed s = read_stream(events);
    EXPECT_EQ(s.content, "Paris.");
    EXPECT_EQ(s.reasoning, "The user asks for a capital. Easy.");
    EXPECT_EQ(events.find("<|"), std::string::npos) << events;
}

TEST(ServerReasoning, SeedOssThinkBlocksAreReasoningAndOtherFormatsStayAsWritten) {
    const GenRequest seed = chat_request(ToolCallFormat::seed_oss, false);
    const Reply seed_reply(true, "chatcmpl-3", "m", 0, seed, ToolCallFormat::seed_oss);
    const json message =
        seed_reply.complete(done_with("<seed:think>Short question.</seed:think>Paris."))["choices"][0]["message"];
    EXPECT_EQ(message["content"], "Paris.");
    EXPECT_EQ(message["reasoning_content"], "Short question.");
    // A format without reasoning is not parsed without tools: its text is the content.
    const GenRequest hermes = chat_request(ToolCallFormat::hermes, false);
    const Reply hermes_reply(true, "chatcmpl-4", "m", 0, hermes, ToolCallFormat::hermes);
    EXPECT_EQ(hermes_reply.complete(done_with("<tool_call>not parsed</tool_call>"))["choices"][0]["message"]["content"],
              "<tool_call>not parsed</tool_call>");
}

}  // namespace
}  // namespace powerhouse::server
