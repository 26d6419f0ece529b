// The app's own data in one SQLite file: conversations and their messages (with the
// statistics of each answer), per-conversation settings, per-GPU settings by UUID, and app
// settings. No Qt: the desktop app and the command line share it.
//
// Durability: the file is in WAL mode with synchronous=FULL, so a call that returned has
// reached the disk; a crash or SIGKILL loses nothing that was acknowledged and never leaves
// a half-written message. An answer that was streaming when the app died is found on the
// next open and marked interrupted, with the text saved so far.
//
// Schema changes are numbered migrations (PRAGMA user_version); before migrating an
// existing file the store copies it beside itself ("<file>.v<N>.bak"), so an upgrade can
// always be undone by hand.
//
// Errors are values (powerhouse/result.h) that say what failed and on which file. A file
// that another program keeps locked past the busy timeout fails with an io error saying so
// and what to do (close the other Powerhouse or program, try again); the statement or
// transaction that failed changed nothing.
//
// Thread-safety: a Store is used by one thread at a time; it may be moved between threads.
// Several Stores (or processes) may open the same file; writers wait for each other.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "powerhouse/result.h"

namespace powerhouse::store {

struct Conversation {
    int64_t id = 0;
    std::string title;
    std::string system_prompt;
    std::string settings_json;  // sampling and other per-conversation settings, the app's JSON
    int64_t created_ms = 0;     // milliseconds since the Unix epoch
    int64_t updated_ms = 0;     // last change to it or its messages
};

enum class MessageState {
    complete,     // a finished message
    streaming,    // an answer being generated (saved every second or so)
    stopped,      // the user stopped the answer
    failed,       // generation failed; the error is in `error`
    interrupted,  // the app ended while the answer was streaming
};
const char* message_state_name(MessageState state);

// An answer that a device failure interrupted and that went on elsewhere (the engine's
// RecoveryNote, powerhouse/engine.h), kept with the answer (migration 7).
struct MessageRecovery {
    int64_t at_token = 0;      // tokens of the answer generated before the failure
    std::string failed;        // the device: "GPU 1"
    std::string cause;         // "Xid 79, fell off the bus"
    std::string continued_on;  // where the answer went on: "CPU (8 threads)"
    bool operator==(const MessageRecovery&) const = default;
};

// The note shown under such an answer and written into exports, one per recovery:
// "Continued on CPU (8 threads) after GPU 1 failed at token 37: Xid 79, fell off the bus".
std::string recovery_text(const MessageRecovery& recovery);

// What the engine reported for an answer.
struct MessageStats {
    std::string model;
    // Which engine answered: "local" (this app's engine), or a remote engine's base URL
    // (app/core/remote); empty for answers stored before migration 5.
    std::string engine;
    int64_t prompt_tokens = 0;
    int64_t reused_tokens = 0;  // of the prompt, found in the engine's KV cache
    int64_t generated_tokens = 0;
    // Speculative decoding (migration 10): the tokens guessed ahead (a draft model's, or the
    // conversation's own by prompt lookup) and how many of those the model kept; both 0 for
    // an answer generated without guesses, and for older ones.
    int64_t drafted_tokens = 0;
    int64_t accepted_tokens = 0;
    double ttft_ms = 0;
    double tokens_per_second = 0;
    std::optional<double> energy_joules;
    std::vector<MessageRecovery> recoveries;  // in the order they happened; usually none
    // The GPUs were slowed (power cap, thermal) while it was generated, as the dashboard said
    // it at its end: "GPU 0 throttled (power cap) for 40% of the answer, 18% slower"; empty:
    // they were not, or nothing was measured.
    std::string throttle;
};

// Speculative decoding's line for an answer's statistics, shown in the chat and the Markdown
// export: "12 of 20 guesses kept"; empty when nothing was guessed (drafted_tokens 0).
std::string guesses_text(const MessageStats& stats);

// A model file the library knows (app/core/catalog scans and imports them).
struct ModelRecord {
    int64_t id = 0;
    std::string path;        // the model's first (or only) file
    std::string folder;      // the library folder it was found in; empty: imported by itself
    int64_t file_size = 0;   // all parts
    int64_t mtime_ns = 0;    // of the first file when it was inspected: a change means inspect again
    std::string sha256;      // when known (a verified download)
    bool ok = false;         // the engine can run it; otherwise `problem` says why not
    std::string problem;
    std::string info_json;   // what the model is (the catalog's JSON)
    int64_t added_ms = 0;
    // Where it came from (migration 6): "downloaded", "imported", "folder" (the library
    // folder or one the user added), or the app whose download it is, used in place:
    // "lmstudio", "ollama", "llama.cpp", "gpt4all", "jan" (catalog/other_apps.h).
    std::string source;
    std::string source_name;  // that app's name for it ("llama3.2:3b"); may be empty
};

struct Message {
    int64_t id = 0;
    int64_t conversation_id = 0;
    std::string role;  // "system", "user", "assistant"
    std::string content;
    // An answer's reasoning (a reasoning model's thinking, migration 9), apart from its text:
    // shown folded, exported, never sent back to the model. Empty when it had none.
    std::string reasoning;
    // The tools an answer called, as OpenAI's chat API writes an assistant message's
    // `tool_calls`: a JSON array of {"id", "type", "function": {"name", "arguments"}}
    // (migration 11). Only imported conversations have any (the app's own chat offers no
    // tools); empty for none. A turn that only called tools has empty content.
    std::string tool_calls;
    MessageState state = MessageState::complete;
    std::string error;  // why generation failed
    MessageStats stats;
    int64_t created_ms = 0;
    int64_t updated_ms = 0;
};

// A conversation with its messages, as kept elsewhere (an export being imported).
struct ConversationRecord {
    Conversation conversation;
    std::vector<Message> messages;
};

struct SearchHit {
    int64_t conversation_id = 0;
    std::string title;
    std::string snippet;  // the matching text, terms between [ and ]
    int64_t updated_ms = 0;
};

struct StoreOptions {
    // Migrate no further than this version (tests of the migrations); 0: the latest.
    int target_version = 0;
    // Whether open() marks answers left streaming as interrupted (recovery after a crash).
    // A second connection inside a running app passes false: its answers are streaming now.
    bool recover_interrupted = true;
    // How long a statement waits for another connection's lock (another Powerhouse, or
    // powerhouse-cli importing) before it fails with words that say so. Tests shorten it.
    int busy_timeout_ms = 5000;
};

class Store {
public:
    // Opens or creates the file (and its folder), migrating it to the current schema.
    static Result<Store> open(const std::filesystem::path& path, const StoreOptions& options = {});
    static int latest_version();

    Store(Store&&) noexcept;
    Store& operator=(Store&&) noexcept;
    ~Store();

    const std::filesystem::path& path() const;
    int schema_version() const;
    // The copy made before the last migration at open(); empty when none was needed.
    const std::filesystem::path& backup_path() const;
    // Answers that were streaming when the app last ended, marked interrupted by open().
    int recovered_messages() const;
    // StoreOptions::busy_timeout_ms as opened: a second connection to the file waits as long.
    int busy_timeout_ms() const;
    // Rows this connection has inserted, changed or deleted since it opened (SQLite's
    // total_changes): tests use it to see which connection made a write.
    int64_t changes_made() const;

    // Conversations, newest activity first; deleted ones are hidden until purged.
    Result<Conversation> create_conversation(const std::string& title, const std::string& system_prompt = {});
    Result<std::vector<Conversation>> conversations() const;
    Result<Conversation> conversation(int64_t id) const;
    Result<void> rename_conversation(int64_t id, const std::string& title);
    Result<void> set_conversation_settings(int64_t id, const std::string& system_prompt,
                                           const std::string& settings_json);
    // Hides a conversation; restore_conversation undoes it until purge_deleted runs.
    Result<void> delete_conversation(int64_t id);
    Result<void> restore_conversation(int64_t id);
    Result<int> purge_deleted();
    // Conversations whose title or messages contain every word of `text` (prefixes count:
    // "cap" finds "capital"), best match first.
    Result<std::vector<SearchHit>> search(const std::string& text, int limit = 50) const;

    // Messages of a conversation, in order.
    Result<Message> add_message(int64_t conversation_id, const std::string& role, const std::string& content,
                                MessageState state = MessageState::complete);
    // Saves the text of an answer while it streams, with its reasoning so far. A reasoning
    // given replaces what was stored (an empty one clears it); std::nullopt, the default,
    // keeps what was stored, so a caller that does not mention the reasoning never loses it.
    Result<void> update_message(int64_t id, const std::string& content,
                                const std::optional<std::string>& reasoning = std::nullopt);
    // Saves an answer for good: its text, final state and statistics, and its reasoning (as
    // update_message: std::nullopt keeps what was stored).
    Result<void> finish_message(int64_t id, const std::string& content, MessageState state, const MessageStats& stats,
                                const std::string& error = {},
                                const std::optional<std::string>& reasoning = std::nullopt);
    Result<std::vector<Message>> messages(int64_t conversation_id) const;
    Result<Message> message(int64_t id) const;
    // The statistics (tokens, tokens/s, joules) of the latest `limit` answers whose energy was
    // measured, newest first: what the Costs view's figures start from.
    Result<std::vector<MessageStats>> measured_answers(int limit) const;
    Result<void> delete_message(int64_t id);
    // Deletes the messages after `message_id` in its conversation (regenerate, edit and resend).
    Result<int> delete_messages_after(int64_t message_id);
    // Edit and resend: message `message_id` and every message after it in its conversation
    // give way to one new complete message, in one transaction (on any error nothing changes,
    // so the original is never lost without its replacement). The new message.
    Result<Message> replace_messages_from(int64_t message_id, const std::string& role, const std::string& content);

    // Adds conversations as they were kept elsewhere (an import, transfer.h): title, system
    // prompt, settings and times, and messages with their reasoning, states, errors,
    // statistics and times, all as given; ids are ignored and new ones made (an existing
    // conversation is never touched). One transaction: all are added, or on any error none. The new ids, in order.
    Result<std::vector<int64_t>> insert_conversations(const std::vector<ConversationRecord>& records);

    // App settings and per-GPU settings (JSON text the app defines), by key and by GPU UUID.
    Result<std::optional<std::string>> setting(const std::string& key) const;
    Result<void> set_setting(const std::string& key, const std::string& value);
    Result<std::optional<std::string>> gpu_settings(const std::string& uuid) const;
    Result<void> set_gpu_settings(const std::string& uuid, const std::string& json);
    // Several app settings (key, value) and per-GPU settings (uuid, json) in one transaction:
    // all are written, or on any error none (the settings' Apply).
    using SettingValues = std::vector<std::pair<std::string, std::string>>;
    Result<void> set_settings(const SettingValues& app_settings, const SettingValues& gpu_settings = {});

    // The model catalog. put_model inserts or replaces by path (keeping id and added_ms).
    Result<ModelRecord> put_model(const ModelRecord& record);
    Result<std::vector<ModelRecord>> models() const;  // by path
    Result<std::optional<ModelRecord>> model_by_path(const std::string& path) const;
    Result<void> remove_model(const std::string& path);
    // Models the user forgot that a scan would find again (another app's download, a file
    // in a library folder): hide_model removes the record and remembers the path, so scans
    // skip it, until unhide_model (an explicit import or download of that path).
    Result<void> hide_model(const std::string& path);
    Result<void> unhide_model(const std::string& path);
    Result<std::vector<std::string>> hidden_models() const;  // by path
    // Folders the user added to the library (besides the default one).
    Result<std::vector<std::string>> model_folders() const;
    Result<void> add_model_folder(const std::string& path);
    Result<void> remove_model_folder(const std::string& path);

    struct Impl;

private:
    explicit Store(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace powerhouse::store
