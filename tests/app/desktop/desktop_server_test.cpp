// Settings → Server (ServerController) on the real SmolLM2 model: the app serves its loaded
// model over the OpenAI API while a conversation answers, real HTTP requests from a client
// on another thread get their answers, and neither side sees the other's tokens; switching it
// off, unloading the model, a public address without a key and a port in use.
#include <gtest/gtest.h>

#include <QSignalSpy>
#include <QTest>

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "chat_controller.h"
#include "desktop_test_support.h"
#include "engine_client.h"
#include "powerhouse/synth.h"
#include "server_controller.h"
#include "store/store.h"
#include "support/test_support.h"

namespace {

using nlohmann::json;
using powerhouse::store::MessageState;
using powerhouse::store::Store;
using powerhouse::test::open_store;

constexpr uint64_t kFirstServerId = uint64_t{1} << 40;  // ApiServer::kFirstRequestId

using powerhouse::test::reference_answer;
using powerhouse::test::wait_for;

// An HTTP exchange on a thread of its own, so that the test's event loop runs meanwhile.
struct Reply {
    int status = 0;  // 0: no answer (the connection failed)
    std::string body;
    std::string retry_after;  // the Retry-After header, if any
};

class Request {
public:
    Request(int port, std::string method, std::string path, std::string body = {}, std::string key = {})
        : thread_([this, port, method = std::move(method), path = std::move(path), body = std::move(body),
                   key = std::move(key)] {
              httplib::Client client("127.0.0.1", port);
              client.set_connection_timeout(5, 0);
              client.set_read_timeout(120, 0);
              httplib::Headers headers;
              if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
              httplib::Result r = method == "GET" ? client.Get(path.c_str(), headers)
                                                  : client.Post(path.c_str(), headers, body, "application/json");
              if (r) {
                  reply_.status = r->status;
                  reply_.body = r->body;
                  reply_.retry_after = r->get_header_value("Retry-After");
              }
              done_ = true;
          }) {}
    ~Request() {
        if (thread_.joinable()) thread_.join();
    }

    // Waits (running the event loop) for the answer.
    Reply wait() {
        EXPECT_TRUE(wait_for([this] { return done_.load(); }));
        thread_.join();
        return reply_;
    }

private:
    Reply reply_;
    std::atomic<bool> done_{false};
    std::thread thread_;
};

Reply get(int port, const std::string& path, const std::string& key = {}) {
    return Request(port, "GET", path, {}, key).wait();
}

class ServerControllerTest : public ::testing::Test {
protected:
    void SetUp() override {
        store_ = std::make_unique<Store>(open_store(dir_));
        engine_ = std::make_unique<EngineClient>();
        chat_ = std::make_unique<ChatController>(*store_, *engine_);
        powerhouse::GenerationSettings settings;
        settings.max_tokens = 32;
        settings.sampling.temperature = 0;
        chat_->setGenerationSettings(settings);
        server_ = std::make_unique<ServerController>(*store_, *engine_);
        // What the app's side of the engine client delivers: only the app's own requests.
        QObject::connect(engine_.get(), &EngineClient::tokens, engine_.get(),
                         [this](quint64 id, const QString&) { appIds_.insert(id); });
        QObject::connect(engine_.get(), &EngineClient::finished, engine_.get(),
                         [this](quint64 id, const QString&, const QVariantMap&) { appIds_.insert(id); });
    }

    void TearDown() override {
        server_.reset();
        chat_.reset();
        engine_.reset();
    }

    void load() {
        powerhouse::ModelOptions options;
        options.n_ctx = 1024;
        options.n_threads = 2;
        chat_->loadModel(QString::fromStdString(powerhouse::test::test_model_path().string()), options);
        ASSERT_TRUE(wait_for([&] { return chat_->modelState() != ChatController::ModelState::Loading; }));
        ASSERT_EQ(chat_->modelState(), ChatController::ModelState::Ready) << chat_->errorText().toStdString();
    }

    bool wait_running() {
        return wait_for([&] { return server_->running() || server_->state() == "error"; }) && server_->running();
    }

    powerhouse::test::TempDir dir_;
    std::unique_ptr<Store> store_;
    std::unique_ptr<EngineClient> engine_;
    std::unique_ptr<ChatController> chat_;
    std::unique_ptr<ServerController> server_;
    std::set<quint64> appIds_;
};

// The server answers /v1/models and a chat completion while a conversation answers in the
// app; each gets exactly its own greedy answer (llama.cpp's), and switching the server off
// closes the port.
TEST_F(ServerControllerTest, ServesTheLoadedModelWhileTheAppChats) {
    server_->setPort(0);  // any free port
    server_->setEnabled(true);
    EXPECT_FALSE(server_->running());
    EXPECT_EQ(server_->state(), "no_model");
    EXPECT_TRUE(server_->statusText().contains("load a model first")) << server_->statusText().toStdString();
    ASSERT_NO_FATAL_FAILURE(load());
    ASSERT_TRUE(wait_running()) << server_->error().toStdString();
    const int port = server_->boundPort();
    ASSERT_GT(port, 0);
    EXPECT_EQ(server_->address(), QStringLiteral("http://127.0.0.1:%1").arg(port));
    EXPECT_EQ(server_->modelId(), "SmolLM2-135M-Instruct.Q4_1");
    EXPECT_TRUE(server_->curlExample().contains(server_->address() + "/v1/chat/completions"));
    EXPECT_TRUE(server_->pythonExample().contains(server_->address() + "/v1"));
    EXPECT_TRUE(server_->statusText().contains("Running")) << server_->statusText().toStdString();

    const Reply models = get(port, "/v1/models");
    ASSERT_EQ(models.status, 200) << models.body;
    EXPECT_EQ(json::parse(models.body).at("data").at(0).at("id"), "SmolLM2-135M-Instruct.Q4_1");

    // The app answers a conversation; once its answer streams, a client asks the server.
    chat_->send("Write a Python function that reverses a string.");
    ASSERT_TRUE(wait_for([&] {
        const auto* m = chat_->messages()->at(1);
        return m != nullptr && !m->content.empty();
    }));
    EXPECT_TRUE(chat_->generating()) << "the app is still answering when the request comes";
    const json body = {{"model", "SmolLM2-135M-Instruct.Q4_1"},
                       {"messages", json::array({{{"role", "user"}, {"content", "What is the capital of France?"}}})},
                       {"max_tokens", 8},
                       {"temperature", 0}};
    Request completion(port, "POST", "/v1/chat/completions", body.dump());
    const Reply answer = completion.wait();
    ASSERT_EQ(answer.status, 200) << answer.body;
    const json reply = json::parse(answer.body);
    const std::string served = reply.at("choices").at(0).at("message").at("content").get<std::string>();
    EXPECT_FALSE(served.empty());
    EXPECT_EQ(reply.at("usage").at("completion_tokens"), 8);
    EXPECT_EQ(reference_answer("chat_capital").substr(0, served.size()), served);
    // Embeddings on the same engine, beside the app's answer.
    const json embed_body = {{"model", "SmolLM2-135M-Instruct.Q4_1"}, {"input", "What is the capital of France?"}};
    const Reply embedded = Request(port, "POST", "/v1/embeddings", embed_body.dump()).wait();
    ASSERT_EQ(embedded.status, 200) << embedded.body;
    EXPECT_EQ(json::parse(embedded.body).at("data").at(0).at("embedding").size(), 576u);
    ASSERT_TRUE(wait_for([&] { return !chat_->generatingAny(); }));

    // The app's conversation has its own answer, whole and untouched by the server's tokens.
    chat_->flushWrites();  // the chat's writes run on its writer thread
    auto stored = store_->messages(chat_->currentConversationId());
    ASSERT_TRUE(stored);
    ASSERT_EQ(stored->size(), 2u);
    EXPECT_EQ((*stored)[1].state, MessageState::complete);
    const std::string own = (*stored)[1].content;
    EXPECT_GT(own.size(), 20u);
    EXPECT_EQ(reference_answer("chat_code").substr(0, own.size()), own);
    EXPECT_EQ(chat_->messages()->at(1)->content, own);
    ASSERT_FALSE(appIds_.empty());
    for (quint64 id : appIds_) EXPECT_LT(id, kFirstServerId) << "the app saw a server request's event";
    EXPECT_TRUE(wait_for([&] { return server_->requestsServed() == 2; })) << "the chat and the embeddings";

    // Switched off: stopped, the port closed, and kept so in the store.
    server_->setEnabled(false);
    ASSERT_TRUE(wait_for([&] { return server_->state() == "off"; }));
    EXPECT_FALSE(server_->running());
    EXPECT_EQ(get(port, "/health").status, 0) << "connection refused";
    EngineClient other;  // one ServerController per engine client: it owns the client's event hook
    EXPECT_FALSE(ServerController(*store_, other).enabled());
}

// The server writes a required call's grammar in the format of the template the model chats
// with: a chosen template (Qwen3-Coder's XML calls, on SmolLM2) and not the file's own
// (SmolLM2's, whose generic JSON blocks the engine would not read as Qwen3-Coder calls).
TEST_F(ServerControllerTest, ToolCallsFollowTheTemplateTheModelChatsWith) {
    server_->setPort(0);
    server_->setEnabled(true);
    powerhouse::ModelOptions options;
    options.n_ctx = 2048;
    options.n_threads = 2;
    options.chat_template =
        powerhouse::test::read_file(powerhouse::test::data_dir() / "templates" / "Qwen3-Coder.jinja");
    chat_->loadModel(QString::fromStdString(powerhouse::test::test_model_path().string()), options);
    ASSERT_TRUE(wait_for([&] { return chat_->modelState() != ChatController::ModelState::Loading; }));
    ASSERT_EQ(chat_->modelState(), ChatController::ModelState::Ready) << chat_->errorText().toStdString();
    ASSERT_TRUE(wait_running()) << server_->error().toStdString();
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
        "required": ["city"]}}}])");
    const json body = {{"model", "SmolLM2-135M-Instruct.Q4_1"},
                       {"messages", json::array({{{"role", "user"}, {"content", "The weather in Paris?"}}})},
                       {"tools", tools},
                       {"tool_choice", "required"},
                       {"max_tokens", 80},
                       {"temperature", 0}};
    const Reply answer = Request(server_->boundPort(), "POST", "/v1/chat/completions", body.dump()).wait();
    ASSERT_EQ(answer.status, 200) << answer.body;
    const json message = json::parse(answer.body).at("choices").at(0).at("message");
    ASSERT_TRUE(message.contains("tool_calls")) << answer.body;
    EXPECT_EQ(message.at("tool_calls").at(0).at("function").at("name"), "get_weather");
    EXPECT_TRUE(
        json::parse(message.at("tool_calls").at(0).at("function").at("arguments").get<std::string>()).contains("city"))
        << answer.body;
}

// Loading another model stops the server before the model goes; it starts again once the
// model is in, and an unload stops it for good.
TEST_F(ServerControllerTest, StopsBeforeTheModelGoesAndFollowsTheNextOne) {
    server_->setPort(0);
    server_->setEnabled(true);
    ASSERT_NO_FATAL_FAILURE(load());
    ASSERT_TRUE(wait_running()) << server_->error().toStdString();
    const int first = server_->boundPort();
    QSignalSpy changes(server_.get(), &ServerController::changed);
    ASSERT_NO_FATAL_FAILURE(load());  // the same file again: a new model as far as the engine goes
    EXPECT_GE(changes.count(), 1);
    ASSERT_TRUE(wait_running()) << server_->error().toStdString();
    EXPECT_EQ(get(server_->boundPort(), "/health").status, 200);
    if (server_->boundPort() != first) {
        EXPECT_EQ(get(first, "/health").status, 0);
    }

    const int port = server_->boundPort();
    engine_->unload();
    EXPECT_FALSE(server_->running()) << "stopped before the unload is submitted";
    ASSERT_TRUE(wait_for([&] { return server_->state() == "no_model"; })) << server_->state().toStdString();
    EXPECT_EQ(get(port, "/health").status, 0);
    EXPECT_TRUE(server_->statusText().contains("load a model first"));
}

// Quitting while a client waits for a long answer: the controller's destructor stops the
// server, the answer is cut short, and the destructor returns (no hang).
TEST_F(ServerControllerTest, QuittingWithARequestInFlightDoesNotHang) {
    server_->setPort(0);
    server_->setEnabled(true);
    ASSERT_NO_FATAL_FAILURE(load());
    ASSERT_TRUE(wait_running()) << server_->error().toStdString();
    int running = 0;
    QObject::connect(
        engine_.get(), &EngineClient::schedulerStats, engine_.get(),
        [&](const powerhouse::SchedulerStats& s) { running = std::max(running, static_cast<int>(s.running)); });
    const json body = {{"model", "SmolLM2-135M-Instruct.Q4_1"},
                       {"messages", json::array({{{"role", "user"}, {"content", "Write a very long story."}}})},
                       {"max_tokens", 900},
                       {"temperature", 0}};
    Request completion(server_->boundPort(), "POST", "/v1/chat/completions", body.dump());
    ASSERT_TRUE(wait_for([&] { return running >= 1; })) << "the server's request runs in the engine";
    const auto before = std::chrono::steady_clock::now();
    server_.reset();
    EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(30));
    const Reply cut = completion.wait();
    if (cut.status != 0) {
        ASSERT_EQ(cut.status, 200) << cut.body;
        EXPECT_LT(json::parse(cut.body).at("usage").at("completion_tokens").get<int>(), 900);
    }
    for (quint64 id : appIds_) EXPECT_LT(id, kFirstServerId) << "the app saw a server request's event";
}

// Held (the app's efficiency sweep holds it): new requests get 503 with the reason and
// Retry-After and /health says busy, a server started while held is held too; released,
// requests are answered again.
TEST_F(ServerControllerTest, HeldRequestsGetTheReasonUntilReleased) {
    server_->setPort(0);
    server_->holdRequests("the GPUs are being measured", 60);
    server_->setEnabled(true);
    ASSERT_NO_FATAL_FAILURE(load());
    ASSERT_TRUE(wait_running()) << server_->error().toStdString();
    const int port = server_->boundPort();
    const std::string body = json{{"model", "SmolLM2-135M-Instruct.Q4_1"},
                                  {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                                  {"max_tokens", 4},
                                  {"temperature", 0}}
                                 .dump();
    const Reply held = Request(port, "POST", "/v1/chat/completions", body).wait();
    ASSERT_EQ(held.status, 503) << held.body;
    const json error = json::parse(held.body).at("error");
    EXPECT_EQ(error.at("message"), "the GPUs are being measured");
    EXPECT_EQ(error.at("code"), "busy");
    EXPECT_EQ(held.retry_after, "60");
    const Reply busy = get(port, "/health");
    EXPECT_EQ(busy.status, 200);
    EXPECT_EQ(json::parse(busy.body).at("status"), "busy") << busy.body;
    EXPECT_EQ(json::parse(busy.body).at("message"), "the GPUs are being measured");

    server_->releaseRequests();
    const Reply answered = Request(port, "POST", "/v1/chat/completions", body).wait();
    EXPECT_EQ(answered.status, 200) << answered.body;
    EXPECT_EQ(json::parse(get(port, "/health").body).at("status"), "ok");

    server_->holdRequests("again", 0);  // held while it runs; no Retry-After asked for
    const Reply again = Request(port, "POST", "/v1/chat/completions", body).wait();
    EXPECT_EQ(again.status, 503);
    EXPECT_TRUE(again.retry_after.empty());
}

// Any address but loopback needs a key: refused, with the reason shown, until one is made;
// the key is shown once, kept in the store, and required by the server.
TEST_F(ServerControllerTest, APublicAddressNeedsAKey) {
    server_->setPort(0);
    server_->setHost("0.0.0.0");
    server_->setEnabled(true);
    EXPECT_TRUE(server_->keyRequired());
    EXPECT_EQ(server_->state(), "error");
    EXPECT_TRUE(server_->error().contains("generate an API key")) << server_->error().toStdString();
    EXPECT_EQ(server_->statusText(), server_->error());
    ASSERT_NO_FATAL_FAILURE(load());
    EXPECT_FALSE(server_->running());
    EXPECT_EQ(server_->state(), "error");
    EXPECT_TRUE(server_->error().contains("generate an API key")) << server_->error().toStdString();

    server_->generateApiKey();
    const std::string key = server_->shownApiKey().toStdString();
    ASSERT_EQ(key.size(), 64u);
    EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_TRUE(server_->hasApiKey());
    ASSERT_TRUE(wait_running()) << server_->error().toStdString();
    const int port = server_->boundPort();
    EXPECT_EQ(get(port, "/v1/models").status, 401);
    EXPECT_EQ(get(port, "/v1/models", "not the key").status, 401);
    EXPECT_EQ(get(port, "/v1/models", key).status, 200);
    EXPECT_TRUE(server_->curlExample().contains("Bearer $POWERHOUSE_API_KEY"));
    EXPECT_FALSE(server_->curlExample().contains(QString::fromStdString(key))) << "examples never hold the key";
    server_->hideApiKey();
    EXPECT_TRUE(server_->shownApiKey().isEmpty());

    // Kept: the next start has the host, the port and the key, but does not show the key.
    {
        EngineClient other;  // one ServerController per engine client: it owns the client's event hook
        ServerController again(*store_, other);
        EXPECT_TRUE(again.enabled());
        EXPECT_EQ(again.host(), "0.0.0.0");
        EXPECT_EQ(again.port(), 0);
        EXPECT_TRUE(again.hasApiKey());
        EXPECT_TRUE(again.shownApiKey().isEmpty());
    }
    auto stored = store_->setting("server_api_key");
    ASSERT_TRUE(stored && *stored);
    EXPECT_EQ(**stored, key);

    // Without the key again: the server stops and says why.
    server_->removeApiKey();
    ASSERT_TRUE(wait_for([&] { return !server_->running() && server_->state() == "error"; }));
    EXPECT_EQ(get(port, "/health").status, 0);
}

// A port another program listens on: refused with a message that says what to do; another
// port then works.
TEST_F(ServerControllerTest, APortInUseSaysWhatToDo) {
    // A plain listener, as another program would have.
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
    ASSERT_EQ(listen(fd, 4), 0);
    socklen_t size = sizeof at;
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&at), &size), 0);
    const int taken = ntohs(at.sin_port);

    server_->setPort(taken);
    server_->setEnabled(true);
    ASSERT_NO_FATAL_FAILURE(load());
    ASSERT_TRUE(wait_for([&] { return server_->state() == "error" || server_->running(); }));
    EXPECT_FALSE(server_->running());
    EXPECT_EQ(server_->state(), "error");
    const std::string error = server_->error().toStdString();
    EXPECT_NE(error.find("Port " + std::to_string(taken) + " is in use by another program"), std::string::npos)
        << error;
    EXPECT_NE(error.find("Choose another port"), std::string::npos) << error;
    EXPECT_EQ(server_->statusText(), server_->error());

    server_->setPort(0);
    EXPECT_TRUE(server_->error().isEmpty());
    ASSERT_TRUE(wait_running()) << server_->error().toStdString();
    EXPECT_NE(server_->boundPort(), taken);
    close(fd);
}

// An embedding model (a synthetic 2-layer bge-small) loaded in the app: the chat will not
// send to it (ChatController::cannotChatReason), and the server serves it for what it is
// for, /v1/embeddings (bge-small's 384 numbers).
TEST_F(ServerControllerTest, ServesAnEmbeddingModelThatTheChatRefuses) {
    powerhouse::SynthOptions so;
    so.preset = "bge-small";
    so.type = "q8_0";
    so.n_layer = 2;
    so.threads = 2;
    so.output = dir_.path() / "bge-small.gguf";
    auto made = powerhouse::synthesize_model(so);
    ASSERT_TRUE(made) << made.error().message;
    server_->setPort(0);
    server_->setEnabled(true);
    powerhouse::ModelOptions options;
    options.n_ctx = 512;
    options.n_threads = 2;
    chat_->loadModel(QString::fromStdString(so.output.string()), options);
    ASSERT_TRUE(wait_for([&] { return chat_->modelState() != ChatController::ModelState::Loading; }));
    ASSERT_EQ(chat_->modelState(), ChatController::ModelState::Ready) << chat_->errorText().toStdString();
    EXPECT_FALSE(chat_->cannotChatReason().isEmpty());
    EXPECT_FALSE(chat_->send("Hello"));
    ASSERT_TRUE(wait_running()) << server_->error().toStdString();
    const json body = {{"model", server_->modelId().toStdString()}, {"input", "What is the capital of France?"}};
    const Reply embedded = Request(server_->boundPort(), "POST", "/v1/embeddings", body.dump()).wait();
    ASSERT_EQ(embedded.status, 200) << embedded.body;
    EXPECT_EQ(json::parse(embedded.body).at("data").at(0).at("embedding").size(), 384u);
}

}  // namespace
