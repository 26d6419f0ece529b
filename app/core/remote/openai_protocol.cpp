#include "remote/openai_protocol.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

#include "remote/http_client.h"

namespace powerhouse::remote::detail {
namespace {

using nlohmann::json;

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

json message_json(const ChatMessage& m) {
    json out = {{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
        json calls = json::array();
        for (const ToolCall& c : m.tool_calls) {
            calls.push_back(
                {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
        }
        out["tool_calls"] = std::move(calls);
        if (m.content.empty()) out["content"] = nullptr;
    }
    if (!m.tool_call_id.empty()) out["tool_call_id"] = m.tool_call_id;
    if (!m.name.empty()) out["name"] = m.name;
    return out;
}

// A float as JSON without float's noise: 0.7f is sent as 0.7, not 0.699999988079071.
json number(float v) {
    return std::round(static_cast<double>(v) * 1e6) / 1e6;
}

std::optional<ChatUsage> usage_of(const json& chunk) {
    if (!chunk.contains("usage") || !chunk["usage"].is_object()) return std::nullopt;
    const json& u = chunk["usage"];
    ChatUsage usage;
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_unsigned()) {
        usage.prompt_tokens = u["prompt_tokens"].get<uint32_t>();
    }
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_unsigned()) {
        usage.completion_tokens = u["completion_tokens"].get<uint32_t>();
    }
    return usage;
}

std::string string_or_empty(const json& object, const char* key) {
    return object.is_object() && object.contains(key) && object[key].is_string() ? object[key].get<std::string>()
                                                                                 : std::string();
}

// A delta's or a message's reasoning (see the header): reasoning_content, else reasoning.
std::string reasoning_of(const json& delta) {
    std::string reasoning = string_or_empty(delta, "reasoning_content");
    return reasoning.empty() ? string_or_empty(delta, "reasoning") : reasoning;
}

// The server's message when `j` (parsed from `body`) is an error object: {"error": ...}.
std::optional<std::string> error_object(const json& j, std::string_view body, std::string_view secret) {
    if (j.is_discarded() || !j.is_object() || !j.contains("error") || j["error"].is_null()) return std::nullopt;
    std::string message = server_message(body, secret);
    if (message.empty()) message = "an error without a message";
    return message;
}

// Whether a server's message says that the conversation does not fit the model's context:
// OpenAI's and vLLM's "maximum context length", llama.cpp's "exceeds the available context
// size", and others' words for it.
bool says_context_is_full(std::string_view said) {
    const std::string l = lower(said);
    for (std::string_view words :
         {"context length", "context window", "maximum context", "context size", "too many tokens"}) {
        if (l.find(words) != std::string::npos) return true;
    }
    return false;
}

Error context_full_error(std::string_view what, std::string_view server) {
    return make_error(ErrorCode::context_full,
                      fmt::format("{}: the conversation is too long for the server's model ({}): shorten it or ask "
                                  "for fewer tokens",
                                  what, server));
}

}  // namespace

std::string chat_body(const ChatRequest& r, bool include_usage) {
    json body = {{"model", r.model}, {"stream", true}};
    json messages = json::array();
    for (const ChatMessage& m : r.messages) messages.push_back(message_json(m));
    body["messages"] = std::move(messages);
    if (include_usage) body["stream_options"] = {{"include_usage", true}};
    if (r.max_tokens) body["max_tokens"] = *r.max_tokens;
    if (r.temperature) body["temperature"] = number(*r.temperature);
    if (r.top_p) body["top_p"] = number(*r.top_p);
    if (r.presence_penalty) body["presence_penalty"] = number(*r.presence_penalty);
    if (r.frequency_penalty) body["frequency_penalty"] = number(*r.frequency_penalty);
    if (r.seed) body["seed"] = *r.seed;
    if (!r.stop.empty()) body["stop"] = r.stop;
    if (r.top_k) body["top_k"] = *r.top_k;
    if (r.min_p) body["min_p"] = number(*r.min_p);
    if (r.repeat_penalty) body["repeat_penalty"] = number(*r.repeat_penalty);
    if (!r.chat_template_kwargs.is_null()) body["chat_template_kwargs"] = r.chat_template_kwargs;
    if (r.reasoning_effort) body["reasoning_effort"] = *r.reasoning_effort;
    if (r.tools.is_array() && !r.tools.empty()) {
        body["tools"] = r.tools;
        if (!r.tool_choice.is_null()) body["tool_choice"] = r.tool_choice;
    }
    return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<std::vector<std::string>> parse_model_list(std::string_view body, std::string_view secret) {
    const json j = json::parse(body, nullptr, false);
    if (std::optional<std::string> error = error_object(j, body, secret)) {
        return make_error(
            ErrorCode::device_failed,
            fmt::format("the server answered with an error instead of its models (HTTP 200): {}", *error));
    }
    if (j.is_discarded() || !j.is_object() || !j.contains("data") || !j["data"].is_array()) {
        return make_error(
            ErrorCode::format,
            fmt::format("the model list is not an OpenAI list ({{\"data\": [...]}}): '{}'", quoted(body, secret)));
    }
    std::vector<std::string> ids;
    for (const json& m : j["data"]) {
        const std::string id = string_or_empty(m, "id");
        if (!id.empty()) ids.push_back(id);
    }
    return ids;
}

Result<ChunkDelta> parse_chunk(std::string_view data, std::string_view secret) {
    const json j = json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return make_error(ErrorCode::format, fmt::format("the stream carries something that is not a JSON object: "
                                                         "'data: {}'",
                                                         quoted(data, secret)));
    }
    ChunkDelta d;
    if (j.contains("error") && !j["error"].is_null()) {
        d.error = server_message(data, secret);
        if (d.error->empty()) d.error = "an error without a message";
        return d;
    }
    d.model = string_or_empty(j, "model");
    d.usage = usage_of(j);
    if (j.contains("choices")) {
        const json& choices = j["choices"];
        if (!choices.is_array()) {
            return make_error(ErrorCode::format,
                              fmt::format("a chunk's 'choices' is not an array: 'data: {}'", quoted(data, secret)));
        }
        for (const json& c : choices) {
            // One answer was asked for (n = 1): another index is not ours.
            if (!c.is_object() || (c.contains("index") && c["index"] != 0)) continue;
            if (c.contains("delta") && c["delta"].is_object()) {
                d.text += string_or_empty(c["delta"], "content");
                d.reasoning += reasoning_of(c["delta"]);
                if (c["delta"].contains("tool_calls")) {
                    Result<std::vector<ToolCallDelta>> calls = read_tool_call_deltas(c["delta"]["tool_calls"], true);
                    if (!calls) {
                        return make_error(ErrorCode::format,
                                          fmt::format("{}: 'data: {}'", calls.error().message, quoted(data, secret)));
                    }
                    d.tool_calls.insert(d.tool_calls.end(), calls->begin(), calls->end());
                }
            }
            d.finish_reason = string_or_empty(c, "finish_reason");
        }
    } else if (!d.usage) {
        return make_error(ErrorCode::format,
                          fmt::format("a chunk has neither 'choices' nor 'usage': 'data: {}'", quoted(data, secret)));
    }
    return d;
}

Result<ChunkDelta> parse_completion(std::string_view body, std::string_view secret) {
    const json j = json::parse(body, nullptr, false);
    if (std::optional<std::string> error = error_object(j, body, secret)) {
        ChunkDelta d;
        d.error = std::move(error);
        return d;
    }
    if (j.is_discarded() || !j.is_object() || !j.contains("choices") || !j["choices"].is_array() ||
        j["choices"].empty()) {
        return make_error(ErrorCode::format, fmt::format("the answer is neither a stream nor a chat completion: '{}'",
                                                         quoted(body, secret)));
    }
    ChunkDelta d;
    d.model = string_or_empty(j, "model");
    d.usage = usage_of(j);
    const json& c = j["choices"][0];
    if (c.is_object()) {
        if (c.contains("message")) {
            d.text = string_or_empty(c["message"], "content");
            d.reasoning = reasoning_of(c["message"]);
            if (c["message"].is_object() && c["message"].contains("tool_calls")) {
                Result<std::vector<ToolCallDelta>> calls = read_tool_call_deltas(c["message"]["tool_calls"], false);
                if (!calls) {
                    return make_error(ErrorCode::format,
                                      fmt::format("{}: '{}'", calls.error().message, quoted(body, secret)));
                }
                d.tool_calls = std::move(calls).value();
            }
        }
        d.finish_reason = string_or_empty(c, "finish_reason");
    }
    return d;
}

Error reported_error(std::string_view what, const std::string& said, bool answer_begun) {
    if (says_context_is_full(said)) return context_full_error(what, said);
    return make_error(ErrorCode::device_failed,
                      fmt::format("{}: the server reported an error {}: {}", what,
                                  answer_begun ? "in the middle of the answer" : "before the answer began", said));
}

Error redirect_error(long status, std::string_view location, std::string_view what, std::string_view secret) {
    const std::string where = location.empty() ? std::string("elsewhere, without saying where")
                                               : fmt::format("to {}", quoted(location, secret, 300));
    return make_error(ErrorCode::invalid_argument,
                      fmt::format("{}: the server redirects {} ({}): give the URL it redirects to as the server's "
                                  "URL (redirects are not followed, so that the API key and the prompts go only "
                                  "to the server named)",
                                  what, where, status_text(status)));
}

bool blames_stream_options(std::string_view body) {
    return body.find("stream_options") != std::string_view::npos;
}

Error http_error(long status, std::string_view body, std::optional<double> retry_after, std::string_view what,
                 std::string_view secret, const std::string& model, const std::vector<std::string>* models) {
    const std::string said = server_message(body, secret);
    const std::string server = said.empty() ? status_text(status) : fmt::format("{}: {}", status_text(status), said);
    if (status == 401) {
        if (secret.empty()) {
            return make_error(ErrorCode::invalid_argument,
                              fmt::format("{}: the server needs an API key ({}): give one", what, server));
        }
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("{}: the server refused the API key ({}): check the key", what, server));
    }
    if (status == 403) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("{}: the server forbids it ({}): the API key lacks the permission, or the "
                                      "server does not accept clients from this address",
                                      what, server));
    }
    if (status == 404) {
        if (models != nullptr && !model.empty() && std::find(models->begin(), models->end(), model) == models->end()) {
            std::vector<std::string> shown;  // the server's ids: control characters escaped
            for (const std::string& id : *models) shown.push_back(quoted(id, secret, std::string::npos));
            return make_error(
                ErrorCode::invalid_argument,
                fmt::format("{}: the server has no model '{}'; it has: {}", what, model,
                            models->empty() ? std::string("none") : fmt::format("{}", fmt::join(shown, ", "))));
        }
        return make_error(
            ErrorCode::invalid_argument,
            fmt::format("{}: {}: check the base URL (servers answer under .../v1) and the model name", what, server));
    }
    if (status == 429) {
        const std::string when =
            retry_after ? fmt::format("retry after {:.0f} s", std::ceil(*retry_after)) : std::string("retry later");
        return make_error(ErrorCode::io, fmt::format("{}: the server is busy or the key's rate limit is reached "
                                                     "({}): {}",
                                                     what, server, when));
    }
    if (status == 413) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("{}: the request is too large for the server ({})", what, server));
    }
    if (status >= 500) {
        const std::string when = retry_after ? fmt::format("; retry after {:.0f} s", std::ceil(*retry_after)) : "";
        return make_error(ErrorCode::device_failed,
                          fmt::format("{}: the server failed ({}){}; its log may say more", what, server, when));
    }
    if (status >= 400) {
        if (says_context_is_full(said)) return context_full_error(what, server);
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("{}: the server refused the request ({})", what, server));
    }
    return make_error(
        ErrorCode::format,
        fmt::format("{}: an unexpected answer ({}): is the URL an OpenAI-compatible server?", what, server));
}

}  // namespace powerhouse::remote::detail
