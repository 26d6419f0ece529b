// The Models page's scan off the GUI thread: a library of 200 models (symbolic links to the
// SmolLM2 test model, so each is a real header to read and a real shape to plan) scanned
// while a 10 ms timer on the GUI thread keeps firing; a rescan asked for during a scan gives
// exactly one more; the controller destroyed before, during and right after a scan; the
// worker's store connection leaves a streaming answer streaming.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTest>
#include <QTimer>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "desktop_test_support.h"
#include "library_controller.h"
#include "powerhouse/telemetry.h"
#include "settings_controller.h"
#include "store/store.h"
#include "support/test_support.h"

namespace {

namespace fs = std::filesystem;
using powerhouse::store::Store;
using powerhouse::test::open_store;

constexpr int kModels = 200;
constexpr int kScanWait = 120000;  // ms: 200 headers on a loaded machine

class LibraryScanTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!fs::exists(powerhouse::test::test_model_path())) GTEST_SKIP() << "no test model";
        fs::create_directories(library());
        for (int i = 0; i < kModels; ++i) {
            char name[32];
            std::snprintf(name, sizeof name, "model-%03d.gguf", i);
            fs::create_symlink(powerhouse::test::test_model_path(), library() / name);
        }
        store_ = std::make_unique<Store>(open_store(dir_));
        settings_ = std::make_unique<SettingsController>(*store_, QString());
        powerhouse::GpuMonitorOptions options;
        options.simulate = "Small:1";  // one GPU of 1 GiB
        powerhouse::GpuMonitor monitor(options);
        settings_->setDevices(monitor.sample_now());
        settings_->setGpuReserve(0, 0);
    }

    fs::path library() const { return dir_ / "models"; }
    std::unique_ptr<LibraryController> make() {
        // No other apps' folders: only the library folder's files.
        powerhouse::catalog::Environment env;
        env.home = dir_ / "home";
        env.ollama_service_models.clear();
        return std::make_unique<LibraryController>(*store_, *settings_, QString::fromStdString(library().string()),
                                                   nullptr, env);
    }
    // Records the worker has written so far (read on this thread's own connection).
    size_t recorded() const {
        auto models = store_->models();
        return models ? models->size() : 0;
    }

    powerhouse::test::TempDir dir_;
    std::unique_ptr<Store> store_;
    std::unique_ptr<SettingsController> settings_;
};

TEST_F(LibraryScanTest, TheWindowKeepsTickingWhileTwoHundredModelsAreScanned) {
    auto controller = make();
    QAbstractItemModelTester tester(controller->models(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    QSignalSpy finished(controller.get(), &LibraryController::scanFinished);
    QSignalSpy scanning(controller.get(), &LibraryController::scanningChanged);
    int ticks = 0;
    qint64 longestGap = 0;
    QElapsedTimer sinceTick;
    QTimer timer;
    timer.setInterval(10);
    QObject::connect(&timer, &QTimer::timeout, [&] {
        if (ticks > 0) longestGap = std::max(longestGap, sinceTick.elapsed());
        sinceTick.restart();
        ++ticks;
    });
    timer.start();
    QElapsedTimer took;
    took.start();
    controller->rescan();
    // It returned before scanning: the rows come later, through the event loop.
    EXPECT_TRUE(controller->scanning());
    EXPECT_EQ(scanning.count(), 1);
    EXPECT_EQ(controller->models()->rowCount(), 0);
    ASSERT_TRUE(QTest::qWaitFor([&] { return finished.count() == 1; }, kScanWait));
    const qint64 scanMs = took.elapsed();
    timer.stop();
    EXPECT_FALSE(controller->scanning());
    EXPECT_EQ(scanning.count(), 2);
    std::printf("scan of %d models: %lld ms, %d ticks of the 10 ms timer, longest gap %lld ms\n", kModels,
                static_cast<long long>(scanMs), ticks, static_cast<long long>(longestGap));
    // The GUI thread ran its timer throughout: a scan on it would be one gap as long as the scan.
    EXPECT_GE(ticks, 3);
    if (scanMs >= 200) {
        EXPECT_LT(longestGap, scanMs / 2) << "the GUI thread was blocked";
    }

    const ModelListModel& models = *controller->models();
    ASSERT_EQ(models.rowCount(), kModels);
    for (int row = 0; row < kModels; ++row) {
        ASSERT_TRUE(models.data(models.index(row), ModelListModel::UsableRole).toBool()) << row;
        ASSERT_TRUE(models.data(models.index(row), ModelListModel::FitsRole).toBool())
            << row << ": " << models.data(models.index(row), ModelListModel::FitRole).toString().toStdString();
    }
    EXPECT_TRUE(models.data(models.index(0), ModelListModel::FitRole).toString().contains("GPU 0 (Small)"));

    // A change of settings re-plans on the GUI thread from the shapes in hand: a model whose
    // file went meanwhile is still planned (no file is read), until a scan notices.
    const QString first = models.data(models.index(0), ModelListModel::PathRole).toString();
    fs::remove(first.toStdString());
    settings_->setContextLength(65536);
    EXPECT_FALSE(models.data(models.index(0), ModelListModel::FitsRole).toBool());
    const QString suggestion = models.data(models.index(0), ModelListModel::SuggestionRole).toString();
    EXPECT_TRUE(suggestion.startsWith("It fits with a context of ")) << suggestion.toStdString() << " / "
        << models.data(models.index(0), ModelListModel::FitRole).toString().toStdString();
    controller->rescan();
    ASSERT_TRUE(QTest::qWaitFor([&] { return finished.count() == 2; }, kScanWait));
    EXPECT_EQ(models.rowCount(), kModels - 1);
    EXPECT_NE(models.data(models.index(0), ModelListModel::PathRole).toString(), first);
}

TEST_F(LibraryScanTest, ARescanAskedForDuringAScanGivesExactlyOneMore) {
    auto controller = make();
    QSignalSpy finished(controller.get(), &LibraryController::scanFinished);
    QSignalSpy scanning(controller.get(), &LibraryController::scanningChanged);
    controller->rescan();
    // Under way: the worker has written a first record.
    ASSERT_TRUE(QTest::qWaitFor([&] { return recorded() > 0; }, kScanWait));
    ASSERT_EQ(finished.count(), 0) << "the scan ended before it could be asked again";
    controller->rescan();
    controller->rescan();
    controller->rescan();
    EXPECT_TRUE(controller->scanning());
    ASSERT_TRUE(QTest::qWaitFor([&] { return !controller->scanning(); }, kScanWait));
    QTest::qWait(100);  // a third scan, were there one, would have started by now
    EXPECT_EQ(finished.count(), 2) << "the scan running, and one more for the three asked meanwhile";
    EXPECT_EQ(scanning.count(), 2) << "scanning from the first request to the last scan's end";
    EXPECT_FALSE(controller->scanning());
    EXPECT_EQ(controller->models()->rowCount(), kModels);

    // A download arriving while a rescan waits is not merged into it: its hash is kept.
    controller->rescan();
    controller->rescan();
    const std::string arrived = (library() / "model-005.gguf").string();
    const QString sha(64, QLatin1Char('b'));
    controller->addDownloaded(QString::fromStdString(arrived), sha);
    ASSERT_TRUE(QTest::qWaitFor([&] { return !controller->scanning(); }, kScanWait));
    // The two rescans are one scan when the worker had not begun the first before the second
    // was asked, else two (a loaded machine, CI, sees both); the download's is its own.
    EXPECT_TRUE(finished.count() == 4 || finished.count() == 5)
        << finished.count() << ": the rescans as one or two, and the download's";
    auto record = store_->model_by_path(arrived);
    ASSERT_TRUE(record && *record);
    EXPECT_EQ((*record)->sha256, sha.toStdString());
    EXPECT_EQ((*record)->source, "downloaded");
}

TEST_F(LibraryScanTest, DestroyingTheControllerBeforeDuringOrAfterAScanIsClean) {
    // Before the worker has begun.
    {
        auto controller = make();
        controller->rescan();
        controller.reset();
    }
    // During: the worker is writing records.
    {
        auto controller = make();
        controller->rescan();
        ASSERT_TRUE(QTest::qWaitFor([&] { return recorded() > 0; }, kScanWait));
        controller.reset();
        QTest::qWait(50);  // anything it posted is dropped with it, never run
    }
    // After: the listing is posted to the GUI thread but not yet shown (the event loop has
    // not run since); it goes with the controller.
    {
        auto controller = make();
        controller->rescan();
        ASSERT_TRUE(QTest::qWaitFor([&] { return recorded() == kModels; }, kScanWait));
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));
        controller.reset();
        QTest::qWait(50);
    }
    // The store is whole: a new controller lists every model.
    auto controller = make();
    QSignalSpy finished(controller.get(), &LibraryController::scanFinished);
    controller->rescan();
    ASSERT_TRUE(QTest::qWaitFor([&] { return finished.count() == 1; }, kScanWait));
    EXPECT_EQ(controller->models()->rowCount(), kModels);
}

// The worker's connection is opened while the app's answers may be streaming: it must not
// take them for a crash's leftovers.
TEST_F(LibraryScanTest, TheWorkersStoreLeavesAStreamingAnswerStreaming) {
    auto conversation = store_->create_conversation("a chat");
    ASSERT_TRUE(conversation);
    auto answer = store_->add_message(conversation->id, "assistant", "half an answer",
                                      powerhouse::store::MessageState::streaming);
    ASSERT_TRUE(answer);
    auto controller = make();
    QSignalSpy finished(controller.get(), &LibraryController::scanFinished);
    controller->rescan();
    ASSERT_TRUE(QTest::qWaitFor([&] { return finished.count() == 1; }, kScanWait));
    auto now = store_->message(answer->id);
    ASSERT_TRUE(now);
    EXPECT_EQ(now->state, powerhouse::store::MessageState::streaming);
}

}  // namespace
