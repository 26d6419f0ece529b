#include "store/schema.h"

namespace powerhouse::store {

namespace {

// 1: conversations and messages. Ids are never reused (AUTOINCREMENT): the app holds on to
// them (undo, a streaming answer) across deletions.
constexpr std::string_view kConversations = R"sql(
CREATE TABLE conversations (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    title         TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '',
    settings_json TEXT NOT NULL DEFAULT '{}',
    created_ms    INTEGER NOT NULL,
    updated_ms    INTEGER NOT NULL,
    deleted_ms    INTEGER
);
CREATE INDEX conversations_by_activity ON conversations (updated_ms DESC, id DESC);

CREATE TABLE messages (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id   INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    role              TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
    content           TEXT NOT NULL,
    state             TEXT NOT NULL DEFAULT 'complete'
                      CHECK (state IN ('complete', 'streaming', 'stopped', 'failed', 'interrupted')),
    error             TEXT NOT NULL DEFAULT '',
    model             TEXT NOT NULL DEFAULT '',
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    generated_tokens  INTEGER NOT NULL DEFAULT 0,
    ttft_ms           REAL NOT NULL DEFAULT 0,
    tokens_per_second REAL NOT NULL DEFAULT 0,
    energy_joules     REAL,
    created_ms        INTEGER NOT NULL,
    updated_ms        INTEGER NOT NULL
);
CREATE INDEX messages_by_conversation ON messages (conversation_id, id);
)sql";

// 2: full-text search over titles and messages, and the settings tables.
constexpr std::string_view kSearchAndSettings = R"sql(
CREATE VIRTUAL TABLE messages_fts USING fts5 (content, content = 'messages', content_rowid = 'id');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');

CREATE VIRTUAL TABLE conversations_fts USING fts5 (title, content = 'conversations', content_rowid = 'id');
CREATE TRIGGER conversations_fts_insert AFTER INSERT ON conversations BEGIN
    INSERT INTO conversations_fts (rowid, title) VALUES (new.id, new.title);
END;
CREATE TRIGGER conversations_fts_delete AFTER DELETE ON conversations BEGIN
    INSERT INTO conversations_fts (conversations_fts, rowid, title) VALUES ('delete', old.id, old.title);
END;
CREATE TRIGGER conversations_fts_update AFTER UPDATE OF title ON conversations BEGIN
    INSERT INTO conversations_fts (conversations_fts, rowid, title) VALUES ('delete', old.id, old.title);
    INSERT INTO conversations_fts (rowid, title) VALUES (new.id, new.title);
END;
INSERT INTO conversations_fts (conversations_fts) VALUES ('rebuild');

CREATE TABLE app_settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE gpu_settings (
    uuid       TEXT PRIMARY KEY,
    json       TEXT NOT NULL,
    updated_ms INTEGER NOT NULL
);
)sql";

// 3: the model library's catalog (app/core/catalog): every model file found in the library
// folders or imported, with what it is or why it cannot be used.
constexpr std::string_view kModels = R"sql(
CREATE TABLE models (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    path      TEXT NOT NULL UNIQUE,
    folder    TEXT NOT NULL DEFAULT '',
    file_size INTEGER NOT NULL,
    mtime_ns  INTEGER NOT NULL,
    sha256    TEXT NOT NULL DEFAULT '',
    ok        INTEGER NOT NULL,
    problem   TEXT NOT NULL DEFAULT '',
    info_json TEXT NOT NULL DEFAULT '{}',
    added_ms  INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE INDEX models_by_folder ON models (folder);
CREATE TABLE model_folders (
    path     TEXT PRIMARY KEY,
    added_ms INTEGER NOT NULL
);
)sql";

// 4: the part of an answer's prompt the engine found in its KV cache (the prompt cache).
constexpr std::string_view kReusedTokens = R"sql(
ALTER TABLE messages ADD COLUMN reused_tokens INTEGER NOT NULL DEFAULT 0;
)sql";

// 5: which engine answered (a remote engine's base URL, or "local").
constexpr std::string_view kMessageEngine = R"sql(
ALTER TABLE messages ADD COLUMN engine TEXT NOT NULL DEFAULT '';
)sql";

// 6: where each model came from (issue 22: other apps' downloads used in place), and the
// paths the user forgot that a scan would otherwise find again. Existing records get their
// source from what is known of them: imported by itself (no folder), a verified download
// (its sha256), else found in a library folder. Their modification time is cleared so the
// next scan inspects them again and their summaries gain the naming fields (display_name,
// basename, size_label, finetune, quantization).
constexpr std::string_view kModelSources = R"sql(
ALTER TABLE models ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE models ADD COLUMN source_name TEXT NOT NULL DEFAULT '';
UPDATE models SET source = CASE WHEN folder = '' THEN 'imported'
                                WHEN sha256 != '' THEN 'downloaded'
                                ELSE 'folder' END,
                  mtime_ns = 0;
CREATE TABLE hidden_models (
    path      TEXT PRIMARY KEY,
    hidden_ms INTEGER NOT NULL
);
)sql";

// 7: where an answer went on after a device failed under it (issue 23): the engine's
// recovery notes as a JSON array of {at_token, failed, cause, continued_on}; empty for the
// answers no failure touched, which are nearly all.
constexpr std::string_view kMessageRecoveries = R"sql(
ALTER TABLE messages ADD COLUMN recoveries_json TEXT NOT NULL DEFAULT '';
)sql";

// 8: whether the GPUs were slowed while an answer was generated (issue 24), as the dashboard
// said it at the answer's end; empty for the answers they were not, and for older ones.
constexpr std::string_view kMessageThrottle = R"sql(
ALTER TABLE messages ADD COLUMN throttle TEXT NOT NULL DEFAULT '';
)sql";

// 9: a reasoning model's thinking, kept apart from the answer's text so that the chat can
// show it folded above the answer and never send it back to the model; empty for answers
// without any, and for older ones. Not indexed for search: the words found are the answer's.
constexpr std::string_view kMessageReasoning = R"sql(
ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT '';
)sql";

// 10: speculative decoding's figures for an answer (the engine's GenerationStats): the tokens
// guessed ahead and how many of them the model kept; 0 for answers made without guesses, and
// for older ones.
constexpr std::string_view kMessageGuesses = R"sql(
ALTER TABLE messages ADD COLUMN drafted_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN accepted_tokens INTEGER NOT NULL DEFAULT 0;
)sql";

// 11: the tools an answer called (OpenAI's `tool_calls`, a JSON array), kept from imported
// chats so that a turn that only called tools keeps what it did; empty for the others.
constexpr std::string_view kMessageToolCalls = R"sql(
ALTER TABLE messages ADD COLUMN tool_calls TEXT NOT NULL DEFAULT '';
)sql";

}  // namespace

const std::vector<std::string_view>& migrations() {
    static const std::vector<std::string_view> list = {
        kConversations,     kSearchAndSettings, kModels,           kReusedTokens,   kMessageEngine,   kModelSources,
        kMessageRecoveries, kMessageThrottle,   kMessageReasoning, kMessageGuesses, kMessageToolCalls};
    return list;
}

}  // namespace powerhouse::store
