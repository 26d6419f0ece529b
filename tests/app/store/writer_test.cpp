// The store's writer thread: jobs run in the order posted on a connection of its own,
// flush() waits for them and hands back their errors, nothing posted is lost at
// destruction, the GUI's connection writes meanwhile without "database is locked", and
// opening the writer does not mark the app's streaming answers interrupted.
#include "store/writer.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "store_test_support.h"
#include "support/test_support.h"

namespace powerhouse::store {
namespace {

using test_support::open_store;

TEST(StoreWriter, JobsRunInOrderAndFlushWaitsForThem) {
    test::TempDir dir;
    Store store = open_store(dir / "p.db");
    auto conversation = store.create_conversation("c");
    ASSERT_TRUE(conversation.ok());
    auto answer = store.add_message(conversation->id, "assistant", "", MessageState::streaming);
    ASSERT_TRUE(answer.ok());
    auto writer = StoreWriter::open(dir / "p.db");
    ASSERT_TRUE(writer.ok()) << writer.error().message;
    std::string text;
    for (int i = 0; i < 200; ++i) {
        text += std::to_string(i) + " ";
        (*writer)->post([id = answer->id, text](Store& s) { return s.update_message(id, text); });
    }
    EXPECT_TRUE((*writer)->flush().empty());
    // The GUI's connection sees the last one: in order, all done.
    auto saved = store.message(answer->id);
    ASSERT_TRUE(saved.ok());
    EXPECT_EQ(saved->content, text);
    EXPECT_EQ(saved->state, MessageState::streaming) << "opening the writer recovered a live answer";
}

TEST(StoreWriter, FailedJobsAreReportedOnceByFlush) {
    test::TempDir dir;
    Store store = open_store(dir / "p.db");
    auto writer = StoreWriter::open(dir / "p.db");
    ASSERT_TRUE(writer.ok());
    (*writer)->post([](Store& s) { return s.update_message(424242, "lost"); });
    const std::vector<Error> errors = (*writer)->flush();
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors.front().message.find("424242"), std::string::npos) << errors.front().message;
    EXPECT_TRUE((*writer)->flush().empty());
    EXPECT_TRUE((*writer)->take_errors().empty());
}

TEST(StoreWriter, NothingPostedIsLostWhenItGoes) {
    test::TempDir dir;
    Store store = open_store(dir / "p.db");
    auto conversation = store.create_conversation("c");
    ASSERT_TRUE(conversation.ok());
    auto answer = store.add_message(conversation->id, "assistant", "", MessageState::streaming);
    ASSERT_TRUE(answer.ok());
    {
        auto writer = StoreWriter::open(dir / "p.db");
        ASSERT_TRUE(writer.ok());
        for (int i = 0; i < 50; ++i) {
            (*writer)->post([id = answer->id, i](Store& s) { return s.update_message(id, "v" + std::to_string(i)); });
        }
    }
    auto saved = store.message(answer->id);
    ASSERT_TRUE(saved.ok());
    EXPECT_EQ(saved->content, "v49");
}

TEST(StoreWriter, TheGuiConnectionWritesWhileTheWriterWrites) {
    test::TempDir dir;
    Store store = open_store(dir / "p.db");
    auto conversation = store.create_conversation("c");
    ASSERT_TRUE(conversation.ok());
    auto answer = store.add_message(conversation->id, "assistant", "", MessageState::streaming);
    ASSERT_TRUE(answer.ok());
    auto writer = StoreWriter::open(dir / "p.db");
    ASSERT_TRUE(writer.ok());
    // One job that writes for a while (many transactions, each an fsync)...
    (*writer)->post([id = answer->id](Store& s) -> Result<void> {
        for (int i = 0; i < 400; ++i) {
            if (Result<void> r = s.update_message(id, std::string(4096, static_cast<char>('a' + i % 26))); !r) return r;
        }
        return {};
    });
    // ... while the GUI thread's connection adds messages: each waits for the writer's
    // transaction to end instead of failing with "database is locked".
    for (int i = 0; i < 300; ++i) {
        auto added = store.add_message(conversation->id, "user", "question " + std::to_string(i));
        ASSERT_TRUE(added.ok()) << added.error().message;
    }
    EXPECT_TRUE((*writer)->flush().empty());
    auto messages = store.messages(conversation->id);
    ASSERT_TRUE(messages.ok());
    EXPECT_EQ(messages->size(), 301u);
}

}  // namespace
}  // namespace powerhouse::store
