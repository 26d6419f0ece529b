// Remote engines in the desktop app, continued (issue 20): each failure of a remote server
// as the chat window meets it (429 with its retry-after, 500, a server that never answers,
// garbage in the middle of a stream, an untrusted and a trusted TLS certificate), against
// tests/app/remote/openai_fault_server.py; editing an endpoint in Settings → Engines and the
// remote model remembered across starts; and, under a real Secret Service (keyring_test.sh),
// an endpoint's key moving with a rename and going to its metrics URL only on its own server.
#include <gtest/gtest.h>

#include <QSignalSpy>
#include <QTest>

#include <cstdlib>
#include <string>

#include "chat_controller.h"
#include "engines_controller.h"
#include "key_store.h"
#include "remote_chat_fixture.h"
#include "remote_gpu_model.h"
#include "store/store.h"

namespace {

using powerhouse::store::Message;
using powerhouse::store::MessageState;
using powerhouse::store::Store;
using powerhouse::test::fault_server;
using powerhouse::test::open_store;
using powerhouse::test::RemoteChatTest;
using powerhouse::test::wait_for;

class RemoteFaultsInTheApp : public RemoteChatTest {
protected:
    // Sends "Hello?" to the scenario's model and waits for the answer to end.
    std::vector<Message> ask(const std::string& base, const QString& caFile = {}) {
        controller_->useRemote(RemoteTarget{"faults", QString::fromStdString(base), caFile, {}, "test-model"});
        controller_->send("Hello?");
        EXPECT_TRUE(wait_idle());
        auto messages = stored();
        EXPECT_EQ(messages.size(), 2u);
        if (messages.size() == 2) {
            EXPECT_EQ(messages[0].content, "Hello?") << "the question is kept";
        }
        return messages;
    }
};

TEST_F(RemoteFaultsInTheApp, A429SaysWhenToRetryAndA500SaysTheServerFailed) {
    auto faults = fault_server();
    ASSERT_TRUE(faults->running());
    auto busy = ask(faults->url("/status-429/v1"));
    ASSERT_EQ(busy.size(), 2u);
    EXPECT_EQ(busy[1].state, MessageState::failed);
    EXPECT_NE(busy[1].error.find("rate limit"), std::string::npos) << busy[1].error;
    EXPECT_NE(busy[1].error.find("retry after 7 s"), std::string::npos) << busy[1].error;
    EXPECT_EQ(controller_->errorText().toStdString(), busy[1].error);

    controller_->newConversation();
    auto failed = ask(faults->url("/status-500/v1"));
    ASSERT_EQ(failed.size(), 2u);
    EXPECT_EQ(failed[1].state, MessageState::failed);
    EXPECT_NE(failed[1].error.find("the server failed"), std::string::npos) << failed[1].error;

    // After the failures the same conversation goes on with a working server.
    controller_->useRemote(RemoteTarget{"faults", QString::fromStdString(faults->url("/ok/v1")), {}, {}, "test-model"});
    controller_->send("Again?");
    ASSERT_TRUE(wait_idle());
    const auto after = stored();
    ASSERT_EQ(after.size(), 4u);
    EXPECT_EQ(after[1].state, MessageState::failed);
    EXPECT_EQ(after[3].state, MessageState::complete) << after[3].error;
    EXPECT_EQ(after[3].content, "Hello, wörld! Ünïcode ✓ and more.");
}

TEST_F(RemoteFaultsInTheApp, ASilentServerCanBeStoppedAndGarbageKeepsThePartialAnswer) {
    auto faults = fault_server();
    ASSERT_TRUE(faults->running());
    // Nothing comes at all (the first-byte timeout is minutes: a busy server may queue the
    // request): the user stops it, and the answer ends at once, stopped, with nothing lost.
    controller_->useRemote(
        RemoteTarget{"faults", QString::fromStdString(faults->url("/silent/v1")), {}, {}, "test-model"});
    controller_->send("Anyone there?");
    ASSERT_TRUE(controller_->generating());
    QTest::qWait(700);
    EXPECT_TRUE(controller_->generating()) << "still waiting for the server";
    controller_->stop();
    ASSERT_TRUE(wait_for([&] { return !controller_->generatingAny(); }, 10000)) << "Stop ends the wait at once";
    const auto silent = stored();
    ASSERT_EQ(silent.size(), 2u);
    EXPECT_EQ(silent[0].content, "Anyone there?");
    EXPECT_EQ(silent[1].state, MessageState::stopped);

    controller_->newConversation();
    auto garbage = ask(faults->url("/garbage-2/v1"));
    ASSERT_EQ(garbage.size(), 2u);
    EXPECT_EQ(garbage[1].state, MessageState::interrupted);
    EXPECT_EQ(garbage[1].content, "Hello,") << "the two events before the garbage are kept";
    EXPECT_FALSE(garbage[1].error.empty());
}

TEST_F(RemoteFaultsInTheApp, AnUntrustedCertificateIsNamedAndTheCaFileMakesItWork) {
    if (std::system("openssl version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl command";
    auto tls = fault_server(dir_.path().string());
    ASSERT_TRUE(tls->running());
    const std::string base = "https://127.0.0.1:" + std::to_string(tls->port()) + "/ok/v1";
    auto refused = ask(base);
    ASSERT_EQ(refused.size(), 2u);
    EXPECT_EQ(refused[1].state, MessageState::failed);
    EXPECT_NE(refused[1].error.find("certificate cannot be trusted"), std::string::npos) << refused[1].error;
    EXPECT_NE(refused[1].error.find("CA file"), std::string::npos) << refused[1].error;

    controller_->newConversation();
    auto trusted = ask(base, QString::fromStdString((dir_ / "cert.pem").string()));
    ASSERT_EQ(trusted.size(), 2u);
    EXPECT_EQ(trusted[1].state, MessageState::complete) << trusted[1].error;
    EXPECT_EQ(trusted[1].content, "Hello, wörld! Ünïcode ✓ and more.");
}

// A remote engine that cannot be reached says so on its row (the Models page shows the
// endpoints in error), whether its models were being listed or an answer was asked of it,
// until the user dismisses it (until it fails again) or a listing succeeds.
TEST_F(RemoteChatTest, AnEndpointThatCannotBeReachedKeepsItsErrorUntilDismissedOrResolved) {
    auto faults = fault_server();
    ASSERT_TRUE(faults->running());
    const QString ok = QString::fromStdString(faults->url("/ok/v1"));
    const QString down = QStringLiteral("http://127.0.0.1:9/v1");  // nothing listens on port 9
    EnginesController engines(*store_);
    const auto row = [&] { return engines.endpoints().at(0).toMap(); };
    ASSERT_TRUE(engines.addEndpoint("lab", down, {}, {}));
    ASSERT_TRUE(wait_for([&] { return row().value("status") == "error"; }));
    const QString listing = row().value("error").toString();
    EXPECT_TRUE(listing.contains("127.0.0.1")) << listing.toStdString();
    EXPECT_FALSE(row().value("errorDismissed").toBool());
    engines.dismissEndpointError("lab");
    EXPECT_TRUE(row().value("errorDismissed").toBool());
    engines.refreshEndpoint("lab");
    EXPECT_EQ(row().value("error").toString(), listing) << "kept while it is tried again";
    ASSERT_TRUE(wait_for([&] { return row().value("status") == "error"; }));
    EXPECT_FALSE(row().value("errorDismissed").toBool()) << "failing again, it shows again";

    // An answer asked of it fails in the chat, and the chat says which endpoint failed.
    QSignalSpy failed(controller_.get(), &ChatController::remoteAnswerFailed);
    QObject::connect(controller_.get(), &ChatController::remoteAnswerFailed, &engines,
                     &EnginesController::answerFailed);
    controller_->useRemote(RemoteTarget{"lab", down, {}, {}, "tiny"});
    engines.dismissEndpointError("lab");
    ASSERT_TRUE(controller_->send("Hello?"));
    ASSERT_TRUE(wait_idle());
    ASSERT_EQ(failed.size(), 1);
    EXPECT_EQ(failed[0][0].toString(), down);
    EXPECT_EQ(stored()[1].state, MessageState::failed);
    EXPECT_EQ(row().value("error").toString().toStdString(), stored()[1].error);
    EXPECT_FALSE(row().value("errorDismissed").toBool());

    // Pointed at a server that answers: resolved.
    ASSERT_TRUE(engines.editEndpoint("lab", "lab", ok, {}, {}, {}));
    ASSERT_TRUE(wait_for([&] { return row().value("status") == "ok"; }));
    EXPECT_TRUE(row().value("error").toString().isEmpty());
}

TEST_F(RemoteChatTest, AnEndpointIsEditedInPlaceAndTheRemoteChoiceIsRemembered) {
    auto faults = fault_server();
    ASSERT_TRUE(faults->running());
    const QString ok = QString::fromStdString(faults->url("/ok/v1"));
    const QString nousage = QString::fromStdString(faults->url("/nousage/v1"));
    {
        EnginesController engines(*store_);
        QObject::connect(&engines, &EnginesController::remoteChosen, controller_.get(), &ChatController::useRemote);
        ASSERT_TRUE(engines.addEndpoint("faults", ok, {}, {}));
        ASSERT_TRUE(engines.addEndpoint("other", ok, {}, {}));
        ASSERT_TRUE(wait_for([&] { return engines.remoteModels().size() == 4; }));
        QSignalSpy chosen(&engines, &EnginesController::remoteChosen);
        engines.choose("faults", "other-model");
        ASSERT_TRUE(wait_for([&] { return chosen.count() == 1; }));

        // Refused: a name taken by another endpoint, a bad URL, an endpoint that is gone.
        EXPECT_FALSE(engines.editEndpoint("faults", "other", ok, {}, {}, {}));
        EXPECT_TRUE(engines.message().contains("exists already")) << engines.message().toStdString();
        EXPECT_FALSE(engines.editEndpoint("faults", "lab", "ftp://x", {}, {}, {}));
        EXPECT_FALSE(engines.editEndpoint("gone", "lab", ok, {}, {}, {}));
        EXPECT_EQ(engines.endpoints().size(), 2);

        // Renamed, another URL, a metrics URL: kept in place, listed again, and the chosen
        // model follows it (the chat gets the new URL).
        ASSERT_TRUE(engines.editEndpoint("faults", "lab", nousage, {}, {},
                                         QString::fromStdString(faults->url("/metrics/vllm_v1"))));
        EXPECT_FALSE(engines.messageIsError()) << engines.message().toStdString();
        ASSERT_EQ(engines.endpoints().size(), 2);
        const QVariantMap lab = engines.endpoints().front().toMap();
        EXPECT_EQ(lab.value("name").toString(), "lab");
        EXPECT_EQ(lab.value("url").toString(), nousage);
        ASSERT_TRUE(wait_for([&] { return chosen.count() == 2; }));
        EXPECT_EQ(chosen.back().front().value<RemoteTarget>().url, nousage);
        EXPECT_EQ(engines.chosen(), "other-model — lab");
        ASSERT_TRUE(wait_for([&] { return engines.endpoints().front().toMap().value("status") == "ok"; }));
        ASSERT_EQ(engines.metricsSources().size(), 1u);
        EXPECT_EQ(engines.metricsSources()[0].name, "lab");
        EXPECT_TRUE(engines.metricsSources()[0].apiKey.empty());
        controller_->send("Hello?");
        ASSERT_TRUE(wait_idle());
        ASSERT_EQ(stored().size(), 2u);
        EXPECT_EQ(stored()[1].stats.engine, nousage.toStdString());
    }
    // The next start chooses the same remote model again, before any local model loads.
    {
        EnginesController engines(*store_);
        QSignalSpy chosen(&engines, &EnginesController::remoteChosen);
        ASSERT_TRUE(engines.restoreChoice());
        ASSERT_TRUE(wait_for([&] { return chosen.count() == 1; }));
        const RemoteTarget target = chosen.front().front().value<RemoteTarget>();
        EXPECT_EQ(target.name, "lab");
        EXPECT_EQ(target.model, "other-model");
        EXPECT_EQ(target.url, nousage);
        // A local model taken: forgotten.
        engines.clearChoice();
    }
    EnginesController third(*store_);
    EXPECT_FALSE(third.restoreChoice());
    // A remembered endpoint that was removed meanwhile restores nothing.
    third.choose("other", "test-model");
    ASSERT_TRUE(wait_for([&] { return !third.chosen().isEmpty(); }));
    third.removeEndpoint("other");
    EXPECT_TRUE(third.chosen().isEmpty());
    EnginesController fourth(*store_);
    EXPECT_FALSE(fourth.restoreChoice());
}

// Under a real Secret Service only (keyring_test.sh); see desktop_remote_test.cpp's KeyStore tests.
TEST(EnginesWithKeys, AKeyMovesWithARenameAndGoesToItsOwnServersMetricsOnly) {
    if (qEnvironmentVariable("POWERHOUSE_KEYRING_TEST") != QLatin1String("secret-service")) {
        GTEST_SKIP() << "needs a Secret Service: run through tests/app/desktop/keyring_test.sh";
    }
    auto faults = fault_server();
    ASSERT_TRUE(faults->running());
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    EnginesController engines(store);
    const QString keyed = QString::fromStdString(faults->url("/key-sk-one/v1"));
    const QString keyedMetrics = QString::fromStdString(faults->url("/key-sk-one/metrics/dcgm_exporter"));
    ASSERT_TRUE(engines.addEndpoint("a", keyed, "sk-one", {}, keyedMetrics));
    // Another server (port 1) must not see the second endpoint's key.
    ASSERT_TRUE(engines.addEndpoint("b", QString::fromStdString(faults->url("/ok/v1")), "sk-two", {},
                                    "http://127.0.0.1:1/metrics"));
    ASSERT_TRUE(wait_for(
        [&] {
            return !engines.busy() && engines.endpoints().size() == 2 &&
                   engines.endpoints()[0].toMap().value("status") == "ok";
        },
        30000))
        << engines.message().toStdString();
    ASSERT_TRUE(wait_for(
        [&] { return engines.metricsSources().size() == 2 && !engines.metricsSources()[0].apiKey.empty(); }, 30000));
    EXPECT_EQ(engines.metricsSources()[0].apiKey, "sk-one");
    EXPECT_TRUE(engines.metricsSources()[1].apiKey.empty()) << "a key never goes to another server";

    // The dashboard reads the keyed metrics with it (the server answers 401 without).
    {
        RemoteGpuModel model(std::chrono::milliseconds(200));
        model.setSources(engines.metricsSources());
        ASSERT_TRUE(wait_for([&] { return model.find("a", "gpu-node-1") >= 0; }, 30000));
        std::vector<MetricsSource> keyless = engines.metricsSources();
        keyless[0].apiKey.clear();
        keyless.resize(1);
        model.setSources(keyless);
        ASSERT_TRUE(wait_for(
            [&] {
                const int row = model.find("a", "gpu-node-1");
                return row >= 0 && !model.data(model.index(row), RemoteGpuModel::ErrorRole).toString().isEmpty();
            },
            30000));
        const QString error =
            model.data(model.index(model.find("a", "gpu-node-1")), RemoteGpuModel::ErrorRole).toString();
        EXPECT_TRUE(error.contains("API key")) << error.toStdString();
    }

    // Renamed without typing the key: the key moves to the new name and still works.
    ASSERT_TRUE(engines.editEndpoint("a", "lab", keyed, {}, {}, keyedMetrics));
    ASSERT_TRUE(wait_for([&] { return !engines.busy(); }, 30000));
    EXPECT_FALSE(engines.messageIsError()) << engines.message().toStdString();
    ASSERT_TRUE(wait_for([&] { return engines.endpoints()[0].toMap().value("status") == "ok"; }, 30000))
        << engines.endpoints()[0].toMap().value("error").toString().toStdString();
    EXPECT_EQ(engines.endpoints()[0].toMap().value("name").toString(), "lab");
    EXPECT_TRUE(engines.endpoints()[0].toMap().value("hasKey").toBool());
    KeyStore keys;
    bool done = false, found = true;
    QString key;
    keys.read("a", [&](const QString&, bool f, const QString&) {
        found = f;
        done = true;
    });
    ASSERT_TRUE(wait_for([&] { return done; }, 30000));
    EXPECT_FALSE(found) << "the old name's key is gone";
    done = false;
    keys.read("lab", [&](const QString& k, bool f, const QString&) {
        key = k;
        found = f;
        done = true;
    });
    ASSERT_TRUE(wait_for([&] { return done; }, 30000));
    EXPECT_TRUE(found);
    EXPECT_EQ(key, "sk-one");

    // Forgetting the key: the endpoint asks for one again, the metrics go without.
    ASSERT_TRUE(engines.editEndpoint("lab", "lab", keyed, {}, {}, keyedMetrics, /*forgetKey=*/true));
    ASSERT_TRUE(wait_for([&] { return engines.endpoints()[0].toMap().value("status") == "error"; }, 30000));
    EXPECT_TRUE(engines.endpoints()[0].toMap().value("error").toString().contains("API key"));
    EXPECT_FALSE(engines.endpoints()[0].toMap().value("hasKey").toBool());
    EXPECT_TRUE(engines.metricsSources()[0].apiKey.empty());
    engines.removeEndpoint("b");
    engines.removeEndpoint("lab");
    QTest::qWait(500);
}

}  // namespace
