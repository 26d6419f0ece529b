// The desktop app's chat controller on the real SmolLM2 model, without a window: sending,
// streaming, stopping, regenerating, editing and deleting, with the store checked after each
// step; several conversations answering at once; each conversation's settings and the
// composer's draft. The list models and other controllers are in desktop_test.cpp.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QSignalSpy>

#include <algorithm>
#include <memory>
#include <optional>

#include "chat_controller.h"
#include "conversation_list_model.h"
#include "conversation_settings.h"
#include "dashboard_controller.h"
#include "desktop_test_support.h"
#include "engine_client.h"
#include "message_list_model.h"
#include "model_templates.h"
#include "settings_controller.h"
#include "store/store.h"
#include "support/test_support.h"

namespace {

using powerhouse::store::MessageState;
using powerhouse::store::Store;

using powerhouse::test::expect_reference_answer;
using powerhouse::test::open_store;
using powerhouse::test::wait_for;

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

    static powerhouse::ModelOptions model_options() {
        powerhouse::ModelOptions options;
        options.n_ctx = 1024;
        options.n_threads = 2;
        return options;
    }

    void load(const powerhouse::ModelOptions& options = model_options()) {
        controller_->loadModel(QString::fromStdString(powerhouse::test::test_model_path().string()), options);
        ASSERT_TRUE(wait_for([&] { return controller_->modelState() != ChatController::ModelState::Loading; }));
        ASSERT_EQ(controller_->modelState(), ChatController::ModelState::Ready)
            << controller_->errorText().toStdString();
    }

    bool wait_idle() {
        return wait_for([&] { return !controller_->generating(); });
    }

    std::vector<powerhouse::store::Message> stored() { return stored(controller_->currentConversationId()); }

    std::vector<powerhouse::store::Message> stored(qint64 conversation) {
        controller_->flushWrites();  // the controller's writes run on its writer thread
        auto m = store_->messages(conversation);
        EXPECT_TRUE(m);
        return m ? *m : std::vector<powerhouse::store::Message>{};
    }

    bool wait_all_idle() {
        return wait_for([&] { return !controller_->generatingAny(); });
    }

    bool listed_as_generating(qint64 conversation) {
        const ConversationListModel& list = *controller_->conversations();
        const int row = list.rowOf(conversation);
        return row >= 0 && list.data(list.index(row), ConversationListModel::GeneratingRole).toBool();
    }

    // Answers long enough to outlast what a test does meanwhile.
    void long_answers() {
        powerhouse::GenerationSettings settings;
        settings.max_tokens = 400;
        settings.sampling.temperature = 0;
        controller_->setGenerationSettings(settings);
    }

    powerhouse::test::TempDir dir_;
    std::unique_ptr<Store> store_;
    std::unique_ptr<EngineClient> engine_;
    std::unique_ptr<ChatController> controller_;
    std::unique_ptr<QAbstractItemModelTester> tester_;
};

// The engine's scheduler reports, as the dashboard shows them, with the most sequences
// seen running and waiting at once.
class BatchingWatch {
public:
    explicit BatchingWatch(EngineClient& engine) : dashboard_(no_gpus()) {
        QObject::connect(&engine, &EngineClient::schedulerStats, &dashboard_,
                         [this](const powerhouse::SchedulerStats& s) {
                             dashboard_.setSchedulerStats(s);
                             maxRunning = std::max(maxRunning, dashboard_.sequencesRunning());
                             maxWaiting = std::max(maxWaiting, dashboard_.sequencesWaiting());
                         });
    }
    const DashboardController& dashboard() const { return dashboard_; }
    int maxRunning = 0;
    int maxWaiting = 0;

private:
    static powerhouse::GpuMonitorOptions no_gpus() {
        powerhouse::GpuMonitorOptions options;
        options.nvml = "/nonexistent/libnvidia-ml.so.1";
        return options;
    }
    DashboardController dashboard_;
};

TEST_F(ChatControllerTest, SendingWithoutAModelSaysWhatToDo) {
    controller_->send("hello");
    EXPECT_FALSE(controller_->errorText().isEmpty());
    EXPECT_EQ(controller_->messages()->rowCount(), 0);
    EXPECT_EQ(controller_->conversations()->rowCount(), 0) << "nothing is stored";
}

// Regenerating and editing need a model as sending does: without one (none loaded yet, or
// one still loading) the conversation stays as it was and the error says what to do; the
// answer and the messages after the edited one are not deleted first.
TEST_F(ChatControllerTest, RegenerateAndEditWithoutAModelKeepTheConversation) {
    auto conversation = store_->create_conversation("Capitals");
    ASSERT_TRUE(conversation);
    ASSERT_TRUE(store_->add_message(conversation->id, "user", "What is the capital of France?"));
    ASSERT_TRUE(store_->add_message(conversation->id, "assistant", "Paris."));
    controller_->conversations()->reload();
    controller_->selectConversation(conversation->id);
    ASSERT_EQ(controller_->messages()->rowCount(), 2);
    const auto before = stored();
    ASSERT_EQ(before.size(), 2u);
    const auto unchanged = [&](const char* after) {
        ASSERT_TRUE(wait_idle());
        const auto now = stored();
        ASSERT_EQ(now.size(), 2u) << after;
        EXPECT_EQ(now[0].content, "What is the capital of France?") << after;
        EXPECT_EQ(now[1].id, before[1].id) << after;
        EXPECT_EQ(now[1].content, "Paris.") << after;
        EXPECT_EQ(controller_->messages()->rowCount(), 2) << after;
        EXPECT_TRUE(controller_->errorText().contains("No model is loaded")) << controller_->errorText().toStdString();
        controller_->dismissError();
    };

    controller_->regenerate();
    unchanged("regenerate");
    EXPECT_FALSE(controller_->editAndResend(before[0].id, "And of Germany?"));
    unchanged("edit and resend");
}

// Choosing a model again while one loads (the Models page, or applying the settings) cancels
// the first load: that is no failure, and the model bar and the chat wait for the second.
TEST_F(ChatControllerTest, ALoadReplacedByAnotherIsNoFailure) {
    const QString model = QString::fromStdString(powerhouse::test::test_model_path().string());
    QSignalSpy progress(engine_.get(), &EngineClient::loadProgress);
    QSignalSpy failed(engine_.get(), &EngineClient::loadFailed);
    QList<ChatController::ModelState> states;
    QObject::connect(controller_.get(), &ChatController::modelChanged,
                     [&] { states.append(controller_->modelState()); });
    controller_->loadModel(model, model_options());
    ASSERT_TRUE(wait_for([&] { return progress.count() > 0; }));
    controller_->loadModel(model, model_options());
    ASSERT_TRUE(wait_for([&] { return controller_->modelState() == ChatController::ModelState::Ready; }, 60000))
        << controller_->errorText().toStdString();
    EXPECT_EQ(failed.count(), 0);
    EXPECT_FALSE(states.contains(ChatController::ModelState::Failed));
    EXPECT_TRUE(controller_->errorText().isEmpty()) << controller_->errorText().toStdString();
}

// Words written in the composer and not sent are still there when the app starts again.
TEST_F(ChatControllerTest, AnUnsentDraftIsKeptAcrossARestart) {
    controller_->setDraft(QStringLiteral("Half a thought, not sent yet"));
    tester_.reset();
    controller_.reset();  // quitting at once, before the pause that saves it
    controller_ = std::make_unique<ChatController>(*store_, *engine_);
    EXPECT_EQ(controller_->draft().toStdString(), "Half a thought, not sent yet");
    // Sent (the composer empties): nothing comes back.
    controller_->setDraft({});
    controller_.reset();
    controller_ = std::make_unique<ChatController>(*store_, *engine_);
    EXPECT_TRUE(controller_->draft().isEmpty()) << controller_->draft().toStdString();
}

// A remote engine's model chosen in the model bar while a local model loads answers from
// then on: the load ending, loaded or failed, does not take the model bar back from it (it
// named the local model while the answers went to the remote one), nor drop the choice.
TEST_F(ChatControllerTest, ARemoteModelChosenWhileALocalOneLoadsKeepsAnswering) {
    const RemoteTarget remote{"lab", "http://127.0.0.1:9", {}, {}, "big-model"};
    QSignalSpy loaded(engine_.get(), &EngineClient::loaded);
    controller_->loadModel(QString::fromStdString(powerhouse::test::test_model_path().string()), model_options());
    controller_->useRemote(remote);
    ASSERT_TRUE(wait_for([&] { return loaded.count() > 0; }));
    EXPECT_TRUE(controller_->usingRemote());
    EXPECT_EQ(controller_->modelState(), ChatController::ModelState::Ready);
    EXPECT_EQ(controller_->modelName().toStdString(), "big-model");
    EXPECT_TRUE(controller_->modelDevice().contains("lab")) << controller_->modelDevice().toStdString();

    QSignalSpy failed(engine_.get(), &EngineClient::loadFailed);
    controller_->loadModel(QString::fromStdString((dir_ / "missing.gguf").string()), model_options());
    controller_->useRemote(remote);
    ASSERT_TRUE(wait_for([&] { return failed.count() > 0; }));
    EXPECT_TRUE(controller_->usingRemote());
    EXPECT_EQ(controller_->modelState(), ChatController::ModelState::Ready);
    EXPECT_EQ(controller_->modelName().toStdString(), "big-model");
    EXPECT_TRUE(controller_->errorText().contains("could not be loaded")) << controller_->errorText().toStdString();
}

// The first line of the first message names the conversation, cut at 60 characters, never
// in the middle of one (an emoji is two UTF-16 units: half of one was stored as U+FFFD).
TEST_F(ChatControllerTest, TheTitleIsNotCutInsideACharacter) {
    load();
    const QString first = QString(59, QLatin1Char('x')) + QString::fromUtf8("\xF0\x9F\x98\x80 and more");
    ASSERT_TRUE(controller_->send(first));
    ASSERT_TRUE(wait_idle());
    EXPECT_EQ(controller_->currentTitle().toStdString(), std::string(59, 'x'));
    controller_->flushWrites();
    const auto stored = store_->conversation(controller_->currentConversationId());
    ASSERT_TRUE(stored);
    EXPECT_EQ(stored->title, std::string(59, 'x'));
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
    EXPECT_EQ(controller_->messages()
                  ->data(controller_->messages()->index(1), MessageListModel::ContentRole)
                  .toString()
                  .toStdString(),
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

// Two conversations answer at once: the user starts one, opens a new chat and sends there,
// then goes back to the first while both stream. Both answers complete, are stored, and
// are each exactly what llama.cpp answers to that conversation alone (greedy).
TEST_F(ChatControllerTest, TwoConversationsAnswerAtOnceAsEachWouldAlone) {
    BatchingWatch batching(*engine_);
    load();
    controller_->send("What is the capital of France?");
    const qint64 first = controller_->currentConversationId();
    ASSERT_TRUE(controller_->generating());
    controller_->newConversation();
    EXPECT_FALSE(controller_->generating()) << "the new chat is not answering";
    EXPECT_TRUE(controller_->generatingIn(first));
    EXPECT_TRUE(listed_as_generating(first));
    controller_->send("Write a Python function that reverses a string.");
    const qint64 second = controller_->currentConversationId();
    ASSERT_NE(first, second);
    ASSERT_TRUE(controller_->generating()) << "sending while another conversation answers is allowed";
    EXPECT_TRUE(listed_as_generating(second));

    // Back to the first while the second streams: it shows at least what the store has.
    ASSERT_TRUE(wait_for([&] { return controller_->messages()->at(1)->content.size() > 0; }));
    const std::string storedAtSwitch = stored(first)[1].content;
    controller_->selectConversation(first);
    ASSERT_EQ(controller_->messages()->rowCount(), 2);
    const std::string shownAtSwitch = controller_->messages()->at(1)->content;
    EXPECT_GE(shownAtSwitch.size(), storedAtSwitch.size());
    EXPECT_EQ(shownAtSwitch.substr(0, storedAtSwitch.size()), storedAtSwitch);
    // What it shows as more comes in: every time, the start of the answer, nothing skipped.
    std::vector<std::string> streamed;
    QObject::connect(controller_->messages(), &QAbstractItemModel::dataChanged, controller_.get(), [&] {
        if (controller_->generating()) streamed.push_back(controller_->messages()->at(1)->content);
    });

    ASSERT_TRUE(wait_all_idle());
    EXPECT_FALSE(listed_as_generating(first));
    EXPECT_FALSE(listed_as_generating(second));
    const auto a = stored(first);
    const auto b = stored(second);
    ASSERT_EQ(a.size(), 2u);
    ASSERT_EQ(b.size(), 2u);
    EXPECT_EQ(a[1].state, MessageState::complete);
    EXPECT_EQ(b[1].state, MessageState::complete);
    expect_reference_answer(a[1].content, "chat_capital");
    expect_reference_answer(b[1].content, "chat_code");
    // The open conversation showed its answer streaming on to the end.
    EXPECT_EQ(controller_->messages()->at(1)->content, a[1].content);
    EXPECT_EQ(a[1].content.substr(0, shownAtSwitch.size()), shownAtSwitch);
    for (const std::string& text : streamed) EXPECT_EQ(a[1].content.substr(0, text.size()), text);
    // The engine ran them together, and keeps both conversations cached for their next turn.
    EXPECT_EQ(batching.maxRunning, 2);
    EXPECT_EQ(batching.dashboard().sequencesRunning(), 0);
    EXPECT_GT(batching.dashboard().kvBlocksTotal(), 0);
    EXPECT_GE(batching.dashboard().cachedPrefixes(), 1);

    // The next turn of the first conversation, after the second ran: its history is found
    // in the engine's cache, and the statistics say so.
    controller_->send("And of Germany?");
    ASSERT_TRUE(wait_idle());
    const auto next = stored(first);
    ASSERT_EQ(next.size(), 4u);
    EXPECT_GT(next[3].stats.reused_tokens, 0);
    EXPECT_LT(next[3].stats.reused_tokens, next[3].stats.prompt_tokens);
    const MessageListModel& shown = *controller_->messages();
    const QString statsText = shown.data(shown.index(3), MessageListModel::StatsRole).toString();
    EXPECT_TRUE(statsText.contains(QStringLiteral("of %1 prompt tokens from cache").arg(next[3].stats.prompt_tokens)))
        << statsText.toStdString();
}

// Stop (Esc) stops the open conversation's answer only.
TEST_F(ChatControllerTest, StopInOneConversationLeavesTheOtherAnswering) {
    long_answers();
    load();
    controller_->send("Write a very long story about a dragon who learns to cook.");
    const qint64 first = controller_->currentConversationId();
    controller_->newConversation();
    controller_->stop();  // nothing to stop here
    controller_->send("Write a very long story about a cat who learns to fly.");
    const qint64 second = controller_->currentConversationId();
    ASSERT_TRUE(wait_for([&] { return controller_->messages()->at(1)->content.size() > 20; }));
    controller_->stop();
    ASSERT_TRUE(wait_idle());
    EXPECT_TRUE(controller_->generatingIn(first)) << "the other conversation goes on";
    EXPECT_TRUE(listed_as_generating(first));
    EXPECT_FALSE(listed_as_generating(second));
    const auto b = stored(second);
    ASSERT_EQ(b.size(), 2u);
    EXPECT_EQ(b[1].state, MessageState::stopped);
    // It keeps streaming into its stored message while another conversation is open.
    ASSERT_TRUE(wait_for([&] { return stored(first)[1].content.size() > b[1].content.size(); }));
    EXPECT_EQ(stored(first)[1].state, MessageState::streaming);
    controller_->selectConversation(first);
    EXPECT_TRUE(controller_->generating());
    controller_->stop();
    ASSERT_TRUE(wait_all_idle());
    const auto a = stored(first);
    EXPECT_EQ(a[1].state, MessageState::stopped);
    EXPECT_GT(a[1].stats.generated_tokens, b[1].stats.generated_tokens);
    EXPECT_EQ(controller_->messages()->at(1)->content, a[1].content);
}

// Deleting a conversation that is answering (from the list, while another is open) cancels
// its answer in the engine; undo brings it back with what was written, as stopped.
TEST_F(ChatControllerTest, DeletingAConversationCancelsItsAnswer) {
    long_answers();
    load();
    QSignalSpy finished(engine_.get(), &EngineClient::finished);
    controller_->send("Write a very long story about a dragon who learns to cook.");
    const qint64 doomed = controller_->currentConversationId();
    ASSERT_TRUE(wait_for([&] { return controller_->messages()->at(1)->content.size() > 10; }));
    controller_->newConversation();
    controller_->deleteConversation(doomed);
    EXPECT_FALSE(controller_->generatingAny());
    // The engine ends it as cancelled, far short of its 400 tokens.
    ASSERT_TRUE(wait_for([&] { return finished.count() == 1; }));
    const QVariantMap stats = finished[0][2].toMap();
    EXPECT_EQ(stats.value("stopReason").toString(), "cancelled");
    EXPECT_LT(stats.value("generatedTokens").toInt(), 400);
    controller_->undoDelete();
    EXPECT_EQ(controller_->currentConversationId(), doomed);
    EXPECT_FALSE(controller_->generating());
    const auto kept = stored(doomed);
    ASSERT_EQ(kept.size(), 2u);
    EXPECT_EQ(kept[1].state, MessageState::stopped);
    EXPECT_GT(kept[1].content.size(), 10u);
    EXPECT_EQ(controller_->messages()->at(1)->content, kept[1].content);
}

// What the settings panel applies reaches the engine: one conversation at a time makes the
// second wait, and the KV cache has the size asked for.
TEST_F(ChatControllerTest, SettingsSetTheConversationsAtOnceAndTheKvCache) {
    SettingsController settings(*store_, {});
    settings.setMaxSequences(0);
    EXPECT_EQ(settings.maxSequences(), 1);
    settings.setMaxSequences(99);
    EXPECT_EQ(settings.maxSequences(), 16);
    settings.setMaxSequences(1);
    settings.setKvCacheTokens(-5);
    EXPECT_EQ(settings.kvCacheTokens(), 0);
    settings.setKvCacheTokens(768);
    ASSERT_TRUE(settings.apply());
    EXPECT_EQ(SettingsController(*store_, {}).maxSequences(), 1) << "kept in the store";
    EXPECT_EQ(SettingsController(*store_, {}).kvCacheTokens(), 768);
    powerhouse::ModelOptions options = settings.modelOptions();
    EXPECT_EQ(options.max_sequences, 1u);
    EXPECT_EQ(options.kv_cache_tokens, 768u);

    BatchingWatch batching(*engine_);
    options.n_ctx = 1024;
    options.n_threads = 2;
    load(options);
    controller_->send("What is the capital of France?");
    const qint64 first = controller_->currentConversationId();
    controller_->newConversation();
    controller_->send("Write a Python function that reverses a string.");
    ASSERT_TRUE(wait_all_idle());
    EXPECT_EQ(batching.maxRunning, 1);
    EXPECT_EQ(batching.maxWaiting, 1);
    const DashboardController& dashboard = batching.dashboard();
    EXPECT_EQ(dashboard.kvBlocksTotal() * static_cast<int>(options.kv_block_size), 768);
    // Taking turns gives the same answers as at once.
    expect_reference_answer(stored(first)[1].content, "chat_capital");
    expect_reference_answer(stored()[1].content, "chat_code");
}

TEST(ConversationSettings, RoundTripThroughJsonAndQmlAndRefuseBadValues) {
    ConversationSettings defaults;
    defaults.generation.max_tokens = 1024;
    // Nothing stored, or garbage: the defaults.
    EXPECT_EQ(conversation_settings_json(parse_conversation_settings("", defaults)),
              conversation_settings_json(defaults));
    EXPECT_EQ(conversation_settings_json(parse_conversation_settings("{not json", defaults)),
              conversation_settings_json(defaults));
    EXPECT_FALSE(parse_conversation_settings("{}", defaults).seed.has_value());
    // Wrong types are skipped; out-of-range values give the defaults.
    const ConversationSettings typed = parse_conversation_settings(R"({"temperature":"hot","top_k":7})", defaults);
    EXPECT_EQ(typed.generation.sampling.temperature, defaults.generation.sampling.temperature);
    EXPECT_EQ(typed.generation.sampling.top_k, 7);
    EXPECT_EQ(parse_conversation_settings(R"({"top_p":5})", defaults).generation.sampling.top_p,
              defaults.generation.sampling.top_p);

    auto s = conversation_settings_from_variant(
        QVariantMap{{"temperature", 0.3}, {"topK", 12}, {"maxTokens", 77}, {"seed", 1234}}, defaults);
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_FLOAT_EQ(s->generation.sampling.temperature, 0.3f);
    EXPECT_EQ(s->generation.sampling.top_k, 12);
    EXPECT_EQ(s->generation.max_tokens, 77);
    EXPECT_EQ(s->seed, 1234u);
    const ConversationSettings back = parse_conversation_settings(conversation_settings_json(*s), defaults);
    EXPECT_EQ(conversation_settings_json(back), conversation_settings_json(*s));
    EXPECT_EQ(conversation_settings_variant(back).value("seed").toDouble(), 1234.0);
    EXPECT_EQ(conversation_settings_variant(defaults).value("seed").toDouble(), -1.0);

    auto bad = conversation_settings_from_variant(QVariantMap{{"topP", 1.5}}, defaults);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("top_p"), std::string::npos) << bad.error().message;
    EXPECT_FALSE(conversation_settings_from_variant(QVariantMap{{"maxTokens", 0}}, defaults));
    EXPECT_FALSE(conversation_settings_from_variant(QVariantMap{{"temperature", "warm"}}, defaults));

    // The settings dialog's refusal names the field to show it beside, and why.
    EXPECT_TRUE(
        conversation_settings_problem(QVariantMap{{"temperature", 0.3}, {"maxTokens", 77}}, defaults).isEmpty());
    const QVariantMap problem =
        conversation_settings_problem(QVariantMap{{"temperature", 0.3}, {"topP", 1.5}, {"maxTokens", 0}}, defaults);
    EXPECT_EQ(problem.value("field").toString().toStdString(), "topP");
    EXPECT_TRUE(problem.value("message").toString().contains("top_p"))
        << problem.value("message").toString().toStdString();
    EXPECT_EQ(
        conversation_settings_problem(QVariantMap{{"maxTokens", 0}}, defaults).value("field").toString().toStdString(),
        "maxTokens");
    EXPECT_EQ(conversation_settings_problem(QVariantMap{{"temperature", "warm"}}, defaults)
                  .value("field")
                  .toString()
                  .toStdString(),
              "temperature");
}

TEST_F(ChatControllerTest, EachConversationKeepsItsSystemPromptAndSampling) {
    load();
    // Out of range: refused, with the reason shown.
    EXPECT_FALSE(controller_->setConversationSettings("", {{"topP", 2.0}}));
    EXPECT_TRUE(controller_->errorText().contains("top_p")) << controller_->errorText().toStdString();
    controller_->dismissError();

    // Set on a new chat before its first message; a fixed seed makes answers repeatable.
    ASSERT_TRUE(controller_->setConversationSettings(
        "You are a pirate.",
        {{"temperature", 1.0}, {"topK", 0}, {"topP", 1.0}, {"minP", 0.0}, {"maxTokens", 8}, {"seed", 7}}));
    controller_->send("Say something.");
    ASSERT_TRUE(wait_idle());
    const qint64 first = controller_->currentConversationId();
    auto answer = stored();
    ASSERT_EQ(answer.size(), 2u);
    EXPECT_LE(answer[1].stats.generated_tokens, 8);
    const std::string text = answer[1].content;
    controller_->regenerate();
    ASSERT_TRUE(wait_idle());
    EXPECT_EQ(stored()[1].content, text) << "the same seed gives the same answer";

    // A new chat starts from the defaults: no system prompt of its own, so SmolLM2's template
    // puts in its default one ("You are a helpful AI assistant named SmolLM, ..."): another prompt.
    controller_->newConversation();
    EXPECT_TRUE(controller_->systemPrompt().isEmpty());
    EXPECT_EQ(controller_->sampling().value("seed").toDouble(), -1.0);
    controller_->send("Say something.");
    ASSERT_TRUE(wait_idle());
    EXPECT_NE(stored()[1].stats.prompt_tokens, answer[1].stats.prompt_tokens);

    // Back to the first: its settings, from the store.
    controller_->selectConversation(first);
    EXPECT_EQ(controller_->systemPrompt(), "You are a pirate.");
    EXPECT_EQ(controller_->sampling().value("maxTokens").toInt(), 8);
    controller_->flushWrites();
    auto conversation = store_->conversation(first);
    ASSERT_TRUE(conversation);
    EXPECT_EQ(conversation->system_prompt, "You are a pirate.");
    controller_->resetConversationSettings();
    EXPECT_TRUE(controller_->systemPrompt().isEmpty());
    EXPECT_EQ(controller_->sampling().value("maxTokens").toInt(), 32);  // the fixture's default
}

// A caller that gives some of the settings (a script, a later dialog showing a part of them)
// changes only those: the others keep the conversation's values, not the defaults, in the
// view and in the store. A refused value changes nothing; "Defaults" still resets them all.
TEST_F(ChatControllerTest, SettingsGivenInPartChangeOnlyThoseFields) {
    auto made = store_->create_conversation("Partial");
    ASSERT_TRUE(made);
    controller_->conversations()->reload();
    controller_->selectConversation(made->id);
    ASSERT_TRUE(controller_->setConversationSettings("Be brief.", {{"temperature", 0.7},
                                                                   {"topK", 5},
                                                                   {"maxTokens", 99},
                                                                   {"seed", 3},
                                                                   {"thinking", false},
                                                                   {"reasoningEffort", "high"}}));
    ASSERT_TRUE(controller_->setConversationSettings("Be brief.", {{"topP", 0.5}}));
    const auto expect_kept = [&](const char* after) {
        const QVariantMap s = controller_->sampling();
        EXPECT_FLOAT_EQ(s.value("temperature").toFloat(), 0.7f) << after;
        EXPECT_EQ(s.value("topK").toInt(), 5) << after;
        EXPECT_EQ(s.value("maxTokens").toInt(), 99) << after;
        EXPECT_EQ(s.value("seed").toDouble(), 3.0) << after;
        EXPECT_FALSE(s.value("thinking").toBool()) << after;
        EXPECT_EQ(s.value("reasoningEffort").toString().toStdString(), "high") << after;
        EXPECT_FLOAT_EQ(s.value("topP").toFloat(), 0.5f) << after;
        controller_->flushWrites();
        auto stored = store_->conversation(made->id);
        ASSERT_TRUE(stored);
        const ConversationSettings kept = parse_conversation_settings(stored->settings_json, {});
        EXPECT_FLOAT_EQ(kept.generation.sampling.temperature, 0.7f) << after;
        EXPECT_EQ(kept.generation.max_tokens, 99) << after;
        EXPECT_EQ(kept.seed, std::optional<uint64_t>(3)) << after;
        EXPECT_FALSE(kept.thinking) << after;
        EXPECT_EQ(kept.reasoning_effort, "high") << after;
        EXPECT_FLOAT_EQ(kept.generation.sampling.top_p, 0.5f) << after;
    };
    expect_kept("top-p alone given");
    EXPECT_TRUE(controller_->conversationSettingsProblem({{"minP", 0.1}}).isEmpty());
    EXPECT_FALSE(controller_->setConversationSettings("Be brief.", {{"topP", 2.0}}));
    controller_->dismissError();
    expect_kept("a refused top-p");

    controller_->resetConversationSettings();
    EXPECT_FLOAT_EQ(controller_->sampling().value("temperature").toFloat(), 0.0f);  // the fixture's default
    EXPECT_EQ(controller_->sampling().value("maxTokens").toInt(), 32);
    EXPECT_TRUE(controller_->sampling().value("thinking").toBool());
    EXPECT_EQ(controller_->sampling().value("seed").toDouble(), -1.0);
}

// The conversation settings offer the chat-template switches of the model that answered the
// conversation, where the app knows them (a local model it has loaded, now or at an earlier
// start; a remote one: both), and say when the model loaded now is another one and what its
// template reads. The engine's word on each load is given here as EngineClient says it.
TEST_F(ChatControllerTest, TheTemplateSwitchesOfferedAreThoseOfTheConversationsModel) {
    const auto loaded = [&](const char* name, bool thinking) {
        emit engine_->loaded({{"displayName", name}, {"device", "CPU"}, {"hasThinkingSwitch", thinking}});
    };
    const auto answered_by = [&](const char* model, const char* engine) {
        auto c = store_->create_conversation(std::string("Answered by ") + model);
        EXPECT_TRUE(c);
        EXPECT_TRUE(store_->add_message(c->id, "user", "Hi"));
        auto answer = store_->add_message(c->id, "assistant", "", MessageState::streaming);
        EXPECT_TRUE(answer);
        powerhouse::store::MessageStats stats;
        stats.model = model;
        stats.engine = engine;
        EXPECT_TRUE(store_->finish_message(answer->id, "Hello", MessageState::complete, stats));
        controller_->conversations()->reload();
        return c->id;
    };
    loaded("Thinker", true);
    loaded("Plain", false);
    const qint64 thinker = answered_by("Thinker", "local");
    controller_->selectConversation(thinker);
    EXPECT_TRUE(controller_->thinkingSwitch());
    EXPECT_FALSE(controller_->reasoningEffortChoice());
    EXPECT_EQ(controller_->templateSwitchesNote().toStdString(),
              "Shown for Thinker, which answered this conversation. Plain, loaded now, answers next: its chat "
              "template reads neither switch.");

    // A new chat has no model of its own: the loaded model's.
    controller_->newConversation();
    EXPECT_FALSE(controller_->thinkingSwitch());
    EXPECT_EQ(controller_->templateSwitchesNote().toStdString(),
              "This model's chat template has no switch for thinking or reasoning effort.");

    // The conversation's model loaded again: nothing to point out.
    loaded("Thinker", true);
    controller_->selectConversation(thinker);
    EXPECT_TRUE(controller_->thinkingSwitch());
    EXPECT_TRUE(controller_->templateSwitchesNote().isEmpty()) << controller_->templateSwitchesNote().toStdString();

    // A model the app has never loaded: what its template reads is unknown, so the loaded
    // model's switches, saying so.
    loaded("Plain", false);
    const qint64 stranger = answered_by("Stranger", "local");
    controller_->selectConversation(stranger);
    EXPECT_FALSE(controller_->thinkingSwitch());
    EXPECT_EQ(controller_->templateSwitchesNote().toStdString(),
              "Shown for Plain, the model that answers next: Stranger answered this conversation, and what its chat "
              "template reads is known once it is loaded.");

    // A remote model's: both, whatever is loaded.
    const qint64 remote = answered_by("qwen3", "http://127.0.0.1:9/v1");
    controller_->selectConversation(remote);
    EXPECT_TRUE(controller_->thinkingSwitch());
    EXPECT_TRUE(controller_->reasoningEffortChoice());
    EXPECT_TRUE(controller_->templateSwitchesNote().startsWith("Shown for qwen3, which answered this conversation."));

    // What the loaded models read is kept: after a restart, with no model loaded yet.
    controller_->flushWrites();
    ChatController again(*store_, *engine_);
    again.selectConversation(thinker);
    EXPECT_TRUE(again.thinkingSwitch());
    EXPECT_EQ(again.templateSwitchesNote().toStdString(),
              "Shown for Thinker, which answered this conversation. No model is loaded now.");
}

// Settings saved for a new chat before its first message are the user's for that chat:
// pressing New chat (Ctrl+N) again, or looking at another conversation and coming back with
// New chat, keeps them; the first message creates the chat with them, and the chat after it
// starts from the defaults.
TEST_F(ChatControllerTest, SettingsOfANewChatSurviveNewChatUntilItIsSent) {
    auto older = store_->create_conversation("An older chat");
    ASSERT_TRUE(older);
    controller_->conversations()->reload();
    controller_->newConversation();
    ASSERT_TRUE(controller_->setConversationSettings("You are a pirate.", {{"temperature", 0.5}, {"maxTokens", 8}}));
    const auto kept = [&](const char* after) {
        EXPECT_EQ(controller_->currentConversationId(), 0) << after;
        EXPECT_EQ(controller_->systemPrompt().toStdString(), "You are a pirate.") << after;
        EXPECT_FLOAT_EQ(controller_->sampling().value("temperature").toFloat(), 0.5f) << after;
        EXPECT_EQ(controller_->sampling().value("maxTokens").toInt(), 8) << after;
    };
    controller_->newConversation();
    kept("New chat pressed again");
    controller_->selectConversation(older->id);
    EXPECT_TRUE(controller_->systemPrompt().isEmpty()) << "the older chat has its own";
    controller_->newConversation();
    kept("another conversation, then New chat");

    load();
    ASSERT_TRUE(controller_->send("Say something."));
    ASSERT_TRUE(wait_idle());
    const qint64 sent = controller_->currentConversationId();
    ASSERT_NE(sent, 0);
    EXPECT_LE(stored()[1].stats.generated_tokens, 8);
    controller_->flushWrites();
    auto conversation = store_->conversation(sent);
    ASSERT_TRUE(conversation);
    EXPECT_EQ(conversation->system_prompt, "You are a pirate.");
    EXPECT_EQ(parse_conversation_settings(conversation->settings_json, {}).generation.max_tokens, 8);

    // Sent: the next new chat starts from the defaults.
    controller_->newConversation();
    EXPECT_TRUE(controller_->systemPrompt().isEmpty());
    EXPECT_EQ(controller_->sampling().value("maxTokens").toInt(), 32);  // the fixture's default
    EXPECT_FLOAT_EQ(controller_->sampling().value("temperature").toFloat(), 0.0f);
    // "Defaults" on a new chat holds across New chat too.
    ASSERT_TRUE(controller_->setConversationSettings("Be brief.", {}));
    controller_->resetConversationSettings();
    controller_->newConversation();
    EXPECT_TRUE(controller_->systemPrompt().isEmpty());
}

// Speculative decoding by a draft model chosen for the model (the Models page,
// model_templates.h): it loads with the model, the model bar names it, and its guesses are
// checked as the answer is written. The test model is its own draft, so every greedy guess
// is kept. With none chosen again, the model loads alone and gives the same answer.
TEST_F(ChatControllerTest, ADraftModelChosenForTheModelLoadsWithItAndGuesses) {
    const QString model = QString::fromStdString(powerhouse::test::test_model_path().string());
    ASSERT_TRUE(set_model_draft_model(*store_, model, model));
    ASSERT_EQ(model_draft_model(*store_, model).value(), model);
    load();
    EXPECT_FALSE(controller_->draftModelName().isEmpty());
    EXPECT_EQ(controller_->draftModelName(), controller_->modelName()) << "named as a person writes it";
    QSignalSpy finished(engine_.get(), &EngineClient::finished);
    ASSERT_TRUE(controller_->send("Count from one to twenty."));
    ASSERT_TRUE(wait_idle());
    ASSERT_EQ(finished.count(), 1);
    const QVariantMap guessed = finished.at(0).at(2).toMap();
    EXPECT_GT(guessed.value("draftedTokens").toInt(), 0);
    EXPECT_EQ(guessed.value("acceptedTokens").toInt(), guessed.value("draftedTokens").toInt());
    // Stored with the answer, and said in its statistics.
    const int drafted = guessed.value("draftedTokens").toInt();
    const auto kept = stored();
    ASSERT_EQ(kept.size(), 2u);
    EXPECT_EQ(kept[1].stats.drafted_tokens, drafted);
    EXPECT_EQ(kept[1].stats.accepted_tokens, drafted);
    const MessageListModel& shown = *controller_->messages();
    const QString statsText = shown.data(shown.index(1), MessageListModel::StatsRole).toString();
    EXPECT_TRUE(statsText.endsWith(QStringLiteral(" · %1 of %1 guesses kept").arg(drafted))) << statsText.toStdString();

    ASSERT_TRUE(set_model_draft_model(*store_, model, {}));
    load();
    EXPECT_TRUE(controller_->draftModelName().isEmpty());
    controller_->regenerate();
    ASSERT_TRUE(wait_idle());
    ASSERT_EQ(finished.count(), 2);
    EXPECT_EQ(finished.at(1).at(2).toMap().value("draftedTokens").toInt(), 0) << "no draft: nothing guessed";
    EXPECT_EQ(stored().at(1).stats.drafted_tokens, 0);
    EXPECT_FALSE(shown.data(shown.index(1), MessageListModel::StatsRole).toString().contains("guess"));
    EXPECT_EQ(finished.at(1).at(1).toString(), finished.at(0).at(1).toString()) << "the same answer";
}

// Guessing tokens from the conversation (Settings, SettingsController::guessTokens): off by
// default; on, every answer sent guesses from the conversation (GenerationSettings::lookup)
// and the answer is the same.
TEST_F(ChatControllerTest, GuessingTokensFromTheConversationGivesTheSameAnswer) {
    load();
    EXPECT_FALSE(controller_->guessTokens());
    QSignalSpy finished(engine_.get(), &EngineClient::finished);
    ASSERT_TRUE(controller_->send("Repeat this list exactly: apples, pears, plums, cherries, apples, pears, plums."));
    ASSERT_TRUE(wait_idle());
    ASSERT_EQ(finished.count(), 1);
    EXPECT_EQ(finished.at(0).at(2).toMap().value("draftedTokens").toInt(), 0) << "off by default";

    controller_->setGuessTokens(true);
    controller_->regenerate();
    ASSERT_TRUE(wait_idle());
    ASSERT_EQ(finished.count(), 2);
    EXPECT_GT(finished.at(1).at(2).toMap().value("draftedTokens").toInt(), 0);
    EXPECT_EQ(finished.at(1).at(1).toString(), finished.at(0).at(1).toString()) << "the same answer";
}

}  // namespace
