// The API key never reaches a message, even from a server that quotes it back wherever the
// client quotes the server (openai_fault_server.py's echo-* scenarios and /echo/metrics): a
// model list that is no list, a 200 that is no completion, an error event, a malformed chunk,
// a line that is no SSE, a redirect's Location, metrics that are no metrics. Each message
// keeps the rest of the server's words, the key blanked as "[the key]".
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "http_test_server.h"
#include "remote/http_client.h"
#include "remote/remote_engine.h"
#include "support/test_support.h"

namespace powerhouse::remote {
namespace {

const std::string kKey = "sk-echo-5150";

class RemoteKeyTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        server_ = std::make_unique<test::HttpTestServer>(
            POWERHOUSE_REMOTE_TEST_DIR "/openai_fault_server.py",
            std::vector<std::string>{"--fixtures", (test::data_dir() / "remote").string()});
    }
    static void TearDownTestSuite() { server_.reset(); }
    void SetUp() override { ASSERT_TRUE(server_->running()) << "the fault server did not start"; }

    static ConnectionOptions keyed() {
        ConnectionOptions o;
        o.api_key = kKey;
        return o;
    }

    static RemoteEngine engine(const std::string& scenario) {
        Result<RemoteEngine> e = RemoteEngine::create(server_->url("/" + scenario + "/v1"), keyed());
        EXPECT_TRUE(e.ok()) << e.error().message;
        return std::move(e).value();
    }

    static ChatRequest request() {
        ChatRequest r;
        r.model = "test-model";
        r.messages = {{"user", "Say hello."}};
        return r;
    }

    // The message of a chat whose stream broke after its first piece of text.
    static std::string interruption(const std::string& scenario) {
        Result<ChatResult> result = engine(scenario).chat(request());
        EXPECT_TRUE(result.ok()) << scenario << ": " << result.error().message;
        if (!result.ok()) return result.error().message;
        EXPECT_EQ(result->text, "Hello") << scenario;
        EXPECT_TRUE(result->interruption) << scenario;
        return result->interruption ? result->interruption->message : "";
    }

    static std::unique_ptr<test::HttpTestServer> server_;
};

std::unique_ptr<test::HttpTestServer> RemoteKeyTest::server_;

bool has(const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
}

TEST_F(RemoteKeyTest, AModelListThatIsNoListIsQuotedWithoutTheKey) {
    Result<std::vector<std::string>> models = engine("echo-list").list_models();
    ASSERT_FALSE(models.ok());
    const std::string& message = models.error().message;
    EXPECT_TRUE(has(message, "the model list is not an OpenAI list")) << message;
    EXPECT_TRUE(has(message, "no models for [the key] here")) << message;
    EXPECT_FALSE(has(message, kKey)) << message;
}

TEST_F(RemoteKeyTest, AnAnswerThatIsNoCompletionIsQuotedWithoutTheKey) {
    Result<ChatResult> result = engine("echo-completion").chat(request());
    ASSERT_FALSE(result.ok());
    const std::string& message = result.error().message;
    EXPECT_TRUE(has(message, "neither a stream nor a chat completion")) << message;
    EXPECT_TRUE(has(message, "key [the key] accepted")) << message;
    EXPECT_FALSE(has(message, kKey)) << message;
}

TEST_F(RemoteKeyTest, AnErrorEventIsQuotedWithoutTheKey) {
    const std::string message = interruption("echo-event");
    EXPECT_TRUE(has(message, "the server reported an error")) << message;
    EXPECT_TRUE(has(message, "the key [the key] has no quota left")) << message;
    EXPECT_FALSE(has(message, kKey)) << message;
}

TEST_F(RemoteKeyTest, AMalformedChunkIsQuotedWithoutTheKey) {
    const std::string message = interruption("echo-chunk");
    EXPECT_TRUE(has(message, "'choices' is not an array")) << message;
    EXPECT_TRUE(has(message, "denied [the key]")) << message;
    EXPECT_FALSE(has(message, kKey)) << message;
}

TEST_F(RemoteKeyTest, ALineThatIsNoEventIsQuotedWithoutTheKey) {
    const std::string message = interruption("echo-junk");
    EXPECT_TRUE(has(message, "not a server-sent event: '<html><body>token [the key] is not valid here")) << message;
    EXPECT_FALSE(has(message, kKey)) << message;
}

TEST_F(RemoteKeyTest, ARedirectsLocationIsQuotedWithoutTheKey) {
    Result<std::vector<std::string>> models = engine("echo-moved").list_models();
    ASSERT_FALSE(models.ok());
    EXPECT_TRUE(has(models.error().message, "redirects to /login?next=/ok/v1&token=[the key]"))
        << models.error().message;
    EXPECT_FALSE(has(models.error().message, kKey)) << models.error().message;
    Result<ChatResult> chat = engine("echo-moved").chat(request());
    ASSERT_FALSE(chat.ok());
    EXPECT_TRUE(has(chat.error().message, "redirects to /login?next=/ok/v1&token=[the key]")) << chat.error().message;
    EXPECT_FALSE(has(chat.error().message, kKey)) << chat.error().message;
}

TEST_F(RemoteKeyTest, MetricsThatAreNoMetricsAreQuotedWithoutTheKey) {
    Result<PrometheusText> body = fetch_metrics(server_->url("/echo/metrics/body"), keyed());
    ASSERT_FALSE(body.ok());
    EXPECT_TRUE(has(body.error().message, "no Prometheus samples in the answer")) << body.error().message;
    EXPECT_TRUE(has(body.error().message, "the token [the key] is not allowed here")) << body.error().message;
    EXPECT_FALSE(has(body.error().message, kKey)) << body.error().message;

    Result<PrometheusText> value = fetch_metrics(server_->url("/echo/metrics/value"), keyed());
    ASSERT_FALSE(value.ok());
    EXPECT_TRUE(has(value.error().message, "'[the key]' is not a number")) << value.error().message;
    EXPECT_FALSE(has(value.error().message, kKey)) << value.error().message;
}

// The key is blanked also as JSON writes it escaped (a raw body is quoted as it came), and
// every time it occurs.
TEST(BlankSecret, BlanksTheKeyAsWrittenAndAsJsonEscapesIt) {
    EXPECT_EQ(detail::blank_secret("a sk-1 b sk-1", "sk-1"), "a [the key] b [the key]");
    EXPECT_EQ(detail::blank_secret(R"({"token": "k\"ey\\1"})", "k\"ey\\1"), R"({"token": "[the key]"})");
    EXPECT_EQ(detail::blank_secret(R"({"token": "a\/b"})", "a/b"), R"({"token": "[the key]"})");
    EXPECT_EQ(detail::blank_secret("nothing to hide", ""), "nothing to hide");
    EXPECT_EQ(detail::blank_secret("sk-1sk-1", "sk-1"), "[the key][the key]");
}

}  // namespace
}  // namespace powerhouse::remote
