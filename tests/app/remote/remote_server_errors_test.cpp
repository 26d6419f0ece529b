// A server's own failures, as a user reads them (openai_fault_server.py): llama.cpp's way of
// failing a stream that has begun (an "error: {...}" line), and a prompt longer than the
// server's context, refused with a 400 or reported in the stream.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "http_test_server.h"
#include "remote/remote_engine.h"
#include "support/test_support.h"

namespace powerhouse::remote {
namespace {

const std::string kLlamaContextMessage = "the request exceeds the available context size, try increasing it";

class RemoteServerErrorsTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        server_ = std::make_unique<test::HttpTestServer>(
            POWERHOUSE_REMOTE_TEST_DIR "/openai_fault_server.py",
            std::vector<std::string>{"--fixtures", (test::data_dir() / "remote").string()});
    }
    static void TearDownTestSuite() { server_.reset(); }
    void SetUp() override { ASSERT_TRUE(server_->running()) << "the fault server did not start"; }

    static Result<ChatResult> chat(const std::string& scenario) {
        Result<RemoteEngine> e = RemoteEngine::create(server_->url("/" + scenario + "/v1"));
        if (!e) return e.error();
        ChatRequest r;
        r.model = "test-model";
        r.messages = {{"user", "Say hello."}};
        return e->chat(r);
    }

    static std::unique_ptr<test::HttpTestServer> server_;
};

std::unique_ptr<test::HttpTestServer> RemoteServerErrorsTest::server_;

// The user reads llama.cpp's message, not "a line that is not a server-sent event", before
// any text and after some (which is kept).
TEST_F(RemoteServerErrorsTest, LlamaCppsErrorLineIsTheServersMessage) {
    for (const std::string scenario : {"llamaerr-0", "llamaerr-2"}) {
        Result<ChatResult> result = chat(scenario);
        ASSERT_TRUE(result.ok()) << scenario << ": " << result.error().message;
        EXPECT_TRUE(result->interrupted()) << scenario;
        EXPECT_EQ(result->text, scenario == "llamaerr-0" ? "" : "Hello,") << scenario;
        ASSERT_TRUE(result->interruption) << scenario;
        const std::string& message = result->interruption->message;
        EXPECT_NE(result->interruption->code, ErrorCode::format) << scenario << ": " << message;
        EXPECT_NE(message.find(kLlamaContextMessage), std::string::npos) << scenario << ": " << message;
        EXPECT_EQ(message.find("not a server-sent event"), std::string::npos) << scenario << ": " << message;
    }
}

// A prompt longer than the server's context is named as such, with what to do: refused with
// a 400 in llama.cpp's words ("context size"), or reported in the stream.
TEST_F(RemoteServerErrorsTest, APromptLongerThanTheContextSaysWhatToDo) {
    Result<ChatResult> refused = chat("ctxsize");
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::context_full) << refused.error().message;
    EXPECT_NE(refused.error().message.find("the conversation is too long for the server's model (HTTP 400 (Bad "
                                           "Request): " +
                                           kLlamaContextMessage + "): shorten it"),
              std::string::npos)
        << refused.error().message;

    Result<ChatResult> streamed = chat("llamaerr-0");
    ASSERT_TRUE(streamed.ok()) << streamed.error().message;
    ASSERT_TRUE(streamed->interruption);
    EXPECT_EQ(streamed->interruption->code, ErrorCode::context_full) << streamed->interruption->message;
    EXPECT_NE(streamed->interruption->message.find("the conversation is too long for the server's model (" +
                                                   kLlamaContextMessage + "): shorten it"),
              std::string::npos)
        << streamed->interruption->message;

    // An error event about something else stays the server's failure.
    Result<ChatResult> other = chat("errevent-1");
    ASSERT_TRUE(other.ok()) << other.error().message;
    ASSERT_TRUE(other->interruption);
    EXPECT_EQ(other->interruption->code, ErrorCode::device_failed) << other->interruption->message;
}

}  // namespace
}  // namespace powerhouse::remote
