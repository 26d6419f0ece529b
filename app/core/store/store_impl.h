// Inside the store only (store.cpp, store_messages.cpp): the connection behind a Store and
// what its queries share. The queries are split by what they touch (the messages in
// store_messages.cpp, the rest in store.cpp) so that neither file grows past reading; this
// header is what they have in common, and nothing outside app/core/store includes it.
//
// Thread-safety: as Store's (one thread at a time).
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>

#include "store/store.h"

namespace powerhouse::store {

inline int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// An UPDATE or DELETE of one row by id: none changed means there is no such row.
inline Result<void> changed_one(int rows, const char* what, int64_t id) {
    if (rows == 0) return make_error(ErrorCode::invalid_argument, fmt::format("no {} {}", what, id));
    return {};
}

struct Store::Impl {
    std::filesystem::path path;
    int busy_timeout_ms;
    SQLite::Database db;
    int version = 0;
    std::filesystem::path backup;
    int recovered = 0;

    Impl(std::filesystem::path p, int busy_ms)
        : path(std::move(p)),
          busy_timeout_ms(busy_ms),
          db(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, busy_ms) {}

    // SQLite's exception as an error naming the file (and, for a lock held past the busy
    // timeout, who to close): store.cpp.
    Error failure(const std::exception& e) const;

    // Runs `body` and turns SQLite's exceptions into errors naming the file.
    template <class Body>
    auto guarded(Body&& body) const -> decltype(body()) {
        try {
            return body();
        } catch (const std::exception& e) {
            return failure(e);
        }
    }

    // Touches a conversation's activity time; fails when there is no such conversation.
    void touch(int64_t conversation_id, int64_t at) {
        SQLite::Statement q(db, "UPDATE conversations SET updated_ms = ? WHERE id = ?");
        q.bind(1, at);
        q.bind(2, conversation_id);
        q.exec();
    }

    // Adds a message at `at` and touches its conversation, inside the caller's transaction:
    // store_messages.cpp.
    Message insert_message(int64_t conversation_id, const std::string& role, const std::string& content,
                           MessageState state, int64_t at);

    Result<void> migrate(int target);
};

}  // namespace powerhouse::store
