// The API server's answers from the engine's events (app/server/replies.h), without a model
// or a socket: a chat's reasoning (read apart by the engine, GenerateCommand::read_answer)
// comes back as `reasoning_content`, streamed as it arrives and never as content; tool
// calls come back as `tool_calls`. The whole server, with a real model, is tested through
// the official `openai` package (openai_client_test.py, openai_features_test.py).
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "replies.h"
#include "requests.h"

namespace powerhouse::server {
namespace {

GenRequest chat_request(bool stream, const json& extra = json::object()) {
    json body = {
        {"model", "m"}, {"messages", {{{"role", "user"}, {"content", "The capital of France?"}}}}, {"stream", stream}};
    body.update(extra);
    std::variant<GenRequest, ApiError> r = parse_chat(body, ServedModel{"m", 4096, 0, ToolCallFormat::hermes, {}});
    EXPECT_TRUE(std::holds_alternative<GenRequest>(r)) << std::get<ApiError>(r).message;
    return std::holds_alternative<GenRequest>(r) ? std::get<GenRequest>(std::move(r)) : GenRequest{};
}

DoneEvent done_with(std::string text, std::string reasoning = {}, std::vector<ToolCall> calls = {}) {
    DoneEvent done;
    done.text = std::move(text);
    done.reasoning = std::move(reasoning);
    done.tool_calls = std::move(calls);
    done.stats.stop_reason = StopReason::eos;
    return done;
}

TokenEvent token(std::string text, std::string reasoning) {
    TokenEvent t;
    t.text = std::move(text);
    t.reasoning = std::move(reasoning);
    return t;
}

// The stream's events' choices, in order.
std::vector<json> choices_of(const std::string& events) {
    std::vector<json> out;
    size_t at = 0;
    while ((at = events.find("data: ", at)) != std::string::npos) {
        const size_t end = events.find("\n\n", at);
        const std::string data = events.substr(at + 6, end - at - 6);
        at = end;
        if (data == "[DONE]") break;
        const json chunk = json::parse(data);
        if (!chunk["choices"].empty()) out.push_back(chunk["choices"][0]);
    }
    return out;
}

TEST(ServerReply, AWholeAnswerCarriesItsReasoningApart) {
    const Reply reply(true, "chatcmpl-1", "m", 0, chat_request(false));
    const json message =
        reply.complete(done_with("Paris.", "The user asks for a capital. Easy."))["choices"][0]["message"];
    EXPECT_EQ(message["content"], "Paris.");
    EXPECT_EQ(message["reasoning_content"], "The user asks for a capital. Easy.");
    EXPECT_FALSE(message.contains("tool_calls"));
    // No reasoning: no field.
    EXPECT_FALSE(reply.complete(done_with("Paris."))["choices"][0]["message"].contains("reasoning_content"));
}

TEST(ServerReply, ReasoningStreamsAsItArrivesBeforeTheContent) {
    Reply reply(true, "chatcmpl-2", "m", 0, chat_request(true));
    std::string events = reply.stream_start();
    events += reply.stream_text(token("", "The user asks"));
    events += reply.stream_text(token("", " for a capital."));
    events += reply.stream_text(token("", ""));  // the reader waits on a possible tag
    events += reply.stream_text(token("Par", ""));
    events += reply.stream_text(token("is.", ""));
    events += reply.stream_end(done_with("Paris.", "The user asks for a capital."));
    std::vector<std::string> order;
    std::string content, reasoning;
    for (const json& c : choices_of(events)) {
        const json& delta = c["delta"];
        if (delta.contains("reasoning_content")) {
            reasoning += delta["reasoning_content"].get<std::string>();
            order.push_back("reasoning");
        }
        if (delta.contains("content") && delta["content"].is_string() && !delta["content"].get<std::string>().empty()) {
            content += delta["content"].get<std::string>();
            order.push_back("content");
        }
    }
    EXPECT_EQ(reasoning, "The user asks for a capital.");
    EXPECT_EQ(content, "Paris.");
    EXPECT_EQ(order, (std::vector<std::string>{"reasoning", "reasoning", "content", "content"}));
}

TEST(ServerReply, CallsComeBackAsToolCalls) {
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather"}}])");
    const GenRequest request = chat_request(false, {{"tools", tools}});
    const Reply reply(true, "chatcmpl-3", "m", 0, request);
    const json whole = reply.complete(done_with("", "", {{"call_1", "get_weather", R"({"city":"Paris"})"}}));
    EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls");
    EXPECT_TRUE(whole["choices"][0]["message"]["content"].is_null());
    EXPECT_EQ(whole["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");

    Reply streamed(true, "chatcmpl-4", "m", 0, chat_request(true, {{"tools", tools}}));
    std::string events = streamed.stream_start();
    events += streamed.stream_end(done_with("", "", {{"call_1", "get_weather", R"({"city":"Paris"})"}}));
    const std::vector<json> choices = choices_of(events);
    ASSERT_GE(choices.size(), 2u);
    EXPECT_EQ(choices[choices.size() - 2]["delta"]["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");
    EXPECT_EQ(choices.back()["finish_reason"], "tool_calls");
}

TEST(ServerRequests, AGrammarConstrainsTheAnswer) {
    EXPECT_TRUE(chat_request(false, {{"grammar", "root ::= \"yes\" | \"no\""}}).settings.grammar.has_value());
    const json base = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    const ServedModel model{"m", 4096, 0, ToolCallFormat::hermes, {}};
    for (const json& bad : {json{{"grammar", 3}}, json{{"grammar", "root ::= ("}},
                            json{{"grammar", "root ::= \"a\""}, {"response_format", {{"type", "json_object"}}}}}) {
        json body = base;
        body.update(bad);
        const std::variant<GenRequest, ApiError> r = parse_chat(body, model);
        ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << bad.dump();
        EXPECT_EQ(std::get<ApiError>(r).status, 400) << bad.dump();
        EXPECT_EQ(std::get<ApiError>(r).param, "grammar") << bad.dump();
    }
}

TEST(ServerRequests, TemplateVariablesAndReasoningEffort) {
    const GenRequest r =
        chat_request(false, {{"chat_template_kwargs", {{"enable_thinking", false}}}, {"reasoning_effort", "high"}});
    EXPECT_EQ(r.template_variables, json({{"enable_thinking", false}, {"reasoning_effort", "high"}}));
    EXPECT_TRUE(chat_request(false).template_variables.is_null());
    const json base = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    const ServedModel model{"m", 4096, 0, ToolCallFormat::hermes, {}};
    for (const auto& [bad, param] : std::vector<std::pair<json, std::string>>{
             {{{"chat_template_kwargs", "enable_thinking=false"}}, "chat_template_kwargs"},
             {{{"chat_template_kwargs", {{"messages", json::array()}}}}, "chat_template_kwargs"},
             {{{"reasoning_effort", "extreme"}}, "reasoning_effort"},
             {{{"reasoning_effort", 2}}, "reasoning_effort"}}) {
        json body = base;
        body.update(bad);
        const std::variant<GenRequest, ApiError> refused = parse_chat(body, model);
        ASSERT_TRUE(std::holds_alternative<ApiError>(refused)) << bad.dump();
        EXPECT_EQ(std::get<ApiError>(refused).param, param) << bad.dump();
    }
}

TEST(ServerRequests, SpeculationAndPredictedOutputs) {
    // The server's default (serve --lookup-draft), overridden by llama.cpp's field.
    const json base = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    ServedModel model{"m", 4096, 0, ToolCallFormat::hermes, {}};
    model.lookup.max_draft = 4;
    const auto parsed = [&](const json& extra) {
        json body = base;
        body.update(extra);
        return parse_chat(body, model);
    };
    EXPECT_EQ(std::get<GenRequest>(parsed(json::object())).settings.lookup.max_draft, 4u);
    EXPECT_EQ(std::get<GenRequest>(parsed({{"speculative.n_max", 0}})).settings.lookup.max_draft, 0u);
    EXPECT_EQ(std::get<GenRequest>(parsed({{"speculative.n_max", 12}})).settings.lookup.max_draft, 12u);
    // OpenAI's predicted output, as a string or as text parts.
    EXPECT_EQ(std::get<GenRequest>(parsed({{"prediction", {{"type", "content"}, {"content", "x = 1"}}}})).prediction,
              "x = 1");
    const json parts = {{{"type", "text"}, {"text", "x = "}}, {{"type", "text"}, {"text", "1"}}};
    EXPECT_EQ(std::get<GenRequest>(parsed({{"prediction", {{"type", "content"}, {"content", parts}}}})).prediction,
              "x = 1");
    for (const json& bad : {json("x"), json({{"type", "content"}}), json({{"type", "file"}, {"content", "x"}}),
                            json({{"type", "content"}, {"content", 5}}),
                            json({{"type", "content"}, {"content", {{{"type", "image_url"}}}}})}) {
        const auto refused = parsed({{"prediction", bad}});
        ASSERT_TRUE(std::holds_alternative<ApiError>(refused)) << bad.dump();
        EXPECT_EQ(std::get<ApiError>(refused).param, "prediction") << bad.dump();
    }
    // The guesses are counted as OpenAI counts a prediction's tokens, and only when there were any.
    DoneEvent done = done_with("x = 1");
    EXPECT_FALSE(Reply::usage(done).contains("completion_tokens_details"));
    done.stats.drafted_tokens = 10;
    done.stats.accepted_tokens = 7;
    EXPECT_EQ(Reply::usage(done)["completion_tokens_details"],
              json({{"accepted_prediction_tokens", 7}, {"rejected_prediction_tokens", 3}}));
}

TEST(ServerRequests, EmbeddingsInputsAndTheirAnswer) {
    const ServedModel model{"m", 4096, 1000, ToolCallFormat::hermes, {}};
    const auto parsed = [&](const json& input, const json& extra = json::object()) {
        json body = {{"model", "m"}, {"input", input}};
        body.update(extra);
        return parse_embeddings(body, model);
    };
    EXPECT_EQ(std::get<EmbedRequest>(parsed("hi")).texts, std::vector<std::string>{"hi"});
    EXPECT_EQ(std::get<EmbedRequest>(parsed(json::array({"a", "b"}))).texts, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(std::get<EmbedRequest>(parsed(json::array({5, 6}))).tokens, (std::vector<std::vector<TokenId>>{{5, 6}}));
    EXPECT_EQ(std::get<EmbedRequest>(parsed(json::array({json::array({5}), json::array({7, 8})}))).tokens,
              (std::vector<std::vector<TokenId>>{{5}, {7, 8}}));
    EXPECT_TRUE(std::get<EmbedRequest>(parsed("hi", {{"encoding_format", "base64"}})).base64);
    for (const auto& [input, extra, param] :
         std::vector<std::tuple<json, json, std::string>>{{"", json::object(), "input"},
                                                          {json::array(), json::object(), "input"},
                                                          {json::array({"a", 5}), json::object(), "input"},
                                                          {json::array({1000}), json::object(), "input"},
                                                          {json::array({-1}), json::object(), "input"},
                                                          {json::array({json::array()}), json::object(), "input"},
                                                          {5, json::object(), "input"},
                                                          {"hi", {{"encoding_format", "hex"}}, "encoding_format"},
                                                          {"hi", {{"dimensions", 64}}, "dimensions"}}) {
        const auto refused = parsed(input, extra);
        ASSERT_TRUE(std::holds_alternative<ApiError>(refused)) << input.dump() << extra.dump();
        EXPECT_EQ(std::get<ApiError>(refused).param, param) << input.dump() << extra.dump();
    }
    // Floats as they are, or their little-endian bytes in base64 (Python:
    // base64.b64encode(struct.pack("<ff", 1.0, -2.5))).
    EmbeddingsEvent event;
    event.vectors = {{1.0f, -2.5f}, {0.5f}};
    event.prompt_tokens = 7;
    const json as_float = embeddings_reply(event, "m", false);
    EXPECT_EQ(as_float["data"][0]["embedding"], json::array({1.0, -2.5}));
    EXPECT_EQ(as_float["data"][1]["index"], 1);
    EXPECT_EQ(as_float["usage"]["prompt_tokens"], 7);
    const json as_base64 = embeddings_reply(event, "m", true);
    EXPECT_EQ(as_base64["data"][0]["embedding"], "AACAPwAAIMA=");
    EXPECT_EQ(as_base64["data"][1]["embedding"], "AAAAPw==");
}

}  // namespace
}  // namespace powerhouse::server
