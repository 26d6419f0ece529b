// A remote engine: an OpenAI-compatible server (vLLM, SGLang, llama.cpp's server,
// llama-cpp-python, another Powerhouse's `serve`) driven like the local engine: list its
// models, stream a chat answer with statistics measured here, cancel it, and read the
// Prometheus metrics of its machines.
//
// Failures are Error values that say what happened and what to do:
//   - before any answer (unreachable host, DNS, TLS, timeouts while connecting or waiting,
//     HTTP errors: 401/403 the key, 404 the model with the models the server has, 429 with
//     its Retry-After, 5xx with the server's own message) chat() returns an Error;
//   - once the answer streams, chat() returns a ChatResult: a stream that breaks (cut, silent
//     past the idle timeout, garbage, an error event) keeps the text received so far, with
//     finish_reason "interrupted" and the reason in `interruption`; a cancelled one keeps it
//     with finish_reason "cancelled". A stream that breaks after the answer's finish_reason
//     has lost only the usage chunk and [DONE]: the answer is whole, not interrupted.
// A reasoning model's thinking, which servers send apart from the text (reasoning_content),
// is kept apart here too: ChatResult::reasoning and ChatCallbacks::on_reasoning, as the local
// engine's parse_answer (powerhouse/tool_calls.h) keeps gpt-oss's analysis channel and the
// think blocks apart from the content. It is no part of the answer's text, so a conversation
// sent back to the server carries only the text (DeepSeek's API refuses reasoning_content in
// its input).
// Error codes: io (the network: unreachable, TLS, timeouts, a cut stream), invalid_argument
// (the key, the model, a refused request), context_full (a prompt the server's context cannot
// hold), device_failed (the server failed: 5xx, an error in the stream), format (what it sent
// is not the protocol), cancelled (a cancelled listing or metrics fetch).
//
// The API key goes out as "Authorization: Bearer <key>" and is never part of a message or a
// log line, even where a server echoes it back. TLS certificates are always verified; a
// server with a private CA or a self-signed certificate is reached by naming that certificate
// as the CA file.
//
// Thread-safety: a RemoteEngine is an immutable value; its methods may run on any threads at
// once (each call has its own connection). Callbacks run on the calling thread, which the call
// blocks: the desktop app calls from a worker thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/generation.h"
#include "powerhouse/result.h"
#include "remote/prometheus.h"

namespace powerhouse::remote {

struct ConnectionOptions {
    std::string api_key;            // empty: none sent
    std::filesystem::path ca_file;  // PEM certificates to trust instead of the system's
    std::chrono::milliseconds connect_timeout{10'000};
    // From sending a chat request to the first byte of its answer's body: a busy server queues
    // the request and reads a long prompt first.
    std::chrono::milliseconds first_byte_timeout{300'000};
    // The same wait for the small requests a healthy server answers at once (the model list,
    // metrics), capped by first_byte_timeout: a server that accepts the connection and never
    // answers is named after this, not after a generation's wait.
    std::chrono::milliseconds metadata_timeout{15'000};
    // Between bytes after the first (a stream's events; keep-alive comments count).
    std::chrono::milliseconds idle_timeout{60'000};
    std::string user_agent = "powerhouse";
};

// Polled several times a second while a call waits; true stops it.
using CancelCheck = std::function<bool()>;

struct ChatRequest {
    std::string model;
    std::vector<ChatMessage> messages{};
    // Sampling: unset fields are left out, so that the server's defaults apply.
    std::optional<int32_t> max_tokens{};
    std::optional<float> temperature{};
    std::optional<float> top_p{};
    std::optional<float> presence_penalty{};
    std::optional<float> frequency_penalty{};
    std::optional<uint64_t> seed{};
    std::vector<std::string> stop{};  // at most 4, OpenAI's limit
    // Not in OpenAI's API, but taken by vLLM, SGLang, llama.cpp's server and llama-cpp-python;
    // others ignore them.
    std::optional<int32_t> top_k{};
    std::optional<float> min_p{};
    std::optional<float> repeat_penalty{};
    // Variables for the server's chat template, as GenerateCommand::template_variables are for
    // the local engine: {"enable_thinking": false} turns Qwen3's thinking off. Not OpenAI's;
    // vLLM, SGLang, llama.cpp's server and Powerhouse's `serve` take them. Null: not sent.
    nlohmann::ordered_json chat_template_kwargs{};
    // OpenAI's reasoning_effort ("low", "medium", "high"): its reasoning models, and gpt-oss
    // on vLLM and Powerhouse's `serve`. Unset: not sent.
    std::optional<std::string> reasoning_effort{};
    // OpenAI tool objects ({"type": "function", "function": {"name", "description",
    // "parameters"}}) offered to the model, as GenerateCommand::tools are to the local engine;
    // null or empty: none sent. The calls come back in ChatResult::tool_calls.
    nlohmann::ordered_json tools{};
    // OpenAI's tool_choice, sent with the tools only: "auto", "none", "required", or
    // {"type": "function", "function": {"name": ...}} to force a call of that function. Null:
    // not sent (the server's default, "auto").
    nlohmann::ordered_json tool_choice{};
    // stream_options.include_usage: the server's token counts after the last chunk. A server
    // that refuses the field is asked once more without it.
    bool include_usage = true;
};

struct ChatCallbacks {
    // Each piece of the answer's text as it arrives (whole UTF-8 characters: JSON strings).
    std::function<void(std::string_view text)> on_text;
    // Each piece of the model's reasoning as it arrives (the same), when the server sends it
    // apart from the text; on most servers it all comes before the text.
    std::function<void(std::string_view reasoning)> on_reasoning;
    // Polled several times a second; true closes the stream (finish_reason "cancelled").
    CancelCheck cancelled;
};

struct ChatUsage {
    uint32_t prompt_tokens = 0;
    uint32_t completion_tokens = 0;
};

struct ChatResult {
    std::string text;
    std::string reasoning;  // the model's thinking, when the server sent it apart from the text
    // The calls the answer made, as DoneEvent::tool_calls holds the local engine's: streamed in
    // pieces (choices[0].delta.tool_calls, put together by their index: tool_call_deltas.h) or
    // whole (message.tool_calls), in the order of their indexes; each call's id as the server
    // sent it (empty when it sent none), arguments as JSON text ("{}" when none came). Only a
    // whole answer has them: an interrupted or cancelled one keeps none (their arguments may be
    // cut), and its interruption says how many were dropped. A malformed call (no index, a
    // non-string field, no name at the end) interrupts the answer with a format error naming it.
    std::vector<ToolCall> tool_calls;
    std::string model;      // as the server named it in its chunks
    // The server's ("stop", "length", "tool_calls", "content_filter", ...), or this side's:
    // "cancelled", "interrupted".
    std::string finish_reason;
    std::optional<Error> interruption;  // why an "interrupted" stream broke
    std::optional<ChatUsage> usage;     // when the server sent it
    // Seconds from sending the request to the first text, reasoning or piece of a tool call (a
    // reasoning model's first tokens are its thinking), and from there to the last.
    double time_to_first_token = 0;
    double generation_seconds = 0;
    uint32_t text_chunks = 0;       // deltas with text (about a token each on most servers)
    uint32_t reasoning_chunks = 0;  // deltas with reasoning (the same)
    uint32_t tool_call_chunks = 0;  // deltas with pieces of tool calls (the same)

    bool interrupted() const { return finish_reason == "interrupted"; }
    bool cancelled() const { return finish_reason == "cancelled"; }
    // The token limit came while the model was still reasoning: there is no answer to show,
    // only its thinking.
    bool cut_while_reasoning() const { return finish_reason == "length" && text.empty() && !reasoning.empty(); }
    // The server's count when it sent usage (reasoning included), else the chunks of text,
    // reasoning and tool calls.
    uint32_t completion_tokens() const {
        return usage ? usage->completion_tokens : text_chunks + reasoning_chunks + tool_call_chunks;
    }
    // Tokens after the first over generation_seconds, as GenerationStats counts them.
    double tokens_per_second() const;
};

class RemoteEngine {
public:
    // Checks and normalises the base URL (remote_url.h: with or without /v1). Sends nothing.
    static Result<RemoteEngine> create(std::string_view base_url, ConnectionOptions options = {});

    const std::string& base_url() const { return base_url_; }
    const ConnectionOptions& options() const { return options_; }
    // plain_http_warning() of the base URL.
    std::optional<std::string> transport_warning() const;

    // GET /models: the ids of the models the server serves.
    Result<std::vector<std::string>> list_models(const CancelCheck& cancelled = {}) const;

    // POST /chat/completions, streamed. See the file comment for what fails how.
    Result<ChatResult> chat(const ChatRequest& request, const ChatCallbacks& callbacks = {}) const;

private:
    RemoteEngine(std::string base_url, ConnectionOptions options)
        : base_url_(std::move(base_url)), options_(std::move(options)) {}

    std::string base_url_;
    ConnectionOptions options_;
};

// GET a Prometheus text endpoint (DCGM exporter, vLLM's /metrics, Powerhouse's /metrics) and
// parse it. A URL without a path gets "/metrics". The key, when given, goes as a bearer token
// (a Powerhouse server with a key wants it for /metrics too). A body with no sample in it is
// an error (format) naming what it looked like.
Result<PrometheusText> fetch_metrics(std::string_view url, const ConnectionOptions& options = {},
                                     const CancelCheck& cancelled = {});

}  // namespace powerhouse::remote
