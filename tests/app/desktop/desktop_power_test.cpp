// Power limits in the app (issue 24, PowerController): set, refused (no permission with the
// nvidia-smi command, not supported, out of range) and restored, on simulated GPUs and on the
// fake NVML library of tests/engine/telemetry; the limits put back when the controller goes
// unless kept; the changes a crashed run left in the store set back at the next start
// (restoreLeftovers, and DesktopApp saying so once, then setting the kept limit again).
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <stdlib.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <QTest>

#include "dashboard_controller.h"
#include "desktop_app.h"
#include "desktop_test_support.h"
#include "power_controller.h"
#include "powerhouse/telemetry.h"
#include "support/test_support.h"

namespace {

using powerhouse::GpuMonitor;
using powerhouse::GpuMonitorOptions;

GpuMonitorOptions simulated(const char* spec) {
    GpuMonitorOptions options;
    options.simulate = spec;
    return options;
}

GpuMonitorOptions fakeNvml(const char* scenario) {
    setenv("FAKE_NVML_SCENARIO", scenario, 1);
    GpuMonitorOptions options;
    options.nvml = FAKE_NVML_PATH;
    return options;
}

QVariantMap row(const PowerController& power, int gpu) { return power.gpus().at(gpu).toMap(); }

std::string setting(const powerhouse::store::Store& store, const std::string& key) {
    auto v = store.setting(key);
    return v && *v ? **v : std::string();
}

QJsonObject gpuSettings(const powerhouse::store::Store& store, const std::string& uuid) {
    auto v = store.gpu_settings(uuid);
    return v && *v ? QJsonDocument::fromJson(QByteArray::fromStdString(**v)).object() : QJsonObject();
}

TEST(DesktopPower, SetRefusedAndRestoredOnSimulatedGpus) {
    powerhouse::test::TempDir dir;
    auto store = powerhouse::test::open_store(dir);
    GpuMonitor monitor(simulated("RTX 4090:24;RTX 4090:24:power=denied;RTX 4090:24:power=fixed"));
    monitor.sample_now();
    PowerController power(store, monitor);
    ASSERT_EQ(power.gpus().size(), 3);
    EXPECT_EQ(row(power, 0).value("currentW").toDouble(), 450);
    EXPECT_EQ(row(power, 0).value("defaultW").toDouble(), 450);
    EXPECT_EQ(row(power, 0).value("minW").toDouble(), 150);
    EXPECT_EQ(row(power, 0).value("maxW").toDouble(), 600);
    const std::string uuid = row(power, 0).value("uuid").toString().toStdString();

    ASSERT_TRUE(power.setLimit(0, 300));
    EXPECT_EQ(row(power, 0).value("currentW").toDouble(), 300);
    EXPECT_EQ(row(power, 0).value("changedFromW").toDouble(), 450);
    EXPECT_EQ(gpuSettings(store, uuid).value("power_limit_w").toDouble(), 300);
    const QJsonArray changes = QJsonDocument::fromJson(QByteArray::fromStdString(setting(store, "power_limit_changes"))).array();
    ASSERT_EQ(changes.size(), 1);
    EXPECT_EQ(changes[0].toObject().value("uuid").toString().toStdString(), uuid);
    EXPECT_EQ(changes[0].toObject().value("before_w").toDouble(), 450);
    EXPECT_EQ(changes[0].toObject().value("now_w").toDouble(), 300);

    // Out of range: the range in watts, nothing changed, no command.
    EXPECT_FALSE(power.setLimit(0, 700));
    EXPECT_TRUE(row(power, 0).value("error").toString().contains("150")) << row(power, 0).value("error").toString().toStdString();
    EXPECT_TRUE(row(power, 0).value("command").toString().isEmpty());
    EXPECT_EQ(row(power, 0).value("currentW").toDouble(), 300);

    // No permission: the engine's words and the exact command.
    EXPECT_FALSE(power.setLimit(1, 300));
    EXPECT_EQ(row(power, 1).value("command").toString().toStdString(), "sudo nvidia-smi -i 1 -pl 300");
    EXPECT_TRUE(row(power, 1).value("error").toString().contains("sudo nvidia-smi -i 1 -pl 300"));
    // Not supported: the words, no command.
    EXPECT_FALSE(power.setLimit(2, 300));
    EXPECT_FALSE(row(power, 2).value("error").toString().isEmpty());
    EXPECT_TRUE(row(power, 2).value("command").toString().isEmpty());

    // One click back to the default: the setting and the record go.
    ASSERT_TRUE(power.restoreDefault(0));
    EXPECT_EQ(row(power, 0).value("currentW").toDouble(), 450);
    EXPECT_EQ(row(power, 0).value("changedFromW").toDouble(), 0);
    EXPECT_TRUE(row(power, 0).value("error").toString().isEmpty());
    EXPECT_FALSE(gpuSettings(store, uuid).contains("power_limit_w"));
    EXPECT_EQ(setting(store, "power_limit_changes"), "[]");
}

TEST(DesktopPower, QuittingPutsTheLimitsBackUnlessKept) {
    powerhouse::test::TempDir dir;
    auto store = powerhouse::test::open_store(dir);
    GpuMonitor monitor(simulated("RTX 4090:24"));
    monitor.sample_now();
    {
        PowerController power(store, monitor);
        ASSERT_TRUE(power.setLimit(0, 350));
    }
    EXPECT_EQ(*monitor.power_limits(0)->current_w, 450);
    EXPECT_EQ(setting(store, "power_limit_changes"), "[]");
    {
        PowerController power(store, monitor);
        power.setKeepLimits(true);
        ASSERT_TRUE(power.setLimit(0, 350));
    }
    EXPECT_EQ(*monitor.power_limits(0)->current_w, 350);
    EXPECT_EQ(setting(store, "keep_power_limits"), "true");
    EXPECT_EQ(setting(store, "power_limit_changes"), "[]");  // kept: nothing for the next start to undo
}

// The fake NVML's record of the limits set since its nvmlInit_v2 (not NVML's).
std::vector<unsigned> fakeSets(int gpu) {
    void* lib = dlopen(FAKE_NVML_PATH, RTLD_NOW);
    if (lib == nullptr) return {};
    auto sets = reinterpret_cast<int (*)(int, unsigned*, int)>(dlsym(lib, "fake_nvml_power_limit_sets"));
    std::vector<unsigned> out(16);
    out.resize(sets != nullptr ? static_cast<size_t>(sets(gpu, out.data(), 16)) : 0);
    dlclose(lib);
    return out;
}

TEST(DesktopPower, NvmlRefusalGivesTheCommandAndACrashedRunsLimitsGoBack) {
    powerhouse::test::TempDir dir;
    auto store = powerhouse::test::open_store(dir);
    std::string uuid;
    {
        GpuMonitor monitor(fakeNvml("normal,power_denied"));
        monitor.sample_now();
        PowerController power(store, monitor);
        ASSERT_EQ(power.gpus().size(), 2);
        uuid = row(power, 0).value("uuid").toString().toStdString();
        EXPECT_FALSE(power.setLimit(0, 300));
        EXPECT_EQ(row(power, 0).value("command").toString().toStdString(), "sudo nvidia-smi -i 0 -pl 300");
        EXPECT_FALSE(power.setLimit(1, 400));  // an RTX A6000: 100-300 W
        EXPECT_TRUE(row(power, 1).value("error").toString().contains("300")) << row(power, 1).value("error").toString().toStdString();
    }
    // A run that crashed with GPU 0 at 300 W: the next start sets 450 W back, once.
    const QJsonArray left{QJsonObject{{"uuid", QString::fromStdString(uuid)}, {"before_w", 450}, {"now_w", 300}}};
    ASSERT_TRUE(store.set_setting("power_limit_changes", QJsonDocument(left).toJson().toStdString()));
    GpuMonitor holder(fakeNvml("normal"));  // keeps the library loaded, and its record, after restoring
    const QString note = PowerController::restoreLeftovers(store, fakeNvml("normal"));
    EXPECT_TRUE(note.contains("set back from 300 W to 450 W")) << note.toStdString();
    EXPECT_EQ(fakeSets(0), std::vector<unsigned>{450000});
    EXPECT_EQ(setting(store, "power_limit_changes"), "[]");
    EXPECT_TRUE(PowerController::restoreLeftovers(store, fakeNvml("normal")).isEmpty());
    // A user who kept their limits meant them: nothing is undone.
    ASSERT_TRUE(store.set_setting("power_limit_changes", QJsonDocument(left).toJson().toStdString()));
    ASSERT_TRUE(store.set_setting("keep_power_limits", "true"));
    EXPECT_TRUE(PowerController::restoreLeftovers(store, fakeNvml("normal")).isEmpty());
}

TEST(DesktopPower, TheAppSaysOnceWhatItSetBackAndSetsTheKeptLimitAgain) {
    powerhouse::test::TempDir dir;
    const char* old = std::getenv("POWERHOUSE_SIMULATE_GPUS");
    const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
    setenv("POWERHOUSE_SIMULATE_GPUS", "RTX 4090:24;RTX 4090:24", 1);
    const std::string uuid = powerhouse::test::simulated_gpus("RTX 4090:24;RTX 4090:24").gpus.at(1).uuid;
    {
        auto store = powerhouse::store::Store::open((dir / "powerhouse.db").string());
        ASSERT_TRUE(store.ok());
        const QJsonArray left{QJsonObject{{"uuid", QString::fromStdString(uuid)}, {"before_w", 450}, {"now_w", 250}}};
        ASSERT_TRUE(store->set_setting("power_limit_changes", QJsonDocument(left).toJson().toStdString()));
        ASSERT_TRUE(store->set_gpu_settings(uuid, R"({"use":true,"power_limit_w":250})"));
    }
    DesktopApp::Options options;
    options.dataDir = QString::fromStdString(dir.path().string());
    options.rescan = false;
    {
        auto app = DesktopApp::create(options);
        ASSERT_TRUE(app.ok()) << app.error().message;
        PowerController& power = (*app)->power();
        EXPECT_TRUE(power.startupNote().contains("GPU 1 (RTX 4090) set back from 250 W to 450 W"))
            << power.startupNote().toStdString();
        EXPECT_EQ(row(power, 1).value("currentW").toDouble(), 250);  // the kept setting, set again
        EXPECT_EQ(row(power, 1).value("changedFromW").toDouble(), 450);
        EXPECT_EQ(row(power, 0).value("currentW").toDouble(), 450);
        power.dismissStartupNote();
        EXPECT_TRUE(power.startupNote().isEmpty());
        // The settings' own fields keep the power limit when applied.
        ASSERT_TRUE((*app)->settings().apply());
        EXPECT_EQ(gpuSettings((*app)->store(), uuid).value("power_limit_w").toDouble(), 250);
    }
    {
        auto app = DesktopApp::create(options);
        ASSERT_TRUE(app.ok());
        EXPECT_TRUE((*app)->power().startupNote().isEmpty());  // a clean quit left nothing
    }
    if (saved) setenv("POWERHOUSE_SIMULATE_GPUS", saved->c_str(), 1);
    else unsetenv("POWERHOUSE_SIMULATE_GPUS");
}

}  // namespace

namespace {

// Heat: a simulated GPU held at its lowest limit under load is slowed by its power cap, and
// the dashboard says so for the answer, with the speed lost.
TEST(DesktopPower, ThrottlingDuringAnAnswerIsShownWithItsCost) {
    DashboardController dashboard(simulated("RTX 4090:24"));
    dashboard.start();
    dashboard.setModelGpus(QVariantList{QVariantMap{{"gpu", 0}, {"bytes", 1e9}}});
    ASSERT_TRUE(dashboard.monitor().set_power_limit(0, 150));
    dashboard.beginAnswer(1);
    for (int i = 0; i < 4; ++i) {
        QTest::qWait(60);
        dashboard.apply(dashboard.monitor().sample_now());
    }
    const DashboardController::AnswerEnd end = dashboard.endAnswer(1);
    const std::string text = dashboard.answerThrottle().toStdString();
    EXPECT_NE(text.find("GPU 0 throttled (power cap) for "), std::string::npos) << text;
    EXPECT_NE(text.find("% slower"), std::string::npos) << text;
    EXPECT_EQ(end.throttle.toStdString(), text) << "the answer keeps what was said of it";
    // The next answer starts with a clean slate, and at the default limit nothing is said.
    ASSERT_TRUE(dashboard.monitor().restore_power_limit(0));
    dashboard.beginAnswer(2);
    EXPECT_TRUE(dashboard.answerThrottle().isEmpty());
}

}  // namespace
