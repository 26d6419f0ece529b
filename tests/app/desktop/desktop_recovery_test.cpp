// What the desktop app does when a device fails under the model (issue 23), on the real
// SmolLM2 model with a fault injected into its CPU device (ModelOptions::fail_device, as
// POWERHOUSE_FAIL_DEVICE does): EngineClient's recovery signal and the answer streaming on
// whole under its request id; ChatController's banner through each phase, the model bar
// following the model, the answer going on in the same message and stored with its note;
// giving up and the policy stop; the dashboard marking a GPU whose telemetry fails and
// telling it once; the settings leaving a failed GPU out until restart; the policy setting.
#include <gtest/gtest.h>

#include <QSignalSpy>
#include <QTest>

#include <memory>

#include "chat_controller.h"
#include "dashboard_controller.h"
#include "desktop_test_support.h"
#include "engine_client.h"
#include "settings_controller.h"
#include "store/store.h"
#include "support/test_support.h"

namespace {

using powerhouse::store::MessageState;
using powerhouse::store::Store;
using powerhouse::test::expect_reference_answer;
using powerhouse::test::open_store;

constexpr int kRecoveryWait = 120000;
const char* const kQuestion = "Write a Python function that reverses a string.";

// The test model on one CPU device, whose sixth step fails (the prompt is one step, so the
// fault comes five tokens into the answer) unless `fault` is false.
powerhouse::ModelOptions faulty(bool fault = true) {
    powerhouse::ModelOptions options;
    options.n_ctx = 1024;
    options.n_threads = 2;
    options.devices = "cpu";
    if (fault) {
        options.fail_device = 0;
        options.fail_after = 5;
    }
    return options;
}

QString modelPath() { return QString::fromStdString(powerhouse::test::test_model_path().string()); }

TEST(EngineClientRecovery, AnAnswerADeviceFailureInterruptsStreamsOnWholeUnderItsId) {
    EngineClient client;
    QSignalSpy loaded(&client, &EngineClient::loaded);
    QSignalSpy recoveries(&client, &EngineClient::recovery);
    QString streamed;
    QVariantMap stats;
    QString done;
    QObject::connect(&client, &EngineClient::tokens, [&](quint64, const QString& text) { streamed += text; });
    QObject::connect(&client, &EngineClient::finished, [&](quint64, const QString& text, const QVariantMap& s) {
        done = text;
        stats = s;
    });
    client.load(modelPath(), faulty());
    ASSERT_TRUE(QTest::qWaitFor([&] { return loaded.count() == 1; }, kRecoveryWait));
    powerhouse::GenerateCommand command;
    command.messages = {{"user", kQuestion}};
    command.settings.max_tokens = 32;
    command.settings.sampling.temperature = 0;
    const quint64 id = client.generate(command);
    ASSERT_TRUE(QTest::qWaitFor([&] { return !done.isEmpty(); }, kRecoveryWait));

    // Announced, then done: the same model again on the CPU, the fault gone with the reload.
    ASSERT_EQ(recoveries.count(), 2);
    const auto reloading = recoveries.at(0).at(0).value<EngineRecovery>();
    const auto recovered = recoveries.at(1).at(0).value<EngineRecovery>();
    EXPECT_EQ(reloading.phase, EngineRecovery::Phase::Reloading);
    EXPECT_EQ(recovered.phase, EngineRecovery::Phase::Recovered);
    EXPECT_FALSE(recovered.device.isEmpty());
    EXPECT_TRUE(recovered.uuid.isEmpty()) << "a CPU device has no UUID";
    EXPECT_TRUE(recovered.message.contains("Continuing on")) << recovered.message.toStdString();
    EXPECT_EQ(recovered.requests, QList<quint64>{id});
    EXPECT_FALSE(recovered.model.value("device").toString().isEmpty());
    EXPECT_EQ(recovered.model.value("path").toString(), modelPath());

    // Nothing streamed twice, nothing lost: the tokens add up to the whole answer, which is
    // the greedy answer a run without the fault gives.
    EXPECT_EQ(streamed, done);
    expect_reference_answer(done.toStdString(), "chat_code");
    const QVariantList notes = stats.value("recoveries").toList();
    ASSERT_EQ(notes.size(), 1);
    const QVariantMap note = notes[0].toMap();
    // Five steps went well: the prompt's, which gave the first token, and four more.
    EXPECT_EQ(note.value("atToken").toInt(), 5);
    EXPECT_EQ(note.value("failed").toString(), recovered.device);
    EXPECT_EQ(note.value("continuedOn").toString(), recovered.model.value("device").toString());
    EXPECT_EQ(stats.value("generatedTokens").toInt(), 32);
}

class ChatRecoveryTest : public ::testing::Test {
protected:
    void SetUp() override {
        store_ = std::make_unique<Store>(open_store(dir_));
        controller_ = std::make_unique<ChatController>(*store_, engine_);
        powerhouse::GenerationSettings settings;
        settings.max_tokens = 32;
        settings.sampling.temperature = 0;
        controller_->setGenerationSettings(settings);
    }

    void load(const powerhouse::ModelOptions& options,
              powerhouse::RecoveryPolicy policy = powerhouse::RecoveryPolicy::replan) {
        controller_->loadModel(modelPath(), options, policy);
        ASSERT_TRUE(QTest::qWaitFor([&] { return controller_->modelState() != ChatController::ModelState::Loading; },
                                    kRecoveryWait));
        ASSERT_EQ(controller_->modelState(), ChatController::ModelState::Ready)
            << controller_->errorText().toStdString();
    }

    // Sends the question and waits for the answer to end; the stored messages.
    std::vector<powerhouse::store::Message> ask() {
        controller_->send(kQuestion);
        EXPECT_TRUE(QTest::qWaitFor([&] { return !controller_->generatingAny(); }, kRecoveryWait));
        controller_->flushWrites();  // the controller's writes run on its writer thread
        auto stored = store_->messages(controller_->currentConversationId());
        EXPECT_TRUE(stored);
        return stored ? *stored : std::vector<powerhouse::store::Message>{};
    }

    powerhouse::test::TempDir dir_;
    std::unique_ptr<Store> store_;
    EngineClient engine_;
    std::unique_ptr<ChatController> controller_;
};

TEST_F(ChatRecoveryTest, TheAnswerGoesOnInTheSameMessageAndIsStoredWithWhereItWentOn) {
    load(faulty());
    const QString device = controller_->modelDevice();
    QSignalSpy rows(controller_->messages(), &QAbstractItemModel::rowsInserted);
    QList<ChatController::Recovery> seen;
    QObject::connect(controller_.get(), &ChatController::recoveryChanged,
                     [&] { seen.append(controller_->recovery()); });
    const auto messages = ask();

    // One question, one answer: the recovery made no second message.
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(rows.count(), 2);
    EXPECT_EQ(seen, (QList<ChatController::Recovery>{ChatController::Recovery::Reloading,
                                                      ChatController::Recovery::Recovered}));
    EXPECT_TRUE(controller_->recoveryText().contains("Continuing on")) << controller_->recoveryText().toStdString();
    EXPECT_TRUE(controller_->errorText().isEmpty()) << controller_->errorText().toStdString();
    EXPECT_EQ(controller_->modelState(), ChatController::ModelState::Ready);
    EXPECT_FALSE(controller_->modelDevice().isEmpty());
    EXPECT_EQ(controller_->modelDevice(), device) << "the same CPU again, as the model bar shows";

    const powerhouse::store::Message& answer = messages[1];
    EXPECT_EQ(answer.state, MessageState::complete);
    expect_reference_answer(answer.content, "chat_code");
    ASSERT_EQ(answer.stats.recoveries.size(), 1u);
    EXPECT_EQ(answer.stats.recoveries[0].at_token, 5);
    EXPECT_EQ(answer.stats.recoveries[0].continued_on, device.toStdString());
    // The view shows the whole answer and, under it, the note.
    MessageListModel& view = *controller_->messages();
    EXPECT_EQ(view.data(view.index(1), MessageListModel::ContentRole).toString().toStdString(), answer.content);
    const QString note = view.data(view.index(1), MessageListModel::RecoveryRole).toString();
    EXPECT_TRUE(note.startsWith("Continued on " + device + " after ")) << note.toStdString();
    EXPECT_TRUE(note.contains("failed at token 5")) << note.toStdString();
    EXPECT_TRUE(view.data(view.index(0), MessageListModel::RecoveryRole).toString().isEmpty());

    // The banner is the window's: it stays through switching conversations, until dismissed.
    const qint64 first = controller_->currentConversationId();
    controller_->newConversation();
    controller_->selectConversation(first);
    EXPECT_EQ(controller_->recovery(), ChatController::Recovery::Recovered);
    controller_->dismissRecovery();
    EXPECT_EQ(controller_->recovery(), ChatController::Recovery::None);
    EXPECT_TRUE(controller_->recoveryText().isEmpty());
}

TEST_F(ChatRecoveryTest, WhenLoadingAgainDoesNotHelpTheBannerSaysWhyAndTheTextSoFarIsKept) {
    // Retry loads on the same device, where the fault comes back: it gives up the third time.
    load(faulty(), powerhouse::RecoveryPolicy::retry);
    const auto messages = ask();
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[1].state, MessageState::failed);
    EXPECT_FALSE(messages[1].content.empty()) << "what was written before is kept";
    EXPECT_NE(messages[1].error.find("did not help"), std::string::npos) << messages[1].error;
    EXPECT_EQ(controller_->recovery(), ChatController::Recovery::Failed);
    EXPECT_TRUE(controller_->recoveryText().contains("did not help")) << controller_->recoveryText().toStdString();
    EXPECT_TRUE(controller_->recoveryText().endsWith("Choose other devices in Settings and apply to load the model "
                                                     "again."));
    EXPECT_TRUE(controller_->errorText().isEmpty())
        << "the banner says it once: " << controller_->errorText().toStdString();
    EXPECT_EQ(controller_->modelState(), ChatController::ModelState::Failed);

    // Loading a model again is a fresh start.
    load(faulty(false));
    EXPECT_EQ(controller_->recovery(), ChatController::Recovery::None);
}

TEST_F(ChatRecoveryTest, ThePolicyStopEndsTheAnswerAndSaysHowToGoOn) {
    load(faulty(), powerhouse::RecoveryPolicy::stop);
    const auto messages = ask();
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[1].state, MessageState::failed);
    EXPECT_FALSE(messages[1].content.empty());
    EXPECT_EQ(controller_->recovery(), ChatController::Recovery::Failed);
    EXPECT_TRUE(controller_->recoveryText().contains("The answer was stopped"))
        << controller_->recoveryText().toStdString();
    EXPECT_TRUE(controller_->errorText().isEmpty()) << controller_->errorText().toStdString();
    EXPECT_EQ(controller_->modelState(), ChatController::ModelState::Failed);
}

// The phases as the engine client reports them, without a model: what the banner and the
// model bar say at each.
TEST_F(ChatRecoveryTest, EachPhaseHasItsBannerAndTheModelBarFollowsTheModel) {
    EngineRecovery r;
    r.phase = EngineRecovery::Phase::Reloading;
    r.message = "GPU 1 stopped answering: Xid 79, fell off the bus. Loading the model again on cuda:GPU-0.";
    emit engine_.recovery(r);
    EXPECT_EQ(controller_->recovery(), ChatController::Recovery::Reloading);
    EXPECT_EQ(controller_->recoveryText(), r.message);

    r.phase = EngineRecovery::Phase::Recovered;
    r.message = "GPU 1 stopped answering: Xid 79, fell off the bus. Continuing on GPU 0 and RAM, at about 24 tokens/s.";
    r.model = {{"device", "GPU 0 and RAM"}};
    QSignalSpy modelChanged(controller_.get(), &ChatController::modelChanged);
    emit engine_.recovery(r);
    EXPECT_EQ(controller_->recovery(), ChatController::Recovery::Recovered);
    EXPECT_EQ(controller_->recoveryText(), r.message);
    EXPECT_EQ(controller_->modelDevice(), "GPU 0 and RAM");
    EXPECT_EQ(modelChanged.count(), 1);

    r.phase = EngineRecovery::Phase::GaveUp;
    r.message = "GPU 0 failed: an illegal memory access. The model could not be loaded again on cpu: out of memory";
    emit engine_.recovery(r);
    EXPECT_EQ(controller_->recovery(), ChatController::Recovery::Failed);
    EXPECT_EQ(controller_->recoveryText(),
              r.message + ". Choose other devices in Settings and apply to load the model again.");
    EXPECT_EQ(controller_->modelState(), ChatController::ModelState::Failed);
    EXPECT_TRUE(controller_->modelDevice().isEmpty());
    // Sending now says nothing more than the banner does.
    controller_->send("hello");
    EXPECT_TRUE(controller_->errorText().isEmpty());
    EXPECT_EQ(controller_->conversations()->rowCount(), 0);
}

TEST(DashboardRecovery, AGpuWhoseTelemetryFailsIsMarkedAndToldOnce) {
    powerhouse::GpuMonitorOptions options;
    options.simulate = "RTX 4090:24;RTX 4090:24:xid=79@3";
    options.interval = std::chrono::milliseconds(100);
    DashboardController dashboard(options);
    QSignalSpy failed(&dashboard, &DashboardController::gpuFailed);
    dashboard.start();
    ASSERT_TRUE(QTest::qWaitFor([&] { return failed.count() > 0; }, 10000));
    QTest::qWait(500);  // five samples more, each still failed
    ASSERT_EQ(failed.count(), 1);
    const GpuListModel& gpus = *dashboard.gpus();
    const QString uuid1 = gpus.data(gpus.index(1), GpuListModel::UuidRole).toString();
    EXPECT_EQ(failed.at(0).at(0).toString(), uuid1);
    EXPECT_EQ(failed.at(0).at(1).toString(), "GPU 1 stopped answering: Xid 79, fell off the bus");
    EXPECT_EQ(failed.at(0).at(2).toString(), "Xid 79, fell off the bus");
    EXPECT_TRUE(failed.at(0).at(3).toBool());
    EXPECT_TRUE(gpus.data(gpus.index(1), GpuListModel::FailedRole).toBool());
    EXPECT_EQ(gpus.data(gpus.index(1), GpuListModel::FailureRole).toString(),
              "GPU 1 stopped answering: Xid 79, fell off the bus");
    EXPECT_FALSE(gpus.data(gpus.index(0), GpuListModel::FailedRole).toBool());

    // The engine's word marks a GPU whose telemetry says nothing (a hung kernel).
    const QString uuid0 = gpus.data(gpus.index(0), GpuListModel::UuidRole).toString();
    dashboard.markGpuFailed(uuid0, "GPU 0 failed: did not answer within 60 s");
    EXPECT_TRUE(gpus.data(gpus.index(0), GpuListModel::FailedRole).toBool());
    EXPECT_EQ(gpus.data(gpus.index(0), GpuListModel::FailureRole).toString(),
              "GPU 0 failed: did not answer within 60 s");
    QTest::qWait(300);  // new samples keep it
    EXPECT_TRUE(gpus.data(gpus.index(0), GpuListModel::FailedRole).toBool());
}

TEST(SettingsRecovery, AFailedGpuIsLeftOutUntilRestartAndThePolicyIsKept) {
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    const powerhouse::TelemetrySnapshot snapshot = powerhouse::test::simulated_gpus("RTX 4090:24;RTX 4090:24");
    const QString uuid1 = QString::fromStdString(snapshot.gpus[1].uuid);
    {
        SettingsController settings(store, {});
        settings.setDevices(snapshot);
        EXPECT_EQ(settings.recoveryPolicy(), "replan");
        EXPECT_EQ(settings.recovery(), powerhouse::RecoveryPolicy::replan);
        QSignalSpy changed(&settings, &SettingsController::changed);
        settings.markGpuFailed(uuid1, "GPU 1 stopped answering: Xid 79, fell off the bus");
        EXPECT_EQ(changed.count(), 1);
        QVariantMap gpu = settings.gpus()[1].toMap();
        EXPECT_FALSE(gpu.value("use").toBool());
        EXPECT_TRUE(gpu.value("failed").toBool());
        EXPECT_EQ(gpu.value("failure").toString(), "GPU 1 stopped answering: Xid 79, fell off the bus");
        EXPECT_TRUE(settings.gpus()[0].toMap().value("use").toBool());
        // It cannot be ticked again, and the engine is told to leave it out.
        settings.setGpuUse(1, true);
        EXPECT_FALSE(settings.gpus()[1].toMap().value("use").toBool());
        EXPECT_EQ(settings.modelOptions().excluded_gpus, std::vector<std::string>{uuid1.toStdString()});
        EXPECT_EQ(settings.planInputs(4096, false).options.use, std::vector<uint32_t>{0}) << "only GPU 0 is planned on";

        settings.setRecoveryPolicy("sideways");
        EXPECT_EQ(settings.recoveryPolicy(), "replan");
        settings.setRecoveryPolicy("stop");
        ASSERT_TRUE(settings.apply());
    }
    // The user's own choice for the GPU was kept; after a restart it is in use again.
    SettingsController restarted(store, {});
    restarted.setDevices(snapshot);
    EXPECT_TRUE(restarted.gpus()[1].toMap().value("use").toBool());
    EXPECT_FALSE(restarted.gpus()[1].toMap().value("failed").toBool());
    EXPECT_TRUE(restarted.modelOptions().excluded_gpus.empty());
    EXPECT_EQ(restarted.recoveryPolicy(), "stop");
    EXPECT_EQ(restarted.recovery(), powerhouse::RecoveryPolicy::stop);
    ASSERT_TRUE(store.set_setting("recovery_policy", "sometimes"));
    EXPECT_EQ(SettingsController(store, {}).recovery(), powerhouse::RecoveryPolicy::replan);
}

}  // namespace
