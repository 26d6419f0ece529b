// Remote engines in the desktop app (issue 20): Settings → Engines (EnginesController) and
// chat answers through RemoteChat, against `powerhouse-cli serve` on the real SmolLM2 model
// (a remote answer at temperature 0 equals the local one) and against the fault-injecting
// server tests/app/remote/openai_fault_server.py (a stream cut in the middle, 401, a slow
// stream to stop). The keyring: KeyStore under a real Secret Service and without one; those
// two run through keyring_test.sh, which starts the D-Bus session and gnome-keyring (or
// points the bus nowhere) and names them; run plainly they skip.
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QProcess>
#include <QSignalSpy>
#include <QTest>

#include <memory>
#include <string>

#include "chat_controller.h"
#include "desktop_test_support.h"
#include "engine_client.h"
#include "engines_controller.h"
#include "http_test_server.h"
#include "key_store.h"
#include "remote_chat.h"
#include "remote_chat_fixture.h"
#include "store/store.h"
#include "support/test_support.h"

namespace {

using powerhouse::store::Message;
using powerhouse::store::MessageState;
using powerhouse::store::Store;
using powerhouse::test::fault_server;
using powerhouse::test::open_store;
using powerhouse::test::RemoteChatTest;
using powerhouse::test::wait_for;

// `powerhouse-cli serve` on the test model, on a free port of 127.0.0.1.
class ServeProcess {
public:
    ServeProcess() {
        process_.setProgram(QStringLiteral(POWERHOUSE_CLI_PATH));
        process_.setArguments({"serve", "-m", QString::fromStdString(powerhouse::test::test_model_path().string()),
                               "--port", "0", "-t", "2", "--ctx", "2048"});
        process_.setProcessChannelMode(QProcess::SeparateChannels);
        process_.start();
        if (!process_.waitForStarted(10000)) return;
        // "serving MODEL on http://127.0.0.1:PORT" once the model is loaded.
        while (!process_.canReadLine() && process_.waitForReadyRead(120000)) {
        }
        const QString line = QString::fromUtf8(process_.readLine()).trimmed();
        const QStringList words = line.split(QLatin1Char(' '));
        if (words.size() >= 4 && words[0] == QLatin1String("serving")) {
            model_ = words[1];
            url_ = words.last();
        } else {
            ADD_FAILURE() << "serve did not start: " << line.toStdString() << " "
                          << process_.readAllStandardError().toStdString();
        }
    }
    ~ServeProcess() {
        process_.terminate();
        if (!process_.waitForFinished(15000)) process_.kill();
        process_.waitForFinished(5000);
    }
    bool running() const { return !url_.isEmpty(); }
    QString url() const { return url_; }
    QString model() const { return model_; }

private:
    QProcess process_;
    QString url_, model_;
};

TEST_F(RemoteChatTest, EnginesListModelsTestConnectionsAndPersistEndpoints) {
    auto faults = fault_server();
    ASSERT_TRUE(faults->running());
    {
        EnginesController engines(*store_);
        EXPECT_TRUE(engines.endpoints().isEmpty());
        // Test connection: the models, or RemoteEngine's clear error.
        engines.testConnection(QString::fromStdString(faults->url("/ok/v1")), {}, {});
        EXPECT_TRUE(engines.busy());
        ASSERT_TRUE(wait_for([&] { return !engines.busy(); }));
        EXPECT_FALSE(engines.messageIsError()) << engines.message().toStdString();
        EXPECT_TRUE(engines.message().contains("test-model")) << engines.message().toStdString();
        engines.testConnection(QString::fromStdString(faults->url("/status-401/v1")), {}, {});
        ASSERT_TRUE(wait_for([&] { return !engines.busy(); }));
        EXPECT_TRUE(engines.messageIsError());
        EXPECT_TRUE(engines.message().contains("key", Qt::CaseInsensitive)) << engines.message().toStdString();
        EXPECT_FALSE(engines.addEndpoint({}, QStringLiteral("http://127.0.0.1:1"), {}, {})) << "a name is needed";
        EXPECT_FALSE(engines.addEndpoint("bad", QStringLiteral("ftp://x"), {}, {}));
        EXPECT_TRUE(engines.message().size() > 0);

        // Added without a key: saved, and its models listed on a worker.
        ASSERT_TRUE(engines.addEndpoint("faults", QString::fromStdString(faults->url("/ok/v1")), {}, {}));
        ASSERT_TRUE(wait_for([&] { return engines.remoteModels().size() == 2; }));
        const QVariantMap first = engines.remoteModels().front().toMap();
        EXPECT_EQ(first.value("endpoint").toString(), "faults");
        EXPECT_EQ(first.value("model").toString(), "test-model");
        ASSERT_TRUE(engines.addEndpoint("down", QStringLiteral("http://127.0.0.1:1/v1"), {}, {}));
        ASSERT_TRUE(wait_for([&] { return engines.endpoints().back().toMap().value("status") == "error"; }));
        EXPECT_FALSE(engines.endpoints().back().toMap().value("error").toString().isEmpty());
        // Choosing a model hands the target on.
        QSignalSpy chosen(&engines, &EnginesController::remoteChosen);
        engines.choose("faults", "other-model");
        ASSERT_TRUE(wait_for([&] { return chosen.count() == 1; }));
        EXPECT_EQ(engines.chosen(), "other-model — faults");
    }
    // The endpoints are in the store, without any key.
    const auto setting = store_->setting("remote_endpoints");
    ASSERT_TRUE(setting && *setting);
    EXPECT_NE((*setting)->find("faults"), std::string::npos);
    EXPECT_EQ((*setting)->find("api_key"), std::string::npos);
    EnginesController again(*store_);
    ASSERT_EQ(again.endpoints().size(), 2);
    again.removeEndpoint("down");
    EXPECT_EQ(again.endpoints().size(), 1);
    EnginesController third(*store_);
    EXPECT_EQ(third.endpoints().size(), 1);
}

TEST_F(RemoteChatTest, ARemoteAnswerAtTemperatureZeroEqualsTheLocalOneAndNamesItsEngine) {
    ServeProcess serve;
    ASSERT_TRUE(serve.running());
    powerhouse::ModelOptions options;
    options.n_ctx = 1024;
    options.n_threads = 2;
    controller_->loadModel(QString::fromStdString(powerhouse::test::test_model_path().string()), options);
    ASSERT_TRUE(wait_for([&] { return controller_->modelState() != ChatController::ModelState::Loading; }));
    ASSERT_EQ(controller_->modelState(), ChatController::ModelState::Ready);
    const QString question = QStringLiteral("What is the capital of France?");
    controller_->send(question);
    ASSERT_TRUE(wait_idle());
    const auto local = stored();
    ASSERT_EQ(local.size(), 2u);
    EXPECT_EQ(local[1].state, MessageState::complete);
    EXPECT_EQ(local[1].stats.engine, "local");

    // The endpoint as Settings → Engines keeps it, chosen in the model bar.
    EnginesController engines(*store_);
    QObject::connect(&engines, &EnginesController::remoteChosen, controller_.get(), &ChatController::useRemote);
    ASSERT_TRUE(engines.addEndpoint("serve", serve.url(), {}, {}));
    ASSERT_TRUE(wait_for([&] { return !engines.remoteModels().isEmpty(); }));
    engines.choose("serve", serve.model());
    ASSERT_TRUE(wait_for([&] { return controller_->usingRemote(); }));
    EXPECT_EQ(controller_->modelName(), serve.model());
    EXPECT_TRUE(controller_->modelDevice().contains("serve"));

    controller_->newConversation();
    QSignalSpy streamed(controller_->messages(), &QAbstractItemModel::dataChanged);
    controller_->send(question);
    ASSERT_TRUE(controller_->generating());
    ASSERT_TRUE(wait_idle());
    const auto remote = stored();
    ASSERT_EQ(remote.size(), 2u);
    EXPECT_EQ(remote[1].state, MessageState::complete) << remote[1].error;
    EXPECT_EQ(remote[1].content, local[1].content);
    EXPECT_GT(streamed.count(), 1) << "the answer streamed in";
    EXPECT_EQ(remote[1].stats.engine, serve.url().toStdString());
    EXPECT_EQ(remote[1].stats.model, serve.model().toStdString());
    EXPECT_GT(remote[1].stats.generated_tokens, 0);
    EXPECT_GT(remote[1].stats.prompt_tokens, 0) << "usage from the server";
    EXPECT_GT(remote[1].stats.ttft_ms, 0.0);
    EXPECT_GT(remote[1].stats.tokens_per_second, 0.0);

    // Regenerate goes to the same engine and replaces the answer.
    controller_->regenerate();
    ASSERT_TRUE(wait_idle());
    const auto again = stored();
    ASSERT_EQ(again.size(), 2u);
    EXPECT_NE(again[1].id, remote[1].id);
    EXPECT_EQ(again[1].content, local[1].content);
    EXPECT_EQ(again[1].stats.engine, serve.url().toStdString());
}

TEST_F(RemoteChatTest, StopClosesTheStreamAndKeepsWhatCame) {
    auto faults = fault_server();
    ASSERT_TRUE(faults->running());
    controller_->useRemote(
        RemoteTarget{"faults", QString::fromStdString(faults->url("/slow/v1")), {}, {}, "test-model"});
    controller_->send("Tell me a long story.");
    ASSERT_TRUE(wait_for([&] {
        const auto* m = controller_->messages()->at(1);
        return m != nullptr && m->content.size() > 5;
    }));
    controller_->stop();
    ASSERT_TRUE(wait_for([&] { return !controller_->generatingAny(); }, 10000)) << "the stream closed at once";
    const auto messages = stored();
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[0].content, "Tell me a long story.");
    EXPECT_EQ(messages[1].state, MessageState::stopped);
    EXPECT_GT(messages[1].content.size(), 5u);
    EXPECT_EQ(messages[1].stats.engine, faults->url("/slow/v1"));
}

TEST_F(RemoteChatTest, ACutStreamKeepsThePartialAnswerMarkedInterrupted) {
    auto faults = fault_server();
    ASSERT_TRUE(faults->running());
    controller_->useRemote(
        RemoteTarget{"faults", QString::fromStdString(faults->url("/cut-3/v1")), {}, {}, "test-model"});
    controller_->send("Hello?");
    ASSERT_TRUE(wait_idle());
    const auto messages = stored();
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[1].state, MessageState::interrupted);
    EXPECT_FALSE(messages[1].content.empty()) << "the three events that came are kept";
    EXPECT_FALSE(messages[1].error.empty());
    EXPECT_EQ(messages[1].stats.model, "test-model");
    EXPECT_FALSE(controller_->errorText().isEmpty());
}

TEST_F(RemoteChatTest, A401IsShownWithRemoteEnginesMessageAndNothingIsLost) {
    auto faults = fault_server();
    ASSERT_TRUE(faults->running());
    controller_->useRemote(
        RemoteTarget{"faults", QString::fromStdString(faults->url("/status-401/v1")), {}, "sk-wrong", "test-model"});
    controller_->send("Hello?");
    ASSERT_TRUE(wait_idle());
    const auto messages = stored();
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[0].content, "Hello?");
    EXPECT_EQ(messages[1].state, MessageState::failed);
    EXPECT_NE(messages[1].error.find("key"), std::string::npos) << messages[1].error;
    EXPECT_EQ(messages[1].error.find("sk-wrong"), std::string::npos) << "the key is never shown";
    EXPECT_EQ(controller_->errorText().toStdString(), messages[1].error);
}

// The keyring: keyring_test.sh sets POWERHOUSE_KEYRING_TEST to "secret-service" inside a
// D-Bus session with an unlocked gnome-keyring, or to "none" with the bus pointing nowhere.
TEST(KeyStore, StoresAndReadsBackAKeyInTheSecretService) {
    if (qEnvironmentVariable("POWERHOUSE_KEYRING_TEST") != QLatin1String("secret-service")) {
        GTEST_SKIP() << "needs a Secret Service: run through tests/app/desktop/keyring_test.sh";
    }
    KeyStore keys;
    QString error = "pending";
    keys.write("cluster", "sk-test-123", [&](const QString& e) { error = e; });
    ASSERT_TRUE(wait_for([&] { return error != "pending"; }, 30000));
    ASSERT_TRUE(error.isEmpty()) << error.toStdString();
    QString key;
    bool found = false, done = false;
    keys.read("cluster", [&](const QString& k, bool f, const QString& e) {
        key = k;
        found = f;
        error = e;
        done = true;
    });
    ASSERT_TRUE(wait_for([&] { return done; }, 30000));
    EXPECT_TRUE(error.isEmpty()) << error.toStdString();
    EXPECT_TRUE(found);
    EXPECT_EQ(key, "sk-test-123");
    done = false;
    keys.remove("cluster", [&](const QString& e) {
        error = e;
        done = true;
    });
    ASSERT_TRUE(wait_for([&] { return done; }, 30000));
    EXPECT_TRUE(error.isEmpty());
    done = false;
    keys.read("cluster", [&](const QString&, bool f, const QString&) {
        found = f;
        done = true;
    });
    ASSERT_TRUE(wait_for([&] { return done; }, 30000));
    EXPECT_FALSE(found);

    // An endpoint added with a key keeps it there, not in the store.
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    EnginesController engines(store);
    ASSERT_TRUE(engines.addEndpoint("keyed", "http://127.0.0.1:1/v1", "sk-secret-456", {}));
    ASSERT_TRUE(wait_for([&] { return !engines.busy(); }, 30000));
    EXPECT_FALSE(engines.messageIsError()) << engines.message().toStdString();
    ASSERT_EQ(engines.endpoints().size(), 1);
    EXPECT_TRUE(engines.endpoints().front().toMap().value("hasKey").toBool());
    const auto setting = store.setting("remote_endpoints");
    ASSERT_TRUE(setting && *setting);
    EXPECT_EQ((*setting)->find("sk-secret-456"), std::string::npos);
    QSignalSpy chosen(&engines, &EnginesController::remoteChosen);
    engines.choose("keyed", "m");
    ASSERT_TRUE(wait_for([&] { return chosen.count() == 1; }, 30000));
    EXPECT_EQ(chosen.front().front().value<RemoteTarget>().apiKey, "sk-secret-456");
    engines.removeEndpoint("keyed");
    QTest::qWait(500);
}

TEST(KeyStore, SaysSoClearlyWhenNoKeyringIsReachable) {
    if (qEnvironmentVariable("POWERHOUSE_KEYRING_TEST") != QLatin1String("none")) {
        GTEST_SKIP() << "needs the session bus pointing nowhere: run through tests/app/desktop/keyring_test.sh";
    }
    KeyStore keys;
    QString error = "pending";
    keys.write("cluster", "sk-test-123", [&](const QString& e) { error = e; });
    ASSERT_TRUE(wait_for([&] { return error != "pending"; }, 30000));
    EXPECT_TRUE(error.startsWith(KeyStore::kNoKeyringMessage)) << error.toStdString();

    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    EnginesController engines(store);
    ASSERT_TRUE(engines.addEndpoint("keyed", "http://127.0.0.1:1/v1", "sk-secret-456", {}));
    ASSERT_TRUE(wait_for([&] { return !engines.busy(); }, 30000));
    EXPECT_TRUE(engines.messageIsError());
    EXPECT_TRUE(engines.message().contains("no system keyring", Qt::CaseInsensitive))
        << engines.message().toStdString();
    EXPECT_TRUE(engines.endpoints().isEmpty()) << "nothing is kept without the keyring";
    const auto setting = store.setting("remote_endpoints");
    EXPECT_TRUE(!setting || !*setting || (*setting)->find("sk-secret-456") == std::string::npos);
}

}  // namespace
