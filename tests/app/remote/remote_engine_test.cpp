// RemoteEngine against a loopback server that injects faults (openai_fault_server.py, started
// through the download tests' launcher): streamed answers split at every awkward place, the
// protocol's variants (CRLF, no usage, no [DONE], a non-streamed answer, an older server
// without stream_options), and every failure a remote engine meets: refused connections, TLS
// to a self-signed certificate, 401/403/404/429/500/503, a stream cut after N events, a
// clean close too early, a server silent before or during the answer, garbage and error
// events in the stream, cancellation. A recorded llama-cpp-python stream is replayed too.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http_test_server.h"
#include "remote/remote_engine.h"
#include "support/test_support.h"

namespace powerhouse::remote {
namespace {

using namespace std::chrono_literals;

const std::string kAnswer = "Hello, wörld! Ünïcode ✓ and more.";
constexpr uint32_t kAnswerPieces = 9;

std::string fault_server_script() {
    return POWERHOUSE_REMOTE_TEST_DIR "/openai_fault_server.py";
}

// A port on 127.0.0.1 that nothing listens on (bound, then closed).
int closed_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
    ::close(fd);
    return ntohs(address.sin_port);
}

class RemoteEngineTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        server_ = std::make_unique<test::HttpTestServer>(
            fault_server_script(), std::vector<std::string>{"--fixtures", (test::data_dir() / "remote").string()});
    }
    static void TearDownTestSuite() { server_.reset(); }

    void SetUp() override {
        ASSERT_TRUE(server_->running()) << "python3 " << fault_server_script() << " did not start";
    }

    static std::string base(const std::string& scenario) { return server_->url("/" + scenario + "/v1"); }

    static RemoteEngine engine(const std::string& scenario, ConnectionOptions options = {}) {
        Result<RemoteEngine> e = RemoteEngine::create(base(scenario), std::move(options));
        EXPECT_TRUE(e.ok()) << e.error().message;
        return std::move(e).value();
    }

    static ChatRequest request(const std::string& model = "test-model") {
        ChatRequest r;
        r.model = model;
        r.messages = {{"system", "Be brief."}, {"user", "Say hello."}};
        return r;
    }

    // The last chat request the scenario received, as the server saw it.
    static nlohmann::json last(const std::string& scenario) { return server_->get_json("/" + scenario + "/last"); }

    static ConnectionOptions quick() {
        ConnectionOptions o;
        o.first_byte_timeout = 1500ms;
        o.idle_timeout = 1500ms;
        return o;
    }

    static std::unique_ptr<test::HttpTestServer> server_;
};

std::unique_ptr<test::HttpTestServer> RemoteEngineTest::server_;

TEST_F(RemoteEngineTest, ListsTheModels) {
    Result<std::vector<std::string>> models = engine("ok").list_models();
    ASSERT_TRUE(models.ok()) << models.error().message;
    EXPECT_EQ(*models, (std::vector<std::string>{"test-model", "other-model"}));
}

TEST_F(RemoteEngineTest, StreamsAnAnswerSplitAcrossReads) {
    std::string streamed;
    std::vector<std::string> pieces;
    ChatCallbacks callbacks;
    callbacks.on_text = [&](std::string_view piece) {
        streamed += piece;
        pieces.emplace_back(piece);
    };
    Result<ChatResult> result = engine("ok").chat(request(), callbacks);
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->text, kAnswer);
    EXPECT_EQ(streamed, kAnswer);
    EXPECT_EQ(pieces.size(), kAnswerPieces);  // one callback per delta, whole characters each
    EXPECT_EQ(result->finish_reason, "stop");
    EXPECT_FALSE(result->interruption);
    ASSERT_TRUE(result->usage);
    EXPECT_EQ(result->usage->prompt_tokens, 11u);
    EXPECT_EQ(result->usage->completion_tokens, kAnswerPieces);
    EXPECT_EQ(result->text_chunks, kAnswerPieces);
    EXPECT_EQ(result->model, "test-model");
    EXPECT_GT(result->time_to_first_token, 0.0);
    EXPECT_GT(result->generation_seconds, 0.0);
    EXPECT_GT(result->tokens_per_second(), 0.0);
}

TEST_F(RemoteEngineTest, SendsTheRequestAsOpenAiDefinesIt) {
    ChatRequest r = request();
    r.max_tokens = 64;
    r.temperature = 0.7f;
    r.top_p = 0.9f;
    r.seed = 42;
    r.stop = {"\n\n", "END"};
    r.presence_penalty = 0.5f;
    r.frequency_penalty = -0.25f;
    r.top_k = 40;
    r.chat_template_kwargs = {{"enable_thinking", false}};
    r.reasoning_effort = "low";
    ConnectionOptions o;
    o.api_key = "sk-test-123";
    ASSERT_TRUE(engine("ok", o).chat(r).ok());
    const nlohmann::json seen = last("ok");
    const nlohmann::json& body = seen.at("body");
    EXPECT_EQ(seen.at("authorization"), "Bearer sk-test-123");
    EXPECT_EQ(body.at("model"), "test-model");
    EXPECT_EQ(body.at("stream"), true);
    EXPECT_EQ(body.at("stream_options"), (nlohmann::json{{"include_usage", true}}));
    EXPECT_EQ(body.at("messages"), (nlohmann::json::array({{{"role", "system"}, {"content", "Be brief."}},
                                                           {{"role", "user"}, {"content", "Say hello."}}})));
    EXPECT_EQ(body.at("max_tokens"), 64);
    EXPECT_EQ(body.at("temperature"), 0.7);
    EXPECT_EQ(body.at("top_p"), 0.9);
    EXPECT_EQ(body.at("seed"), 42);
    EXPECT_EQ(body.at("stop"), (nlohmann::json{"\n\n", "END"}));
    EXPECT_EQ(body.at("presence_penalty"), 0.5);
    EXPECT_EQ(body.at("frequency_penalty"), -0.25);
    EXPECT_EQ(body.at("top_k"), 40);
    EXPECT_EQ(body.at("chat_template_kwargs"), (nlohmann::json{{"enable_thinking", false}}));
    EXPECT_EQ(body.at("reasoning_effort"), "low");
    // Fields not set are left to the server.
    EXPECT_FALSE(body.contains("min_p"));
    EXPECT_FALSE(body.contains("repeat_penalty"));

    // Without a key, no Authorization header at all.
    ASSERT_TRUE(engine("ok").chat(request()).ok());
    EXPECT_TRUE(last("ok").at("authorization").is_null());
    // Nor template variables or a reasoning effort when none is asked for.
    EXPECT_FALSE(last("ok").at("body").contains("chat_template_kwargs"));
    EXPECT_FALSE(last("ok").at("body").contains("reasoning_effort"));
}

TEST_F(RemoteEngineTest, AcceptsTheProtocolsVariants) {
    for (const char* scenario : {"crlf", "nousage", "nodone", "json"}) {
        std::string streamed;
        ChatCallbacks callbacks;
        callbacks.on_text = [&](std::string_view piece) { streamed += piece; };
        Result<ChatResult> result = engine(scenario).chat(request(), callbacks);
        ASSERT_TRUE(result.ok()) << scenario << ": " << result.error().message;
        EXPECT_EQ(result->text, kAnswer) << scenario;
        EXPECT_EQ(streamed, kAnswer) << scenario;
        EXPECT_EQ(result->finish_reason, "stop") << scenario;
        EXPECT_FALSE(result->interruption) << scenario;
        EXPECT_EQ(result->usage.has_value(), std::string(scenario) != "nousage") << scenario;
    }
}

// Events of a type the client does not listen for ("event: ping" with JSON data, a keep-alive
// with a timestamp) are ignored, as the SSE standard's client ignores them: they are neither
// text nor garbage. ("event: error" is listened for: AnErrorEventInTheStreamIsTheServersFailure.)
TEST_F(RemoteEngineTest, NamedEventsThatAreNotTheAnswerAreIgnored) {
    uint32_t pieces = 0;
    ChatCallbacks callbacks;
    callbacks.on_text = [&](std::string_view) { ++pieces; };
    Result<ChatResult> result = engine("ping").chat(request(), callbacks);
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->text, kAnswer);
    EXPECT_EQ(pieces, kAnswerPieces);
    EXPECT_EQ(result->finish_reason, "stop");
    EXPECT_FALSE(result->interruption) << result->interruption->message;
    ASSERT_TRUE(result->usage);
}

TEST_F(RemoteEngineTest, AsksAgainWithoutStreamOptionsWhenTheServerRefusesThem) {
    Result<ChatResult> result = engine("nostreamopts").chat(request());
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->text, kAnswer);
    EXPECT_FALSE(last("nostreamopts").at("body").contains("stream_options"));
}

// A reasoning model's thinking, sent apart from the text in either field servers use, reaches
// the caller apart from the text, streamed or not, and is no part of the text.
TEST_F(RemoteEngineTest, ReasoningIsKeptApartFromTheText) {
    const std::string thinking = "The user greets me; greet them back.";
    for (const std::string field : {"reasoning_content", "reasoning"}) {
        for (const std::string kind : {"think-", "thinkjson-"}) {
            const std::string scenario = kind + field;
            std::string streamed, thought, order;
            ChatCallbacks callbacks;
            callbacks.on_text = [&](std::string_view piece) {
                streamed += piece;
                if (order.empty() || order.back() != 't') order += 't';
            };
            callbacks.on_reasoning = [&](std::string_view piece) {
                thought += piece;
                if (order.empty() || order.back() != 'r') order += 'r';
            };
            Result<ChatResult> result = engine(scenario).chat(request(), callbacks);
            ASSERT_TRUE(result.ok()) << scenario << ": " << result.error().message;
            EXPECT_EQ(result->text, kAnswer) << scenario;
            EXPECT_EQ(streamed, kAnswer) << scenario;
            EXPECT_EQ(result->reasoning, thinking) << scenario;
            EXPECT_EQ(thought, thinking) << scenario;
            EXPECT_EQ(order, "rt") << scenario;  // the thinking first, then the text
            EXPECT_EQ(result->finish_reason, "stop") << scenario;
            EXPECT_FALSE(result->cut_while_reasoning()) << scenario;
            ASSERT_TRUE(result->usage) << scenario;
            EXPECT_EQ(result->completion_tokens(), 8u + kAnswerPieces) << scenario;
        }
        // Streamed, each piece of thinking is a chunk, and the first token is the first thought.
        Result<ChatResult> streamed = engine("think-" + field).chat(request());
        ASSERT_TRUE(streamed.ok()) << streamed.error().message;
        EXPECT_EQ(streamed->reasoning_chunks, 8u) << field;
        EXPECT_EQ(streamed->text_chunks, kAnswerPieces) << field;
        EXPECT_GT(streamed->time_to_first_token, 0.0) << field;
    }
}

// An answer cut by its token limit while the model was still thinking has no text, only
// reasoning: the result says so, and the thinking is kept.
TEST_F(RemoteEngineTest, AnAnswerCutWhileReasoningSaysSo) {
    for (const std::string field : {"reasoning_content", "reasoning"}) {
        Result<ChatResult> result = engine("thinkcut-" + field).chat(request());
        ASSERT_TRUE(result.ok()) << field << ": " << result.error().message;
        EXPECT_EQ(result->text, "") << field;
        EXPECT_EQ(result->reasoning, "The user greets me; greet them back.") << field;
        EXPECT_EQ(result->finish_reason, "length") << field;
        EXPECT_TRUE(result->cut_while_reasoning()) << field;
        EXPECT_FALSE(result->interruption) << field;
        EXPECT_GT(result->time_to_first_token, 0.0) << field;
    }
}

TEST_F(RemoteEngineTest, ReplaysARecordedLlamaCppPythonStream) {
    // tests/data/remote/llama_cpp_python_stream.sse: llama-cpp-python 0.3.36's server on
    // SmolLM2, "Name three colours.", max_tokens 48, temperature 0 (its bytes as sent).
    Result<ChatResult> result = engine("replay-llama_cpp_python_stream").chat(request("smollm2"));
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->finish_reason, "length");
    EXPECT_EQ(result->text_chunks, 48u);
    EXPECT_FALSE(result->usage);  // llama-cpp-python sends none
    EXPECT_EQ(result->completion_tokens(), 48u);
    EXPECT_EQ(result->text.rfind("1. Red: This is the most obvious colour", 0), 0u) << result->text;
    EXPECT_NE(result->text.find("\n\n2. Blue:"), std::string::npos) << result->text;
    EXPECT_EQ(result->model, "smollm2");
}

TEST_F(RemoteEngineTest, AStreamCutAfterNEventsKeepsThePartialText) {
    Result<ChatResult> result = engine("cut-3").chat(request());
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->text, "Hello, wörld");
    EXPECT_TRUE(result->interrupted());
    ASSERT_TRUE(result->interruption);
    EXPECT_EQ(result->interruption->code, ErrorCode::io);
    EXPECT_NE(result->interruption->message.find("the connection broke"), std::string::npos)
        << result->interruption->message;
    EXPECT_NE(result->interruption->message.find("test-model"), std::string::npos);
}

// A connection that breaks, or a server that goes silent, after the answer's finish_reason
// loses only the usage chunk and [DONE]: the answer is whole, not interrupted.
TEST_F(RemoteEngineTest, AStreamBrokenAfterItsFinishReasonIsWhole) {
    for (const std::string scenario : {"cutend", "stallend"}) {
        Result<ChatResult> result = engine(scenario, quick()).chat(request());
        ASSERT_TRUE(result.ok()) << scenario << ": " << result.error().message;
        EXPECT_EQ(result->text, kAnswer) << scenario;
        EXPECT_EQ(result->finish_reason, "stop") << scenario;
        EXPECT_FALSE(result->interruption) << scenario << ": " << result->interruption.value_or(Error{}).message;
    }
}

TEST_F(RemoteEngineTest, AStreamClosedBeforeItsEndIsInterrupted) {
    Result<ChatResult> result = engine("eof-4").chat(request());
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->text, "Hello, wörld!");
    EXPECT_TRUE(result->interrupted());
    ASSERT_TRUE(result->interruption);
    EXPECT_NE(result->interruption->message.find("closed the stream before the answer ended"), std::string::npos)
        << result->interruption->message;
}

TEST_F(RemoteEngineTest, AnEmptyStreamIsTheServersFailure) {
    Result<ChatResult> result = engine("empty").chat(request());
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_TRUE(result->interrupted());
    EXPECT_EQ(result->text, "");
    ASSERT_TRUE(result->interruption);
    EXPECT_EQ(result->interruption->code, ErrorCode::device_failed);
    EXPECT_NE(result->interruption->message.find("without sending anything"), std::string::npos)
        << result->interruption->message;
}

TEST_F(RemoteEngineTest, ASilentServerIsNamedAfterTheTimeouts) {
    const auto start = std::chrono::steady_clock::now();
    // Silent from the start: no answer at all.
    Result<ChatResult> silent = engine("silent", quick()).chat(request());
    ASSERT_FALSE(silent.ok());
    EXPECT_EQ(silent.error().code, ErrorCode::io);
    EXPECT_NE(silent.error().message.find("no answer came for 1.5 s"), std::string::npos) << silent.error().message;
    // Headers, then nothing: the answer began, so it is an interrupted result.
    Result<ChatResult> headers = engine("headers", quick()).chat(request());
    ASSERT_TRUE(headers.ok()) << headers.error().message;
    EXPECT_TRUE(headers->interrupted());
    EXPECT_EQ(headers->text, "");
    // Silent in the middle: the idle timeout, with the text so far.
    Result<ChatResult> stalled = engine("stall-2", quick()).chat(request());
    ASSERT_TRUE(stalled.ok()) << stalled.error().message;
    EXPECT_EQ(stalled->text, "Hello,");
    EXPECT_TRUE(stalled->interrupted());
    ASSERT_TRUE(stalled->interruption);
    EXPECT_NE(stalled->interruption->message.find("went silent for 1.5 s"), std::string::npos)
        << stalled->interruption->message;
    // Each waited about its timeout, not the server's 30 s.
    EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
}

// A server that accepts the connection and never answers is named after the model list's own
// short wait (metadata_timeout), not after the first byte of a generation's (300 s here).
TEST_F(RemoteEngineTest, AStuckServerFailsTheModelListAfterItsOwnWait) {
    ConnectionOptions o;
    o.metadata_timeout = 1500ms;
    ASSERT_EQ(o.first_byte_timeout, ConnectionOptions{}.first_byte_timeout);
    Result<std::vector<std::string>> models = engine("stuck", o).list_models();
    ASSERT_FALSE(models.ok());
    const std::string& message = models.error().message;
    EXPECT_EQ(models.error().code, ErrorCode::io) << message;
    EXPECT_NE(message.find("listing the models at " + base("stuck") + ": no answer came for 1.5 s"), std::string::npos)
        << message;
    EXPECT_NE(message.find("the server accepted the connection"), std::string::npos) << message;
    EXPECT_NE(message.find("Check that the server is running"), std::string::npos) << message;

    // Metrics are such a request too.
    Result<PrometheusText> metrics = fetch_metrics(server_->url("/silent/metrics/dcgm_exporter"), o);
    ASSERT_FALSE(metrics.ok());
    EXPECT_NE(metrics.error().message.find("no answer came for 1.5 s"), std::string::npos) << metrics.error().message;

    // The shorter of the two waits applies: a caller's short first_byte_timeout still holds.
    ConnectionOptions shorter;
    shorter.first_byte_timeout = 1200ms;
    Result<std::vector<std::string>> capped = engine("stuck", shorter).list_models();
    ASSERT_FALSE(capped.ok());
    EXPECT_NE(capped.error().message.find("no answer came for 1.2 s"), std::string::npos) << capped.error().message;
}

TEST_F(RemoteEngineTest, GarbageInTheStreamIsNamedWithTheLine) {
    Result<ChatResult> result = engine("garbage-2").chat(request());
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->text, "Hello,");
    EXPECT_TRUE(result->interrupted());
    ASSERT_TRUE(result->interruption);
    const std::string& message = result->interruption->message;
    EXPECT_EQ(result->interruption->code, ErrorCode::format);
    EXPECT_NE(message.find("not a JSON object: 'data: <html><body>this is not JSON"), std::string::npos) << message;
    EXPECT_NE(message.find("...'"), std::string::npos) << message;  // truncated
    EXPECT_LT(message.size(), 400u);

    Result<ChatResult> junk = engine("junk-1").chat(request());
    ASSERT_TRUE(junk.ok()) << junk.error().message;
    EXPECT_EQ(junk->text, "Hello");
    ASSERT_TRUE(junk->interruption);
    EXPECT_NE(junk->interruption->message.find("not a server-sent event: '<html><head><title>502 Bad Gateway"),
              std::string::npos)
        << junk->interruption->message;
}

// A 200 that is a web page (a captive portal, a proxy's sign-in) is named as what it is,
// also when its last line has no line end: not as a server that crashed mid-answer.
TEST_F(RemoteEngineTest, AWebPageInsteadOfAStreamIsNamed) {
    Result<ChatResult> page = engine("page").chat(request());
    ASSERT_TRUE(page.ok()) << page.error().message;
    EXPECT_TRUE(page->text.empty());
    ASSERT_TRUE(page->interruption);
    EXPECT_EQ(page->interruption->code, ErrorCode::format);
    EXPECT_NE(page->interruption->message.find("not a server-sent event: '<html><body>Sign in to use this network"),
              std::string::npos)
        << page->interruption->message;
}

TEST_F(RemoteEngineTest, AnErrorEventInTheStreamIsTheServersFailure) {
    Result<ChatResult> result = engine("errevent-3").chat(request());
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->text, "Hello, wörld");
    ASSERT_TRUE(result->interruption);
    EXPECT_EQ(result->interruption->code, ErrorCode::device_failed);
    EXPECT_NE(result->interruption->message.find("the server reported an error in the middle of the answer: the "
                                                 "engine failed: out of KV cache blocks"),
              std::string::npos)
        << result->interruption->message;

    // Before any text, it is worded as what it was: no answer had begun.
    Result<ChatResult> first = engine("errevent-0").chat(request());
    ASSERT_TRUE(first.ok()) << first.error().message;
    EXPECT_EQ(first->text, "");
    ASSERT_TRUE(first->interruption);
    EXPECT_EQ(first->interruption->code, ErrorCode::device_failed);
    EXPECT_NE(first->interruption->message.find("the server reported an error before the answer began: the engine "
                                                "failed: out of KV cache blocks"),
              std::string::npos)
        << first->interruption->message;
    EXPECT_EQ(first->interruption->message.find("middle"), std::string::npos) << first->interruption->message;
}

// Some servers and proxies answer a failure with 200 and an OpenAI error object: the server's
// own message is shown (its echo of the key blanked), not "neither a stream nor a chat
// completion".
TEST_F(RemoteEngineTest, AnErrorObjectSentWith200IsTheServersMessage) {
    ConnectionOptions o;
    o.api_key = "sk-echoed-77";
    Result<ChatResult> result = engine("errjson", o).chat(request());
    ASSERT_FALSE(result.ok());
    const std::string& message = result.error().message;
    EXPECT_EQ(result.error().code, ErrorCode::device_failed) << message;
    EXPECT_NE(message.find("asking 'test-model' at " + base("errjson") +
                           ": the server answered with an error instead of a completion (HTTP 200): The model is "
                           "overloaded, try again later (request for key [the key])"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find("neither a stream nor"), std::string::npos) << message;
    EXPECT_EQ(message.find("sk-echoed-77"), std::string::npos) << message;

    Result<std::vector<std::string>> models = engine("errjson", o).list_models();
    ASSERT_FALSE(models.ok());
    EXPECT_EQ(models.error().code, ErrorCode::device_failed) << models.error().message;
    EXPECT_NE(models.error().message.find("listing the models at " + base("errjson") +
                                          ": the server answered with an error instead of its models (HTTP 200): "
                                          "The model is overloaded"),
              std::string::npos)
        << models.error().message;
    EXPECT_EQ(models.error().message.find("sk-echoed-77"), std::string::npos) << models.error().message;
}

TEST_F(RemoteEngineTest, CancellingClosesTheStreamAndKeepsTheText) {
    std::atomic<int> pieces{0};
    ChatCallbacks callbacks;
    callbacks.on_text = [&](std::string_view) { ++pieces; };
    callbacks.cancelled = [&] { return pieces.load() >= 5; };
    const auto start = std::chrono::steady_clock::now();
    Result<ChatResult> result = engine("slow").chat(request(), callbacks);
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->finish_reason, "cancelled");
    EXPECT_TRUE(result->cancelled());
    EXPECT_FALSE(result->interruption);
    EXPECT_GE(result->text_chunks, 5u);
    EXPECT_LT(result->text_chunks, 100u);
    EXPECT_EQ(result->text.rfind(" 0 1 2 3 4", 0), 0u) << result->text;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);  // the stream runs 20 s
    // Cancelled before anything arrives (a silent server): a result too, not an error.
    std::atomic<bool> cancel{false};
    ChatCallbacks early;
    early.cancelled = [&] { return cancel.load(); };
    std::thread canceller([&] {
        std::this_thread::sleep_for(300ms);
        cancel = true;
    });
    Result<ChatResult> silent = engine("silent").chat(request(), early);
    canceller.join();
    ASSERT_TRUE(silent.ok()) << silent.error().message;
    EXPECT_EQ(silent->finish_reason, "cancelled");
}

TEST_F(RemoteEngineTest, HttpErrorsSayWhatToDo) {
    struct Case {
        const char* scenario;
        ErrorCode code;
        std::vector<std::string> words;
    };
    const std::vector<Case> cases = {
        {"status-401",
         ErrorCode::invalid_argument,
         {"needs an API key", "HTTP 401 (Unauthorized): You didn't provide an API key.", "give one"}},
        {"status-403", ErrorCode::invalid_argument, {"forbids", "HTTP 403"}},
        {"status-429",
         ErrorCode::io,
         {"rate limit", "HTTP 429 (Too Many Requests): Rate limit reached", "retry after 7 s"}},
        {"status-500",
         ErrorCode::device_failed,
         {"the server failed", "HTTP 500 (Internal Server Error): CUDA error: an illegal memory access"}},
        {"status-503",
         ErrorCode::device_failed,
         {"HTTP 503 (Service Unavailable): upstream connect error or disconnect/reset before headers"}},
        {"status-400", ErrorCode::context_full, {"too long", "maximum context length is 2048 tokens"}},
    };
    for (const Case& c : cases) {
        Result<ChatResult> result = engine(c.scenario).chat(request());
        ASSERT_FALSE(result.ok()) << c.scenario;
        EXPECT_EQ(result.error().code, c.code) << c.scenario << ": " << result.error().message;
        for (const std::string& word : c.words) {
            EXPECT_NE(result.error().message.find(word), std::string::npos)
                << c.scenario << ": " << result.error().message;
        }
        EXPECT_NE(result.error().message.find(base(c.scenario)), std::string::npos) << result.error().message;
    }
}

// An error body that is partly binary: its text stays readable, and every byte a terminal
// could act on or could not show (controls, bytes that are not UTF-8) is escaped.
TEST_F(RemoteEngineTest, AnErrorBodyThatIsNotTextIsShownEscaped) {
    Result<std::vector<std::string>> listed = engine("status-502").list_models();
    ASSERT_FALSE(listed.ok());
    const std::string& message = listed.error().message;
    EXPECT_NE(message.find("HTTP 502 (Bad Gateway): café \\x1b[31mred \\x80\\xff\\xfe \\xc0\\xaf "
                           "\\xed\\xa0\\x80 \\u009b2J end \\xe2\\x9c"),
              std::string::npos)
        << message;
    for (const char c : message) {
        EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) << message;
    }
    EXPECT_NO_THROW((void)nlohmann::json(message).dump()) << "not valid UTF-8: " << message;
}

// A redirect is not followed (the key and the prompt go only where the user said): the
// error names where the server points instead.
TEST_F(RemoteEngineTest, ARedirectIsNamedNotFollowed) {
    Result<std::vector<std::string>> listed = engine("moved").list_models();
    ASSERT_FALSE(listed.ok());
    EXPECT_EQ(listed.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(listed.error().message.find("redirects to /ok/v1/models (HTTP 308 (Permanent Redirect)): give the URL "
                                          "it redirects to"),
              std::string::npos)
        << listed.error().message;
    Result<ChatResult> chat = engine("moved").chat(request());
    ASSERT_FALSE(chat.ok());
    EXPECT_NE(chat.error().message.find("redirects to /ok/v1/chat/completions"), std::string::npos)
        << chat.error().message;
}

TEST_F(RemoteEngineTest, AnUnknownModelListsTheServersModels) {
    Result<ChatResult> result = engine("status-404").chat(request("missing-model"));
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(result.error().message.find("the server has no model 'missing-model'; it has: test-model, other-model"),
              std::string::npos)
        << result.error().message;
}

TEST_F(RemoteEngineTest, TheKeyIsSentButNeverShown) {
    ConnectionOptions right;
    right.api_key = "sekrit-key-42";
    Result<ChatResult> ok = engine("key-sekrit-key-42", right).chat(request());
    ASSERT_TRUE(ok.ok()) << ok.error().message;
    EXPECT_EQ(ok->text, kAnswer);
    ASSERT_TRUE(engine("key-sekrit-key-42", right).list_models().ok());

    ConnectionOptions wrong;
    wrong.api_key = "wrong-key-99";
    Result<ChatResult> refused = engine("key-sekrit-key-42", wrong).chat(request());
    ASSERT_FALSE(refused.ok());
    // The server echoes the key it got; the message must not.
    EXPECT_EQ(refused.error().message.find("wrong-key-99"), std::string::npos) << refused.error().message;
    EXPECT_NE(refused.error().message.find("Incorrect API key provided: [the key]"), std::string::npos)
        << refused.error().message;
    EXPECT_NE(refused.error().message.find("check the key"), std::string::npos);
    Result<std::vector<std::string>> models = engine("key-sekrit-key-42", wrong).list_models();
    ASSERT_FALSE(models.ok());
    EXPECT_EQ(models.error().message.find("wrong-key-99"), std::string::npos) << models.error().message;
}

TEST_F(RemoteEngineTest, AnUnreachableServerIsNamed) {
    const std::string url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/v1";
    Result<RemoteEngine> e = RemoteEngine::create(url);
    ASSERT_TRUE(e.ok());
    Result<ChatResult> result = e->chat(request());
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.error().code, ErrorCode::io);
    EXPECT_NE(result.error().message.find("cannot connect"), std::string::npos) << result.error().message;
    EXPECT_NE(result.error().message.find("is the server running"), std::string::npos);
    EXPECT_NE(result.error().message.find(url), std::string::npos);
    Result<std::vector<std::string>> models = e->list_models();
    ASSERT_FALSE(models.ok());
    EXPECT_NE(models.error().message.find("listing the models at " + url + ": cannot connect"), std::string::npos)
        << models.error().message;
}

TEST_F(RemoteEngineTest, TheBaseUrlIsNormalised) {
    for (const std::string& form : {server_->url("/ok/v1"), server_->url("/ok/v1/"),
                                    server_->url("/ok/v1/chat/completions"), server_->url("/ok/v1/models")}) {
        Result<RemoteEngine> e = RemoteEngine::create(form);
        ASSERT_TRUE(e.ok()) << form;
        EXPECT_EQ(e->base_url(), base("ok")) << form;
        Result<std::vector<std::string>> models = e->list_models();
        EXPECT_TRUE(models.ok()) << form << ": " << models.error().message;
    }
    // A bare host gets /v1.
    for (const std::string& form : {server_->url(""), server_->url("/")}) {
        Result<RemoteEngine> e = RemoteEngine::create(form);
        ASSERT_TRUE(e.ok()) << form;
        EXPECT_EQ(e->base_url(), server_->url("/v1")) << form;
        Result<std::vector<std::string>> models = e->list_models();
        EXPECT_TRUE(models.ok()) << form << ": " << models.error().message;
    }
    EXPECT_FALSE(RemoteEngine::create("127.0.0.1:8000").ok());
    EXPECT_FALSE(RemoteEngine::create("ftp://127.0.0.1/v1").ok());
    EXPECT_FALSE(RemoteEngine::create("http://user:pw@127.0.0.1/v1").ok());
}

// A base URL whose path ends in no version (Gemini's ".../v1beta/openai") is used as given:
// models and chat reach the server under that prefix, not under an added "/v1".
TEST_F(RemoteEngineTest, ABaseUrlWithAPathIsUsedAsGiven) {
    const std::string prefix = server_->url("/ok/v1beta/openai");
    Result<RemoteEngine> e = RemoteEngine::create(prefix);
    ASSERT_TRUE(e.ok()) << e.error().message;
    EXPECT_EQ(e->base_url(), prefix);
    Result<std::vector<std::string>> models = e->list_models();
    ASSERT_TRUE(models.ok()) << models.error().message;
    EXPECT_EQ(*models, (std::vector<std::string>{"test-model", "other-model"}));
    Result<ChatResult> result = e->chat(request());
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->text, kAnswer);
}

// https to a server with a self-signed certificate for 127.0.0.1: refused by default, trusted
// when the certificate is given as the CA file.
class RemoteTlsTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (std::system("openssl version > /dev/null 2>&1") != 0)
            GTEST_SKIP() << "no openssl command to make a certificate";
        server_ = std::make_unique<test::HttpTestServer>(
            fault_server_script(), std::vector<std::string>{"--fixtures", (test::data_dir() / "remote").string(),
                                                            "--tls", dir_.path().string()});
        ASSERT_TRUE(server_->running()) << "the TLS test server did not start";
        base_ = "https://127.0.0.1:" + std::to_string(server_->port()) + "/ok/v1";
    }

    test::TempDir dir_;
    std::unique_ptr<test::HttpTestServer> server_;
    std::string base_;
};

TEST_F(RemoteTlsTest, AnUntrustedCertificateIsRefusedAndATrustedOneWorks) {
    Result<RemoteEngine> untrusted = RemoteEngine::create(base_);
    ASSERT_TRUE(untrusted.ok());
    Result<std::vector<std::string>> refused = untrusted->list_models();
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::io);
    EXPECT_NE(refused.error().message.find("TLS error: the server's certificate cannot be trusted"), std::string::npos)
        << refused.error().message;
    EXPECT_NE(refused.error().message.find("as the CA file"), std::string::npos);

    ConnectionOptions trusted;
    trusted.ca_file = dir_ / "cert.pem";
    Result<RemoteEngine> e = RemoteEngine::create(base_, trusted);
    ASSERT_TRUE(e.ok());
    EXPECT_FALSE(e->transport_warning());
    Result<ChatResult> result = e->chat({"test-model", {{"user", "hi"}}});
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result->text, kAnswer);

    // The same certificate does not vouch for another name of the host.
    Result<RemoteEngine> other_name =
        RemoteEngine::create("https://localhost:" + std::to_string(server_->port()) + "/ok/v1", trusted);
    ASSERT_TRUE(other_name.ok());
    Result<std::vector<std::string>> mismatch = other_name->list_models();
    ASSERT_FALSE(mismatch.ok());
    EXPECT_NE(mismatch.error().message.find("TLS error"), std::string::npos) << mismatch.error().message;

    // Plain http to a TLS port is named as such.
    Result<RemoteEngine> plain = RemoteEngine::create("http://127.0.0.1:" + std::to_string(server_->port()) + "/ok/v1");
    ASSERT_TRUE(plain.ok());
    Result<std::vector<std::string>> garbled = plain->list_models();
    ASSERT_FALSE(garbled.ok());
    // And a missing CA file is named.
    ConnectionOptions missing;
    missing.ca_file = dir_ / "no-such.pem";
    Result<std::vector<std::string>> no_file = RemoteEngine::create(base_, missing)->list_models();
    ASSERT_FALSE(no_file.ok());
    EXPECT_NE(no_file.error().message.find("TLS error"), std::string::npos) << no_file.error().message;
}

}  // namespace
}  // namespace powerhouse::remote
