// The store under SIGKILL: a child process writes messages and streams answers as fast as
// it can and reports each write the store acknowledged; the test kills it at a random
// moment, then checks that every acknowledged write is in the file, whole, and that SQLite
// finds the file intact. Ten kills accumulate in one file.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <chrono>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"
#include "support/test_support.h"

namespace powerhouse::store {
namespace {

// What the child reports after each acknowledged write (fits in one atomic pipe write).
struct Ack {
    int64_t id;       // message id
    int32_t seq;      // which exchange
    int32_t version;  // 0: the user's message; 1..5: the answer while streaming; 6: finished
};

constexpr int kFinal = 6;

// The text of a message at a version: long enough to span pages, different every time.
std::string text(int seq, int version) {
    if (version == kFinal) return text(seq, kFinal - 1) + " done";
    std::string out = "exchange " + std::to_string(seq) + " version " + std::to_string(version) + ": ";
    const size_t length = 100 + static_cast<size_t>(seq) * 37 % 6000 + static_cast<size_t>(version) * 500;
    while (out.size() < length) out += static_cast<char>('a' + (out.size() * 7 + static_cast<size_t>(seq)) % 26);
    return out;
}

[[noreturn]] void child(const std::filesystem::path& path, int fd, int round) {
    Result<Store> opened = Store::open(path);
    if (!opened) _exit(3);
    Store& s = *opened;
    const auto ack = [&](int64_t id, int seq, int version) {
        const Ack a{id, seq, version};
        if (write(fd, &a, sizeof a) != static_cast<ssize_t>(sizeof a)) _exit(4);
    };
    Result<Conversation> c = s.create_conversation("round " + std::to_string(round));
    if (!c) _exit(5);
    for (int seq = round * 100000;; ++seq) {
        Result<Message> q = s.add_message(c->id, "user", text(seq, 0));
        if (!q) _exit(6);
        ack(q->id, seq, 0);
        Result<Message> a = s.add_message(c->id, "assistant", "", MessageState::streaming);
        if (!a) _exit(7);
        for (int v = 1; v < kFinal; ++v) {
            if (!s.update_message(a->id, text(seq, v))) _exit(8);
            ack(a->id, seq, v);
        }
        MessageStats stats;
        stats.generated_tokens = seq;
        if (!s.finish_message(a->id, text(seq, kFinal), MessageState::complete, stats)) _exit(9);
        ack(a->id, seq, kFinal);
    }
}

TEST(StoreKill, EveryAcknowledgedWriteSurvivesSigkill) {
    test::TempDir dir;
    const auto path = dir / "kill.db";
    std::map<int64_t, Ack> acked;  // latest acknowledged version of each message
    std::mt19937 rng(20261203);
    int killed_while_streaming = 0;
    for (int round = 0; round < 10; ++round) {
        int fds[2];
        ASSERT_EQ(pipe(fds), 0);
        const pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            close(fds[0]);
            child(path, fds[1], round);
        }
        close(fds[1]);
        // Once it has acknowledged a first write (a loaded machine may be slow to start it),
        // let it write for a random while, then kill it in the middle of whatever it does.
        Ack a{};
        int in_round = 0;
        if (read(fds[0], &a, sizeof a) == static_cast<ssize_t>(sizeof a)) {
            acked[a.id] = a;
            ++in_round;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(30, 250)(rng)));
        kill(pid, SIGKILL);
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFSIGNALED(status)) << "the child ended by itself with status " << WEXITSTATUS(status);
        while (read(fds[0], &a, sizeof a) == static_cast<ssize_t>(sizeof a)) {
            acked[a.id] = a;
            ++in_round;
        }
        close(fds[0]);
        ASSERT_GT(in_round, 0) << "round " << round << ": nothing was written before the kill";
        if (a.version > 0 && a.version < kFinal) ++killed_while_streaming;

        Result<Store> reopened = Store::open(path);
        ASSERT_TRUE(reopened) << reopened.error().message;
        for (const auto& [id, ack] : acked) {
            Result<Message> m = reopened->message(id);
            ASSERT_TRUE(m) << "acknowledged message " << id << " is missing: " << m.error().message;
            if (ack.version == 0) {
                EXPECT_EQ(m->content, text(ack.seq, 0)) << "message " << id;
                continue;
            }
            // A write may have reached the disk just before the kill, unacknowledged: the
            // answer holds the acknowledged version or a later one, never less, never torn.
            bool found = false;
            for (int v = ack.version; v <= kFinal && !found; ++v) found = m->content == text(ack.seq, v);
            EXPECT_TRUE(found) << "answer " << id << " lost acknowledged version " << ack.version;
            if (m->content == text(ack.seq, kFinal)) {
                EXPECT_EQ(m->state, MessageState::complete);
            } else {
                EXPECT_EQ(m->state, MessageState::interrupted) << "a streaming answer is recovered on open";
            }
        }
    }
    SQLite::Database db(path.string(), SQLite::OPEN_READWRITE);
    EXPECT_EQ(db.execAndGet("PRAGMA integrity_check").getString(), "ok");
    // The search index agrees with the messages (FTS5 raises an error when it does not).
    EXPECT_NO_THROW(db.exec("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')"));
    std::printf("%zu acknowledged messages over 10 kills, %d of them during a streaming answer\n", acked.size(),
                killed_while_streaming);
}

}  // namespace
}  // namespace powerhouse::store
