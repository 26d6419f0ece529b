// The OpenAI API's JSON as remote engines speak it (internal to powerhouse_remote): the chat
// request's body, the model list, one streamed chunk, and the Error for an HTTP failure.
//
// Servers differ in small ways, all accepted here: vLLM's error body is the error object
// itself ({"object": "error", "message", ...}), FastAPI's (llama-cpp-python) is
// {"detail": ...}; llama-cpp-python sends no usage; chunks may carry "usage": null; a role-only
// first delta and empty deltas carry no text. A reasoning model's thinking comes apart from
// its text, as "reasoning_content" (vLLM, SGLang, llama.cpp's server with --reasoning-format,
// DeepSeek's API, Powerhouse's `serve`) or "reasoning" (newer vLLM, OpenRouter); a server that
// sends both sends the same text twice, so one is read: reasoning_content when it is there.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remote/remote_engine.h"
#include "remote/tool_call_deltas.h"

namespace powerhouse::remote::detail {

// The body of POST /chat/completions, streamed.
std::string chat_body(const ChatRequest& request, bool include_usage);

// {"data": [{"id": ...}, ...]} -> ids. An error (format) names what was wrong, quoting the
// body; a 200 whose body is an error object ({"error": {...}}) is the server's failure
// (device_failed) in its own words. Either way `secret` (the API key) is blanked.
Result<std::vector<std::string>> parse_model_list(std::string_view body, std::string_view secret);

// What one event of the stream said.
struct ChunkDelta {
    std::string text;                // choices[0].delta.content
    std::string reasoning;           // choices[0].delta.reasoning_content, else .reasoning
    // choices[0].delta.tool_calls: pieces of calls (tool_call_deltas.h); a whole answer's
    // message.tool_calls, each call whole with its place as its index.
    std::vector<ToolCallDelta> tool_calls;
    std::string finish_reason;       // choices[0].finish_reason when set
    std::optional<ChatUsage> usage;  // the usage chunk (include_usage), or usage on any chunk
    std::string model;
    std::optional<std::string> error;  // an error event: {"error": {...}} in the stream
};

// One event's data (not "[DONE]"). An error (format) quotes the offending data, truncated
// (a malformed tool call: which call and which field, read_tool_call_deltas);
// it and an error event's message have `secret` (the API key) blanked.
Result<ChunkDelta> parse_chunk(std::string_view data, std::string_view secret);

// A whole non-streamed chat.completion (a server that ignored stream=true). A body that is an
// error object ({"error": {...}}, sent with 200 by some servers and proxies) is no failure
// here: `error` holds the server's message. A body that is neither is quoted in the error
// (format). Either way `secret` (the API key) is blanked.
Result<ChunkDelta> parse_completion(std::string_view body, std::string_view secret);

// The Error for a non-2xx answer to `what`. `models` is the server's list when it was fetched
// (for a 404), else empty. The server's words and ids have `secret` (the API key) blanked.
Error http_error(long status, std::string_view body, std::optional<double> retry_after, std::string_view what,
                 std::string_view secret, const std::string& model, const std::vector<std::string>* models);

// The Error for a failure the server reported in a stream it had begun (an error object, an
// error event), `said` being its words: device_failed, or context_full (with what to do) when
// they say the conversation does not fit the model's context. `answer_begun`: some of the
// answer (text or reasoning) had arrived before it, which the message says.
Error reported_error(std::string_view what, const std::string& said, bool answer_begun);

// The Error for a redirect (3xx) to `location` (the Location header, maybe relative or
// empty). Redirects are never followed: a POST would turn into a GET, and the API key and the
// prompts would go to a host the user did not name; the message says where to point instead,
// `secret` (the API key) blanked in it.
Error redirect_error(long status, std::string_view location, std::string_view what, std::string_view secret);

// Whether a 400's message blames stream_options (a server older than that field).
bool blames_stream_options(std::string_view body);

}  // namespace powerhouse::remote::detail
