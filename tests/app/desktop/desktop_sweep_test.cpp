// The dashboard's efficiency sweep (issue 24, PowerSweepController) through the whole app
// (DesktopApp): the test model on the CPU, simulated GPUs standing in for it. A sweep runs
// the model's answers at each limit, marks the most efficient and the knee, labels the
// figures as simulated, sets the limits back and keeps its result for the next start; the
// chosen limit can be applied as the GPU's setting. Each step's limit is in the store before
// it is set (for a crash), even while the GUI thread that owns the store is busy; a step the
// store cannot record is never set; and a cancel, an unload or quitting mid-sweep sets the
// limits back.
// Nothing of it reaches the chat's conversations. Also the chat's side of heat: an answer
// the GPUs were slowed under keeps the dashboard's words with it, after a restart too.
#include <gtest/gtest.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>

#include <SQLiteCpp/SQLiteCpp.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dashboard_controller.h"
#include "desktop_app.h"
#include "desktop_test_support.h"
#include "server_controller.h"
#include "support/test_support.h"

namespace {

namespace fs = std::filesystem;

constexpr int kSweepWait = 120000;

class DesktopSweepTest : public ::testing::Test {
protected:
    void SetUp() override {
        for (const char* name : {"HOME", "POWERHOUSE_SIMULATE_GPUS", "POWERHOUSE_TEST_MODEL"}) {
            const char* value = std::getenv(name);
            saved_.emplace_back(name, value != nullptr ? std::optional<std::string>(value) : std::nullopt);
        }
        test_model_ = powerhouse::test::test_model_path();
        fs::create_directories(dir_ / "home");
        setenv("HOME", (dir_ / "home").c_str(), 1);
        setenv("POWERHOUSE_TEST_MODEL", (dir_ / "no-default-model.gguf").c_str(), 1);
        setenv("POWERHOUSE_SIMULATE_GPUS", "RTX 4090:24", 1);
    }
    void TearDown() override {
        for (const auto& [name, value] : saved_) {
            if (value) setenv(name.c_str(), value->c_str(), 1);
            else unsetenv(name.c_str());
        }
    }
    std::unique_ptr<DesktopApp> make(double secondsPerLimit, std::vector<double> limits) {
        DesktopApp::Options options;
        options.dataDir = QString::fromStdString((dir_ / "data").string());
        options.hubEndpoint = "http://127.0.0.1:9";
        options.rescan = false;
        options.sweep.secondsPerLimit = secondsPerLimit;
        options.sweep.tokensPerAnswer = 12;
        options.sweep.limitsW = std::move(limits);
        auto app = DesktopApp::create(options);
        EXPECT_TRUE(app.ok()) << (app.ok() ? "" : app.error().message);
        return app.ok() ? std::move(*app) : nullptr;
    }
    // Loads the test model; false (with a failure) when it does not become ready.
    bool loadModel(DesktopApp& app) {
        app.load(QString::fromStdString(test_model_.string()), false);
        if (!QTest::qWaitFor([&] { return app.chat().modelState() != ChatController::ModelState::Loading; }, kSweepWait))
            return false;
        EXPECT_EQ(app.chat().modelState(), ChatController::ModelState::Ready) << app.chat().errorText().toStdString();
        return QTest::qWaitFor([&] { return app.sweep().whyNot().isEmpty(); }, 10000);
    }
    static double currentLimit(DesktopApp& app) {
        return app.power().gpus().at(0).toMap().value("currentW").toDouble();
    }
    static QJsonArray crashRecord(DesktopApp& app) {
        auto v = app.store().setting("power_limit_changes");
        return v && *v ? QJsonDocument::fromJson(QByteArray::fromStdString(**v)).array() : QJsonArray();
    }
    static bool settled(DesktopApp& app) { return !app.sweep().running(); }

    powerhouse::test::TempDir dir_;
    fs::path test_model_;
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

PowerSweepRow rowOf(const PowerSweepController& sweep, int i) { return sweep.rows().at(i).value<PowerSweepRow>(); }

// Every limit GPU 0 has had while it watches, read on a thread of its own as often as it can:
// the sweep sets limits from its own thread, whatever the GUI thread is doing.
class LimitWatcher {
public:
    explicit LimitWatcher(powerhouse::GpuMonitor& monitor)
        : m_thread([this, &monitor] {
              while (!m_stop) {
                  if (auto l = monitor.power_limits(0); l && l->current_w) {
                      const std::lock_guard lock(m_mutex);
                      m_seen.insert(*l->current_w);
                  }
                  std::this_thread::sleep_for(std::chrono::microseconds(50));
              }
          }) {}
    ~LimitWatcher() {
        m_stop = true;
        m_thread.join();
    }
    std::set<double> seen() const {
        const std::lock_guard lock(m_mutex);
        return m_seen;
    }

private:
    std::atomic<bool> m_stop{false};
    mutable std::mutex m_mutex;
    std::set<double> m_seen;
    std::thread m_thread;  // last: it starts once the rest is made
};

// Keeps the GUI thread (which owns the store and records each step) busy for `ms`, as a slow
// frame would, checking `ok` about every millisecond meanwhile; false at its first failure.
template <class Check>
bool busyGuiThread(int ms, Check ok) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
        if (!ok()) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return ok();
}

TEST_F(DesktopSweepTest, ASweepMarksTheBestLimitSetsTheLimitsBackAndIsKept) {
    if (!fs::exists(test_model_)) GTEST_SKIP() << "no test model";
    auto app = make(0, {450, 300, 200});
    ASSERT_NE(app, nullptr);
    PowerSweepController& sweep = app->sweep();
    EXPECT_FALSE(sweep.whyNot().isEmpty()) << "no model yet";
    EXPECT_FALSE(sweep.start());
    EXPECT_TRUE(sweep.messageIsError());
    ASSERT_TRUE(loadModel(*app));
    const int conversations = app->chat().conversations()->rowCount();

    ASSERT_TRUE(sweep.start()) << sweep.message().toStdString();
    EXPECT_TRUE(sweep.running());
    EXPECT_FALSE(sweep.start()) << "one sweep at a time";
    // The API server's new requests wait the sweep out (desktop_server_test: what they get).
    EXPECT_TRUE(app->server().heldReason().contains("efficiency sweep"));
    ASSERT_TRUE(QTest::qWaitFor([&] { return settled(*app); }, kSweepWait));
    ASSERT_EQ(sweep.state(), PowerSweepController::State::Done) << sweep.message().toStdString();
    EXPECT_TRUE(app->server().heldReason().isEmpty());

    ASSERT_EQ(sweep.rows().size(), 3);
    for (int i = 0; i < 3; ++i) {
        const PowerSweepRow r = rowOf(sweep, i);
        EXPECT_GT(r.tokensPerSecond, 0) << i;
        ASSERT_TRUE(r.hasPower) << i;
        EXPECT_NEAR(r.tokensPerJoule, r.tokensPerSecond / r.averageW, 1e-9 * r.tokensPerJoule) << i;
        EXPECT_LE(r.averageW, r.totalLimitW + 1) << "a GPU draws no more than its limit";
        EXPECT_TRUE(r.hasTemperature) << i;
    }
    EXPECT_EQ(rowOf(sweep, 0).limit, "450 W");
    EXPECT_EQ(rowOf(sweep, 2).limit, "200 W");
    // The stand-in's power model: a lower limit draws less.
    EXPECT_LT(rowOf(sweep, 2).averageW, rowOf(sweep, 0).averageW);
    ASSERT_GE(sweep.mostEfficient(), 0);
    ASSERT_GE(sweep.knee(), 0);
    EXPECT_TRUE(rowOf(sweep, sweep.mostEfficient()).mostEfficient);
    EXPECT_TRUE(rowOf(sweep, sweep.knee()).knee);
    double best = 0;
    for (int i = 0; i < 3; ++i) best = std::max(best, rowOf(sweep, i).tokensPerJoule);
    EXPECT_EQ(rowOf(sweep, sweep.mostEfficient()).tokensPerJoule, best);
    EXPECT_FALSE(sweep.label().isEmpty()) << "simulated figures say so";
    EXPECT_TRUE(sweep.summary().startsWith("Most efficient: ")) << sweep.summary().toStdString();
    EXPECT_TRUE(sweep.about().contains("on GPU 0, 12 tokens per answer")) << sweep.about().toStdString();
    EXPECT_EQ(sweep.message(), "The power limits are back at 450 W, as before the sweep.");
    EXPECT_FALSE(sweep.messageIsError());

    // The limits are back, and nothing is left for a crash to undo.
    EXPECT_EQ(currentLimit(*app), 450);
    EXPECT_TRUE(crashRecord(*app).isEmpty());
    // The sweep's answers are not the chat's.
    EXPECT_EQ(app->chat().conversations()->rowCount(), conversations);
    EXPECT_FALSE(app->chat().generatingAny());

    // Applying a limit makes it the GPU's setting.
    const PowerSweepRow chosen = rowOf(sweep, 1);
    ASSERT_TRUE(sweep.apply(1)) << sweep.message().toStdString();
    EXPECT_EQ(currentLimit(*app), 300);
    EXPECT_EQ(app->power().gpus().at(0).toMap().value("settingW").toDouble(), 300);
    EXPECT_TRUE(sweep.message().startsWith("300 W applied to GPU 0")) << sweep.message().toStdString();
    EXPECT_FALSE(sweep.apply(7));

    // The next start shows the same result.
    app.reset();
    auto again = make(0, {});
    ASSERT_NE(again, nullptr);
    EXPECT_EQ(again->sweep().state(), PowerSweepController::State::Done);
    ASSERT_EQ(again->sweep().rows().size(), 3);
    EXPECT_EQ(rowOf(again->sweep(), 1), chosen);
    ASSERT_GE(again->sweep().mostEfficient(), 0);
    EXPECT_TRUE(rowOf(again->sweep(), again->sweep().mostEfficient()).mostEfficient);
    EXPECT_FALSE(again->sweep().label().isEmpty());
}

TEST_F(DesktopSweepTest, EachStepIsRecordedForACrashAndCancelSetsTheLimitBack) {
    if (!fs::exists(test_model_)) GTEST_SKIP() << "no test model";
    auto app = make(60, {450, 250});  // a minute per limit: cancelled long before
    ASSERT_NE(app, nullptr);
    ASSERT_TRUE(loadModel(*app));
    PowerSweepController& sweep = app->sweep();
    ASSERT_TRUE(sweep.start());
    // Cancelling during the first limit (the default: nothing changed yet), then a second
    // sweep that starts below the default, cancelled there.
    ASSERT_TRUE(QTest::qWaitFor([&] { return sweep.progressText().startsWith("Limit 1 of 2: 450 W on GPU 0"); }, kSweepWait))
        << sweep.progressText().toStdString();
    sweep.cancel();
    EXPECT_EQ(sweep.state(), PowerSweepController::State::Cancelling);
    ASSERT_TRUE(QTest::qWaitFor([&] { return settled(*app); }, kSweepWait));
    EXPECT_EQ(sweep.state(), PowerSweepController::State::Idle) << "no result to show";
    EXPECT_EQ(sweep.message(), "Sweep cancelled; the power limits are back as they were.");

    app.reset();
    auto longSweep = make(60, {250, 450});
    ASSERT_NE(longSweep, nullptr);
    ASSERT_TRUE(loadModel(*longSweep));
    PowerSweepController& second = longSweep->sweep();
    ASSERT_TRUE(second.start());
    // While a limit below the default runs, the store says what to set back after a crash
    // (written before the limit is set: the GPU card shows it a moment later).
    ASSERT_TRUE(QTest::qWaitFor([&] { return crashRecord(*longSweep).size() == 1 && currentLimit(*longSweep) == 250; },
                                kSweepWait));
    const QJsonObject record = crashRecord(*longSweep).at(0).toObject();
    EXPECT_EQ(record.value("before_w").toDouble(), 450);
    EXPECT_EQ(record.value("now_w").toDouble(), 250);
    EXPECT_EQ(currentLimit(*longSweep), 250);
    EXPECT_FALSE(second.whyNot().isEmpty());
    second.cancel();
    ASSERT_TRUE(QTest::qWaitFor([&] { return settled(*longSweep); }, kSweepWait));
    EXPECT_EQ(currentLimit(*longSweep), 450);
    EXPECT_TRUE(crashRecord(*longSweep).isEmpty());
}

// A limit changed on the Power page while a sweep runs on that GPU would be undone by the
// sweep's end, which sets back the limits from before it: the page refuses the change and its
// row says why, until the sweep ends; then the change is made and kept.
TEST_F(DesktopSweepTest, TheSweepsGpusRefuseALimitChangedWhileItRuns) {
    if (!fs::exists(test_model_)) GTEST_SKIP() << "no test model";
    auto app = make(60, {250, 450});  // a minute per limit: cancelled long before
    ASSERT_NE(app, nullptr);
    ASSERT_TRUE(loadModel(*app));
    PowerController& power = app->power();
    const auto held = [&] { return power.gpus().at(0).toMap().value("held").toString(); };
    EXPECT_TRUE(held().isEmpty());
    PowerSweepController& sweep = app->sweep();
    ASSERT_TRUE(sweep.start()) << sweep.message().toStdString();
    EXPECT_TRUE(held().contains("efficiency sweep")) << held().toStdString();
    EXPECT_TRUE(held().contains("cancel the sweep")) << held().toStdString();
    ASSERT_TRUE(QTest::qWaitFor([&] { return currentLimit(*app) == 250; }, kSweepWait));
    EXPECT_FALSE(power.setLimit(0, 300));
    EXPECT_FALSE(power.restoreDefault(0));
    EXPECT_EQ(currentLimit(*app), 250) << "nothing changed under the sweep";
    EXPECT_EQ(power.gpus().at(0).toMap().value("settingW").toDouble(), 0) << "nor kept for the next start";
    if (power.gpus().size() > 1) {
        EXPECT_TRUE(power.gpus().at(1).toMap().value("held").toString().isEmpty()) << "a GPU not swept is free";
    }

    sweep.cancel();
    ASSERT_TRUE(QTest::qWaitFor([&] { return settled(*app); }, kSweepWait));
    EXPECT_EQ(currentLimit(*app), 450);
    EXPECT_TRUE(held().isEmpty());
    EXPECT_TRUE(power.setLimit(0, 300));
    EXPECT_EQ(currentLimit(*app), 300);
    EXPECT_EQ(power.gpus().at(0).toMap().value("settingW").toDouble(), 300);
    EXPECT_TRUE(power.restoreDefault(0));
}

TEST_F(DesktopSweepTest, EachStepsLimitIsInTheStoreBeforeItIsSet) {
    if (!fs::exists(test_model_)) GTEST_SKIP() << "no test model";
    auto app = make(0, {300, 250});
    ASSERT_NE(app, nullptr);
    ASSERT_TRUE(loadModel(*app));
    powerhouse::GpuMonitor& monitor = app->dashboard().monitor();
    double now = 450;
    // What a crash would need at any moment: GPU 0 either at its own 450 W, or the store
    // saying to set 450 W back (and at which of the sweep's limits it was left).
    const auto recorded = [&] {
        now = monitor.power_limits(0)->current_w.value_or(0);
        if (now == 450) return true;
        const QJsonArray record = crashRecord(*app);
        if (record.size() != 1) return false;
        const QJsonObject r = record.at(0).toObject();
        return r.value("before_w").toDouble() == 450 &&
               (r.value("now_w").toDouble() == 300 || r.value("now_w").toDouble() == 250);
    };
    PowerSweepController& sweep = app->sweep();
    ASSERT_TRUE(sweep.start());
    // The GUI thread is busy for a second right away: the sweep's thread cannot have the first
    // limit recorded meanwhile, so it must not set it either.
    EXPECT_TRUE(busyGuiThread(1000, recorded)) << "GPU 0 at " << now << " W with nothing in the store to set it back";
    EXPECT_EQ(now, 450) << "the first step waits for its record";
    // Then at every look until the sweep ends.
    bool always = true;
    ASSERT_TRUE(QTest::qWaitFor(
        [&] {
            if (!recorded() && always) {  // said once
                always = false;
                ADD_FAILURE() << "GPU 0 at " << now << " W with nothing in the store to set it back";
            }
            return settled(*app);
        },
        kSweepWait));
    EXPECT_TRUE(always);
    ASSERT_EQ(sweep.state(), PowerSweepController::State::Done) << sweep.message().toStdString();
    ASSERT_EQ(sweep.rows().size(), 2);
    EXPECT_EQ(rowOf(sweep, 1).limit, "250 W");
    EXPECT_EQ(currentLimit(*app), 450);
    EXPECT_TRUE(crashRecord(*app).isEmpty()) << "nothing left changed after the sweep";
}

TEST_F(DesktopSweepTest, AStepTheStoreCannotRecordStopsTheSweep) {
    if (!fs::exists(test_model_)) GTEST_SKIP() << "no test model";
    auto app = make(60, {250, 450});
    ASSERT_NE(app, nullptr);
    ASSERT_TRUE(loadModel(*app));
    {
        // The record of changed limits can no longer be written (a full disk, say).
        SQLite::Database db((dir_ / "data" / "powerhouse.db").string(), SQLite::OPEN_READWRITE, 10000);
        for (const char* op : {"INSERT", "UPDATE"}) {
            db.exec(
                std::string("CREATE TRIGGER refuse_") + op + " BEFORE " + op +
                " ON app_settings WHEN NEW.key = 'power_limit_changes' BEGIN SELECT RAISE(ABORT, 'disk full'); END");
        }
    }
    PowerSweepController& sweep = app->sweep();
    powerhouse::GpuMonitor& monitor = app->dashboard().monitor();
    const LimitWatcher watcher(monitor);
    ASSERT_TRUE(sweep.start());
    // While the GUI thread is busy (and cannot have been asked yet), and after: a limit a
    // crash could not undo is never set. The sweep stops, and says why.
    EXPECT_TRUE(busyGuiThread(1000, [&] { return monitor.power_limits(0)->current_w == 450.0; }));
    ASSERT_TRUE(QTest::qWaitFor([&] { return settled(*app); }, kSweepWait));
    EXPECT_EQ(sweep.state(), PowerSweepController::State::Failed) << sweep.message().toStdString();
    EXPECT_TRUE(sweep.messageIsError());
    EXPECT_TRUE(
        sweep.message().startsWith("The sweep failed: power sweep: at 250 W: Powerhouse could not record the "
                                   "power limits it was about to set"))
        << sweep.message().toStdString();
    EXPECT_TRUE(sweep.message().contains("so it did not set them")) << sweep.message().toStdString();
    EXPECT_TRUE(sweep.message().contains("disk full")) << sweep.message().toStdString();
    EXPECT_EQ(watcher.seen(), std::set<double>{450});
    EXPECT_EQ(currentLimit(*app), 450);
}

TEST_F(DesktopSweepTest, ALaterStepTheStoreCannotRecordIsNeverSet) {
    if (!fs::exists(test_model_)) GTEST_SKIP() << "no test model";
    auto app = make(0, {300, 250});
    ASSERT_NE(app, nullptr);
    ASSERT_TRUE(loadModel(*app));
    {
        // The store refuses only the record that says GPU 0 is going to 250 W.
        SQLite::Database db((dir_ / "data" / "powerhouse.db").string(), SQLite::OPEN_READWRITE, 10000);
        for (const char* op : {"INSERT", "UPDATE"}) {
            db.exec(std::string("CREATE TRIGGER refuse_") + op + " BEFORE " + op +
                    " ON app_settings WHEN NEW.key = 'power_limit_changes' AND NEW.value LIKE '%\"now_w\":250%' "
                    "BEGIN SELECT RAISE(ABORT, 'disk full'); END");
        }
    }
    PowerSweepController& sweep = app->sweep();
    const LimitWatcher watcher(app->dashboard().monitor());
    ASSERT_TRUE(sweep.start());
    ASSERT_TRUE(QTest::qWaitFor([&] { return settled(*app); }, kSweepWait));
    EXPECT_EQ(sweep.state(), PowerSweepController::State::Failed) << sweep.message().toStdString();
    EXPECT_TRUE(sweep.message().startsWith("The sweep failed: power sweep: at 250 W: Powerhouse could not record"))
        << sweep.message().toStdString();
    EXPECT_TRUE(sweep.message().contains("disk full")) << sweep.message().toStdString();
    EXPECT_TRUE(sweep.message().endsWith("(the power limits are back at 450 W)")) << sweep.message().toStdString();
    // The first step ran at 300 W; 250 W was never set; 450 W is back, and so says the store.
    EXPECT_EQ(watcher.seen(), (std::set<double>{300, 450}));
    EXPECT_EQ(currentLimit(*app), 450);
    EXPECT_TRUE(crashRecord(*app).isEmpty());
}

TEST_F(DesktopSweepTest, UnloadingOrQuittingMidSweepEndsItWithTheLimitsBack) {
    if (!fs::exists(test_model_)) GTEST_SKIP() << "no test model";
    {
        auto app = make(60, {300, 250});
        ASSERT_NE(app, nullptr);
        ASSERT_TRUE(loadModel(*app));
        ASSERT_TRUE(app->sweep().start());
        ASSERT_TRUE(QTest::qWaitFor([&] { return currentLimit(*app) == 300; }, kSweepWait));
        app->engine().unload();
        ASSERT_TRUE(QTest::qWaitFor([&] { return settled(*app); }, kSweepWait));
        EXPECT_EQ(app->sweep().message(), "The sweep stopped: the model was unloaded.");
        EXPECT_TRUE(app->sweep().messageIsError());
        EXPECT_EQ(currentLimit(*app), 450);
        EXPECT_FALSE(app->sweep().whyNot().isEmpty()) << "no model now";
    }
    auto app = make(60, {300, 250});
    ASSERT_NE(app, nullptr);
    ASSERT_TRUE(loadModel(*app));
    ASSERT_TRUE(app->sweep().start());
    ASSERT_TRUE(QTest::qWaitFor([&] { return crashRecord(*app).size() == 1; }, kSweepWait));
    // Quitting: the sweep's thread ends and the limit goes back before the app is gone;
    // what the store keeps for the next start is nothing to undo.
    app.reset();
    auto store = powerhouse::store::Store::open(dir_ / "data" / "powerhouse.db");
    ASSERT_TRUE(store.ok()) << store.error().message;
    auto record = store->setting("power_limit_changes");
    ASSERT_TRUE(record.ok() && record->has_value());
    EXPECT_EQ(**record, "[]");
}

TEST_F(DesktopSweepTest, AnAnswerTheGpusWereSlowedUnderKeepsItsThrottleNote) {
    if (!fs::exists(test_model_)) GTEST_SKIP() << "no test model";
    auto app = make(0, {});
    ASSERT_NE(app, nullptr);
    ASSERT_TRUE(loadModel(*app));
    // The stand-in at its lowest limit is held back by its power cap under the answer's load.
    ASSERT_TRUE(app->power().setLimit(0, 150));
    ChatController& chat = app->chat();
    ASSERT_TRUE(chat.setConversationSettings({}, {{"temperature", 0}, {"maxTokens", 24}}));
    chat.send("Write a Python function that reverses a string.");
    ASSERT_TRUE(QTest::qWaitFor([&] { return !chat.generatingAny(); }, kSweepWait));
    chat.flushWrites();
    auto messages = app->store().messages(chat.currentConversationId());
    ASSERT_TRUE(messages.ok());
    ASSERT_EQ(messages->size(), 2u);
    const std::string throttle = (*messages)[1].stats.throttle;
    EXPECT_EQ(throttle.rfind("GPU 0 throttled (power cap) for ", 0), 0u) << throttle;
    EXPECT_EQ(QString::fromStdString(throttle), app->dashboard().answerThrottle());
    const qint64 conversation = chat.currentConversationId();
    app.reset();

    // After a restart the answer's statistics still say it.
    auto again = make(0, {});
    ASSERT_NE(again, nullptr);
    again->chat().selectConversation(conversation);
    MessageListModel& shown = *again->chat().messages();
    ASSERT_EQ(shown.rowCount(), 2);
    const QString stats = shown.data(shown.index(1), MessageListModel::StatsRole).toString();
    EXPECT_TRUE(stats.endsWith(QString::fromStdString(throttle))) << stats.toStdString();
}

}  // namespace
