// What a client asks of the API server, read and checked: the fields of POST
// /v1/chat/completions and /v1/completions become a GenRequest for the engine, or an
// ApiError that names the field and what is wrong with it (OpenAI's error object).
//
// Everything the server does not do is refused, never silently ignored: a client that asks
// for n = 3 learns that it gets one answer.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "powerhouse/chat_template.h"
#include "powerhouse/engine.h"
#include "powerhouse/generation.h"
#include "powerhouse/tool_calls.h"

namespace powerhouse::server {

using json = nlohmann::ordered_json;  // ordered: tool schemas reach the template in the client's order

// An OpenAI-style error: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::optional<std::string> param;
    std::optional<std::string> code;
};

// Nesting beyond this is refused before parsing: nlohmann's values are destroyed and
// copied recursively, so a body of 100000 '[' would exhaust the stack (and memory).
inline constexpr int kMaxJsonDepth = 64;
// Whether the brackets of JSON `text` nest at most `max_depth` deep (strings skipped).
bool json_depth_within(std::string_view text, int max_depth);

// JSON text to send: bytes that are not UTF-8 (a token that is half a character) become U+FFFD.
std::string to_text(const json& value);

json error_body(const ApiError& e);
// A 400 about `param` (empty: the body as a whole).
ApiError bad(std::string param, std::string message);
// An engine error as the API reports it (a context overflow is the client's, a failed device the server's).
ApiError engine_error(const Error& e);

enum class ToolChoice : uint8_t { none, automatic, required, named };

// A request as the engine takes it.
struct GenRequest {
    std::vector<ChatMessage> messages;  // chat
    std::optional<std::string> prompt;  // text completion (special tokens parsed)
    GenerationSettings settings;
    bool stream = false;
    bool include_usage = false;
    // Tools (chat): the client's tool list, and whether the answer may, must or must not call one.
    json tools = json::array();
    ToolChoice tool_choice = ToolChoice::none;
    std::string tool_name;  // ToolChoice::named
    // The answer's format: the grammar text of response_format (json_object, json_schema),
    // compiled into settings.grammar by the parser.
    std::string response_format = "text";
    // More of the chat template's variables: chat_template_kwargs (as vLLM and llama.cpp's
    // server take them), and reasoning_effort (gpt-oss's template reads it).
    json template_variables;
    // OpenAI's predicted output (prediction: {"type": "content", "content": ...}): its text,
    // looked up for guesses as the answer is written (GenerateCommand::prediction).
    std::string prediction;
};

// What the model's template and vocabulary mean for a request: where its tool calls go.
struct ServedModel {
    std::string id;  // the name /v1/models lists and requests must use
    uint32_t n_ctx = 0;
    uint32_t n_vocab = 0;  // logit_bias's token ids are below it (0: not checked)
    ToolCallFormat tool_format = ToolCallFormat::generic;
    LookupSettings lookup;  // every request's, unless it says otherwise
};

std::variant<GenRequest, ApiError> parse_chat(const json& body, const ServedModel& model);
std::variant<GenRequest, ApiError> parse_completion(const json& body, const ServedModel& model);

// POST /v1/embeddings: the inputs (OpenAI's `input`: a text, texts, one input's token ids,
// or several inputs' ids), and how the vectors are sent back.
struct EmbedRequest {
    std::vector<std::string> texts;
    std::vector<std::vector<TokenId>> tokens;
    bool base64 = false;  // encoding_format "base64": each vector's little-endian float32 bytes
};
std::variant<EmbedRequest, ApiError> parse_embeddings(const json& body, const ServedModel& model);
// {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": ...}], "model", "usage"}.
json embeddings_reply(const EmbeddingsEvent& event, const std::string& model_id, bool base64);

// OpenAI's finish_reason for how a generation ended ("stop", "length").
const char* finish_reason(StopReason reason);

// OpenAI's logprobs content: [{"token", "logprob", "bytes", "top_logprobs": [...]}].
json logprobs_content(std::span<const TokenLogprob> logprobs);

}  // namespace powerhouse::server
