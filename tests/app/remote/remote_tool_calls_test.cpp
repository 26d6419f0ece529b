// RemoteEngine::chat's tool calls against the fault-injecting loopback server
// (openai_fault_server.py): the tools offered in the request, two calls streamed interleaved
// in 7-byte reads (UTF-8 characters split across them), llama-cpp-python's recorded stream,
// a non-streamed answer's calls, malformed calls as interruptions that name them, and a
// stream cut while a call was coming.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "http_test_server.h"
#include "remote/remote_engine.h"
#include "support/test_support.h"

namespace powerhouse::remote {
namespace {

class RemoteToolCallsTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        server_ = std::make_unique<test::HttpTestServer>(
            POWERHOUSE_REMOTE_TEST_DIR "/openai_fault_server.py",
            std::vector<std::string>{"--fixtures", (test::data_dir() / "remote").string()});
    }
    static void TearDownTestSuite() { server_.reset(); }
    void SetUp() override { ASSERT_TRUE(server_->running()) << "the fault server did not start"; }

    static RemoteEngine engine(const std::string& scenario) {
        Result<RemoteEngine> e = RemoteEngine::create(server_->url("/" + scenario + "/v1"));
        EXPECT_TRUE(e.ok()) << e.error().message;
        return std::move(e).value();
    }

    static ChatRequest request(const std::string& model = "test-model") {
        ChatRequest r;
        r.model = model;
        r.messages = {{"user", "What is the weather in Zürich, and the time in Paris?"}};
        r.tools = nlohmann::ordered_json::parse(R"([
            {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
             "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
            {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
             "properties": {"zone": {"type": "string"}}}}}])");
        r.tool_choice = "auto";
        return r;
    }

    static inline std::unique_ptr<test::HttpTestServer> server_;
};

void expect_the_two_calls(const std::vector<ToolCall>& calls) {
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0].id, "call_a");
    EXPECT_EQ(calls[0].name, "get_weather");
    EXPECT_EQ(calls[0].arguments, "{\"city\": \"Zürich ✓\"}");
    EXPECT_EQ(calls[1].id, "call_b");
    EXPECT_EQ(calls[1].name, "get_time");
    EXPECT_EQ(calls[1].arguments, "{\"zone\": \"Europe/Paris\"}");
}

// OpenAI's (and vLLM's) stream of two calls after a line of text: the text streams as usual,
// the calls come whole at the end, and the request carried the tools and tool_choice.
TEST_F(RemoteToolCallsTest, StreamedCallsArePutTogether) {
    std::string streamed;
    ChatCallbacks callbacks;
    callbacks.on_text = [&](std::string_view piece) { streamed += piece; };
    Result<ChatResult> result = engine("tools").chat(request(), callbacks);
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_FALSE(result->interruption) << result->interruption->message;
    EXPECT_EQ(result->finish_reason, "tool_calls");
    EXPECT_EQ(result->text, "Let me check.");
    EXPECT_EQ(streamed, "Let me check.");
    expect_the_two_calls(result->tool_calls);
    EXPECT_EQ(result->tool_call_chunks, 7u);
    const nlohmann::json sent = server_->get_json("/tools/last")["body"];
    EXPECT_EQ(sent["tools"].size(), 2u);
    EXPECT_EQ(sent["tools"][1]["function"]["name"], "get_time");
    EXPECT_EQ(sent["tool_choice"], "auto");
}

// llama-cpp-python 0.3.36's server forced to call get_weather (chatml-function-calling): its
// recorded stream, id and name repeated in every piece.
TEST_F(RemoteToolCallsTest, ReplaysARecordedLlamaCppPythonToolCall) {
    Result<ChatResult> result = engine("replay-llama_cpp_python_tool_call").chat(request("smollm2"));
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_FALSE(result->interruption) << result->interruption->message;
    EXPECT_EQ(result->finish_reason, "tool_calls");
    EXPECT_EQ(result->text, "");
    ASSERT_EQ(result->tool_calls.size(), 1u);
    EXPECT_EQ(result->tool_calls[0].name, "get_weather");
    EXPECT_EQ(result->tool_calls[0].arguments, "{ \"city\": \"Zürich\" }");
    // The calls are the answer's tokens: timed, and counted where the server sends no usage.
    EXPECT_EQ(result->completion_tokens(), 11u);
    EXPECT_GT(result->time_to_first_token, 0.0);
}

// A server that ignores stream=true: the message's calls.
TEST_F(RemoteToolCallsTest, ANonStreamedAnswersCallsAreRead) {
    Result<ChatResult> result = engine("tooljson").chat(request());
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->finish_reason, "tool_calls");
    EXPECT_EQ(result->text, "");
    expect_the_two_calls(result->tool_calls);
}

// A malformed call interrupts the answer with a format error that names it; no call is handed
// on, and nothing crashes.
TEST_F(RemoteToolCallsTest, AMalformedCallInterruptsTheAnswerWithItsReason) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"noindex", "tool call 1 in a chunk's 'tool_calls': it has no 'index'"},
        {"argsobject", "'function.arguments' is an object, not a string of JSON text"},
        {"noname", "the tool call at index 1 (id 'call_n') ended without a function name"},
        {"rename", "changed its function's name from 'get_weather' to 'get_time'"},
        {"notarray", "'tool_calls' is an object, not an array of calls"},
    };
    for (const auto& [kind, words] : cases) {
        Result<ChatResult> result = engine("toolbad-" + kind).chat(request());
        ASSERT_TRUE(result.ok()) << kind << ": " << result.error().message;
        EXPECT_TRUE(result->interrupted()) << kind;
        EXPECT_TRUE(result->tool_calls.empty()) << kind;
        ASSERT_TRUE(result->interruption) << kind;
        EXPECT_EQ(result->interruption->code, ErrorCode::format) << kind;
        EXPECT_NE(result->interruption->message.find(words), std::string::npos)
            << kind << ": " << result->interruption->message;
        EXPECT_NE(result->interruption->message.find("asking 'test-model' at"), std::string::npos)
            << kind << ": " << result->interruption->message;
    }
}

// A stream cut while a call was coming keeps its text, hands on no call (its arguments may be
// cut), and says that one was dropped.
TEST_F(RemoteToolCallsTest, ACutStreamDropsTheCallsItHadBegun) {
    Result<ChatResult> result = engine("toolcut").chat(request());
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_TRUE(result->interrupted());
    EXPECT_EQ(result->text, "Let me check.");
    EXPECT_TRUE(result->tool_calls.empty());
    ASSERT_TRUE(result->interruption);
    EXPECT_NE(result->interruption->message.find("1 tool call it had begun is dropped"), std::string::npos)
        << result->interruption->message;
}

}  // namespace
}  // namespace powerhouse::remote
