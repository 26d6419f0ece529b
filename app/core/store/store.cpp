// The store: opening and migrating the file, conversations and search, settings and the
// model catalog. The queries on messages are store_messages.cpp's; what both share is
// store_impl.h.
#include "store/store.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include <system_error>

#include "store/schema.h"
#include "store/store_impl.h"

namespace powerhouse::store {

namespace {

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

const char* kConversationColumns = "id, title, system_prompt, settings_json, created_ms, updated_ms";

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

Error Store::Impl::failure(const std::exception& e) const {
    if (locked_by_another(e)) return make_error(ErrorCode::io, locked_message(path, busy_timeout_ms, e));
    return make_error(ErrorCode::io, fmt::format("{}: {}", path.string(), e.what()));
}

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
