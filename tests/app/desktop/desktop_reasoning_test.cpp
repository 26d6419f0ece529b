// A reasoning model's thinking in the desktop app: kept apart from the answer's text as it
// streams (the view's `reasoning` role beside `content`), saved while it streams and at the
// end, read back when the conversation is opened again, and never sent back to the model.
// Locally on the real SmolLM2 model, made by a grammar to write what a reasoning model
// writes (a <think> block, then the answer), which the engine reads because the chat asks
// it to (GenerateCommand::read_answer); with EngineClient's signals emitted as its reader
// emits them (the engine's own events held back by the event hook) for the streaming
// saves, switching conversations, failures and a token limit reached while thinking; and
// remotely against the fault server's reasoning answers (reasoning_content), whose next
// request is read back to see the history that was sent, with RemoteChat's own signals.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QSignalSpy>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "chat_controller.h"
#include "desktop_test_support.h"
#include "engine_client.h"
#include "http_test_server.h"
#include "message_list_model.h"
#include "powerhouse/grammar.h"
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

// What the fault server's think-F scenarios send (tests/app/remote/openai_fault_server.py).
constexpr const char* kServerThinking = "The user greets me; greet them back.";
constexpr const char* kServerAnswer = "Hello, wörld! Ünïcode ✓ and more.";

class ChatReasoningTest : public ::testing::Test {
protected:
    void SetUp() override {
        store_ = std::make_unique<Store>(open_store(dir_));
        engine_ = std::make_unique<EngineClient>();
        controller_ = std::make_unique<ChatController>(*store_, *engine_);
        tester_ = std::make_unique<QAbstractItemModelTester>(controller_->messages(),
                                                             QAbstractItemModelTester::FailureReportingMode::Fatal);
        controller_->setAnswerObserver([this](quint64 request) { request_ = request; },
                                       [](quint64, powerhouse::store::MessageStats&) {});
    }

    std::vector<Message> stored(qint64 conversation = 0) {
        controller_->flushWrites();  // the controller's writes run on its writer thread
        auto m = store_->messages(conversation != 0 ? conversation : controller_->currentConversationId());
        EXPECT_TRUE(m);
        return m ? *m : std::vector<Message>{};
    }

    // A role of the open conversation's row, as the view reads it.
    std::string shown(int row, MessageListModel::Role role) {
        const MessageListModel& list = *controller_->messages();
        return list.data(list.index(row), role).toString().toStdString();
    }

    // The app's engine stands in for one with a model loaded, whose events the test writes:
    // the real engine has none, and what it would answer never reaches the app.
    void fake_model() {
        engine_->setEventHook([](const powerhouse::EngineEvent&) { return true; });
        emit engine_->loaded(QVariantMap{{"displayName", "Reasoner"}, {"device", "CPU"}});
        ASSERT_EQ(controller_->modelState(), ChatController::ModelState::Ready);
    }

    powerhouse::test::TempDir dir_;
    std::unique_ptr<Store> store_;
    std::unique_ptr<EngineClient> engine_;
    std::unique_ptr<ChatController> controller_;
    std::unique_ptr<QAbstractItemModelTester> tester_;
    quint64 request_ = 0;  // the last answer's request id
};

TEST_F(ChatReasoningTest, ALocalModelsThinkingStreamsApartFromItsAnswerAndIsStored) {
    const std::string thinking = "The user greets me. Greet them back.";
    powerhouse::GenerationSettings settings;
    settings.max_tokens = 80;
    settings.sampling.temperature = 0;
    const nlohmann::json literal = "<think>" + thinking + "</think>\n\nHello!";
    auto grammar = powerhouse::Grammar::parse("root ::= " + literal.dump());
    ASSERT_TRUE(grammar) << grammar.error().message;
    settings.grammar = std::move(grammar).value();
    controller_->setGenerationSettings(settings);
    powerhouse::ModelOptions options;
    options.n_ctx = 1024;
    options.n_threads = 2;
    controller_->loadModel(QString::fromStdString(powerhouse::test::test_model_path().string()), options);
    ASSERT_TRUE(wait_for([&] { return controller_->modelState() != ChatController::ModelState::Loading; }));
    ASSERT_EQ(controller_->modelState(), ChatController::ModelState::Ready) << controller_->errorText().toStdString();

    // What the view saw while it streamed: thinking shown before any text of the answer.
    bool thoughtBeforeText = false;
    QObject::connect(controller_->messages(), &QAbstractItemModel::dataChanged, [&](const QModelIndex& index) {
        if (index.row() == 1 && shown(1, MessageListModel::ContentRole).empty() &&
            !shown(1, MessageListModel::ReasoningRole).empty())
            thoughtBeforeText = true;
    });
    // EngineClient hands on the engine's deltas and its whole reasoning at the end.
    QSignalSpy deltas(engine_.get(), &EngineClient::tokens);
    QSignalSpy done(engine_.get(), &EngineClient::finished);
    ASSERT_TRUE(controller_->send("Hello?"));
    ASSERT_TRUE(wait_for([&] { return !controller_->generating(); }));
    EXPECT_TRUE(thoughtBeforeText);
    QString streamedThinking;
    for (const QList<QVariant>& call : deltas) streamedThinking += call.at(2).toString();
    EXPECT_EQ(streamedThinking.toStdString(), thinking);
    ASSERT_EQ(done.count(), 1);
    EXPECT_EQ(done.at(0).at(1).toString().toStdString(), "Hello!");
    EXPECT_EQ(done.at(0).at(3).toString().toStdString(), thinking);
    EXPECT_EQ(shown(1, MessageListModel::ContentRole), "Hello!") << "no <think> markup in the answer";
    EXPECT_EQ(shown(1, MessageListModel::ReasoningRole), thinking);
    const auto after = stored();
    ASSERT_EQ(after.size(), 2u);
    EXPECT_EQ(after[1].state, MessageState::complete) << after[1].error;
    EXPECT_EQ(after[1].content, "Hello!");
    EXPECT_EQ(after[1].reasoning, thinking);

    // Opened again, the conversation shows it as stored.
    const qint64 conversation = controller_->currentConversationId();
    controller_->newConversation();
    controller_->selectConversation(conversation);
    EXPECT_EQ(shown(1, MessageListModel::ReasoningRole), thinking);
    EXPECT_EQ(shown(1, MessageListModel::ContentRole), "Hello!");
}

TEST_F(ChatReasoningTest, TheThinkingIsSavedWhileItStreamsAndShownAfterSwitchingBack) {
    fake_model();
    ASSERT_TRUE(controller_->send("Hello?"));
    ASSERT_NE(request_, 0u);
    const qint64 conversation = controller_->currentConversationId();
    emit engine_->tokens(request_, "", "The user greets me;");
    EXPECT_EQ(shown(1, MessageListModel::ReasoningRole), "The user greets me;");
    EXPECT_EQ(shown(1, MessageListModel::ContentRole), "");
    // The streaming saves (every second) keep the thinking with the text so far.
    ASSERT_TRUE(wait_for([&] { return stored(conversation).at(1).reasoning == "The user greets me;"; }, 5000));
    EXPECT_EQ(stored(conversation).at(1).state, MessageState::streaming);

    // Away and back mid-answer: what streamed meanwhile is shown, thinking and text apart.
    controller_->newConversation();
    emit engine_->tokens(request_, "Hel", " greet them back.");
    controller_->selectConversation(conversation);
    EXPECT_EQ(shown(1, MessageListModel::ReasoningRole), "The user greets me; greet them back.");
    EXPECT_EQ(shown(1, MessageListModel::ContentRole), "Hel");
    emit engine_->tokens(request_, "lo!", "");
    EXPECT_EQ(shown(1, MessageListModel::ContentRole), "Hello!");

    emit engine_->finished(request_, "Hello!", QVariantMap{{"stopReason", "eos"}, {"generatedTokens", 12}},
                           "The user greets me; greet them back.");
    const auto after = stored(conversation);
    ASSERT_EQ(after.size(), 2u);
    EXPECT_EQ(after[1].state, MessageState::complete);
    EXPECT_EQ(after[1].content, "Hello!");
    EXPECT_EQ(after[1].reasoning, "The user greets me; greet them back.");
    EXPECT_EQ(after[1].stats.model, "Reasoner");
}

TEST_F(ChatReasoningTest, AnAnswerThatEndsWhileThinkingKeepsItsThoughtsAndSaysWhy) {
    fake_model();
    // A failure mid-thought: what was thought is kept with the error.
    ASSERT_TRUE(controller_->send("First?"));
    emit engine_->tokens(request_, "", "Let me see");
    emit engine_->failed(request_, "the device failed");
    auto first = stored();
    ASSERT_EQ(first.size(), 2u);
    EXPECT_EQ(first[1].state, MessageState::failed);
    EXPECT_EQ(first[1].reasoning, "Let me see");
    EXPECT_EQ(first[1].error, "the device failed");
    controller_->dismissError();

    // The token limit before any answer: all of it was thinking, and the chat says what to
    // do rather than show an answer of nothing. An end that carries no reasoning keeps what
    // streamed.
    controller_->newConversation();
    ASSERT_TRUE(controller_->send("Second?"));
    emit engine_->tokens(request_, "", "Hmm, a long thought");
    emit engine_->finished(request_, "", QVariantMap{{"stopReason", "length"}, {"generatedTokens", 80}}, "");
    const auto second = stored();
    ASSERT_EQ(second.size(), 2u);
    EXPECT_EQ(second[1].state, MessageState::complete);
    EXPECT_EQ(second[1].content, "");
    EXPECT_EQ(second[1].reasoning, "Hmm, a long thought");
    EXPECT_NE(controller_->errorText().indexOf("still thinking"), -1) << controller_->errorText().toStdString();
    EXPECT_EQ(shown(1, MessageListModel::ReasoningRole), "Hmm, a long thought");

    // Stopped while thinking: kept, stopped.
    controller_->dismissError();
    controller_->newConversation();
    ASSERT_TRUE(controller_->send("Third?"));
    emit engine_->tokens(request_, "", "Where was I");
    // Deleting the conversation stops its answer and keeps it as it stands, for undo.
    const qint64 conversation = controller_->currentConversationId();
    controller_->deleteConversation(conversation);
    const auto third = stored(conversation);
    ASSERT_EQ(third.size(), 2u);
    EXPECT_EQ(third[1].state, MessageState::stopped);
    EXPECT_EQ(third[1].reasoning, "Where was I");
}

TEST_F(RemoteChatTest, ARemoteModelsThinkingIsStoredApartAndNeverSentBack) {
    auto faults = fault_server();
    ASSERT_TRUE(faults->running());
    const std::string scenario = "think-reasoning_content";
    controller_->useRemote(
        RemoteTarget{"faults", QString::fromStdString(faults->url("/" + scenario + "/v1")), {}, {}, "test-model"});
    // The thinking streams in first, apart, as the server sends it.
    bool thoughtBeforeText = false;
    QObject::connect(controller_->messages(), &QAbstractItemModel::dataChanged, [&](const QModelIndex& index) {
        const MessageListModel& rows = *controller_->messages();
        if (index.row() == 1 && rows.data(index, MessageListModel::ContentRole).toString().isEmpty() &&
            !rows.data(index, MessageListModel::ReasoningRole).toString().isEmpty())
            thoughtBeforeText = true;
    });
    ASSERT_TRUE(controller_->send("Hello?"));
    ASSERT_TRUE(wait_idle());
    EXPECT_TRUE(thoughtBeforeText);
    const auto first = stored();
    ASSERT_EQ(first.size(), 2u);
    EXPECT_EQ(first[1].state, MessageState::complete) << first[1].error;
    EXPECT_EQ(first[1].content, kServerAnswer);
    EXPECT_EQ(first[1].reasoning, kServerThinking);
    const MessageListModel& list = *controller_->messages();
    EXPECT_EQ(list.data(list.index(1), MessageListModel::ReasoningRole).toString().toStdString(), kServerThinking);
    EXPECT_EQ(list.data(list.index(1), MessageListModel::ContentRole).toString().toStdString(), kServerAnswer);

    // The next request's history: the answer's content, nothing of its thinking.
    ASSERT_TRUE(controller_->send("And now?"));
    ASSERT_TRUE(wait_idle());
    const nlohmann::json sent = faults->get_json("/" + scenario + "/last")["body"]["messages"];
    ASSERT_EQ(sent.size(), 3u) << sent.dump();
    EXPECT_EQ(sent[1], (nlohmann::json{{"role", "assistant"}, {"content", kServerAnswer}})) << sent.dump();
    EXPECT_EQ(sent.dump().find("greets"), std::string::npos) << sent.dump();
}

TEST_F(RemoteChatTest, ARemoteAnswerCutWhileThinkingKeepsTheThoughtsAndSaysWhy) {
    auto faults = fault_server();
    ASSERT_TRUE(faults->running());
    controller_->useRemote(RemoteTarget{
        "faults", QString::fromStdString(faults->url("/thinkcut-reasoning_content/v1")), {}, {}, "test-model"});
    ASSERT_TRUE(controller_->send("Hello?"));
    ASSERT_TRUE(wait_idle());
    const auto messages = stored();
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[1].content, "");
    EXPECT_EQ(messages[1].reasoning, kServerThinking);
    EXPECT_NE(controller_->errorText().indexOf("still thinking"), -1) << controller_->errorText().toStdString();
}

// RemoteChat's own signals: the deltas of thinking and text apart, and the whole of each at
// the end (ChatResult's), as EngineClient gives them for local answers.
TEST(RemoteChatReasoning, TheThinkingComesApartInTheDeltasAndAtTheEnd) {
    auto faults = fault_server();
    ASSERT_TRUE(faults->running());
    RemoteChat chat;
    QSignalSpy deltas(&chat, &RemoteChat::tokens);
    QSignalSpy done(&chat, &RemoteChat::finished);
    const RemoteTarget target{
        "faults", QString::fromStdString(faults->url("/think-reasoning/v1")), {}, {}, "test-model"};
    powerhouse::GenerationSettings settings;
    chat.start(target, remote_chat_request(target.model, {{"user", "Hello?"}}, settings));
    ASSERT_TRUE(wait_for([&] { return done.count() == 1; }, 30000));
    QString text, thinking;
    for (const QList<QVariant>& call : deltas) {
        text += call.at(1).toString();
        thinking += call.at(2).toString();
    }
    EXPECT_EQ(text.toStdString(), kServerAnswer);
    EXPECT_EQ(thinking.toStdString(), kServerThinking);
    EXPECT_EQ(done.at(0).at(1).toString().toStdString(), kServerAnswer);
    EXPECT_EQ(done.at(0).at(3).toString().toStdString(), kServerThinking);
}

TEST(MessageListModelReasoning, StreamedThinkingChangesOnlyItsRole) {
    MessageListModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    Message answer;
    answer.id = 7;
    answer.role = "assistant";
    answer.state = MessageState::streaming;
    model.append(answer);
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.appendReasoning(7, "Think");
    model.appendReasoning(7, "ing.");
    model.appendReasoning(7, "");  // nothing came: nothing changes
    ASSERT_EQ(changed.count(), 2);
    EXPECT_EQ(changed[0][2].value<QList<int>>(), QList<int>{MessageListModel::ReasoningRole});
    EXPECT_EQ(model.data(model.index(0), MessageListModel::ReasoningRole).toString(), "Thinking.");
    EXPECT_EQ(model.data(model.index(0), MessageListModel::ContentRole).toString(), "");
    EXPECT_EQ(model.roleNames().value(MessageListModel::ReasoningRole), "reasoning");
}

}  // namespace
