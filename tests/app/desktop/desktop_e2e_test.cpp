// The installed shape of the app, end to end: `powerhouse` started on the SmolLM2 model
// (offscreen), sends a message, streams the answer, saves a screenshot once idle and quits;
// the data folder then holds the conversation. Also once in a real X window under Xvfb.
#include <gtest/gtest.h>

#include <QImage>
#include <QSet>

#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "store/store.h"
#include "support/test_support.h"

namespace {

std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

TEST(DesktopApp, SendsAMessageAndSavesTheScreenshotOnceTheAnswerIsIn) {
    powerhouse::test::TempDir dir;
    const auto shot = dir / "chat.png";
    const std::string command = "QT_QPA_PLATFORM=offscreen " + quoted(POWERHOUSE_APP_PATH) + " --data-dir " +
                                quoted(dir.path() / "data") + " --model " +
                                quoted(powerhouse::test::test_model_path()) +
                                " --send 'Say hello in one word.' --screenshot " + quoted(shot) +
                                " > " + quoted(dir / "out.txt") + " 2>&1";
    const int status = std::system(command.c_str());
    ASSERT_EQ(status, 0) << powerhouse::test::read_file(dir / "out.txt");

    const QImage image(QString::fromStdString(shot.string()));
    ASSERT_FALSE(image.isNull());
    EXPECT_GE(image.width(), 640);
    EXPECT_GE(image.height(), 420);

    auto store = powerhouse::store::Store::open(dir / "data" / "powerhouse.db");
    ASSERT_TRUE(store) << store.error().message;
    auto conversations = store->conversations();
    ASSERT_TRUE(conversations);
    ASSERT_EQ(conversations->size(), 1u);
    auto messages = store->messages(conversations->front().id);
    ASSERT_TRUE(messages);
    ASSERT_EQ(messages->size(), 2u);
    EXPECT_EQ((*messages)[0].content, "Say hello in one word.");
    EXPECT_EQ((*messages)[1].role, "assistant");
    EXPECT_EQ((*messages)[1].state, powerhouse::store::MessageState::complete);
    EXPECT_FALSE((*messages)[1].content.empty());
    EXPECT_GT((*messages)[1].stats.generated_tokens, 0);
    EXPECT_EQ(store->recovered_messages(), 0) << "the answer was finished before the app quit";
}

// The same app in a real X window (xcb on Xvfb), not the offscreen platform, with simulated
// GPUs: it answers a message, then the screenshot shows the settings open on the planner's
// preview.
TEST(DesktopApp, RunsInARealXWindowUnderXvfb) {
    if (std::system("command -v xvfb-run > /dev/null 2>&1") != 0) {
        GTEST_SKIP() << "xvfb-run is not installed (scripts/test installs it: package xvfb)";
    }
    powerhouse::test::TempDir dir;
    const auto shot = dir / "settings.png";
    const std::string command = "QT_QPA_PLATFORM=xcb POWERHOUSE_SIMULATE_GPUS='RTX 4090:24;RTX 4090:24' "
                                "xvfb-run -a -s '-screen 0 1280x800x24' " +
                                quoted(POWERHOUSE_APP_PATH) + " --data-dir " + quoted(dir.path() / "data") +
                                " --model " + quoted(powerhouse::test::test_model_path()) +
                                " --send 'Say hello in one word.' --show settings --screenshot " + quoted(shot) + " > " + quoted(dir / "out.txt") +
                                " 2>&1";
    const int status = std::system(command.c_str());
    const std::string out = powerhouse::test::read_file(dir / "out.txt");
    ASSERT_EQ(status, 0) << out;
    EXPECT_EQ(out.find("offscreen"), std::string::npos) << out;
    const QImage image(QString::fromStdString(shot.string()));
    ASSERT_FALSE(image.isNull());
    EXPECT_GE(image.width(), 640);
    // Not a blank frame: the window drew its views (many distinct colours).
    QSet<QRgb> colours;
    for (int y = 0; y < image.height(); y += 7) {
        for (int x = 0; x < image.width(); x += 7) colours.insert(image.pixel(x, y));
    }
    EXPECT_GT(colours.size(), 20);
    auto store = powerhouse::store::Store::open(dir / "data" / "powerhouse.db");
    ASSERT_TRUE(store) << store.error().message;
    auto conversations = store->conversations();
    ASSERT_TRUE(conversations && conversations->size() == 1u);
    auto messages = store->messages(conversations->front().id);
    ASSERT_TRUE(messages && messages->size() == 2u);
    EXPECT_EQ((*messages)[1].state, powerhouse::store::MessageState::complete);
    EXPECT_FALSE((*messages)[1].content.empty());
    // The simulated GPU that holds the model measured the answer's energy.
    ASSERT_TRUE((*messages)[1].stats.energy_joules.has_value());
    EXPECT_GT(*(*messages)[1].stats.energy_joules, 0.0);
}

TEST(DesktopApp, ABadDataFolderIsReportedNotACrash) {
    powerhouse::test::TempDir dir;
    std::filesystem::create_directories(dir / "data");
    powerhouse::test::write_file(dir / "data" / "powerhouse.db", std::string(4096, 'x'));
    const std::string command = "QT_QPA_PLATFORM=offscreen " + quoted(POWERHOUSE_APP_PATH) + " --data-dir " +
                                quoted(dir.path() / "data") + " --screenshot " + quoted(dir / "s.png") + " > " +
                                quoted(dir / "out.txt") + " 2>&1";
    const int status = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 1);
    EXPECT_NE(powerhouse::test::read_file(dir / "out.txt").find("not a Powerhouse data file"), std::string::npos);
}

}  // namespace
