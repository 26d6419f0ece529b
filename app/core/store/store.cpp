#include "store/store.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <system_error>

#include "store/schema.h"

namespace powerhouse::store {

namespace {

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

MessageState parse_state(const std::string& text) {
    if (text == "streaming") return MessageState::streaming;
    if (text == "stopped") return MessageState::stopped;
    if (text == "failed") return MessageState::failed;
    if (text == "interrupted") return MessageState::interrupted;
    return MessageState::complete;
}

// FTS5 query from what the user typed: every word, each as a quoted prefix, so that
// punctuation and FTS5 syntax in the input are taken literally.
std::string fts_query(const std::string& text) {
    std::string query;
    std::string word;
    const auto flush = [&] {
        if (word.empty()) return;
        if (!query.empty()) query += ' ';
        query += '"' + word + "\"*";
        word.clear();
    };
    for (const char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x80 || std::isalnum(u) != 0) {
            word += c;
        } else {
            flush();  // spaces, punctuation and quotes separate words, as FTS5's tokenizer does
        }
    }
    flush();
    return query;
}

// A message's recovery notes as the recoveries_json column holds them: a JSON array, or ''
// when there are none (migration 7).
std::string recoveries_json(const std::vector<MessageRecovery>& recoveries) {
    if (recoveries.empty()) return {};
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const MessageRecovery& r : recoveries) {
        out.push_back(
            {{"at_token", r.at_token}, {"failed", r.failed}, {"cause", r.cause}, {"continued_on", r.continued_on}});
    }
    return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// Only this file writes the column; should it hold something else (edited by hand), the
// notes that cannot be read are left out rather than the message made unreadable.
std::vector<MessageRecovery> parse_recoveries(const std::string& text) {
    std::vector<MessageRecovery> out;
    if (text.empty()) return out;
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    if (!doc.is_array()) return out;
    for (const nlohmann::json& r : doc) {
        if (!r.is_object()) continue;
        MessageRecovery note;
        if (const auto at = r.find("at_token"); at != r.end() && at->is_number_integer()) {
            note.at_token = at->get<int64_t>();
        }
        for (auto [key, field] : {std::pair{"failed", &note.failed}, std::pair{"cause", &note.cause},
                                  std::pair{"continued_on", &note.continued_on}}) {
            if (const auto v = r.find(key); v != r.end() && v->is_string()) *field = v->get<std::string>();
        }
        out.push_back(std::move(note));
    }
    return out;
}

const char* kConversationColumns = "id, title, system_prompt, settings_json, created_ms, updated_ms";
const char* kMessageColumns =
    "id, conversation_id, role, content, state, error, model, prompt_tokens, generated_tokens, ttft_ms, "
    "tokens_per_second, energy_joules, created_ms, updated_ms, reused_tokens, engine, recoveries_json, throttle";

Conversation read_conversation(SQLite::Statement& q) {
    Conversation c;
    c.id = q.getColumn(0).getInt64();
    c.title = q.getColumn(1).getString();
    c.system_prompt = q.getColumn(2).getString();
    c.settings_json = q.getColumn(3).getString();
    c.created_ms = q.getColumn(4).getInt64();
    c.updated_ms = q.getColumn(5).getInt64();
    return c;
}

const char* kModelColumns =
    "id, path, folder, file_size, mtime_ns, sha256, ok, problem, info_json, added_ms, source, source_name";

ModelRecord read_model(SQLite::Statement& q) {
    ModelRecord r;
    r.id = q.getColumn(0).getInt64();
    r.path = q.getColumn(1).getString();
    r.folder = q.getColumn(2).getString();
    r.file_size = q.getColumn(3).getInt64();
    r.mtime_ns = q.getColumn(4).getInt64();
    r.sha256 = q.getColumn(5).getString();
    r.ok = q.getColumn(6).getInt() != 0;
    r.problem = q.getColumn(7).getString();
    r.info_json = q.getColumn(8).getString();
    r.added_ms = q.getColumn(9).getInt64();
    r.source = q.getColumn(10).getString();
    r.source_name = q.getColumn(11).getString();
    return r;
}

Message read_message(SQLite::Statement& q) {
    Message m;
    m.id = q.getColumn(0).getInt64();
    m.conversation_id = q.getColumn(1).getInt64();
    m.role = q.getColumn(2).getString();
    m.content = q.getColumn(3).getString();
    m.state = parse_state(q.getColumn(4).getString());
    m.error = q.getColumn(5).getString();
    m.stats.model = q.getColumn(6).getString();
    m.stats.prompt_tokens = q.getColumn(7).getInt64();
    m.stats.generated_tokens = q.getColumn(8).getInt64();
    m.stats.ttft_ms = q.getColumn(9).getDouble();
    m.stats.tokens_per_second = q.getColumn(10).getDouble();
    if (!q.getColumn(11).isNull()) m.stats.energy_joules = q.getColumn(11).getDouble();
    m.created_ms = q.getColumn(12).getInt64();
    m.updated_ms = q.getColumn(13).getInt64();
    m.stats.reused_tokens = q.getColumn(14).getInt64();
    m.stats.engine = q.getColumn(15).getString();
    m.stats.recoveries = parse_recoveries(q.getColumn(16).getString());
    m.stats.throttle = q.getColumn(17).getString();
    return m;
}

}  // namespace

std::string recovery_text(const MessageRecovery& r) {
    const std::string when =
        r.at_token > 0 ? fmt::format("at token {}", r.at_token) : std::string("before its first token");
    std::string text =
        fmt::format("Continued on {} after {} failed {}", r.continued_on.empty() ? "other devices" : r.continued_on,
                    r.failed.empty() ? "a device" : r.failed, when);
    if (!r.cause.empty()) text += ": " + r.cause;
    return text;
}

const char* message_state_name(MessageState state) {
    switch (state) {
        case MessageState::complete: return "complete";
        case MessageState::streaming: return "streaming";
        case MessageState::stopped: return "stopped";
        case MessageState::failed: return "failed";
        case MessageState::interrupted: return "interrupted";
    }
    return "complete";
}

namespace {

// SQLITE_BUSY: another connection (another process) holds the lock a statement needs, past
// the busy timeout; SQLITE_LOCKED: the same, between connections sharing a cache. SQLite's own
// words for both, "database is locked", say neither who holds it nor what to do.
bool locked_by_another(const std::exception& e) {
    const auto* sql = dynamic_cast<const SQLite::Exception*>(&e);
    if (sql == nullptr) return false;
    const int code = sql->getErrorCode() & 0xff;  // the primary code of an extended one
    return code == SQLITE_BUSY || code == SQLITE_LOCKED;
}

std::string locked_message(const std::filesystem::path& path, int busy_timeout_ms, const std::exception& e) {
    return fmt::format(
        "another Powerhouse, or another program (powerhouse-cli, a database browser, a backup tool), "
        "is using {} and kept it locked for {:g} s, so nothing was changed: close that program and "
        "try again ({})",
        path.string(), busy_timeout_ms / 1000.0, e.what());
}

}  // namespace

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

    Error failure(const std::exception& e) const {
        if (locked_by_another(e)) return make_error(ErrorCode::io, locked_message(path, busy_timeout_ms, e));
        return make_error(ErrorCode::io, fmt::format("{}: {}", path.string(), e.what()));
    }

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

    // Adds a message at `at` and touches its conversation, inside the caller's transaction.
    Message insert_message(int64_t conversation_id, const std::string& role, const std::string& content,
                           MessageState state, int64_t at) {
        SQLite::Statement q(db,
                            "INSERT INTO messages (conversation_id, role, content, state, created_ms, "
                            "updated_ms) VALUES (?, ?, ?, ?, ?, ?)");
        q.bind(1, conversation_id);
        q.bind(2, role);
        q.bind(3, content);
        q.bind(4, message_state_name(state));
        q.bind(5, at);
        q.bind(6, at);
        q.exec();
        Message m;
        m.id = db.getLastInsertRowid();
        touch(conversation_id, at);
        m.conversation_id = conversation_id;
        m.role = role;
        m.content = content;
        m.state = state;
        m.created_ms = m.updated_ms = at;
        return m;
    }

    // The roles a stored message may have.
    static Result<void> check_role(const std::string& role) {
        if (role != "system" && role != "user" && role != "assistant") {
            return make_error(ErrorCode::invalid_argument,
                              fmt::format("a message's role is system, user or assistant, not '{}'", role));
        }
        return {};
    }

    Result<void> migrate(int target);
};

Result<void> Store::Impl::migrate(int target) {
    const std::vector<std::string_view>& list = migrations();
    if (version > static_cast<int>(list.size())) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("{} was written by a newer Powerhouse (schema {}; this one knows up to {}): "
                                      "update Powerhouse, or open another data folder",
                                      path.string(), version, list.size()));
    }
    if (version >= target) return {};
    if (version > 0) {
        // Keep a copy of the file as it was, beside it, before changing its schema.
        std::filesystem::path copy = path;
        copy += fmt::format(".v{}.bak", version);
        for (int n = 2; std::filesystem::exists(copy); ++n) {
            copy = path;
            copy += fmt::format(".v{}.{}.bak", version, n);
        }
        SQLite::Statement vacuum(db, "VACUUM INTO ?");
        vacuum.bind(1, copy.string());
        vacuum.exec();
        backup = copy;
    }
    for (int next = version + 1; next <= target; ++next) {
        SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
        // Another process may have migrated the file meanwhile.
        const int current = db.execAndGet("PRAGMA user_version").getInt();
        if (current >= next) {
            version = current;
            continue;
        }
        db.exec(std::string(list[static_cast<size_t>(next - 1)]));
        db.exec(fmt::format("PRAGMA user_version = {}", next));
        transaction.commit();
        version = next;
    }
    return {};
}

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

int Store::latest_version() { return static_cast<int>(migrations().size()); }

Result<Store> Store::open(const std::filesystem::path& path, const StoreOptions& options) {
    if (path.has_parent_path()) {
        std::error_code ec;
        std::filesystem::create_directories(path.parent_path(), ec);
        if (ec) {
            return make_error(ErrorCode::io, fmt::format("cannot create the data folder {}: {}",
                                                         path.parent_path().string(), ec.message()));
        }
    }
    std::unique_ptr<Impl> impl;
    try {
        impl = std::make_unique<Impl>(path, options.busy_timeout_ms);
    } catch (const std::exception& e) {
        if (locked_by_another(e)) return make_error(ErrorCode::io, locked_message(path, options.busy_timeout_ms, e));
        return make_error(ErrorCode::io, fmt::format("cannot open {}: {}", path.string(), e.what()));
    }
    const int target = options.target_version > 0 ? std::min(options.target_version, latest_version())
                                                  : latest_version();
    Result<void> ready = impl->guarded([&]() -> Result<void> {
        SQLite::Database& db = impl->db;
        // Not a database at all (or a damaged one): say so before changing anything.
        const std::string check = db.execAndGet("PRAGMA quick_check").getString();
        if (check != "ok") {
            return make_error(ErrorCode::format, fmt::format("{} is damaged ({}): move it away to start afresh, or "
                                                             "restore a backup", impl->path.string(), check));
        }
        db.exec("PRAGMA journal_mode = WAL");
        db.exec("PRAGMA synchronous = FULL");
        db.exec("PRAGMA foreign_keys = ON");
        impl->version = db.execAndGet("PRAGMA user_version").getInt();
        if (Result<void> m = impl->migrate(target); !m) return m;
        if (impl->version >= 1 && options.recover_interrupted) {
            SQLite::Statement q(db, "UPDATE messages SET state = 'interrupted', updated_ms = ? WHERE state = 'streaming'");
            q.bind(1, now_ms());
            impl->recovered = q.exec();
        }
        return {};
    });
    if (!ready) {
        if (ready.error().code == ErrorCode::io && ready.error().message.find("file is not a database") != std::string::npos) {
            return make_error(ErrorCode::format, fmt::format("{} is not a Powerhouse data file (not an SQLite "
                                                             "database): move it away or choose another data folder",
                                                             path.string()));
        }
        return ready.error();
    }
    return Store(std::move(impl));
}

const std::filesystem::path& Store::path() const { return impl_->path; }
int Store::schema_version() const { return impl_->version; }
const std::filesystem::path& Store::backup_path() const { return impl_->backup; }
int Store::recovered_messages() const { return impl_->recovered; }
int Store::busy_timeout_ms() const {
    return impl_->busy_timeout_ms;
}
int64_t Store::changes_made() const { return sqlite3_total_changes64(impl_->db.getHandle()); }

Result<Conversation> Store::create_conversation(const std::string& title, const std::string& system_prompt) {
    return impl_->guarded([&]() -> Result<Conversation> {
        const int64_t at = now_ms();
        SQLite::Statement q(impl_->db, "INSERT INTO conversations (title, system_prompt, created_ms, updated_ms) "
                                       "VALUES (?, ?, ?, ?)");
        q.bind(1, title);
        q.bind(2, system_prompt);
        q.bind(3, at);
        q.bind(4, at);
        q.exec();
        Conversation c;
        c.id = impl_->db.getLastInsertRowid();
        c.title = title;
        c.system_prompt = system_prompt;
        c.settings_json = "{}";
        c.created_ms = c.updated_ms = at;
        return c;
    });
}

Result<std::vector<Conversation>> Store::conversations() const {
    return impl_->guarded([&]() -> Result<std::vector<Conversation>> {
        SQLite::Statement q(impl_->db, fmt::format("SELECT {} FROM conversations WHERE deleted_ms IS NULL "
                                                   "ORDER BY updated_ms DESC, id DESC",
                                                   kConversationColumns));
        std::vector<Conversation> out;
        while (q.executeStep()) out.push_back(read_conversation(q));
        return out;
    });
}

Result<Conversation> Store::conversation(int64_t id) const {
    return impl_->guarded([&]() -> Result<Conversation> {
        SQLite::Statement q(impl_->db, fmt::format("SELECT {} FROM conversations WHERE id = ?", kConversationColumns));
        q.bind(1, id);
        if (!q.executeStep()) return make_error(ErrorCode::invalid_argument, fmt::format("no conversation {}", id));
        return read_conversation(q);
    });
}

namespace {

Result<void> changed_one(int rows, const char* what, int64_t id) {
    if (rows == 0) return make_error(ErrorCode::invalid_argument, fmt::format("no {} {}", what, id));
    return {};
}

}  // namespace

Result<void> Store::rename_conversation(int64_t id, const std::string& title) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Statement q(impl_->db, "UPDATE conversations SET title = ?, updated_ms = ? WHERE id = ?");
        q.bind(1, title);
        q.bind(2, now_ms());
        q.bind(3, id);
        return changed_one(q.exec(), "conversation", id);
    });
}

Result<void> Store::set_conversation_settings(int64_t id, const std::string& system_prompt,
                                              const std::string& settings_json) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Statement q(impl_->db, "UPDATE conversations SET system_prompt = ?, settings_json = ? WHERE id = ?");
        q.bind(1, system_prompt);
        q.bind(2, settings_json);
        q.bind(3, id);
        return changed_one(q.exec(), "conversation", id);
    });
}

Result<void> Store::delete_conversation(int64_t id) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Statement q(impl_->db, "UPDATE conversations SET deleted_ms = ? WHERE id = ? AND deleted_ms IS NULL");
        q.bind(1, now_ms());
        q.bind(2, id);
        return changed_one(q.exec(), "conversation", id);
    });
}

Result<void> Store::restore_conversation(int64_t id) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Statement q(impl_->db, "UPDATE conversations SET deleted_ms = NULL WHERE id = ? AND deleted_ms IS NOT NULL");
        q.bind(1, id);
        return changed_one(q.exec(), "deleted conversation", id);
    });
}

Result<int> Store::purge_deleted() {
    return impl_->guarded([&]() -> Result<int> {
        return impl_->db.exec("DELETE FROM conversations WHERE deleted_ms IS NOT NULL");
    });
}

Result<std::vector<SearchHit>> Store::search(const std::string& text, int limit) const {
    const std::string query = fts_query(text);
    if (query.empty()) return std::vector<SearchHit>{};
    return impl_->guarded([&]() -> Result<std::vector<SearchHit>> {
        // Title matches first, then messages by relevance (bm25: lower is better).
        SQLite::Statement q(impl_->db, R"sql(
            SELECT c.id, c.title, c.title, c.updated_ms, 0 AS kind, bm25(conversations_fts) AS rank
              FROM conversations_fts JOIN conversations c ON c.id = conversations_fts.rowid
             WHERE conversations_fts MATCH ?1 AND c.deleted_ms IS NULL
            UNION ALL
            SELECT c.id, c.title, snippet(messages_fts, 0, '[', ']', '…', 12), c.updated_ms, 1 AS kind,
                   bm25(messages_fts) AS rank
              FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
                   JOIN conversations c ON c.id = m.conversation_id
             WHERE messages_fts MATCH ?1 AND c.deleted_ms IS NULL
            ORDER BY kind, rank)sql");
        q.bind(1, query);
        std::vector<SearchHit> hits;
        while (q.executeStep() && static_cast<int>(hits.size()) < limit) {
            const int64_t id = q.getColumn(0).getInt64();
            bool seen = false;
            for (const SearchHit& h : hits) seen = seen || h.conversation_id == id;
            if (seen) continue;
            hits.push_back(SearchHit{id, q.getColumn(1).getString(), q.getColumn(2).getString(),
                                     q.getColumn(3).getInt64()});
        }
        return hits;
    });
}

Result<Message> Store::add_message(int64_t conversation_id, const std::string& role, const std::string& content,
                                   MessageState state) {
    PH_TRY(Impl::check_role(role));
    return impl_->guarded([&]() -> Result<Message> {
        SQLite::Transaction transaction(impl_->db, SQLite::TransactionBehavior::IMMEDIATE);
        const int64_t at = now_ms();
        SQLite::Statement exists(impl_->db, "SELECT 1 FROM conversations WHERE id = ?");
        exists.bind(1, conversation_id);
        if (!exists.executeStep()) {
            return make_error(ErrorCode::invalid_argument, fmt::format("no conversation {}", conversation_id));
        }
        Message m = impl_->insert_message(conversation_id, role, content, state, at);
        transaction.commit();
        return m;
    });
}

Result<void> Store::update_message(int64_t id, const std::string& content) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Statement q(impl_->db, "UPDATE messages SET content = ?, updated_ms = ? WHERE id = ?");
        q.bind(1, content);
        q.bind(2, now_ms());
        q.bind(3, id);
        return changed_one(q.exec(), "message", id);
    });
}

Result<void> Store::finish_message(int64_t id, const std::string& content, MessageState state,
                                   const MessageStats& stats, const std::string& error) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Transaction transaction(impl_->db, SQLite::TransactionBehavior::IMMEDIATE);
        const int64_t at = now_ms();
        SQLite::Statement q(impl_->db, "UPDATE messages SET content = ?, state = ?, error = ?, model = ?, "
                                       "prompt_tokens = ?, generated_tokens = ?, ttft_ms = ?, tokens_per_second = ?, "
                                       "energy_joules = ?, updated_ms = ?, reused_tokens = ?, engine = ?, "
                                       "recoveries_json = ?, throttle = ? WHERE id = ?");
        q.bind(1, content);
        q.bind(2, message_state_name(state));
        q.bind(3, error);
        q.bind(4, stats.model);
        q.bind(5, stats.prompt_tokens);
        q.bind(6, stats.generated_tokens);
        q.bind(7, stats.ttft_ms);
        q.bind(8, stats.tokens_per_second);
        if (stats.energy_joules) {
            q.bind(9, *stats.energy_joules);
        } else {
            q.bind(9);
        }
        q.bind(10, at);
        q.bind(11, stats.reused_tokens);
        q.bind(12, stats.engine);
        q.bind(13, recoveries_json(stats.recoveries));
        q.bind(14, stats.throttle);
        q.bind(15, id);
        if (Result<void> r = changed_one(q.exec(), "message", id); !r) return r;
        SQLite::Statement touch(impl_->db, "UPDATE conversations SET updated_ms = ? WHERE id = "
                                           "(SELECT conversation_id FROM messages WHERE id = ?)");
        touch.bind(1, at);
        touch.bind(2, id);
        touch.exec();
        transaction.commit();
        return {};
    });
}

Result<std::vector<Message>> Store::messages(int64_t conversation_id) const {
    return impl_->guarded([&]() -> Result<std::vector<Message>> {
        SQLite::Statement q(impl_->db,
                            fmt::format("SELECT {} FROM messages WHERE conversation_id = ? ORDER BY id", kMessageColumns));
        q.bind(1, conversation_id);
        std::vector<Message> out;
        while (q.executeStep()) out.push_back(read_message(q));
        return out;
    });
}

Result<std::vector<MessageStats>> Store::measured_answers(int limit) const {
    return impl_->guarded([&]() -> Result<std::vector<MessageStats>> {
        SQLite::Statement q(impl_->db,
                            "SELECT generated_tokens, tokens_per_second, energy_joules FROM messages "
                            "WHERE role = 'assistant' AND energy_joules IS NOT NULL AND generated_tokens > 0 "
                            "AND tokens_per_second > 0 ORDER BY updated_ms DESC, id DESC LIMIT ?");
        q.bind(1, limit);
        std::vector<MessageStats> out;
        while (q.executeStep()) {
            MessageStats stats;
            stats.generated_tokens = q.getColumn(0).getInt64();
            stats.tokens_per_second = q.getColumn(1).getDouble();
            stats.energy_joules = q.getColumn(2).getDouble();
            out.push_back(std::move(stats));
        }
        return out;
    });
}

Result<Message> Store::message(int64_t id) const {
    return impl_->guarded([&]() -> Result<Message> {
        SQLite::Statement q(impl_->db, fmt::format("SELECT {} FROM messages WHERE id = ?", kMessageColumns));
        q.bind(1, id);
        if (!q.executeStep()) return make_error(ErrorCode::invalid_argument, fmt::format("no message {}", id));
        return read_message(q);
    });
}

Result<void> Store::delete_message(int64_t id) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Statement q(impl_->db, "DELETE FROM messages WHERE id = ?");
        q.bind(1, id);
        return changed_one(q.exec(), "message", id);
    });
}

Result<int> Store::delete_messages_after(int64_t message_id) {
    return impl_->guarded([&]() -> Result<int> {
        SQLite::Statement q(impl_->db, "DELETE FROM messages WHERE conversation_id = "
                                       "(SELECT conversation_id FROM messages WHERE id = ?1) AND id > ?1");
        q.bind(1, message_id);
        return q.exec();
    });
}

Result<Message> Store::replace_messages_from(int64_t message_id, const std::string& role, const std::string& content) {
    PH_TRY(Impl::check_role(role));
    return impl_->guarded([&]() -> Result<Message> {
        // An exception anywhere leaves the transaction uncommitted: its destructor rolls back.
        SQLite::Transaction transaction(impl_->db, SQLite::TransactionBehavior::IMMEDIATE);
        SQLite::Statement owner(impl_->db, "SELECT conversation_id FROM messages WHERE id = ?");
        owner.bind(1, message_id);
        if (!owner.executeStep())
            return make_error(ErrorCode::invalid_argument, fmt::format("no message {}", message_id));
        const int64_t conversation_id = owner.getColumn(0).getInt64();
        SQLite::Statement gone(impl_->db, "DELETE FROM messages WHERE conversation_id = ? AND id >= ?");
        gone.bind(1, conversation_id);
        gone.bind(2, message_id);
        gone.exec();
        Message m = impl_->insert_message(conversation_id, role, content, MessageState::complete, now_ms());
        transaction.commit();
        return m;
    });
}

Result<std::vector<int64_t>> Store::insert_conversations(const std::vector<ConversationRecord>& records) {
    for (const ConversationRecord& record : records) {
        for (const Message& m : record.messages) {
            if (m.role != "system" && m.role != "user" && m.role != "assistant") {
                return make_error(ErrorCode::invalid_argument,
                                  fmt::format("a message's role is system, user or assistant, not '{}'", m.role));
            }
        }
    }
    return impl_->guarded([&]() -> Result<std::vector<int64_t>> {
        // An exception anywhere leaves the transaction uncommitted: its destructor rolls back.
        SQLite::Transaction transaction(impl_->db, SQLite::TransactionBehavior::IMMEDIATE);
        SQLite::Statement conversation(impl_->db, "INSERT INTO conversations (title, system_prompt, settings_json, "
                                                  "created_ms, updated_ms) VALUES (?, ?, ?, ?, ?)");
        SQLite::Statement message(impl_->db,
                                  "INSERT INTO messages (conversation_id, role, content, state, error, model, "
                                  "prompt_tokens, generated_tokens, ttft_ms, tokens_per_second, energy_joules, "
                                  "created_ms, updated_ms, reused_tokens, engine, recoveries_json, throttle) "
                                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
        std::vector<int64_t> ids;
        ids.reserve(records.size());
        for (const ConversationRecord& record : records) {
            const Conversation& c = record.conversation;
            conversation.reset();
            conversation.bind(1, c.title);
            conversation.bind(2, c.system_prompt);
            conversation.bind(3, c.settings_json.empty() ? std::string("{}") : c.settings_json);
            conversation.bind(4, c.created_ms);
            conversation.bind(5, c.updated_ms);
            conversation.exec();
            const int64_t id = impl_->db.getLastInsertRowid();
            ids.push_back(id);
            for (const Message& m : record.messages) {
                message.reset();
                message.bind(1, id);
                message.bind(2, m.role);
                message.bind(3, m.content);
                message.bind(4, message_state_name(m.state));
                message.bind(5, m.error);
                message.bind(6, m.stats.model);
                message.bind(7, m.stats.prompt_tokens);
                message.bind(8, m.stats.generated_tokens);
                message.bind(9, m.stats.ttft_ms);
                message.bind(10, m.stats.tokens_per_second);
                if (m.stats.energy_joules) {
                    message.bind(11, *m.stats.energy_joules);
                } else {
                    message.bind(11);
                }
                message.bind(12, m.created_ms);
                message.bind(13, m.updated_ms);
                message.bind(14, m.stats.reused_tokens);
                message.bind(15, m.stats.engine);
                message.bind(16, recoveries_json(m.stats.recoveries));
                message.bind(17, m.stats.throttle);
                message.exec();
            }
        }
        transaction.commit();
        return ids;
    });
}

Result<std::optional<std::string>> Store::setting(const std::string& key) const {
    return impl_->guarded([&]() -> Result<std::optional<std::string>> {
        SQLite::Statement q(impl_->db, "SELECT value FROM app_settings WHERE key = ?");
        q.bind(1, key);
        if (!q.executeStep()) return std::optional<std::string>{};
        return std::optional<std::string>(q.getColumn(0).getString());
    });
}

Result<void> Store::set_setting(const std::string& key, const std::string& value) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Statement q(impl_->db, "INSERT INTO app_settings (key, value) VALUES (?, ?) "
                                       "ON CONFLICT (key) DO UPDATE SET value = excluded.value");
        q.bind(1, key);
        q.bind(2, value);
        q.exec();
        return {};
    });
}

Result<void> Store::set_settings(const SettingValues& app_settings, const SettingValues& gpu_settings) {
    return impl_->guarded([&]() -> Result<void> {
        // An exception anywhere leaves the transaction uncommitted: its destructor rolls back.
        SQLite::Transaction transaction(impl_->db, SQLite::TransactionBehavior::IMMEDIATE);
        SQLite::Statement app(impl_->db,
                              "INSERT INTO app_settings (key, value) VALUES (?, ?) "
                              "ON CONFLICT (key) DO UPDATE SET value = excluded.value");
        for (const auto& [key, value] : app_settings) {
            app.reset();
            app.bind(1, key);
            app.bind(2, value);
            app.exec();
        }
        SQLite::Statement gpu(impl_->db,
                              "INSERT INTO gpu_settings (uuid, json, updated_ms) VALUES (?, ?, ?) "
                              "ON CONFLICT (uuid) DO UPDATE SET json = excluded.json, "
                              "updated_ms = excluded.updated_ms");
        const int64_t at = now_ms();
        for (const auto& [uuid, json] : gpu_settings) {
            gpu.reset();
            gpu.bind(1, uuid);
            gpu.bind(2, json);
            gpu.bind(3, at);
            gpu.exec();
        }
        transaction.commit();
        return {};
    });
}

Result<std::optional<std::string>> Store::gpu_settings(const std::string& uuid) const {
    return impl_->guarded([&]() -> Result<std::optional<std::string>> {
        SQLite::Statement q(impl_->db, "SELECT json FROM gpu_settings WHERE uuid = ?");
        q.bind(1, uuid);
        if (!q.executeStep()) return std::optional<std::string>{};
        return std::optional<std::string>(q.getColumn(0).getString());
    });
}

Result<void> Store::set_gpu_settings(const std::string& uuid, const std::string& json) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Statement q(impl_->db, "INSERT INTO gpu_settings (uuid, json, updated_ms) VALUES (?, ?, ?) "
                                       "ON CONFLICT (uuid) DO UPDATE SET json = excluded.json, "
                                       "updated_ms = excluded.updated_ms");
        q.bind(1, uuid);
        q.bind(2, json);
        q.bind(3, now_ms());
        q.exec();
        return {};
    });
}

Result<ModelRecord> Store::put_model(const ModelRecord& record) {
    return impl_->guarded([&]() -> Result<ModelRecord> {
        const int64_t at = now_ms();
        SQLite::Statement q(impl_->db,
                            "INSERT INTO models (path, folder, file_size, mtime_ns, sha256, ok, problem, info_json, "
                            "added_ms, updated_ms, source, source_name) "
                            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10, ?11) "
                            "ON CONFLICT (path) DO UPDATE SET folder = excluded.folder, file_size = excluded.file_size, "
                            "mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256, ok = excluded.ok, "
                            "problem = excluded.problem, info_json = excluded.info_json, updated_ms = excluded.updated_ms, "
                            "source = excluded.source, source_name = excluded.source_name");
        q.bind(1, record.path);
        q.bind(2, record.folder);
        q.bind(3, record.file_size);
        q.bind(4, record.mtime_ns);
        q.bind(5, record.sha256);
        q.bind(6, record.ok ? 1 : 0);
        q.bind(7, record.problem);
        q.bind(8, record.info_json);
        q.bind(9, at);
        q.bind(10, record.source);
        q.bind(11, record.source_name);
        q.exec();
        SQLite::Statement read(impl_->db, fmt::format("SELECT {} FROM models WHERE path = ?", kModelColumns));
        read.bind(1, record.path);
        if (!read.executeStep()) return make_error(ErrorCode::internal, "the model record was not stored");
        return read_model(read);
    });
}

Result<std::vector<ModelRecord>> Store::models() const {
    return impl_->guarded([&]() -> Result<std::vector<ModelRecord>> {
        SQLite::Statement q(impl_->db, fmt::format("SELECT {} FROM models ORDER BY path", kModelColumns));
        std::vector<ModelRecord> out;
        while (q.executeStep()) out.push_back(read_model(q));
        return out;
    });
}

Result<std::optional<ModelRecord>> Store::model_by_path(const std::string& path) const {
    return impl_->guarded([&]() -> Result<std::optional<ModelRecord>> {
        SQLite::Statement q(impl_->db, fmt::format("SELECT {} FROM models WHERE path = ?", kModelColumns));
        q.bind(1, path);
        if (!q.executeStep()) return std::optional<ModelRecord>{};
        return std::optional<ModelRecord>(read_model(q));
    });
}

Result<void> Store::remove_model(const std::string& path) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Statement q(impl_->db, "DELETE FROM models WHERE path = ?");
        q.bind(1, path);
        q.exec();
        return {};
    });
}

Result<void> Store::hide_model(const std::string& path) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Transaction transaction(impl_->db, SQLite::TransactionBehavior::IMMEDIATE);
        SQLite::Statement hide(impl_->db, "INSERT OR IGNORE INTO hidden_models (path, hidden_ms) VALUES (?, ?)");
        hide.bind(1, path);
        hide.bind(2, now_ms());
        hide.exec();
        SQLite::Statement remove(impl_->db, "DELETE FROM models WHERE path = ?");
        remove.bind(1, path);
        remove.exec();
        transaction.commit();
        return {};
    });
}

Result<void> Store::unhide_model(const std::string& path) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Statement q(impl_->db, "DELETE FROM hidden_models WHERE path = ?");
        q.bind(1, path);
        q.exec();
        return {};
    });
}

Result<std::vector<std::string>> Store::hidden_models() const {
    return impl_->guarded([&]() -> Result<std::vector<std::string>> {
        SQLite::Statement q(impl_->db, "SELECT path FROM hidden_models ORDER BY path");
        std::vector<std::string> out;
        while (q.executeStep()) out.push_back(q.getColumn(0).getString());
        return out;
    });
}

Result<std::vector<std::string>> Store::model_folders() const {
    return impl_->guarded([&]() -> Result<std::vector<std::string>> {
        SQLite::Statement q(impl_->db, "SELECT path FROM model_folders ORDER BY added_ms, path");
        std::vector<std::string> out;
        while (q.executeStep()) out.push_back(q.getColumn(0).getString());
        return out;
    });
}

Result<void> Store::add_model_folder(const std::string& path) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Statement q(impl_->db, "INSERT OR IGNORE INTO model_folders (path, added_ms) VALUES (?, ?)");
        q.bind(1, path);
        q.bind(2, now_ms());
        q.exec();
        return {};
    });
}

Result<void> Store::remove_model_folder(const std::string& path) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Statement q(impl_->db, "DELETE FROM model_folders WHERE path = ?");
        q.bind(1, path);
        q.exec();
        SQLite::Statement models(impl_->db, "DELETE FROM models WHERE folder = ?");
        models.bind(1, path);
        models.exec();
        return {};
    });
}

}  // namespace powerhouse::store
