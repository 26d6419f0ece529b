// The store's writer thread: jobs run in the order posted on a connection of its own,
// flush() waits for them and hands back their errors, nothing posted is lost at
// destruction, the GUI's connection writes meanwhile without "database is locked", and
// opening the writer does not mark the app's streaming answers interrupted; call() runs a job
// after those posted before it and hands its result back.
#include "store/writer.h"

#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <string>
#include <thread>

#include "store_test_support.h"
#include "support/test_support.h"

namespace powerhouse::store {
namespace {

using test_support::open_store;

// A conversation with an answer streaming into it, on the GUI's connection (`store`).
class StoreWriterTest : public ::testing::Test {
protected:
    void SetUp() override {
        auto conversation = store.create_conversation("c");
        ASSERT_TRUE(conversation.ok());
        conversation_id = conversation->id;
        auto answer = store.add_message(conversation_id, "assistant", "", MessageState::streaming);
        ASSERT_TRUE(answer.ok());
        answer_id = answer->id;
    }

    test::TempDir dir;
    Store store = open_store(dir / "p.db");
    int64_t conversation_id = 0;
    int64_t answer_id = 0;
};

TEST_F(StoreWriterTest, JobsRunInOrderAndFlushWaitsForThem) {
    auto writer = StoreWriter::open(dir / "p.db");
    ASSERT_TRUE(writer.ok()) << writer.error().message;
    std::string text;
    for (int i = 0; i < 200; ++i) {
        text += std::to_string(i) + " ";
        (*writer)->post([id = answer_id, text](Store& s) { return s.update_message(id, text); });
    }
    EXPECT_TRUE((*writer)->flush().empty());
    // The GUI's connection sees the last one: in order, all done.
    auto saved = store.message(answer_id);
    ASSERT_TRUE(saved.ok());
    EXPECT_EQ(saved->content, text);
    EXPECT_EQ(saved->state, MessageState::streaming) << "opening the writer recovered a live answer";
}

TEST_F(StoreWriterTest, FailedJobsAreReportedOnceByFlush) {
    auto writer = StoreWriter::open(dir / "p.db");
    ASSERT_TRUE(writer.ok());
    (*writer)->post([](Store& s) { return s.update_message(424242, "lost"); });
    const std::vector<Error> errors = (*writer)->flush();
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors.front().message.find("424242"), std::string::npos) << errors.front().message;
    EXPECT_TRUE((*writer)->flush().empty());
    EXPECT_TRUE((*writer)->take_errors().empty());
}

// A job held up by another program's lock fails after the busy timeout the writer was given
// (the app passes its own connection's), and its error comes back from flush() with the
// words that say what to close: the write is reported, never dropped.
TEST_F(StoreWriterTest, AJobHeldUpByAnotherProgramIsReportedWithWhatToDo) {
    StoreOptions options;
    options.busy_timeout_ms = 50;
    auto writer = StoreWriter::open(dir / "p.db", options);
    ASSERT_TRUE(writer.ok()) << writer.error().message;
    {
        SQLite::Database other((dir / "p.db").string(), SQLite::OPEN_READWRITE);
        other.exec("BEGIN IMMEDIATE");
        (*writer)->post([id = answer_id](Store& s) { return s.update_message(id, "held up"); });
        const std::vector<Error> errors = (*writer)->flush();
        ASSERT_EQ(errors.size(), 1u);
        EXPECT_NE(errors.front().message.find("close that program and try again"), std::string::npos)
            << errors.front().message;
        other.exec("ROLLBACK");
    }
    (*writer)->post([id = answer_id](Store& s) { return s.update_message(id, "went through"); });
    EXPECT_TRUE((*writer)->flush().empty());
    auto saved = store.message(answer_id);
    ASSERT_TRUE(saved.ok());
    EXPECT_EQ(saved->content, "went through");
}

TEST_F(StoreWriterTest, NothingPostedIsLostWhenItGoes) {
    {
        auto writer = StoreWriter::open(dir / "p.db");
        ASSERT_TRUE(writer.ok());
        for (int i = 0; i < 50; ++i) {
            (*writer)->post([id = answer_id, i](Store& s) { return s.update_message(id, "v" + std::to_string(i)); });
        }
    }
    auto saved = store.message(answer_id);
    ASSERT_TRUE(saved.ok());
    EXPECT_EQ(saved->content, "v49");
}

TEST_F(StoreWriterTest, TheGuiConnectionWritesWhileTheWriterWrites) {
    auto writer = StoreWriter::open(dir / "p.db");
    ASSERT_TRUE(writer.ok());
    // One job that writes for a while (many transactions, each an fsync)...
    (*writer)->post([id = answer_id](Store& s) -> Result<void> {
        for (int i = 0; i < 400; ++i) {
            if (Result<void> r = s.update_message(id, std::string(4096, static_cast<char>('a' + i % 26))); !r) return r;
        }
        return {};
    });
    // ... while the GUI thread's connection adds messages: each waits for the writer's
    // transaction to end instead of failing with "database is locked".
    for (int i = 0; i < 300; ++i) {
        auto added = store.add_message(conversation_id, "user", "question " + std::to_string(i));
        ASSERT_TRUE(added.ok()) << added.error().message;
    }
    EXPECT_TRUE((*writer)->flush().empty());
    auto messages = store.messages(conversation_id);
    ASSERT_TRUE(messages.ok());
    EXPECT_EQ(messages->size(), 301u);
}

TEST_F(StoreWriterTest, CallRunsAfterThePostedJobsAndHandsBackItsResult) {
    auto writer = StoreWriter::open(dir / "p.db");
    ASSERT_TRUE(writer.ok());
    const int64_t gui_changes = store.changes_made();
    for (int i = 0; i < 50; ++i) {
        (*writer)->post([id = answer_id, i](Store& s) { return s.update_message(id, "v" + std::to_string(i)); });
    }
    // A write whose result is needed at once (the new message's id), made after the saves
    // before it: it reads what they wrote.
    std::thread::id ran_on;
    auto added = (*writer)->call([&, id = answer_id](Store& s) -> Result<Message> {
        ran_on = std::this_thread::get_id();
        auto saved = s.message(id);
        if (!saved) return saved.error();
        return s.add_message(conversation_id, "user", "after " + saved->content);
    });
    ASSERT_TRUE(added.ok()) << added.error().message;
    EXPECT_EQ(added->content, "after v49");
    EXPECT_NE(ran_on, std::this_thread::get_id()) << "the job ran on the writer's thread";
    EXPECT_EQ(store.changes_made(), gui_changes) << "the GUI's connection wrote nothing";
    auto messages = store.messages(conversation_id);
    ASSERT_TRUE(messages.ok());
    ASSERT_EQ(messages->size(), 2u);
    EXPECT_EQ(messages->back().id, added->id);

    // Its error comes back to the caller, not to flush().
    auto failed = (*writer)->call([](Store& s) { return s.update_message(424242, "lost"); });
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(failed.error().message.find("424242"), std::string::npos) << failed.error().message;
    EXPECT_TRUE((*writer)->flush().empty());
}

}  // namespace
}  // namespace powerhouse::store
