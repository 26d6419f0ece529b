// The desktop app's C++ side on the real SmolLM2 model, without a window: the list models
// under QAbstractItemModelTester, and the chat controller sending, streaming, stopping,
// regenerating, editing and deleting, with the store checked after each step.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QCoreApplication>
#include <QSignalSpy>
#include <QTest>

#include <memory>
#include <nlohmann/json.hpp>

#include "chat_controller.h"
#include "conversation_list_model.h"
#include "dashboard_controller.h"
#include "engine_client.h"
#include "message_list_model.h"
#include "store/store.h"
#include "support/test_support.h"

namespace {

using powerhouse::store::MessageState;
using powerhouse::store::Store;

Store open_store(const powerhouse::test::TempDir& dir) {
    auto s = Store::open(dir / "p.db");
    if (!s) {
        ADD_FAILURE() << s.error().message;
        std::abort();
    }
    return std::move(s).value();
}

// llama.cpp's greedy answer to a chat case of tests/data/generation/smollm2_greedy.json.
std::string reference_answer(const std::string& name) {
    const auto fixture = nlohmann::json::parse(
        powerhouse::test::read_file(powerhouse::test::data_dir() / "generation" / "smollm2_greedy.json"));
    for (const auto& c : fixture.at("cases")) {
        if (c.at("name") == name) return c.at("generated_text").get<std::string>();
    }
    ADD_FAILURE() << "no case " << name;
    return {};
}

// The stored answer is the start of llama.cpp's (the controller stops after 32 tokens).
void expect_reference_answer(const std::string& answer, const std::string& name) {
    const std::string want = reference_answer(name);
    EXPECT_GT(answer.size(), 20u) << answer;
    EXPECT_EQ(want.substr(0, answer.size()), answer) << "llama.cpp: " << want;
}

// Runs the event loop until `done` or 120 s (sleeping between checks, so that the engine's
// threads have the cores).
template <class Done>
bool wait_for(Done done) {
    return QTest::qWaitFor(done, 120000);
}

TEST(ConversationListModel, PassesTheModelTesterAndFollowsTheStore) {
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    ConversationListModel model(store);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    EXPECT_EQ(model.rowCount(), 0);
    const auto a = store.create_conversation("Geography");
    ASSERT_TRUE(a);
    ASSERT_TRUE(store.add_message(a->id, "user", "What is the capital of France?"));
    ASSERT_TRUE(store.create_conversation("Cooking"));
    model.reload();
    ASSERT_EQ(model.rowCount(), 2);
    EXPECT_EQ(model.data(model.index(0), ConversationListModel::TitleRole).toString(), "Cooking");
    model.setFilter("capital");
    ASSERT_EQ(model.rowCount(), 1);
    EXPECT_EQ(model.data(model.index(0), ConversationListModel::IdRole).toLongLong(), a->id);
    EXPECT_TRUE(model.data(model.index(0), ConversationListModel::SnippetRole).toString().contains("[capital]"));
    model.setFilter("");
    EXPECT_EQ(model.rowCount(), 2);
}

TEST(MessageListModel, PassesTheModelTesterWhileTextStreamsIn) {
    MessageListModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    powerhouse::store::Message q;
    q.id = 1;
    q.role = "user";
    q.content = "hi";
    model.append(q);
    powerhouse::store::Message a;
    a.id = 2;
    a.role = "assistant";
    a.state = MessageState::streaming;
    model.append(a);
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.appendText(2, "Hel");
    model.appendText(2, "lo");
    EXPECT_EQ(changed.count(), 2);
    EXPECT_EQ(model.data(model.index(1), MessageListModel::ContentRole).toString(), "Hello");
    EXPECT_EQ(model.data(model.index(1), MessageListModel::StateRole).toString(), "streaming");
    model.removeFrom(1);
    EXPECT_EQ(model.rowCount(), 1);
}

TEST(GpuListModel, FollowsTheSimulatedGpusAndKeepsAHistory) {
    powerhouse::GpuMonitorOptions options;
    options.simulate = "RTX 4090:24;A100:80";
    DashboardController dashboard(options);
    QAbstractItemModelTester tester(dashboard.gpus(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    dashboard.start();
    GpuListModel& gpus = *dashboard.gpus();
    ASSERT_EQ(gpus.rowCount(), 2);
    EXPECT_TRUE(dashboard.simulated());
    EXPECT_TRUE(dashboard.status().isEmpty());
    EXPECT_TRUE(gpus.data(gpus.index(0), GpuListModel::NameRole).toString().contains("4090"));
    EXPECT_TRUE(gpus.data(gpus.index(1), GpuListModel::SimulatedRole).toBool());
    EXPECT_DOUBLE_EQ(gpus.data(gpus.index(1), GpuListModel::MemoryTotalRole).toDouble(), 80.0 * (1ull << 30));
    // The monitor samples once a second; each sample adds to the history.
    ASSERT_TRUE(QTest::qWaitFor(
        [&] { return gpus.data(gpus.index(0), GpuListModel::LoadHistoryRole).toList().size() >= 3; }, 10000));
    EXPECT_GE(gpus.data(gpus.index(0), GpuListModel::TemperatureRole).toInt(), 0);
}

TEST(DashboardController, WithoutADriverSaysSoAndListsNoGpu) {
    powerhouse::GpuMonitorOptions options;
    options.nvml = "/nonexistent/libnvidia-ml.so.1";
    DashboardController dashboard(options);
    dashboard.start();
    EXPECT_EQ(dashboard.gpus()->rowCount(), 0);
    EXPECT_TRUE(dashboard.status().contains("no NVIDIA driver found")) << dashboard.status().toStdString();
    EXPECT_FALSE(dashboard.simulated());
    dashboard.setPlacement({QVariantMap{{"name", "CPU"}, {"part", "layers 0-29"}}});
    EXPECT_EQ(dashboard.placement().size(), 1);
}

class ChatControllerTest : public ::testing::Test {
protected:
    void SetUp() override {
        store_ = std::make_unique<Store>(open_store(dir_));
        engine_ = std::make_unique<EngineClient>();
        controller_ = std::make_unique<ChatController>(*store_, *engine_);
        powerhouse::GenerationSettings settings;
        settings.max_tokens = 32;  // short answers keep the test quick
        settings.sampling.temperature = 0;
        controller_->setGenerationSettings(settings);
        tester_ = std::make_unique<QAbstractItemModelTester>(controller_->messages(),
                                                             QAbstractItemModelTester::FailureReportingMode::Fatal);
    }

    void load() {
        powerhouse::ModelOptions options;
        options.n_ctx = 1024;
        options.n_threads = 2;
        controller_->loadModel(QString::fromStdString(powerhouse::test::test_model_path().string()), options);
        ASSERT_TRUE(wait_for([&] { return controller_->modelState() != "loading"; }));
        ASSERT_EQ(controller_->modelState(), "ready") << controller_->errorText().toStdString();
    }

    bool wait_idle() {
        return wait_for([&] { return !controller_->generating(); });
    }

    std::vector<powerhouse::store::Message> stored() {
        auto m = store_->messages(controller_->currentConversationId());
        EXPECT_TRUE(m);
        return m ? *m : std::vector<powerhouse::store::Message>{};
    }

    powerhouse::test::TempDir dir_;
    std::unique_ptr<Store> store_;
    std::unique_ptr<EngineClient> engine_;
    std::unique_ptr<ChatController> controller_;
    std::unique_ptr<QAbstractItemModelTester> tester_;
};

TEST_F(ChatControllerTest, SendingWithoutAModelSaysWhatToDo) {
    controller_->send("hello");
    EXPECT_FALSE(controller_->errorText().isEmpty());
    EXPECT_EQ(controller_->messages()->rowCount(), 0);
    EXPECT_EQ(controller_->conversations()->rowCount(), 0) << "nothing is stored";
}

TEST_F(ChatControllerTest, AnAnswerStreamsInAndIsStoredWithItsStatistics) {
    load();
    QSignalSpy streamed(controller_->messages(), &QAbstractItemModel::dataChanged);
    controller_->send("Write a Python function that reverses a string.");
    ASSERT_TRUE(controller_->generating());
    // The user's message is in the store before the answer starts.
    {
        const auto before = stored();
        ASSERT_EQ(before.size(), 2u);
        EXPECT_EQ(before[0].content, "Write a Python function that reverses a string.");
        EXPECT_EQ(before[1].state, MessageState::streaming);
    }
    ASSERT_TRUE(wait_idle());
    EXPECT_GT(streamed.count(), 1) << "the answer arrived in pieces";
    const auto after = stored();
    ASSERT_EQ(after.size(), 2u);
    EXPECT_EQ(after[1].state, MessageState::complete);
    expect_reference_answer(after[1].content, "chat_code");
    EXPECT_GT(after[1].stats.generated_tokens, 0);
    EXPECT_GT(after[1].stats.tokens_per_second, 0.0);
    EXPECT_EQ(controller_->messages()->data(controller_->messages()->index(1), MessageListModel::ContentRole).toString().toStdString(),
              after[1].content);
    EXPECT_EQ(controller_->conversations()->rowCount(), 1);
    EXPECT_EQ(controller_->currentTitle(), "Write a Python function that reverses a string.");
}

TEST_F(ChatControllerTest, StopKeepsWhatWasWrittenAndRegenerateReplacesIt) {
    load();
    controller_->send("Write a very long story about a dragon who learns to cook.");
    ASSERT_TRUE(wait_for([&] {
        const auto* m = controller_->messages()->at(1);
        return m != nullptr && m->content.size() > 20;
    }));
    controller_->stop();
    ASSERT_TRUE(wait_idle());
    auto messages = stored();
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[1].state, MessageState::stopped);
    EXPECT_GT(messages[1].content.size(), 20u);
    const int64_t stopped_id = messages[1].id;

    controller_->regenerate();
    ASSERT_TRUE(wait_for([&] {
        const auto* m = controller_->messages()->at(1);
        return m != nullptr && m->content.size() > 10;
    }));
    controller_->stop();
    ASSERT_TRUE(wait_idle());
    messages = stored();
    ASSERT_EQ(messages.size(), 2u) << "the new answer replaced the old one";
    EXPECT_NE(messages[1].id, stopped_id);
}

TEST_F(ChatControllerTest, EditAndResendReplacesTheRestOfTheConversation) {
    load();
    controller_->send("What is the capital of France?");
    ASSERT_TRUE(wait_idle());
    controller_->send("And of Germany?");
    ASSERT_TRUE(wait_idle());
    ASSERT_EQ(stored().size(), 4u);
    const int64_t first = stored()[0].id;
    controller_->editAndResend(first, "Write a Python function that reverses a string.");
    ASSERT_TRUE(wait_idle());
    const auto messages = stored();
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[0].content, "Write a Python function that reverses a string.");
    // A fresh conversation of one message: exactly llama.cpp's answer to it.
    expect_reference_answer(messages[1].content, "chat_code");
    EXPECT_EQ(controller_->messages()->rowCount(), 2);
}

TEST_F(ChatControllerTest, DeleteCanBeUndoneAndSwitchingShowsEachConversation) {
    load();
    controller_->send("What is the capital of France?");
    ASSERT_TRUE(wait_idle());
    const qint64 first = controller_->currentConversationId();
    controller_->newConversation();
    EXPECT_EQ(controller_->messages()->rowCount(), 0);
    controller_->send("Name a color.");
    ASSERT_TRUE(wait_idle());
    const qint64 second = controller_->currentConversationId();
    ASSERT_NE(first, second);
    EXPECT_EQ(controller_->conversations()->rowCount(), 2);
    controller_->selectConversation(first);
    EXPECT_EQ(controller_->messages()->at(0)->content, "What is the capital of France?");

    controller_->deleteConversation(first);
    EXPECT_EQ(controller_->conversations()->rowCount(), 1);
    EXPECT_TRUE(controller_->canUndoDelete());
    EXPECT_EQ(controller_->currentConversationId(), 0);
    controller_->undoDelete();
    EXPECT_EQ(controller_->conversations()->rowCount(), 2);
    EXPECT_EQ(controller_->currentConversationId(), first);
    EXPECT_EQ(controller_->messages()->rowCount(), 2);

    controller_->renameConversation(second, "Colours");
    controller_->conversations()->setFilter("colours");
    EXPECT_EQ(controller_->conversations()->rowCount(), 1);
}

}  // namespace

int main(int argc, char** argv) {
    QCoreApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
