// The chat's writes to the store run on the store's writer thread (ChatController's header):
// the GUI's own connection writes nothing while a conversation is made, answered, renamed,
// given settings, regenerated, edited, pruned, deleted and brought back, and the database
// then holds what the window shows. Quitting the app mid-answer loses nothing: the user's
// message and the answer so far are in the database, the answer marked interrupted.
#include <gtest/gtest.h>

#include <QTest>

#include <filesystem>
#include <memory>

#include "chat_controller.h"
#include "desktop_app.h"
#include "desktop_test_support.h"
#include "engine_client.h"
#include "store/store.h"
#include "support/test_support.h"

namespace {

using powerhouse::store::MessageState;
using powerhouse::store::Store;

using powerhouse::test::wait_for;

// A chat on the test model with greedy answers of `max_tokens`, loaded; false (with a
// failure) when the model does not become ready.
bool load_chat(ChatController& chat, int max_tokens) {
    powerhouse::GenerationSettings settings;
    settings.max_tokens = max_tokens;
    settings.sampling.temperature = 0;
    chat.setGenerationSettings(settings);
    powerhouse::ModelOptions options;
    options.n_ctx = 1024;
    options.n_threads = 2;
    chat.loadModel(QString::fromStdString(powerhouse::test::test_model_path().string()), options);
    if (!wait_for([&] { return chat.modelState() != ChatController::ModelState::Loading; })) return false;
    EXPECT_EQ(chat.modelState(), ChatController::ModelState::Ready) << chat.errorText().toStdString();
    return chat.modelState() == ChatController::ModelState::Ready;
}

TEST(ChatStoreWrites, TheChatWritesOnlyThroughItsWriterThread) {
    if (!std::filesystem::exists(powerhouse::test::test_model_path())) GTEST_SKIP() << "no test model";
    powerhouse::test::TempDir dir;
    Store store = powerhouse::test::open_store(dir);
    EngineClient engine;
    ChatController chat(store, engine);
    ASSERT_TRUE(load_chat(chat, 8));
    const auto idle = [&] { return wait_for([&] { return !chat.generatingAny(); }); };

    // Every change the GUI's connection makes is counted: the chat's writes must make none
    // there (the only other connection it has is its writer's, used on the writer's thread).
    const int64_t guiChanges = store.changes_made();
    chat.send("What is the capital of France?");
    ASSERT_TRUE(idle());
    const qint64 first = chat.currentConversationId();
    ASSERT_NE(first, 0);
    chat.renameConversation(first, "Capitals");
    ASSERT_TRUE(chat.setConversationSettings("Answer briefly.", {{"maxTokens", 6}}));
    chat.regenerate();
    ASSERT_TRUE(idle());
    chat.send("And of Germany?");
    ASSERT_TRUE(idle());
    chat.editAndResend(chat.messages()->at(2)->id, "And of Italy?");
    ASSERT_TRUE(idle());
    chat.deleteMessage(chat.messages()->at(3)->id);
    chat.newConversation();
    chat.send("Name a colour.");
    ASSERT_TRUE(idle());
    const qint64 second = chat.currentConversationId();
    chat.deleteConversation(first);
    chat.deleteConversation(second);  // purges the first
    chat.undoDelete();                // brings the second back
    chat.flushWrites();
    EXPECT_TRUE(chat.errorText().isEmpty()) << chat.errorText().toStdString();
    EXPECT_EQ(store.changes_made(), guiChanges) << "a chat write was made on the GUI thread's connection";

    // And the database holds what the window shows.
    auto conversations = store.conversations();
    ASSERT_TRUE(conversations.ok());
    ASSERT_EQ(conversations->size(), 1u) << "the first was purged, the second restored";
    EXPECT_EQ(conversations->front().id, second);
    EXPECT_FALSE(store.conversation(first).ok());
    auto messages = store.messages(second);
    ASSERT_TRUE(messages.ok());
    ASSERT_EQ(messages->size(), 2u);
    EXPECT_EQ((*messages)[0].content, "Name a colour.");
    EXPECT_EQ((*messages)[1].state, MessageState::complete);
    ASSERT_EQ(chat.messages()->rowCount(), 2);
    EXPECT_EQ(chat.messages()->at(1)->content, (*messages)[1].content);
    EXPECT_EQ(chat.messages()->at(1)->stats.generated_tokens, (*messages)[1].stats.generated_tokens);
}

TEST(ChatStoreWrites, EditsRegenerationsAndDeletesLandInOrder) {
    if (!std::filesystem::exists(powerhouse::test::test_model_path())) GTEST_SKIP() << "no test model";
    powerhouse::test::TempDir dir;
    Store store = powerhouse::test::open_store(dir);
    EngineClient engine;
    ChatController chat(store, engine);
    ASSERT_TRUE(load_chat(chat, 6));
    const auto idle = [&] { return wait_for([&] { return !chat.generatingAny(); }); };

    chat.send("What is the capital of France?");
    ASSERT_TRUE(idle());
    chat.send("And of Germany?");
    ASSERT_TRUE(idle());
    chat.renameConversation(chat.currentConversationId(), "Capitals");
    chat.editAndResend(chat.messages()->at(2)->id, "And of Spain?");
    ASSERT_TRUE(idle());
    chat.flushWrites();
    auto messages = store.messages(chat.currentConversationId());
    ASSERT_TRUE(messages.ok());
    ASSERT_EQ(messages->size(), 4u);
    EXPECT_EQ((*messages)[2].content, "And of Spain?");
    EXPECT_EQ((*messages)[3].state, MessageState::complete);
    EXPECT_EQ((*messages)[3].content, chat.messages()->at(3)->content);
    EXPECT_EQ(store.conversation(chat.currentConversationId())->title, "Capitals");
    EXPECT_EQ(chat.currentTitle(), "Capitals");
    EXPECT_EQ(chat.conversations()->data(chat.conversations()->index(0), ConversationListModel::TitleRole).toString(),
              "Capitals")
        << "the list is read again once the rename has landed";
}

TEST(ChatStoreWrites, QuittingMidAnswerKeepsEveryMessage) {
    if (!std::filesystem::exists(powerhouse::test::test_model_path())) GTEST_SKIP() << "no test model";
    powerhouse::test::TempDir dir;
    DesktopApp::Options options;
    options.dataDir = QString::fromStdString((dir / "data").string());
    options.hubEndpoint = QStringLiteral("http://127.0.0.1:9");
    options.rescan = false;
    auto created = DesktopApp::create(options);
    ASSERT_TRUE(created.ok()) << created.error().message;
    std::unique_ptr<DesktopApp> app = std::move(*created);
    ChatController& chat = app->chat();
    app->load(QString::fromStdString(powerhouse::test::test_model_path().string()), false);
    ASSERT_TRUE(wait_for([&] { return chat.modelState() != ChatController::ModelState::Loading; }));
    ASSERT_EQ(chat.modelState(), ChatController::ModelState::Ready) << chat.errorText().toStdString();
    ASSERT_TRUE(chat.setConversationSettings({}, {{"temperature", 0}, {"maxTokens", 400}}));
    chat.send("Write a very long story about a dragon who learns to cook.");
    // Mid-answer, and past its first streaming save.
    ASSERT_TRUE(wait_for([&] {
        const auto* m = chat.messages()->at(1);
        return m != nullptr && m->content.size() > 40;
    }));
    ASSERT_TRUE(chat.generating());
    const qint64 conversation = chat.currentConversationId();
    const std::string shown = chat.messages()->at(1)->content;  // nothing more arrives without the event loop
    app.reset();  // quit

    auto store = Store::open(dir / "data" / "powerhouse.db");
    ASSERT_TRUE(store.ok()) << store.error().message;
    EXPECT_EQ(store->recovered_messages(), 1) << "the answer that was streaming at quit";
    auto messages = store->messages(conversation);
    ASSERT_TRUE(messages.ok());
    ASSERT_EQ(messages->size(), 2u);
    EXPECT_EQ((*messages)[0].content, "Write a very long story about a dragon who learns to cook.");
    EXPECT_EQ((*messages)[1].state, MessageState::interrupted);
    EXPECT_EQ((*messages)[1].content, shown) << "all that had streamed when the app quit";
    auto stored = store->conversation(conversation);
    ASSERT_TRUE(stored.ok());
    EXPECT_NE(stored->settings_json.find("400"), std::string::npos) << stored->settings_json;
}

}  // namespace
