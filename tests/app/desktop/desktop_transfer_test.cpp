// ConversationTransfer (the app's export and import) over a store in a temporary folder:
// files written as the core writes them, the outcome in words, the signal that reloads the
// conversation list, and refusals that change neither the store nor the chosen file.
#include <gtest/gtest.h>

#include <QDate>
#include <QSignalSpy>
#include <QUrl>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "chat_controller.h"
#include "conversation_list_model.h"
#include "conversation_transfer.h"
#include "desktop_test_support.h"
#include "engine_client.h"
#include "message_list_model.h"
#include "store/store.h"
#include "store/transfer.h"
#include "support/test_support.h"

namespace {

using powerhouse::store::ConversationRecord;
using powerhouse::store::Message;
using powerhouse::store::MessageState;
using powerhouse::store::Store;
using powerhouse::test::open_store;

QUrl fileUrl(const std::filesystem::path& path) {
    return QUrl::fromLocalFile(QString::fromStdString(path.string()));
}

std::vector<int64_t> addConversations(Store& store) {
    ConversationRecord a;
    a.conversation.title = "Paths/and: names";
    a.conversation.created_ms = a.conversation.updated_ms = 1714572000000;
    Message question;
    question.role = "user";
    question.content = "Show me a fence";
    Message answer;
    answer.role = "assistant";
    answer.content = "```sh\nls\n```";
    answer.state = MessageState::stopped;
    answer.stats.model = "SmolLM2";
    answer.stats.generated_tokens = 4;
    a.messages = {question, answer};
    ConversationRecord b;
    b.conversation.title = "Second";
    b.conversation.created_ms = b.conversation.updated_ms = 1714573000000;
    b.messages = {question};
    auto ids = store.insert_conversations({a, b});
    EXPECT_TRUE(ids) << ids.error().message;
    return ids ? *ids : std::vector<int64_t>{};
}

TEST(ConversationTransfer, ExportsAndImportsThroughFilesAndSaysHowItWent) {
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    const std::vector<int64_t> ids = addConversations(store);
    ASSERT_EQ(ids.size(), 2u);
    ConversationTransfer transfer(store);
    ConversationListModel list(store);
    // The chat's writer, drained before each export or import: here, a write it still held.
    int drained = 0;
    transfer.setBeforeRead([&] {
        if (drained++ == 0) {
            ASSERT_TRUE(store.rename_conversation(ids[1], "Renamed by the writer"));
        }
    });
    // What main.cpp wires: an import reloads the list.
    QObject::connect(&transfer, &ConversationTransfer::imported, &list, &ConversationListModel::reload);
    QSignalSpy messages(&transfer, &ConversationTransfer::messageChanged);
    QSignalSpy exported(&transfer, &ConversationTransfer::exported);
    QSignalSpy imported(&transfer, &ConversationTransfer::imported);

    // All, as JSON: the core's document.
    ASSERT_TRUE(transfer.exportConversations({}, "json", fileUrl(dir / "all.json")))
        << transfer.message().toStdString();
    EXPECT_FALSE(transfer.failed());
    EXPECT_EQ(transfer.message(), "Exported 2 conversations to all.json");
    ASSERT_EQ(exported.size(), 1);
    EXPECT_EQ(exported[0][1].toInt(), 2);
    const auto doc = nlohmann::json::parse(powerhouse::test::read_file(dir / "all.json"));
    EXPECT_EQ(doc["format"], "powerhouse.conversations");
    EXPECT_EQ(doc["conversations"].size(), 2u);
    EXPECT_EQ(doc["conversations"][1]["title"], "Renamed by the writer") << "the writer drained before the read";

    // One, as Markdown, its id as QML passes numbers (a double).
    ASSERT_TRUE(transfer.exportConversations({QVariant(static_cast<double>(ids[0]))}, "md", fileUrl(dir / "one.md")));
    EXPECT_EQ(transfer.message(), "Exported 1 conversation to one.md");
    EXPECT_EQ(powerhouse::test::read_file(dir / "one.md"), *powerhouse::store::export_markdown(store, {ids[0]}));

    // Import: new conversations beside the old, and the list follows.
    EXPECT_EQ(list.rowCount(), 2);
    ASSERT_TRUE(transfer.importConversations(fileUrl(dir / "all.json"))) << transfer.message().toStdString();
    EXPECT_EQ(transfer.message(), "Imported 2 conversations (3 messages) from all.json");
    ASSERT_EQ(imported.size(), 1);
    EXPECT_GT(imported[0][0].toLongLong(), ids[1]);
    EXPECT_EQ(imported[0][1].toInt(), 2);
    EXPECT_EQ(imported[0][2].toInt(), 3);
    EXPECT_EQ(list.rowCount(), 4);
    EXPECT_EQ(store.conversation(imported[0][0].toLongLong())->title, "Paths/and: names");
    EXPECT_EQ(messages.size(), 3);
    EXPECT_EQ(drained, 3);
}

// An OpenAI-style chat whose assistant turn only called tools ("content": null with
// "tool_calls") comes in through the app's import, and the chat shows that turn's calls
// where its text would be; a null content without tool calls is refused, naming the message.
TEST(ConversationTransfer, AnAnswerThatOnlyCalledToolsIsImportedAndShown) {
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    ConversationTransfer transfer(store);
    powerhouse::test::write_file(dir / "tools.json", R"([{"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "assistant", "content": "Sunny."}])");
    QSignalSpy imported(&transfer, &ConversationTransfer::imported);
    ASSERT_TRUE(transfer.importConversations(fileUrl(dir / "tools.json"))) << transfer.message().toStdString();
    ASSERT_EQ(imported.size(), 1);
    EngineClient engine;
    ChatController chat(store, engine);
    chat.selectConversation(imported[0][0].toLongLong());
    const MessageListModel& shown = *chat.messages();
    ASSERT_EQ(shown.rowCount(), 3);
    EXPECT_EQ(shown.data(shown.index(1), MessageListModel::ContentRole).toString(), "");
    EXPECT_EQ(shown.data(shown.index(1), MessageListModel::ToolCallsRole).toString(),
              "Called get_weather({\"city\": \"Paris\"})");
    EXPECT_EQ(shown.data(shown.index(2), MessageListModel::ToolCallsRole).toString(), "");

    powerhouse::test::write_file(dir / "null.json", R"([{"role": "user", "content": "Hi"},
        {"role": "assistant", "content": null}])");
    EXPECT_FALSE(transfer.importConversations(fileUrl(dir / "null.json")));
    EXPECT_TRUE(transfer.message().contains("[1].content: null, and the message calls no tools"))
        << transfer.message().toStdString();
}

TEST(ConversationTransfer, RefusalsChangeNothing) {
    powerhouse::test::TempDir dir;
    Store store = open_store(dir);
    const std::vector<int64_t> ids = addConversations(store);
    ConversationTransfer transfer(store);
    QSignalSpy imported(&transfer, &ConversationTransfer::imported);
    const std::string before = *powerhouse::store::export_json(store, {}, {.now_ms = 1});

    EXPECT_FALSE(transfer.exportConversations({}, "pdf", fileUrl(dir / "x.pdf")));
    EXPECT_TRUE(transfer.failed());
    EXPECT_EQ(transfer.message(), "Cannot export as \"pdf\": choose JSON or Markdown");
    EXPECT_FALSE(transfer.exportConversations({}, "json", QUrl("https://example.com/x.json")));
    EXPECT_EQ(transfer.message(), "Cannot export to https://example.com/x.json: choose a file on this computer");
    EXPECT_FALSE(transfer.exportConversations({QVariant("abc")}, "json", fileUrl(dir / "x.json")));
    EXPECT_EQ(transfer.message(), "Cannot export: abc is not a conversation");

    // An unknown conversation, and a folder that is not there: the chosen file stays as it was.
    powerhouse::test::write_file(dir / "keep.json", "old");
    EXPECT_FALSE(transfer.exportConversations({QVariant(qint64{999})}, "json", fileUrl(dir / "keep.json")));
    EXPECT_EQ(transfer.message(), "Cannot export: no conversation 999");
    EXPECT_EQ(powerhouse::test::read_file(dir / "keep.json"), "old");
    EXPECT_FALSE(transfer.exportConversations({}, "md", fileUrl(dir / "missing" / "x.md")));
    EXPECT_TRUE(transfer.message().startsWith("Cannot write ")) << transfer.message().toStdString();
    EXPECT_FALSE(std::filesystem::exists(dir / "missing"));

    // Bad files: the place and the problem, and nothing stored.
    powerhouse::test::write_file(dir / "bad.json",
                                 R"([{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}])");
    EXPECT_FALSE(transfer.importConversations(fileUrl(dir / "bad.json")));
    EXPECT_TRUE(transfer.failed());
    EXPECT_EQ(transfer.message(), "Cannot import bad.json: [1].role: \"robot\" is not one of system, user, assistant");
    EXPECT_FALSE(transfer.importConversations(fileUrl(dir / "absent.json")));
    EXPECT_TRUE(transfer.message().startsWith("Cannot import absent.json: ")) << transfer.message().toStdString();
    EXPECT_FALSE(transfer.importConversations(QUrl("https://example.com/x.json")));
    EXPECT_EQ(imported.size(), 0);
    EXPECT_EQ(*powerhouse::store::export_json(store, {}, {.now_ms = 1}), before);

    // The save dialog's name: the title made safe for one, a dated name for several.
    EXPECT_EQ(transfer.suggestedFileName({QVariant(qint64{ids[0]})}, "md"), "Paths and names.md");
    EXPECT_EQ(transfer.suggestedFileName({}, "json"),
              "Powerhouse conversations " + QDate::currentDate().toString(Qt::ISODate) + ".json");
}

}  // namespace
