#include "remote/remote_engine.h"

#include <fmt/format.h>

#include <chrono>

#include "remote/http_client.h"
#include "remote/openai_protocol.h"
#include "remote/remote_url.h"
#include "remote/sse_parser.h"
#include "remote/tool_call_deltas.h"

namespace powerhouse::remote {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxListBody = 8 * 1024 * 1024;
constexpr size_t kMaxCompletionBody = 16 * 1024 * 1024;
constexpr size_t kMaxMetricsBody = 32 * 1024 * 1024;

// A GET of metadata (a model list, metrics) whose whole body is wanted, bounded.
struct Fetched {
    detail::HttpOutcome outcome;
    std::string body;
};

Fetched fetch(const std::string& url, const std::string& accept, size_t limit, const ConnectionOptions& options,
              const CancelCheck& cancelled) {
    Fetched f;
    detail::HttpRequest request;
    request.url = url;
    request.accept = accept;
    request.metadata = true;  // a model list or metrics: answered at once by a healthy server
    bool too_large = false;
    f.outcome = detail::perform(
        request, options,
        [&](std::string_view bytes, const detail::HttpOutcome&) {
            if (f.body.size() + bytes.size() > limit) {
                too_large = true;
                return false;
            }
            f.body.append(bytes);
            return true;
        },
        cancelled);
    if (too_large) f.outcome.stop = detail::Stop::too_large;
    return f;
}

bool succeeded(const detail::HttpOutcome& o) {
    return o.curl_code == 0 && o.stop == detail::Stop::none && o.status >= 200 && o.status < 300;
}

// The failure of a whole-body GET: the HTTP status's when the server answered with an
// error, else the transport's.
Error fetch_error(const Fetched& f, const ConnectionOptions& options, std::string_view what) {
    const detail::HttpOutcome& o = f.outcome;
    if (o.stop == detail::Stop::none && o.head_complete && o.status >= 300 && o.status < 400) {
        return detail::redirect_error(o.status, o.location, what, options.api_key);
    }
    if (o.stop == detail::Stop::none && o.head_complete && (o.status < 200 || o.status >= 300)) {
        return detail::http_error(o.status, o.error_body, o.retry_after_seconds, what, options.api_key, "", nullptr);
    }
    return detail::transport_error(o, options, what);
}

}  // namespace

double ChatResult::tokens_per_second() const {
    const uint32_t tokens = completion_tokens();
    return generation_seconds > 0 && tokens > 1 ? (tokens - 1) / generation_seconds : 0.0;
}

Result<RemoteEngine> RemoteEngine::create(std::string_view base_url, ConnectionOptions options) {
    Result<std::string> url = normalize_base_url(base_url);
    if (!url) return url.error();
    return RemoteEngine(std::move(url).value(), std::move(options));
}

std::optional<std::string> RemoteEngine::transport_warning() const {
    return plain_http_warning(base_url_);
}

Result<std::vector<std::string>> RemoteEngine::list_models(const CancelCheck& cancelled) const {
    const std::string what = fmt::format("listing the models at {}", base_url_);
    const Fetched f = fetch(base_url_ + "/models", "application/json", kMaxListBody, options_, cancelled);
    if (!succeeded(f.outcome)) return fetch_error(f, options_, what);
    Result<std::vector<std::string>> ids = detail::parse_model_list(f.body, options_.api_key);
    if (!ids) return make_error(ids.error().code, fmt::format("{}: {}", what, ids.error().message));
    return ids;
}

Result<ChatResult> RemoteEngine::chat(const ChatRequest& request, const ChatCallbacks& callbacks) const {
    const std::string what = fmt::format("asking '{}' at {}", request.model, base_url_);
    bool include_usage = request.include_usage;
    for (;;) {
        ChatResult result;
        SseParser parser;
        detail::ToolCallAssembler calls(options_.api_key);
        std::vector<SseEvent> events;
        std::string whole_body;  // a server that answers without streaming
        bool json_body = false, decided = false, done = false, too_large = false;
        std::optional<Error> stream_error;
        const Clock::time_point start = Clock::now();
        Clock::time_point first_token{}, last_token{};  // of text, reasoning or tool calls
        // Whether any of the answer (text, reasoning, a piece of a tool call) has come.
        const auto begun = [&] { return result.text_chunks + result.reasoning_chunks + result.tool_call_chunks > 0; };
        // An interrupted answer's calls are dropped (their arguments may be cut): say so.
        const auto interrupt = [&](Error why) {
            if (!calls.empty()) {
                why.message +=
                    fmt::format("; {} tool call{} it had begun {} dropped (the arguments may be cut)", calls.size(),
                                calls.size() == 1 ? "" : "s", calls.size() == 1 ? "is" : "are");
            }
            result.finish_reason = "interrupted";
            result.interruption = std::move(why);
        };

        const auto not_sse = [&] {
            return make_error(ErrorCode::format,
                              fmt::format("{}: the stream carries a line that is not a server-sent event: '{}': is "
                                          "the URL an OpenAI-compatible server (not a proxy's error page)?",
                                          what, detail::quoted(parser.garbage().value_or(""), options_.api_key)));
        };
        // The server's own failure, reported in the stream (an error object, an error event).
        const auto reported = [&](const std::string& said) { return detail::reported_error(what, said, begun()); };
        // The body's bytes as they come; the headers (read before any byte) say what it is.
        auto on_body = [&](std::string_view bytes, const detail::HttpOutcome& head) -> bool {
            if (!decided) {
                decided = true;
                json_body = head.content_type == "application/json";
            }
            if (json_body) {
                if (whole_body.size() + bytes.size() > kMaxCompletionBody) {
                    too_large = true;
                    return false;
                }
                whole_body.append(bytes);
                return true;
            }
            events.clear();
            const bool ok = parser.feed(bytes, events);
            for (const SseEvent& event : events) {
                // An event of a type not listened for ("event: ping"): the standard's client
                // ignores it. The answer comes as "message" (the default), failures as "error".
                if (!event.event.empty() && event.event != "message" && event.event != "error") continue;
                if (event.data == "[DONE]") {
                    done = true;
                    return false;  // nothing after it matters; no need to wait for the close
                }
                if (event.event == "error") {
                    // llama.cpp's "error: {...}", or an event named "error": the server's words.
                    std::string said = detail::server_message(event.data, options_.api_key);
                    if (said.empty()) said = fmt::format("'{}'", detail::quoted(event.data, options_.api_key));
                    stream_error = reported(said);
                    return false;
                }
                Result<detail::ChunkDelta> chunk = detail::parse_chunk(event.data, options_.api_key);
                if (!chunk) {
                    stream_error = make_error(chunk.error().code, fmt::format("{}: {}", what, chunk.error().message));
                    return false;
                }
                if (chunk->error) {
                    stream_error = reported(*chunk->error);
                    return false;
                }
                if (!chunk->model.empty()) result.model = chunk->model;
                if (chunk->usage) result.usage = chunk->usage;
                if (!chunk->finish_reason.empty()) result.finish_reason = chunk->finish_reason;
                if (!chunk->text.empty() || !chunk->reasoning.empty() || !chunk->tool_calls.empty()) {
                    const Clock::time_point now = Clock::now();
                    if (!begun()) first_token = now;
                    last_token = now;
                }
                if (!chunk->reasoning.empty()) {
                    ++result.reasoning_chunks;
                    result.reasoning += chunk->reasoning;
                    if (callbacks.on_reasoning) callbacks.on_reasoning(chunk->reasoning);
                }
                if (!chunk->text.empty()) {
                    ++result.text_chunks;
                    result.text += chunk->text;
                    if (callbacks.on_text) callbacks.on_text(chunk->text);
                }
                if (!chunk->tool_calls.empty()) {
                    ++result.tool_call_chunks;
                    if (Result<void> added = calls.add(chunk->tool_calls); !added) {
                        stream_error =
                            make_error(added.error().code, fmt::format("{}: {}", what, added.error().message));
                        return false;
                    }
                }
            }
            if (!ok) stream_error = not_sse();
            return ok;
        };

        detail::HttpRequest http;
        http.url = base_url_ + "/chat/completions";
        http.post_body = detail::chat_body(request, include_usage);
        http.accept = "text/event-stream";
        const detail::HttpOutcome outcome = detail::perform(http, options_, on_body, callbacks.cancelled);

        if (begun()) {
            result.time_to_first_token = std::chrono::duration<double>(first_token - start).count();
            result.generation_seconds = std::chrono::duration<double>(last_token - first_token).count();
        }
        if (outcome.stop == detail::Stop::cancelled) {
            result.finish_reason = "cancelled";
            return result;
        }
        const bool answered = outcome.head_complete && outcome.status >= 200 && outcome.status < 300;
        if (!answered) {
            if (!outcome.head_complete || outcome.status == 0) return detail::transport_error(outcome, options_, what);
            if (outcome.status >= 300 && outcome.status < 400) {
                return detail::redirect_error(outcome.status, outcome.location, what, options_.api_key);
            }
            if (include_usage && (outcome.status == 400 || outcome.status == 422) &&
                detail::blames_stream_options(outcome.error_body)) {
                include_usage = false;  // an older server: ask again without the field
                continue;
            }
            std::vector<std::string> models;
            const std::vector<std::string>* known = nullptr;
            if (outcome.status == 404) {
                if (Result<std::vector<std::string>> listed = list_models(callbacks.cancelled)) {
                    models = std::move(listed).value();
                    known = &models;
                }
            }
            return detail::http_error(outcome.status, outcome.error_body, outcome.retry_after_seconds, what,
                                      options_.api_key, request.model, known);
        }
        if (json_body) {
            if (too_large) {
                return make_error(ErrorCode::format, fmt::format("{}: the answer is larger than {} MiB: not a chat "
                                                                 "completion",
                                                                 what, kMaxCompletionBody >> 20));
            }
            if (outcome.curl_code != 0 || outcome.stop != detail::Stop::none) {
                result.finish_reason = "interrupted";
                result.interruption = detail::transport_error(outcome, options_, what);
                return result;
            }
            Result<detail::ChunkDelta> whole = detail::parse_completion(whole_body, options_.api_key);
            if (!whole) return make_error(whole.error().code, fmt::format("{}: {}", what, whole.error().message));
            if (whole->error) {
                // Some servers and proxies answer a failure with 200 and an error object.
                return make_error(ErrorCode::device_failed,
                                  fmt::format("{}: the server answered with an error instead of a completion (HTTP "
                                              "200): {}",
                                              what, *whole->error));
            }
            if (Result<void> added = calls.add(whole->tool_calls); !added) {
                return make_error(added.error().code, fmt::format("{}: {}", what, added.error().message));
            }
            Result<std::vector<ToolCall>> made = calls.finish();
            if (!made) return make_error(made.error().code, fmt::format("{}: {}", what, made.error().message));
            result.tool_calls = std::move(made).value();
            result.tool_call_chunks = result.tool_calls.empty() ? 0 : 1;
            result.model = whole->model;
            result.usage = whole->usage;
            result.finish_reason = whole->finish_reason.empty() ? "stop" : whole->finish_reason;
            result.text = whole->text;
            result.reasoning = whole->reasoning;
            result.text_chunks = whole->text.empty() ? 0 : 1;
            result.reasoning_chunks = whole->reasoning.empty() ? 0 : 1;
            result.time_to_first_token = outcome.seconds;
            if (callbacks.on_reasoning && !result.reasoning.empty()) callbacks.on_reasoning(result.reasoning);
            if (callbacks.on_text && !result.text.empty()) callbacks.on_text(result.text);
            return result;
        }
        if (!stream_error && !json_body && !done && outcome.curl_code == 0 && outcome.stop == detail::Stop::none &&
            !parser.finish()) {
            // The body ended cleanly on a last line without a line end that is no SSE either
            // (a page of HTML); a stream cut in the middle of a line is the cut's failure.
            stream_error = not_sse();
        }
        if (stream_error) {
            interrupt(std::move(stream_error).value());
            return result;
        }
        const bool ended_after_finish = !result.finish_reason.empty() && (outcome.stop == detail::Stop::none ||
                                                                          outcome.stop == detail::Stop::idle_timeout);
        if (done || ended_after_finish) {
            // [DONE], or a server that ends with a finish_reason: its close, clean or not, or
            // its silence after it cost only the usage chunk and [DONE], not the answer.
            if (result.finish_reason.empty()) result.finish_reason = "stop";
            Result<std::vector<ToolCall>> made = calls.finish();
            if (!made) {
                // The answer ended, but a call in it cannot be made: none is handed on.
                result.finish_reason = "interrupted";
                result.interruption = make_error(made.error().code, fmt::format("{}: {}", what, made.error().message));
                return result;
            }
            result.tool_calls = std::move(made).value();
            return result;
        }
        if (outcome.curl_code != 0 || outcome.stop != detail::Stop::none) {
            interrupt(detail::transport_error(outcome, options_, what));
        } else if (outcome.body_bytes == 0) {
            // llama-cpp-python does this when the request fails inside its stream (a prompt
            // longer than its context): 200, then an empty body.
            interrupt(make_error(ErrorCode::device_failed,
                                 fmt::format("{}: the server accepted the request, then ended the answer "
                                             "without sending anything: it failed on it (a prompt longer "
                                             "than its context, for one); its log says why",
                                             what)));
        } else {
            interrupt(make_error(ErrorCode::io,
                                 fmt::format("{}: the server closed the stream before the answer ended (no "
                                             "finish_reason, no [DONE]{}): it may have crashed or been restarted",
                                             what, parser.has_pending() ? ", half an event at the end" : "")));
        }
        return result;
    }
}

Result<PrometheusText> fetch_metrics(std::string_view url, const ConnectionOptions& options,
                                     const CancelCheck& cancelled) {
    Result<std::string> normalized = normalize_metrics_url(url);
    if (!normalized) return normalized.error();
    const std::string what = fmt::format("reading the metrics at {}", *normalized);
    // The classic text format; OpenMetrics would do too, but every exporter serves this one.
    const Fetched f = fetch(*normalized, "text/plain;version=0.0.4;q=1,*/*;q=0.1", kMaxMetricsBody, options, cancelled);
    if (f.outcome.stop == detail::Stop::none && f.outcome.head_complete && f.outcome.status == 404) {
        // The chat API's advice (the base URL, the model) is wrong here: say where each
        // exporter and engine serves its metrics, and which must be told to.
        return make_error(
            ErrorCode::invalid_argument,
            fmt::format("{}: nothing there (HTTP 404 Not Found): vLLM and Powerhouse serve /metrics on their "
                        "API port, NVIDIA's DCGM exporter on port 9400; llama.cpp's server needs "
                        "--metrics and SGLang --enable-metrics",
                        what));
    }
    if (!succeeded(f.outcome)) return fetch_error(f, options, what);
    PrometheusText text = parse_prometheus(f.body);
    if (text.samples.empty()) {
        return make_error(
            ErrorCode::format,
            fmt::format("{}: no Prometheus samples in the answer ({}): is it a metrics endpoint?", what,
                        text.problems.empty() ? fmt::format("'{}'", detail::quoted(f.body, options.api_key, 120))
                                              : detail::quoted(text.problems.front(), options.api_key, 300)));
    }
    return text;
}

}  // namespace powerhouse::remote
