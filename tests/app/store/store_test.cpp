// The store of conversations and settings (app/core/store): what it keeps, search, delete
// with undo, the streaming answer's life, migrations with their backup, and files that are
// not what they should be.
#include "store/store.h"

#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "store_test_support.h"
#include "support/test_support.h"

namespace powerhouse::store {
namespace {

using test_support::ok;
using test_support::open_store;




TEST(Store, CreatesTheFileWithTheLatestSchemaInWalMode) {
    test::TempDir dir;
    const auto path = dir / "nested" / "powerhouse.db";
    {
        Store s = open_store(path);
        EXPECT_EQ(s.schema_version(), Store::latest_version());
        EXPECT_TRUE(s.backup_path().empty()) << "a new file needs no backup";
    }
    SQLite::Database db(path.string());
    EXPECT_EQ(db.execAndGet("PRAGMA journal_mode").getString(), "wal");
    EXPECT_EQ(db.execAndGet("PRAGMA user_version").getInt(), Store::latest_version());
}

TEST(Store, KeepsConversationsAndMessagesAcrossOpens) {
    test::TempDir dir;
    int64_t id = 0;
    {
        Store s = open_store(dir / "p.db");
        const Conversation c = ok(s.create_conversation("Capitals", "Answer briefly."));
        id = c.id;
        ok(s.add_message(id, "user", "What is the capital of France?"));
        Message answer = ok(s.add_message(id, "assistant", "", MessageState::streaming));
        ok(s.update_message(answer.id, "Paris"));
        MessageStats stats;
        stats.model = "SmolLM2 135M";
        stats.prompt_tokens = 31;
        stats.reused_tokens = 24;
        stats.generated_tokens = 3;
        stats.ttft_ms = 41.5;
        stats.tokens_per_second = 58.25;
        stats.energy_joules = 1.75;
        ok(s.finish_message(answer.id, "Paris.", MessageState::complete, stats));
        ok(s.set_conversation_settings(id, "Answer in one word.", R"({"temperature":0.2})"));
    }
    Store s = open_store(dir / "p.db");
    const std::vector<Conversation> list = ok(s.conversations());
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0].title, "Capitals");
    EXPECT_EQ(list[0].system_prompt, "Answer in one word.");
    EXPECT_EQ(list[0].settings_json, R"({"temperature":0.2})");
    const std::vector<Message> messages = ok(s.messages(id));
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[0].role, "user");
    EXPECT_EQ(messages[0].content, "What is the capital of France?");
    EXPECT_EQ(messages[1].content, "Paris.");
    EXPECT_EQ(messages[1].state, MessageState::complete);
    EXPECT_EQ(messages[1].stats.model, "SmolLM2 135M");
    EXPECT_EQ(messages[1].stats.prompt_tokens, 31);
    EXPECT_EQ(messages[1].stats.reused_tokens, 24);
    EXPECT_EQ(messages[1].stats.generated_tokens, 3);
    EXPECT_DOUBLE_EQ(messages[1].stats.ttft_ms, 41.5);
    EXPECT_DOUBLE_EQ(messages[1].stats.tokens_per_second, 58.25);
    ASSERT_TRUE(messages[1].stats.energy_joules.has_value());
    EXPECT_DOUBLE_EQ(*messages[1].stats.energy_joules, 1.75);
    EXPECT_EQ(s.recovered_messages(), 0);
}

TEST(Store, ListsTheMostRecentlyActiveConversationFirst) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    const Conversation a = ok(s.create_conversation("a"));
    const Conversation b = ok(s.create_conversation("b"));
    const Conversation c = ok(s.create_conversation("c"));
    std::vector<Conversation> list = ok(s.conversations());
    ASSERT_EQ(list.size(), 3u);
    EXPECT_EQ(list[0].id, c.id);
    EXPECT_EQ(list[2].id, a.id);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ok(s.add_message(a.id, "user", "back to a"));
    list = ok(s.conversations());
    EXPECT_EQ(list[0].id, a.id);
    EXPECT_EQ(list[1].id, c.id);
    EXPECT_EQ(list[2].id, b.id);
}

TEST(Store, DeleteCanBeUndoneUntilPurged) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    const Conversation keep = ok(s.create_conversation("keep"));
    const Conversation gone = ok(s.create_conversation("gone"));
    ok(s.add_message(gone.id, "user", "a unique word: zanzibar"));
    ok(s.delete_conversation(gone.id));
    EXPECT_EQ(ok(s.conversations()).size(), 1u);
    EXPECT_TRUE(ok(s.search("zanzibar")).empty()) << "deleted conversations are not found";
    ok(s.restore_conversation(gone.id));
    EXPECT_EQ(ok(s.conversations()).size(), 2u);
    EXPECT_EQ(ok(s.search("zanzibar")).size(), 1u);
    ok(s.delete_conversation(gone.id));
    EXPECT_EQ(ok(s.purge_deleted()), 1);
    EXPECT_FALSE(s.restore_conversation(gone.id));
    EXPECT_TRUE(ok(s.messages(gone.id)).empty()) << "its messages went with it";
    EXPECT_TRUE(ok(s.search("zanzibar")).empty());
    EXPECT_EQ(ok(s.conversations()).front().id, keep.id);
}

TEST(Store, SearchFindsTitlesAndContentsByWordPrefixes) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    const Conversation geo = ok(s.create_conversation("Geography quiz"));
    const Conversation code = ok(s.create_conversation("Rust lifetimes"));
    ok(s.add_message(geo.id, "user", "What is the capital of France?"));
    ok(s.add_message(geo.id, "assistant", "The capital of France is Paris."));
    ok(s.add_message(code.id, "user", "Why does the borrow checker complain about my capital-letter function?"));

    std::vector<SearchHit> hits = ok(s.search("capital france"));
    ASSERT_EQ(hits.size(), 1u) << "every word must match";
    EXPECT_EQ(hits[0].conversation_id, geo.id);
    EXPECT_NE(hits[0].snippet.find("[France]"), std::string::npos) << hits[0].snippet;

    hits = ok(s.search("capit"));
    EXPECT_EQ(hits.size(), 2u) << "prefixes match, one hit per conversation";

    hits = ok(s.search("geog"));
    ASSERT_EQ(hits.size(), 1u);
    EXPECT_EQ(hits[0].snippet, "Geography quiz");

    ok(s.rename_conversation(code.id, "Borrow checker"));
    EXPECT_EQ(ok(s.search("lifetimes")).size(), 0u);
    EXPECT_EQ(ok(s.search("borrow")).front().conversation_id, code.id);

    // What the user types is never FTS5 syntax.
    EXPECT_TRUE(s.search("\"unbalanced quote").ok());
    EXPECT_TRUE(s.search("NEAR(a b) OR * : ^").ok());
    EXPECT_TRUE(ok(s.search("   ")).empty());
    // Words outside ASCII.
    const Conversation fr = ok(s.create_conversation("Café"));
    ok(s.add_message(fr.id, "user", "Où est la bibliothèque ?"));
    EXPECT_EQ(ok(s.search("bibliothèque")).size(), 1u);
}

TEST(Store, RegenerateAndEditDropTheMessagesAfterOne) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    const Conversation c = ok(s.create_conversation("c"));
    const Message q1 = ok(s.add_message(c.id, "user", "one"));
    ok(s.add_message(c.id, "assistant", "1"));
    ok(s.add_message(c.id, "user", "two"));
    ok(s.add_message(c.id, "assistant", "2"));
    EXPECT_EQ(ok(s.delete_messages_after(q1.id)), 3);
    const std::vector<Message> left = ok(s.messages(c.id));
    ASSERT_EQ(left.size(), 1u);
    EXPECT_EQ(left[0].content, "one");
    ok(s.delete_message(q1.id));
    EXPECT_TRUE(ok(s.messages(c.id)).empty());
}

TEST(Store, AnAnswerLeftStreamingIsMarkedInterruptedWithItsText) {
    test::TempDir dir;
    int64_t id = 0;
    {
        Store s = open_store(dir / "p.db");
        const Conversation c = ok(s.create_conversation("c"));
        ok(s.add_message(c.id, "user", "tell me a story"));
        id = ok(s.add_message(c.id, "assistant", "", MessageState::streaming)).id;
        ok(s.update_message(id, "Once upon a time"));
        // The app ends here without finishing the answer.
    }
    Store s = open_store(dir / "p.db");
    EXPECT_EQ(s.recovered_messages(), 1);
    const Message m = ok(s.message(id));
    EXPECT_EQ(m.state, MessageState::interrupted);
    EXPECT_EQ(m.content, "Once upon a time");
}

TEST(Store, SettingsByKeyAndByGpu) {
    test::TempDir dir;
    {
        Store s = open_store(dir / "p.db");
        EXPECT_FALSE(ok(s.setting("theme")).has_value());
        ok(s.set_setting("theme", "dark"));
        ok(s.set_setting("theme", "light"));
        ok(s.set_gpu_settings("GPU-0000", R"({"use":true,"reserve_mib":1024})"));
    }
    Store s = open_store(dir / "p.db");
    EXPECT_EQ(ok(s.setting("theme")), std::optional<std::string>("light"));
    EXPECT_EQ(ok(s.gpu_settings("GPU-0000")), std::optional<std::string>(R"({"use":true,"reserve_mib":1024})"));
    EXPECT_FALSE(ok(s.gpu_settings("GPU-1111")).has_value());
}

TEST(Store, SeveralSettingsAreWrittenAllOrNone) {
    test::TempDir dir;
    const auto path = dir / "p.db";
    Store s = open_store(path);
    ok(s.set_settings({{"theme", "dark"}, {"split_mode", "layer"}}, {{"GPU-0000", R"({"use":true})"}}));
    EXPECT_EQ(ok(s.setting("theme")), std::optional<std::string>("dark"));
    EXPECT_EQ(ok(s.setting("split_mode")), std::optional<std::string>("layer"));
    EXPECT_EQ(ok(s.gpu_settings("GPU-0000")), std::optional<std::string>(R"({"use":true})"));
    {
        // The last write of a batch fails (a full disk, say): the ones before it are not kept.
        SQLite::Database db(path.string(), SQLite::OPEN_READWRITE);
        db.exec("CREATE TRIGGER refuse BEFORE UPDATE ON gpu_settings BEGIN SELECT RAISE(ABORT, 'disk full'); END");
    }
    Result<void> refused =
        s.set_settings({{"theme", "light"}, {"split_mode", "row"}}, {{"GPU-0000", R"({"use":false})"}});
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("disk full"), std::string::npos) << refused.error().message;
    EXPECT_EQ(ok(s.setting("theme")), std::optional<std::string>("dark"));
    EXPECT_EQ(ok(s.setting("split_mode")), std::optional<std::string>("layer"));
    EXPECT_EQ(ok(s.gpu_settings("GPU-0000")), std::optional<std::string>(R"({"use":true})"));
}

TEST(Store, BadRequestsAreErrorsThatSayWhat) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    Result<Message> no_conversation = s.add_message(999, "user", "hi");
    ASSERT_FALSE(no_conversation);
    EXPECT_NE(no_conversation.error().message.find("no conversation 999"), std::string::npos);
    const Conversation c = ok(s.create_conversation("c"));
    Result<Message> bad_role = s.add_message(c.id, "robot", "hi");
    ASSERT_FALSE(bad_role);
    EXPECT_NE(bad_role.error().message.find("robot"), std::string::npos);
    EXPECT_FALSE(s.update_message(12345, "x"));
    EXPECT_FALSE(s.rename_conversation(12345, "x"));
    EXPECT_FALSE(s.delete_conversation(12345));
}

// A file at schema 1 (before search and settings) is copied aside, then migrated, and
// what it held is found by the new search.
TEST(Store, MigratesAnOlderFileAfterBackingItUp) {
    test::TempDir dir;
    const auto path = dir / "p.db";
    {
        Store old = open_store(path, {.target_version = 1});
        EXPECT_EQ(old.schema_version(), 1);
        const Conversation c = ok(old.create_conversation("Old times"));
        ok(old.add_message(c.id, "user", "remember the gramophone"));
    }
    Store s = open_store(path);
    EXPECT_EQ(s.schema_version(), Store::latest_version());
    ASSERT_FALSE(s.backup_path().empty());
    EXPECT_EQ(s.backup_path().filename().string(), "p.db.v1.bak");
    EXPECT_EQ(ok(s.search("gramophone")).size(), 1u) << "migration 2 indexes the existing messages";
    EXPECT_EQ(ok(s.search("old")).size(), 1u);
    // The backup is the file as it was.
    SQLite::Database backup(s.backup_path().string());
    EXPECT_EQ(backup.execAndGet("PRAGMA user_version").getInt(), 1);
    EXPECT_EQ(backup.execAndGet("SELECT content FROM messages").getString(), "remember the gramophone");
}

// Migration 4 adds the prompt tokens found in the cache: answers stored before it have none.
TEST(Store, AnswersFromBeforeThePromptCacheReuseNothing) {
    test::TempDir dir;
    const auto path = dir / "p.db";
    int64_t answer = 0;
    {
        Store old = open_store(path, {.target_version = 3});
        const Conversation c = ok(old.create_conversation("Before"));
        ok(old.add_message(c.id, "user", "hello"));
        answer = ok(old.add_message(c.id, "assistant", "Hi there.")).id;
    }
    Store s = open_store(path);
    EXPECT_EQ(s.backup_path().filename().string(), "p.db.v3.bak");
    const Message before = ok(s.message(answer));
    EXPECT_EQ(before.content, "Hi there.");
    EXPECT_EQ(before.stats.reused_tokens, 0);
    MessageStats stats;
    stats.prompt_tokens = 840;
    stats.reused_tokens = 812;
    stats.generated_tokens = 5;
    ok(s.finish_message(answer, "Hi there!", MessageState::complete, stats));
    EXPECT_EQ(ok(s.message(answer)).stats.reused_tokens, 812);
}

// Migration 6 says where each model came from and remembers forgotten ones: records made
// before it keep everything they held, get their source from what is known of them, and
// are marked to be inspected again (a cleared modification time).
TEST(Store, ModelRecordsFromBeforeSourcesKeepTheirDataAndGetASource) {
    test::TempDir dir;
    const auto path = dir / "p.db";
    int64_t conversation = 0;
    {
        Store old = open_store(path, {.target_version = 5});
        conversation = ok(old.create_conversation("Kept")).id;
        ok(old.add_message(conversation, "user", "still here"));
        // Version 5's models table, written as that version wrote it.
        SQLite::Database db(path.string(), SQLite::OPEN_READWRITE);
        db.exec(R"sql(
            INSERT INTO models (path, folder, file_size, mtime_ns, sha256, ok, problem, info_json, added_ms, updated_ms)
            VALUES ('/m/imported.gguf', '', 100, 11, '', 1, '', '{"name":"Imported"}', 1000, 1001),
                   ('/lib/downloaded.gguf', '/lib', 200, 22, 'abc123', 1, '', '{"name":"Downloaded"}', 2000, 2001),
                   ('/lib/found.gguf', '/lib', 300, 33, '', 0, 'truncated', '{}', 3000, 3001);
        )sql");
    }
    Store s = open_store(path);
    EXPECT_EQ(s.schema_version(), Store::latest_version());
    EXPECT_GE(Store::latest_version(), 6);
    EXPECT_EQ(s.backup_path().filename().string(), "p.db.v5.bak");
    const std::vector<ModelRecord> models = ok(s.models());
    ASSERT_EQ(models.size(), 3u);
    // By path: /lib/downloaded.gguf, /lib/found.gguf, /m/imported.gguf.
    EXPECT_EQ(models[0].source, "downloaded");
    EXPECT_EQ(models[0].sha256, "abc123");
    EXPECT_EQ(models[0].file_size, 200);
    EXPECT_EQ(models[0].info_json, R"({"name":"Downloaded"})");
    EXPECT_EQ(models[0].added_ms, 2000);
    EXPECT_EQ(models[1].source, "folder");
    EXPECT_FALSE(models[1].ok);
    EXPECT_EQ(models[1].problem, "truncated");
    EXPECT_EQ(models[1].folder, "/lib");
    EXPECT_EQ(models[2].source, "imported");
    EXPECT_EQ(models[2].info_json, R"({"name":"Imported"})");
    for (const ModelRecord& m : models) {
        EXPECT_EQ(m.mtime_ns, 0) << m.path << ": to be inspected again";
        EXPECT_EQ(m.source_name, "");
    }
    EXPECT_EQ(ok(s.messages(conversation)).at(0).content, "still here");
    EXPECT_TRUE(ok(s.hidden_models()).empty());

    // The new columns are kept, and forgotten paths remembered until shown again.
    ModelRecord ollama;
    ollama.path = "/o/blobs/sha256-00";
    ollama.folder = "/o";
    ollama.source = "ollama";
    ollama.source_name = "llama3.2:3b, llama3.2:latest";
    const ModelRecord stored = ok(s.put_model(ollama));
    EXPECT_EQ(stored.source, "ollama");
    EXPECT_EQ(stored.source_name, "llama3.2:3b, llama3.2:latest");
    ok(s.hide_model(ollama.path));
    EXPECT_FALSE(ok(s.model_by_path(ollama.path)).has_value());
    EXPECT_EQ(ok(s.hidden_models()), std::vector<std::string>{ollama.path});
    ok(s.unhide_model(ollama.path));
    EXPECT_TRUE(ok(s.hidden_models()).empty());
}

// Migration 7 keeps where an answer went on after a device failed under it: answers stored
// before it have no such notes, and the notes given are read back as written, in order.
TEST(Store, AnAnswerKeepsWhereItWentOnAfterADeviceFailed) {
    test::TempDir dir;
    const auto path = dir / "p.db";
    int64_t conversation = 0;
    int64_t old_answer = 0;
    {
        Store old = open_store(path, {.target_version = 6});
        conversation = ok(old.create_conversation("Before")).id;
        ok(old.add_message(conversation, "user", "hello"));
        old_answer = ok(old.add_message(conversation, "assistant", "Hi there.")).id;
    }
    Store s = open_store(path);
    EXPECT_EQ(s.schema_version(), Store::latest_version());
    EXPECT_GE(Store::latest_version(), 8);
    EXPECT_EQ(s.backup_path().filename().string(), "p.db.v6.bak");
    const Message before = ok(s.message(old_answer));
    EXPECT_EQ(before.content, "Hi there.");
    EXPECT_TRUE(before.stats.recoveries.empty());
    EXPECT_TRUE(before.stats.throttle.empty());

    const int64_t answer = ok(s.add_message(conversation, "assistant", "", MessageState::streaming)).id;
    MessageStats stats;
    stats.generated_tokens = 80;
    stats.recoveries = {{37, "GPU 1", "Xid 79, fell off the bus", "GPU 0 (NVIDIA H200)"},
                        {52, "GPU 0", "did not answer within 60 s", "CPU (8 threads)"}};
    stats.throttle = "GPU 0 throttled (power cap) for 40% of the answer, 18% slower";
    ok(s.finish_message(answer, "The whole answer.", MessageState::complete, stats));
    const Message after = ok(s.message(answer));
    EXPECT_EQ(after.content, "The whole answer.");
    EXPECT_EQ(after.stats.recoveries, stats.recoveries);
    EXPECT_EQ(after.stats.throttle, stats.throttle);
    EXPECT_EQ(recovery_text(after.stats.recoveries[0]),
              "Continued on GPU 0 (NVIDIA H200) after GPU 1 failed at token 37: Xid 79, fell off the bus");
    EXPECT_EQ(recovery_text({0, "CPU", "", "CPU (2 threads)"}), "Continued on CPU (2 threads) after CPU failed before "
                                                                "its first token");
    // A note a hand edit left unreadable costs the note, not the message.
    {
        SQLite::Database db(path.string(), SQLite::OPEN_READWRITE);
        db.exec("UPDATE messages SET recoveries_json = '{not json' WHERE id = " + std::to_string(answer));
    }
    const Message edited = ok(s.message(answer));
    EXPECT_EQ(edited.content, "The whole answer.");
    EXPECT_TRUE(edited.stats.recoveries.empty());
}

// Migration 9 keeps a reasoning model's thinking apart from the answer's text: answers stored
// before it have none, and a new answer's reasoning is saved as it streams, replaced by the
// final save's, read back after a reopen, and never found by search (the words found are
// the answer's).
TEST(Store, AnAnswerKeepsItsReasoningApartFromItsText) {
    test::TempDir dir;
    const auto path = dir / "p.db";
    int64_t conversation = 0;
    int64_t old_answer = 0;
    {
        Store old = open_store(path, {.target_version = 8});
        EXPECT_EQ(old.schema_version(), 8);
        conversation = ok(old.create_conversation("Before")).id;
        ok(old.add_message(conversation, "user", "hello"));
        old_answer = ok(old.add_message(conversation, "assistant", "Hi there.")).id;
    }
    int64_t answer = 0;
    {
        Store s = open_store(path);
        EXPECT_EQ(s.schema_version(), Store::latest_version());
        EXPECT_GE(Store::latest_version(), 9);
        EXPECT_EQ(s.backup_path().filename().string(), "p.db.v8.bak");
        const Message before = ok(s.message(old_answer));
        EXPECT_EQ(before.content, "Hi there.");
        EXPECT_EQ(before.reasoning, "");

        answer = ok(s.add_message(conversation, "assistant", "", MessageState::streaming)).id;
        ok(s.update_message(answer, "", "The user greets me;"));
        Message streaming = ok(s.message(answer));
        EXPECT_EQ(streaming.content, "");
        EXPECT_EQ(streaming.reasoning, "The user greets me;");
        MessageStats stats;
        stats.generated_tokens = 12;
        ok(s.finish_message(answer, "Hello!", MessageState::complete, stats, {},
                            "The user greets me; greet them back."));
    }
    Store s = open_store(path);
    const std::vector<Message> messages = ok(s.messages(conversation));
    ASSERT_EQ(messages.size(), 3u);
    EXPECT_EQ(messages[2].id, answer);
    EXPECT_EQ(messages[2].content, "Hello!");
    EXPECT_EQ(messages[2].reasoning, "The user greets me; greet them back.");
    EXPECT_EQ(messages[2].state, MessageState::complete);
    EXPECT_EQ(messages[1].reasoning, "");
    EXPECT_TRUE(ok(s.search("greets")).empty()) << "the reasoning is not searched";
    EXPECT_EQ(ok(s.search("hello")).size(), 1u);
}

// Migration 10 keeps speculative decoding's figures with an answer: a file from before it
// (schema 9, its answers kept whole) upgrades with its messages unchanged and guessing
// nothing, and a new answer's guessed and kept tokens are read back after a reopen.
TEST(Store, AnAnswerKeepsItsGuessedAndKeptTokens) {
    test::TempDir dir;
    const auto path = dir / "p.db";
    int64_t conversation = 0;
    int64_t old_answer = 0;
    {
        Store old = open_store(path, {.target_version = 9});
        EXPECT_EQ(old.schema_version(), 9);
        conversation = ok(old.create_conversation("Before")).id;
        ok(old.add_message(conversation, "user", "hello"));
        old_answer = ok(old.add_message(conversation, "assistant", "", MessageState::streaming)).id;
    }
    {
        // The answer as schema 9 finished it (today's queries name the columns of 10).
        SQLite::Database db(path.string(), SQLite::OPEN_READWRITE);
        db.exec(
            "UPDATE messages SET content = 'Hi there.', state = 'complete', model = 'SmolLM2', "
            "generated_tokens = 7, tokens_per_second = 31.5, reasoning = 'A greeting.', "
            "throttle = 'GPU 0 throttled (power cap) for 40% of the answer, 18% slower' WHERE id = " +
            std::to_string(old_answer));
    }
    int64_t answer = 0;
    {
        Store s = open_store(path);
        EXPECT_EQ(s.schema_version(), Store::latest_version());
        EXPECT_GE(Store::latest_version(), 10);
        EXPECT_EQ(s.backup_path().filename().string(), "p.db.v9.bak");
        const Message before = ok(s.message(old_answer));
        EXPECT_EQ(before.content, "Hi there.");
        EXPECT_EQ(before.state, MessageState::complete);
        EXPECT_EQ(before.reasoning, "A greeting.");
        EXPECT_EQ(before.stats.model, "SmolLM2");
        EXPECT_EQ(before.stats.generated_tokens, 7);
        EXPECT_EQ(before.stats.tokens_per_second, 31.5);
        EXPECT_EQ(before.stats.throttle, "GPU 0 throttled (power cap) for 40% of the answer, 18% slower");
        EXPECT_EQ(before.stats.drafted_tokens, 0);
        EXPECT_EQ(before.stats.accepted_tokens, 0);
        EXPECT_EQ(guesses_text(before.stats), "") << "nothing guessed, nothing said";

        answer = ok(s.add_message(conversation, "assistant", "", MessageState::streaming)).id;
        MessageStats stats;
        stats.generated_tokens = 30;
        stats.drafted_tokens = 20;
        stats.accepted_tokens = 12;
        ok(s.finish_message(answer, "Hello!", MessageState::complete, stats));
    }
    Store s = open_store(path);
    const Message after = ok(s.message(answer));
    EXPECT_EQ(after.stats.drafted_tokens, 20);
    EXPECT_EQ(after.stats.accepted_tokens, 12);
    EXPECT_EQ(guesses_text(after.stats), "12 of 20 guesses kept");
    MessageStats one;
    one.drafted_tokens = 1;
    EXPECT_EQ(guesses_text(one), "0 of 1 guess kept");
}

// A caller that saves an answer's text without mentioning its reasoning (an older call
// site, a save of the text alone) keeps the thinking stored; only a reasoning given, an
// empty one included, replaces it.
TEST(Store, SavesThatLeaveTheReasoningOutKeepIt) {
    test::TempDir dir;
    Store s = open_store(dir / "p.db");
    const int64_t conversation = ok(s.create_conversation("Thinking")).id;
    const int64_t answer = ok(s.add_message(conversation, "assistant", "", MessageState::streaming)).id;
    ok(s.update_message(answer, "", "First I think."));
    ok(s.update_message(answer, "Hel"));
    EXPECT_EQ(ok(s.message(answer)).content, "Hel");
    EXPECT_EQ(ok(s.message(answer)).reasoning, "First I think.");
    ok(s.finish_message(answer, "Hello!", MessageState::complete, MessageStats{}));
    Message finished = ok(s.message(answer));
    EXPECT_EQ(finished.content, "Hello!");
    EXPECT_EQ(finished.state, MessageState::complete);
    EXPECT_EQ(finished.reasoning, "First I think.");
    ok(s.finish_message(answer, "Hello!", MessageState::complete, MessageStats{}, {}, "Then I answer."));
    EXPECT_EQ(ok(s.message(answer)).reasoning, "Then I answer.");
    ok(s.update_message(answer, "Hello!", ""));
    EXPECT_EQ(ok(s.message(answer)).reasoning, "") << "an empty reasoning given clears it";
}

// Another program (a second Powerhouse, powerhouse-cli, a database browser) holding the
// file's write lock: a write waits the busy timeout (shortened here), then fails with words
// that say who holds it and what to do, having changed nothing; once the lock is gone the
// same writes succeed, and nothing the other program or this one stored is lost.
TEST(Store, AWriteHeldUpByAnotherProgramSaysWhatToCloseAndChangesNothing) {
    test::TempDir dir;
    const auto path = dir / "p.db";
    StoreOptions options;
    options.busy_timeout_ms = 50;
    Store s = open_store(path, options);
    EXPECT_EQ(s.busy_timeout_ms(), 50);
    const Conversation c = ok(s.create_conversation("Locked"));
    ok(s.add_message(c.id, "user", "Before the lock"));
    for (const char* begin : {"BEGIN IMMEDIATE", "BEGIN EXCLUSIVE"}) {
        SQLite::Database other(path.string(), SQLite::OPEN_READWRITE);
        other.exec(begin);
        other.exec("INSERT OR REPLACE INTO app_settings (key, value) VALUES ('other', 'kept')");
        Result<Message> added = s.add_message(c.id, "user", "While locked");
        ASSERT_FALSE(added) << begin;
        EXPECT_EQ(added.error().code, ErrorCode::io);
        for (const std::string& words : {path.string(), std::string("another Powerhouse, or another program"),
                                         std::string("close that program and try again")}) {
            EXPECT_NE(added.error().message.find(words), std::string::npos) << begin << ": " << added.error().message;
        }
        Result<void> renamed = s.rename_conversation(c.id, "Renamed");
        ASSERT_FALSE(renamed) << begin;
        EXPECT_NE(renamed.error().message.find("close that program"), std::string::npos) << renamed.error().message;
        other.exec("COMMIT");
    }
    const std::vector<Message> kept = ok(s.messages(c.id));
    ASSERT_EQ(kept.size(), 1u) << "a failed write left part of itself";
    EXPECT_EQ(kept[0].content, "Before the lock");
    EXPECT_EQ(ok(s.conversation(c.id)).title, "Locked");
    EXPECT_EQ(ok(s.setting("other")), std::optional<std::string>("kept"));
    // The lock gone, the same writes go through.
    ok(s.add_message(c.id, "user", "While locked"));
    ok(s.rename_conversation(c.id, "Renamed"));
    EXPECT_EQ(ok(s.messages(c.id)).size(), 2u);
    EXPECT_EQ(ok(s.conversation(c.id)).title, "Renamed");
}

TEST(Store, RefusesFilesItCannotUseWithoutTouchingThem) {
    test::TempDir dir;
    const auto junk = dir / "junk.db";
    test::write_file(junk, std::string(8192, 'x'));
    Result<Store> a = Store::open(junk);
    ASSERT_FALSE(a);
    EXPECT_NE(a.error().message.find("not a Powerhouse data file"), std::string::npos) << a.error().message;
    EXPECT_EQ(test::read_file(junk), std::string(8192, 'x'));

    const auto newer = dir / "newer.db";
    {
        SQLite::Database db(newer.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        db.exec("PRAGMA user_version = 99");
    }
    Result<Store> b = Store::open(newer);
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error().code, ErrorCode::unsupported);
    EXPECT_NE(b.error().message.find("newer Powerhouse"), std::string::npos) << b.error().message;

    Result<Store> c = Store::open("/proc/no-such-folder/p.db");
    ASSERT_FALSE(c);
    EXPECT_NE(c.error().message.find("/proc/no-such-folder"), std::string::npos) << c.error().message;
}

}  // namespace
}  // namespace powerhouse::store
