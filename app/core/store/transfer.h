// Conversations out of the store and back in: export as JSON (a documented, versioned format
// that import reads back) or as Markdown (to read, print or share), and import JSON, ours or
// a plain OpenAI-style list of chat messages. No Qt: the CLI and the desktop app share it.
//
// The JSON format, "powerhouse.conversations" version 1 (keys in this order):
//
//   {"format": "powerhouse.conversations", "version": 1, "exported_ms": 1714572000000,
//    "conversations": [
//      {"title": "...", "system_prompt": "...",
//       "settings": {...},            the app's per-conversation settings (sampling), an object
//       "created_ms": ..., "updated_ms": ...,
//       "messages": [
//         {"role": "system" | "user" | "assistant", "content": "...",
//          "reasoning": "...",          only when there is some: a reasoning model's thinking,
//                                       apart from the answer's content (Message::reasoning)
//          "tool_calls": [{"id": "...", "type": "function",
//                          "function": {"name": "...", "arguments": "..."}}, ...],
//                                       only when there are some: the tools an answer called,
//                                       as an imported chat gave them (Message::tool_calls)
//          "state": "complete" | "streaming" | "stopped" | "failed" | "interrupted",
//          "error": "...",              only when there is one (failed answers)
//          "created_ms": ..., "updated_ms": ...,
//          "stats": {"model": "...", "engine": "local" or a remote engine's URL,
//                    "prompt_tokens": 0, "reused_tokens": 0, "generated_tokens": 0,
//                    "ttft_ms": 0.0, "tokens_per_second": 0.0,
//                    "energy_joules": 0.0,   only when measured
//                    "drafted_tokens": 20, "accepted_tokens": 12,
//                                   only for an answer made with speculative decoding: the
//                                   tokens guessed, and how many of those were kept
//                    "recoveries": [{"at_token": 37, "failed": "GPU 1",
//                                    "cause": "Xid 79, fell off the bus",
//                                    "continued_on": "CPU (8 threads)"}, ...]}
//                                   only for an answer a device failure interrupted
//                                   stats only when an engine reported any
//         }, ...]}, ...]}
//
// Times are milliseconds since the Unix epoch. Conversations come oldest first, messages in
// their order; ids are not part of it, because an import always makes new conversations.
// Everything the store keeps about a conversation is in it, so that export, import and
// export again give the same JSON apart from "exported_ms". Text that is not valid UTF-8 in
// the store (Powerhouse never writes any) is exported with U+FFFD in place of the bad bytes.
//
// Import reads version 1 and refuses a newer version, naming the one it reads. A reader
// ignores keys it does not know, so the version rises only for a change that an older reader
// would misread. Only "messages" and each message's "role" and "content" are required; a
// missing title is taken from the first user message, missing times are the import's time.
// An answer that was streaming when exported comes in interrupted. Also accepted: a bare
// array of {"role", "content"} messages, or an object with such a "messages" array (what
// OpenAI's chat API takes), as one conversation titled from its first user message. A
// message's "reasoning_content" (DeepSeek's API, vLLM, SGLang, llama.cpp's server) is read as
// its reasoning where it has no "reasoning"; either may be null (none). An assistant's
// message that only calls tools may have a null "content", as OpenAI writes it, when it has
// "tool_calls" (each an object with a "function" that has a "name"): it is kept with empty
// content and its calls; a null content without them is refused, naming the message.
//
// An import is all or nothing: every conversation is checked before any is stored, and they
// are stored in one transaction. Errors name the place and the problem, e.g.
// `conversations[2].messages[5].role: "robot" is not one of system, user, assistant`.
// Input that is not valid JSON, or not valid UTF-8 (nlohmann's parser refuses ill-formed
// UTF-8 in strings), is refused with the parser's line and column.
//
// Thread-safety: functions over the store given (see store.h); no state of their own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/result.h"
#include "store/store.h"

namespace powerhouse::store {

inline constexpr std::string_view kTransferFormat = "powerhouse.conversations";
inline constexpr int kTransferVersion = 1;
// Larger files are refused before they are read: one JSON document is parsed in memory
// (several times its size), and no conversation history comes near this.
inline constexpr uint64_t kMaxImportBytes = uint64_t{256} << 20;

struct ExportOptions {
    int64_t now_ms = 0;  // the export's time ("exported_ms"); 0: the clock's
    bool utc = false;    // Markdown dates in UTC, marked so, instead of local time
    bool stats = true;   // Markdown: a muted line of statistics under each answer
};

// The conversations with these ids, in this order (a deleted or unknown id is an error), or
// with none given all conversations (not deleted ones), oldest first.
Result<std::string> export_json(const Store& store, const std::vector<int64_t>& ids, const ExportOptions& options = {});

// The same as a Markdown document: per conversation a "# title" heading and its date, then
// each message under **You**, **Assistant** or **System**, its text as it is (an answer cut
// off inside a code block gets the block closed), stopped, interrupted and failed answers
// marked in italics, and with `stats` a line like "*SmolLM2 · 42 tokens · 31.5 tokens/s*"
// and, for an answer that a device failure interrupted, "*Continued on CPU (8 threads)
// after GPU 1 failed at token 37: Xid 79, fell off the bus*". An answer's reasoning is left
// out, as the chat's Copy leaves it: the document is what was said (the JSON keeps it).
Result<std::string> export_markdown(const Store& store, const std::vector<int64_t>& ids,
                                    const ExportOptions& options = {});

struct ImportOptions {
    uint64_t max_bytes = kMaxImportBytes;
    int64_t now_ms = 0;  // the time given to what has none; 0: the clock's
};

struct ImportReport {
    int conversations = 0;
    int messages = 0;
    std::vector<int64_t> ids;  // the new conversations, in the file's order
};

// An error saying that `bytes` is more than import takes, or nothing: for callers that can
// tell a file's size before reading it.
Result<void> check_import_size(uint64_t bytes, uint64_t max_bytes = kMaxImportBytes);

Result<ImportReport> import_json(Store& store, std::string_view text, const ImportOptions& options = {});

// import_json in two steps, for a caller that opens (and so creates) a store only for an
// import that can succeed: read_import checks everything without a store, import_records
// stores what it gave in one transaction.
Result<std::vector<ConversationRecord>> read_import(std::string_view text, const ImportOptions& options = {});
Result<ImportReport> import_records(Store& store, const std::vector<ConversationRecord>& records);

}  // namespace powerhouse::store
