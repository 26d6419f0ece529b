#include "api_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <variant>

#include "client_watch.h"
#include "metrics_text.h"
#include "replies.h"
#include "requests.h"
#include "server_health.h"

namespace powerhouse::server {

// A request's events, routed to it by the server's one reader of the engine's events. Not in
// the anonymous namespace: ApiServer::State holds these.
struct ApiServer::Channel {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<EngineEvent> events;
};

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Channel = ApiServer::Channel;

void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(to_text(error_body(e)), "application/json");
}

// Constant time in the key's contents: every byte is compared, whatever matches.
bool same_key(const std::string& given, const std::string& key) {
    unsigned diff = given.size() == key.size() ? 0u : 1u;
    const size_t n = std::max(given.size(), key.size());
    for (size_t i = 0; i < n; ++i) {
        const auto a = static_cast<unsigned char>(i < given.size() ? given[i] : 0);
        const auto b = static_cast<unsigned char>(i < key.size() ? key[i] : 0);
        diff |= static_cast<unsigned>(a ^ b);
    }
    return diff == 0;
}

// The most header bytes a request may carry (cpp-httplib reads any amount).
constexpr size_t kMaxHeaderBytes = 64u << 10;

// A stream that has sent nothing for this long gets an SSE comment, which clients skip: a
// long prompt, or the model loading again after a device failed (ARCHITECTURE.md section 7),
// must not look like a dead connection to a proxy's or a client's idle timeout.
constexpr auto kKeepAlive = 10s;

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

// The methods whose requests cpp-httplib reads a body for (its expect_content()).
bool reads_body(const std::string& method) {
    return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE" || method == "PRI";
}

// A request's body, read through cpp-httplib's ContentReader with at most `limit` bytes kept.
// The library bounds only a body with a Content-Length: a chunked one it holds whole. Past
// the limit the rest is read and dropped, so that memory stays bounded and the connection's
// next request is framed right, and the answer is 413.
struct Body {
    std::string text;
    bool read = true;  // false: the framing was broken, or the client stopped sending
    bool too_large = false;
};

Body read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
               size_t limit) {
    Body body;
    const auto keep = [&body, limit](const char* data, size_t n) {
        if (body.text.size() + n <= limit) {
            body.text.append(data, n);
        } else {
            body.too_large = true;
            body.text.clear();
            body.text.shrink_to_fit();
        }
        return true;
    };
    if (req.is_multipart_form_data()) {
        // Not JSON: its parts are read the same way (dropped), the answer is an error.
        body.read = reader([](const httplib::MultipartFormData&) { return true; }, keep);
    } else {
        body.read = reader(keep);
    }
    // The library answers a Content-Length past its limit with 413, having read and dropped it.
    if (res.status == 413) body.too_large = true;
    return body;
}

// `text` as an SSE comment line (": ...", no line breaks inside).
std::string sse_comment(std::string_view text) {
    std::string out = ": ";
    for (char c : text) out += (c == '\n' || c == '\r') ? ' ' : c;
    return out + "\n\n";
}

}  // namespace

bool is_loopback(const std::string& host) {
    return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

struct ApiServer::State {
    Engine& engine;
    ServedModel model;
    ServerOptions options;
    httplib::Server http;
    std::atomic<bool> accepting{false};  // new requests are taken
    std::atomic<bool> running{false};    // streams go on; they end when it drops
    std::atomic<bool> routing{false};    // the router reads events until the server is gone
    // Apart from the owner's ids (below 2^40), and from a previous server's on the same
    // engine: a late event of its cancelled request must not reach a new one.
    std::atomic<uint64_t> next_id{ApiServer::kFirstRequestId + (uint64_t{std::random_device{}()} << 20)};
    std::atomic<int> in_flight{0};
    enum class Phase { idle, bound, done };
    std::atomic<Phase> phase{Phase::idle};
    std::atomic<bool> stop_requested{false};
    std::mutex channels_mutex;
    std::map<uint64_t, std::shared_ptr<Channel>> channels;
    std::thread router;
    // A graceful stop: streams in flight may finish until the deadline, then are cancelled.
    std::mutex stop_mutex;
    std::condition_variable stop_changed;
    bool closing = false;
    std::thread drainer;

    State(Engine& e, uint32_t n_ctx, ServerOptions o) : engine(e), options(std::move(o)) {
        model.id = options.model_id;
        model.n_ctx = n_ctx;
        model.n_vocab = options.n_vocab;
        model.tool_format = options.tool_format;
        model.lookup = options.lookup;
    }

    // The one reader of the engine's events (unless the owner reads them and delivers).
    void route() {
        while (routing) {
            std::optional<EngineEvent> event = engine.wait_event(50ms);
            if (event) deliver(std::move(*event));
        }
    }

    // Records scheduler state and a device failure's events (/health, /metrics), and hands a
    // request's event to the request it names. False when the event is not one of this
    // server's requests (the owner's, or the engine's as a whole).
    bool deliver(EngineEvent event) {
        if (const auto* st = std::get_if<SchedulerEvent>(&event)) {
            record(st->stats);
            return false;
        }
        if (const auto* r = std::get_if<RecoveryEvent>(&event)) {
            health.record(*r);
            if (options.on_recovery) options.on_recovery(*r);
            // Its streams tell their clients why they pause (an SSE comment).
            for (uint64_t id : r->requests) {
                if (ApiServer::owns_request(id)) push(id, event);
            }
            return false;
        }
        uint64_t id = 0;
        if (const auto* t = std::get_if<TokenEvent>(&event)) id = t->request_id;
        if (const auto* d = std::get_if<DoneEvent>(&event)) id = d->request_id;
        if (const auto* m = std::get_if<EmbeddingsEvent>(&event)) id = m->request_id;
        if (const auto* e = std::get_if<ErrorEvent>(&event)) {
            id = e->request_id;
            health.record(e->error);  // an owner's request too: the model is the same
        }
        if (!ApiServer::owns_request(id)) return false;
        push(id, std::move(event));
        return true;
    }

    // Hands an event to its request's channel; dropped when the request has gone (its client left).
    void push(uint64_t id, EngineEvent event) {
        std::shared_ptr<Channel> channel;
        {
            const std::lock_guard lock(channels_mutex);
            auto it = channels.find(id);
            if (it != channels.end()) channel = it->second;
        }
        if (!channel) return;
        {
            const std::lock_guard lock(channel->mutex);
            channel->events.push_back(std::move(event));
        }
        channel->ready.notify_all();
    }

    ApiError busy_error() const {
        return ApiError{
            429, fmt::format("the server is busy ({} requests in flight): try again shortly", options.max_waiting),
            "rate_limit_error", std::nullopt, std::nullopt};
    }

    // The error a request that failed gets: while no model can answer, the reason (503),
    // rather than the engine's "no model is loaded" for a request that came just as it gave up.
    ApiError request_error(const Error& error) const {
        if (std::optional<ApiError> refused = health.refusal()) return *refused;
        return engine_error(error);
    }

    std::shared_ptr<Channel> open(uint64_t id) {
        auto channel = std::make_shared<Channel>();
        const std::lock_guard lock(channels_mutex);
        channels[id] = channel;
        return channel;
    }
    void close(uint64_t id) {
        const std::lock_guard lock(channels_mutex);
        channels.erase(id);
    }
    // Cancels every request of this server (never the owner's own generations).
    void cancel_all() {
        std::vector<uint64_t> ids;
        {
            const std::lock_guard lock(channels_mutex);
            for (const auto& [id, channel] : channels) ids.push_back(id);
        }
        for (uint64_t id : ids) engine.submit(CancelCommand{id});
    }

    bool authorized(const httplib::Request& req, httplib::Response& res) const {
        if (options.api_key.empty()) return true;
        const std::string header = req.get_header_value("Authorization");
        // The scheme is case-insensitive (RFC 9110 11.1): "bearer KEY" is the same key.
        const std::string_view prefix = "Bearer ";
        if (header.size() >= prefix.size() && iequals(std::string_view(header).substr(0, prefix.size()), prefix) &&
            same_key(header.substr(prefix.size()), options.api_key)) {
            return true;
        }
        send_error(res, ApiError{401, "a valid API key is needed: send 'Authorization: Bearer <key>'",
                                 "invalid_request_error", std::nullopt, std::string("invalid_api_key")});
        res.set_header("WWW-Authenticate", "Bearer");  // the scheme a 401 asks for (RFC 9110 11.6.1)
        return false;
    }

    // Counters for /metrics.
    std::atomic<uint64_t> requests[3] = {0, 0, 0};  // chat, text completions, embeddings
    std::atomic<uint64_t> errors{0};
    std::atomic<uint64_t> prompt_tokens{0}, generated_tokens{0};
    std::mutex stats_mutex;
    SchedulerStats scheduler;  // the engine's last SchedulerEvent
    // (time, tokens generated in all) of recent scheduler events: the generation rate.
    std::deque<std::pair<Clock::time_point, uint64_t>> rate_window;
    ServerHealth health;  // after a device failure: /health, /metrics, and requests while none can answer
    // hold(): the reason new requests are refused, and the Retry-After to send (0: none).
    struct Hold {
        std::string reason;
        std::chrono::seconds retry_after{0};
    };
    mutable std::mutex hold_mutex;
    std::optional<Hold> held;
    std::optional<Hold> current_hold() const {
        const std::lock_guard lock(hold_mutex);
        return held;
    }

    // A finished request's tokens, for /metrics.
    void count_tokens(const DoneEvent& d) {
        prompt_tokens += d.prompt_ids.size();
        generated_tokens += d.generated_ids.size();
    }

    void record(const SchedulerStats& stats) {
        const std::lock_guard lock(stats_mutex);
        scheduler = stats;
        const auto now = Clock::now();
        rate_window.emplace_back(now, stats.generated_tokens);
        while (rate_window.size() > 2 && now - rate_window.front().first > 10s) rate_window.pop_front();
    }
    double tokens_per_second() {
        const std::lock_guard lock(stats_mutex);
        if (rate_window.size() < 2) return 0.0;
        const auto& [t0, n0] = rate_window.front();
        const auto& [t1, n1] = rate_window.back();
        // Nothing heard for a while: the engine is idle (events come twice a second while it works).
        if (Clock::now() - t1 > 2s) return 0.0;
        const double dt = std::chrono::duration<double>(t1 - t0).count();
        return dt > 0 ? static_cast<double>(n1 - n0) / dt : 0.0;
    }

    // POST /v1/chat/completions (chat) or /v1/completions.
    std::optional<json> read_request(const httplib::Request& req, httplib::Response& res,
                                     const httplib::ContentReader& reader);
    void answer(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader, bool chat);
    void embed(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader);
    void stream(httplib::Response& res, uint64_t id, std::shared_ptr<Channel> channel, std::shared_ptr<Reply> reply,
                std::shared_ptr<ClientWatch> watch, bool http_1_0);
    std::string metrics();
};

namespace {

// The next event of a request, waiting up to `timeout`.
std::optional<EngineEvent> next_event(Channel& channel, std::chrono::milliseconds timeout) {
    std::unique_lock lock(channel.mutex);
    if (!channel.ready.wait_for(lock, timeout, [&] { return !channel.events.empty(); })) return std::nullopt;
    EngineEvent e = std::move(channel.events.front());
    channel.events.pop_front();
    return e;
}

// Waits for a request's last event, its `Final` or an ErrorEvent's error (the events between,
// such as a RecoveryEvent, pass: nothing here times out). `before_each_wait` runs before
// every wait (a chat's cancel when its client has gone).
template <class Final>
std::variant<Final, Error> last_event(Channel& channel, const std::function<void()>& before_each_wait = {}) {
    for (;;) {
        if (before_each_wait) before_each_wait();
        std::optional<EngineEvent> e = next_event(channel, 100ms);
        if (!e) continue;
        if (auto* last = std::get_if<Final>(&*e)) return std::move(*last);
        if (const auto* err = std::get_if<ErrorEvent>(&*e)) return err->error;
    }
}

// How long a stream's start waits for the engine to take or refuse its request (it takes
// commands between steps, a few milliseconds apart; a long prompt's step takes longer, and
// its refusals then come in the stream as before).
constexpr auto kFirstEventWait = 1s;

// Waits until a request's first event comes (or kFirstEventWait has passed, or the client
// has gone, or the server stops): the event when it is an ErrorEvent, taken off the channel;
// nothing otherwise, the events left for the stream.
std::optional<EngineEvent> first_error(Channel& channel, const ClientWatch& watch, const std::atomic<bool>& running) {
    const auto deadline = Clock::now() + kFirstEventWait;
    std::unique_lock lock(channel.mutex);
    while (channel.events.empty() && Clock::now() < deadline && running && !watch.gone()) {
        channel.ready.wait_for(lock, 50ms);
    }
    if (channel.events.empty() || !std::holds_alternative<ErrorEvent>(channel.events.front())) return std::nullopt;
    EngineEvent e = std::move(channel.events.front());
    channel.events.pop_front();
    return e;
}

}  // namespace

// The body of a POST, read and checked up to valid JSON; nullopt when the request has been
// answered with its error.
std::optional<json> ApiServer::State::read_request(const httplib::Request& req, httplib::Response& res,
                                                   const httplib::ContentReader& reader) {
    // The body is read (and what is past the limit dropped) before anything is answered:
    // the next request on the connection starts after it.
    const Body read = read_body(req, res, reader, options.max_body_bytes);
    if (!authorized(req, res)) {
        ++errors;
        return std::nullopt;
    }
    if (!accepting) {
        ++errors;
        send_error(res, ApiError{503, "the server is shutting down", "server_error", std::nullopt, std::nullopt});
        return std::nullopt;
    }
    if (std::optional<ApiError> refused = health.refusal()) {  // no model can answer: say why
        ++errors;
        send_error(res, *refused);
        return std::nullopt;
    }
    if (const std::optional<Hold> hold = current_hold()) {  // the owner's exclusive work
        ++errors;
        send_error(res, ApiError{503, hold->reason, "server_error", std::nullopt, std::string("busy")});
        if (hold->retry_after.count() > 0) res.set_header("Retry-After", std::to_string(hold->retry_after.count()));
        return std::nullopt;
    }
    if (read.too_large) {
        ++errors;
        send_error(res,
                   ApiError{413,
                            fmt::format("the request body is too large: send at most {} bytes", options.max_body_bytes),
                            "invalid_request_error",
                            {},
                            {}});
        return std::nullopt;
    }
    if (!read.read) {
        ++errors;
        const std::string encoding = req.get_header_value("Content-Encoding");
        if (res.status == 415) {
            send_error(res, ApiError{415,
                                     fmt::format("the body's Content-Encoding '{}' is not supported: send it "
                                                 "uncompressed, or as gzip, deflate or br",
                                                 encoding),
                                     "invalid_request_error",
                                     {},
                                     {}});
        } else if (!encoding.empty()) {
            send_error(res, bad("", fmt::format("the body could not be decompressed as its Content-Encoding, '{}', "
                                                "says: send it as that encoding makes it, or uncompressed",
                                                encoding)));
        } else {
            send_error(res, bad("", "the body could not be read: its chunked encoding is broken, or it ended early"));
        }
        return std::nullopt;
    }
    if (req.is_multipart_form_data()) {
        ++errors;
        send_error(res, ApiError{415,
                                 "the body must be JSON (Content-Type: application/json), not multipart form data",
                                 "invalid_request_error",
                                 {},
                                 {}});
        return std::nullopt;
    }
    const std::string& text = read.text;
    if (!json_depth_within(text, kMaxJsonDepth)) {
        ++errors;
        send_error(res, bad("", fmt::format("the body nests deeper than {} levels", kMaxJsonDepth)));
        return std::nullopt;
    }
    json body = json::parse(text, nullptr, false);
    if (body.is_discarded()) {
        ++errors;
        send_error(res, bad("", "the body is not valid JSON (or not valid UTF-8)"));
        return std::nullopt;
    }
    return body;
}

// POST /v1/embeddings: an EmbedCommand, answered whole when its event comes.
void ApiServer::State::embed(const httplib::Request& req, httplib::Response& res,
                             const httplib::ContentReader& reader) {
    ++requests[2];
    const std::optional<json> body = read_request(req, res, reader);
    if (!body) return;
    std::variant<EmbedRequest, ApiError> parsed = parse_embeddings(*body, model);
    if (const auto* e = std::get_if<ApiError>(&parsed)) {
        ++errors;
        send_error(res, *e);
        return;
    }
    EmbedRequest request = std::get<EmbedRequest>(std::move(parsed));
    if (in_flight.fetch_add(1) >= options.max_waiting) {
        in_flight.fetch_sub(1);
        ++errors;
        send_error(res, busy_error());
        return;
    }
    const uint64_t id = next_id.fetch_add(1);
    std::shared_ptr<Channel> channel = open(id);
    EmbedCommand command;
    command.request_id = id;
    command.inputs = std::move(request.texts);
    command.token_inputs = std::move(request.tokens);
    engine.submit(std::move(command));
    // An embedding is not cancelled: it takes a batch per input.
    const std::variant<EmbeddingsEvent, Error> last = last_event<EmbeddingsEvent>(*channel);
    if (const auto* done = std::get_if<EmbeddingsEvent>(&last)) {
        prompt_tokens += done->prompt_tokens;
        res.set_content(to_text(embeddings_reply(*done, model.id, request.base64)), "application/json");
    } else {
        ++errors;
        send_error(res, request_error(std::get<Error>(last)));
    }
    close(id);
    in_flight.fetch_sub(1);
}

void ApiServer::State::answer(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                              bool chat) {
    ++requests[chat ? 0 : 1];
    const std::optional<json> read_body_json = read_request(req, res, reader);
    if (!read_body_json) return;
    const json& body = *read_body_json;
    std::variant<GenRequest, ApiError> parsed = chat ? parse_chat(body, model) : parse_completion(body, model);
    if (const auto* e = std::get_if<ApiError>(&parsed)) {
        ++errors;
        send_error(res, *e);
        return;
    }
    GenRequest request = std::get<GenRequest>(std::move(parsed));
    if (in_flight.fetch_add(1) >= options.max_waiting) {
        in_flight.fetch_sub(1);
        ++errors;
        send_error(res, busy_error());
        return;
    }
    const uint64_t id = next_id.fetch_add(1);
    std::shared_ptr<Channel> channel = open(id);
    GenerateCommand command;
    command.request_id = id;
    command.messages = std::move(request.messages);
    command.raw_prompt = std::move(request.prompt);
    command.settings = request.settings;
    if (request.tool_choice != ToolChoice::none) command.tools = request.tools;
    command.read_answer = chat;
    command.template_variables = std::move(request.template_variables);
    command.prediction = std::move(request.prediction);
    engine.submit(std::move(command));
    auto reply = std::make_shared<Reply>(chat, fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", id), model.id,
                                         static_cast<int64_t>(std::time(nullptr)), request);
    auto watch = std::make_shared<ClientWatch>(req.remote_addr, req.remote_port);

    if (request.stream) {
        // A request the engine refuses at once (a prompt past the context: the engine checks
        // it as it takes the command) gets its error with its status, as OpenAI answers it,
        // not a stream that starts with 200 and carries the error as an event. The stream
        // starts with the first event, or after kFirstEventWait at the latest: a request queued
        // behind others, or a long prompt, still sees its answer start.
        if (std::optional<EngineEvent> refused = first_error(*channel, *watch, running)) {
            ++errors;
            send_error(res, request_error(std::get<ErrorEvent>(*refused).error));
            close(id);
            in_flight.fetch_sub(1);
            return;
        }
        stream(res, id, std::move(channel), std::move(reply), std::move(watch), req.version == "HTTP/1.0");
        return;
    }
    // Not streaming: wait for the answer, cancelling it if the client goes away meanwhile.
    bool cancelled = false;
    const std::variant<DoneEvent, Error> last = last_event<DoneEvent>(*channel, [&] {
        if (!cancelled && (watch->gone() || !running)) {
            engine.submit(CancelCommand{id});
            cancelled = true;  // its DoneEvent still comes (what was generated), within a step
        }
    });
    if (const auto* d = std::get_if<DoneEvent>(&last)) {
        count_tokens(*d);
        res.set_content(to_text(reply->complete(*d)), "application/json");
    } else {
        ++errors;
        send_error(res, request_error(std::get<Error>(last)));
    }
    close(id);
    in_flight.fetch_sub(1);
}

// Streaming: server-sent events as the text comes. A client that goes away (its socket
// closed, or a write that fails) cancels the generation.
void ApiServer::State::stream(httplib::Response& res, uint64_t id, std::shared_ptr<Channel> channel,
                              std::shared_ptr<Reply> reply, std::shared_ptr<ClientWatch> watch, bool http_1_0) {
    auto finished = std::make_shared<bool>(false);
    auto started = std::make_shared<bool>(false);
    res.set_header("Cache-Control", "no-cache");
    const auto provider = [=, this](size_t, httplib::DataSink& sink) {
        if (!*started) {
            *started = true;
            const std::string first = reply->stream_start();
            if (!first.empty() && !sink.write(first.data(), first.size())) return false;
        }
        auto last_write = Clock::now();
        for (;;) {
            if (!running || watch->gone() || !sink.is_writable()) return false;
            std::optional<EngineEvent> e = next_event(*channel, 100ms);
            std::string out;
            if (!e) {
                if (Clock::now() - last_write < kKeepAlive) continue;
                out = sse_comment("keep-alive");
            } else if (const auto* r = std::get_if<RecoveryEvent>(&*e)) {
                out = sse_comment(r->message);  // the answer pauses, and goes on (or ends with the error)
            } else if (const auto* t = std::get_if<TokenEvent>(&*e)) {
                out = reply->stream_text(*t);
            } else if (const auto* d = std::get_if<DoneEvent>(&*e)) {
                count_tokens(*d);
                out = reply->stream_end(*d);
                *finished = true;
            } else if (const auto* err = std::get_if<ErrorEvent>(&*e)) {
                ++errors;
                out = "data: " + to_text(error_body(request_error(err->error))) + "\n\ndata: [DONE]\n\n";
                *finished = true;
            } else {
                continue;
            }
            if (!out.empty()) {
                if (!sink.write(out.data(), out.size())) return false;
                last_write = Clock::now();
            }
            if (*finished) {
                sink.done();
                return true;
            }
        }
    };
    const auto releaser = [=, this](bool) {
        // Ended or aborted: a generation still running is cancelled (within one step).
        // Its DoneEvent may still come; the channel goes first, so it is dropped.
        if (!*finished) engine.submit(CancelCommand{id});
        close(id);
        in_flight.fetch_sub(1);
    };
    // HTTP/1.0 has no chunked encoding: its clients get the stream until the connection closes.
    // cpp-httplib would keep the connection for a keep-alive client's next request, whose
    // answer the client would then read as part of the stream: the connection closes instead.
    if (http_1_0) {
        res.set_header("Connection", "close");
        res.set_content_provider("text/event-stream", provider, [=](bool success) {
            releaser(success);
            watch->end_response();
        });
    } else {
        res.set_chunked_content_provider("text/event-stream", provider, releaser);
    }
}

std::string ApiServer::State::metrics() {
    SchedulerStats st;
    {
        const std::lock_guard lock(stats_mutex);
        st = scheduler;
    }
    std::string out;
    add_metric(out, "powerhouse_requests_total", "counter", "Requests received, by endpoint.",
               fmt::format("powerhouse_requests_total{{endpoint=\"chat\"}} {}\n"
                           "powerhouse_requests_total{{endpoint=\"completions\"}} {}\n"
                           "powerhouse_requests_total{{endpoint=\"embeddings\"}} {}\n",
                           requests[0].load(), requests[1].load(), requests[2].load()));
    add_metric(out, "powerhouse_request_errors_total", "counter", "Requests answered with an error.",
               fmt::format("powerhouse_request_errors_total {}\n", errors.load()));
    add_metric(out, "powerhouse_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
               fmt::format("powerhouse_prompt_tokens_total {}\n", prompt_tokens.load()));
    add_metric(out, "powerhouse_generated_tokens_total", "counter", "Tokens generated for finished requests.",
               fmt::format("powerhouse_generated_tokens_total {}\n", generated_tokens.load()));
    add_metric(out, "powerhouse_generation_tokens_per_second", "gauge",
               "Tokens the engine generated per second, all sequences together, over the last seconds.",
               fmt::format("powerhouse_generation_tokens_per_second {:.2f}\n", tokens_per_second()));
    add_metric(out, "powerhouse_requests_in_flight", "gauge", "Requests being answered or waiting.",
               fmt::format("powerhouse_requests_in_flight {}\n", in_flight.load()));
    add_metric(out, "powerhouse_sequences_running", "gauge", "Sequences the engine is generating.",
               fmt::format("powerhouse_sequences_running {}\n", st.running));
    add_metric(out, "powerhouse_sequences_waiting", "gauge", "Requests queued for a sequence or KV blocks.",
               fmt::format("powerhouse_sequences_waiting {}\n", st.waiting));
    add_metric(out, "powerhouse_kv_blocks", "gauge",
               "KV cache blocks: in use (by sequences or cached prefixes) and in all.",
               fmt::format("powerhouse_kv_blocks{{state=\"used\"}} {}\npowerhouse_kv_blocks{{state=\"total\"}} {}\n",
                           st.kv.total_blocks - st.kv.free_blocks, st.kv.total_blocks));
    add_metric(out, "powerhouse_speculative_tokens_total", "counter",
               "Speculative decoding's guessed tokens, and those the model kept (since the model loaded).",
               fmt::format("powerhouse_speculative_tokens_total{{kind=\"drafted\"}} {}\n"
                           "powerhouse_speculative_tokens_total{{kind=\"accepted\"}} {}\n",
                           st.drafted_tokens, st.accepted_tokens));
    out += health.metrics();
    if (options.telemetry) out += gpu_metrics(options.telemetry());
    return out;
}

ApiServer::ApiServer(Engine& engine, uint32_t n_ctx, ServerOptions options)
    : state_(std::make_shared<State>(engine, n_ctx, std::move(options))) {}

ApiServer::~ApiServer() {
    stop();
    {
        const std::lock_guard lock(state_->stop_mutex);
        state_->closing = true;
    }
    state_->stop_changed.notify_all();
    if (state_->drainer.joinable()) state_->drainer.join();
    state_->routing = false;
    if (state_->router.joinable()) state_->router.join();
}

Result<void> ApiServer::serve(const std::function<void(int)>& on_listening) {
    State& s = *state_;
    if (!is_loopback(s.options.host) && s.options.api_key.empty()) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("serving on {} lets other machines use the model: give an API key "
                                      "(--api-key-file), or serve on 127.0.0.1",
                                      s.options.host));
    }
    httplib::Server& http = s.http;
    http.set_payload_max_length(s.options.max_body_bytes);
    http.set_read_timeout(s.options.io_timeout_seconds, 0);
    http.set_write_timeout(s.options.io_timeout_seconds, 0);
    // An idle kept-alive connection holds a worker: a short wait bounds how long stop() takes.
    http.set_keep_alive_timeout(2);
    // A worker per stream: cpp-httplib's default pool (8 threads) would queue the 9th client
    // behind the others, and a few stalled clients would hold the whole server.
    const size_t workers = static_cast<size_t>(std::max(s.options.max_waiting, 1)) + 32;
    http.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
    // Framing the library takes as it comes is refused before a body is read: conflicting or
    // malformed lengths (400), oversized headers (431), unknown body lengths (411), other
    // transfer codings (501), encodings the library does not inflate (415). Counted as errors.
    const auto framing = [](const httplib::Request& req, httplib::Response& res) {
        size_t header_bytes = 0;
        for (const auto& [name, value] : req.headers) header_bytes += name.size() + value.size() + 4;
        if (header_bytes > kMaxHeaderBytes) {
            send_error(res, ApiError{431,
                                     fmt::format("the request's headers exceed {} KiB", kMaxHeaderBytes >> 10),
                                     "invalid_request_error",
                                     {},
                                     {}});
            return httplib::Server::HandlerResponse::Handled;
        }
        if (req.method == "PRI") {  // HTTP/2's preface: the library would read a body for it, and nothing serves it
            send_error(res, ApiError{501, "HTTP/2 is not served here: use HTTP/1.1", "invalid_request_error", {}, {}});
            return httplib::Server::HandlerResponse::Handled;
        }
        // A body's end must be known: cpp-httplib reads one with neither a length nor chunked
        // encoding until the connection closes, and one in another transfer coding the same.
        if (reads_body(req.method)) {
            const auto codings = req.headers.equal_range("Transfer-Encoding");
            const auto n_codings = std::distance(codings.first, codings.second);
            if (n_codings > 1 || (n_codings == 1 && !iequals(codings.first->second, "chunked"))) {
                send_error(res, ApiError{501,
                                         "the only transfer coding the server reads is 'Transfer-Encoding: chunked' "
                                         "(or send a Content-Length)",
                                         "invalid_request_error",
                                         {},
                                         {}});
                return httplib::Server::HandlerResponse::Handled;
            }
            if (n_codings == 0 && !req.has_header("Content-Length") && req.method != "DELETE") {
                send_error(res, ApiError{411,
                                         "the request has a body of unknown length: send a Content-Length header "
                                         "(or a chunked body)",
                                         "invalid_request_error",
                                         {},
                                         {}});
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        // The library inflates gzip, deflate and br bodies and reads any other encoding as if
        // there were none: that is refused before the body is read.
        if (req.has_header("Content-Encoding")) {
            const std::string encoding = req.get_header_value("Content-Encoding");
            if (encoding != "identity" && encoding != "gzip" && encoding != "deflate" && encoding != "br") {
                send_error(res, ApiError{415,
                                         fmt::format("the body's Content-Encoding '{}' is not supported: send it "
                                                     "uncompressed, or as gzip, deflate or br",
                                                     encoding),
                                         "invalid_request_error",
                                         {},
                                         {}});
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        const auto [first, last] = req.headers.equal_range("Content-Length");
        std::optional<std::string> length;
        for (auto it = first; it != last; ++it) {
            if (length && *length != it->second) {
                send_error(res, bad("", "the request has two different Content-Length headers"));
                return httplib::Server::HandlerResponse::Handled;
            }
            length = it->second;
        }
        if (length) {
            const bool digits =
                !length->empty() && length->size() <= 19 &&
                std::all_of(length->begin(), length->end(), [](char c) { return c >= '0' && c <= '9'; });
            if (!digits) {
                send_error(res, bad("", "the Content-Length header is not a length"));
                return httplib::Server::HandlerResponse::Handled;
            }
            // A length past the limit is left to the library, which reads (and drops) what is
            // sent before its 413: an honest client sending a big body then reads the 413
            // instead of a broken pipe.
        }
        return httplib::Server::HandlerResponse::Unhandled;
    };
    http.set_pre_routing_handler([&s, framing](const httplib::Request& req, httplib::Response& res) {
        const httplib::Server::HandlerResponse handled = framing(req, res);
        if (handled == httplib::Server::HandlerResponse::Handled) ++s.errors;
        return handled;
    });
    // A handler that throws answers 500 with a JSON body, and nothing of the exception's text.
    http.set_exception_handler([&s](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        ++s.errors;
        send_error(res, ApiError{500, "the server could not handle the request", "server_error", {}, {}});
    });
    // CORS: off unless origins are listed; then those origins (or "*") may call from a browser.
    if (!s.options.cors_origins.empty()) {
        const std::vector<std::string> origins = s.options.cors_origins;
        const auto allowed = [origins](const std::string& origin) {
            return std::any_of(origins.begin(), origins.end(),
                               [&](const std::string& o) { return o == "*" || o == origin; });
        };
        http.set_post_routing_handler([allowed](const httplib::Request& req, httplib::Response& res) {
            const std::string origin = req.get_header_value("Origin");
            if (origin.empty() || !allowed(origin)) return;
            res.set_header("Access-Control-Allow-Origin", origin);
            res.set_header("Vary", "Origin");
        });
        http.Options(R"(/.*)", [allowed](const httplib::Request& req, httplib::Response& res) {
            const std::string origin = req.get_header_value("Origin");
            if (origin.empty() || !allowed(origin)) {
                res.status = 403;
                return;
            }
            res.status = 204;
            res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
            res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
            res.set_header("Access-Control-Max-Age", "600");
        });
    }
    // {"status":"ok"}; after a device failed: recovering, degraded or failed (server_health.h).
    http.Get("/health", [&s](const httplib::Request&, httplib::Response& res) {
        if (!s.accepting) {
            res.status = 503;
            res.set_content(R"({"status":"stopping"})", "application/json");
            return;
        }
        auto [status, body] = s.health.report();
        if (const std::optional<State::Hold> hold = s.current_hold(); hold && body.value("status", "") == "ok") {
            body["status"] = "busy";
            body["message"] = hold->reason;
        }
        res.status = status;
        res.set_content(to_text(body), "application/json");
    });
    const auto model_object = [&s] {
        return json{{"id", s.model.id},
                    {"object", "model"},
                    {"created", static_cast<int64_t>(std::time(nullptr))},
                    {"owned_by", "powerhouse"}};
    };
    http.Get("/v1/models", [&s, model_object](const httplib::Request& req, httplib::Response& res) {
        if (!s.authorized(req, res)) return;
        const json out = {{"object", "list"}, {"data", json::array({model_object()})}};
        res.set_content(to_text(out), "application/json");
    });
    // OpenAI's "retrieve model": the served model, or 404 naming the one served. An id may
    // hold slashes ("org/name").
    http.Get(R"(/v1/models/(.+))", [&s, model_object](const httplib::Request& req, httplib::Response& res) {
        if (!s.authorized(req, res)) return;
        const std::string id = req.matches[1].str();
        if (id != s.model.id) {
            send_error(
                res,
                ApiError{404, fmt::format("the model '{}' does not exist; this server serves '{}'", id, s.model.id),
                         "invalid_request_error", std::string("model"), std::string("model_not_found")});
            return;
        }
        res.set_content(to_text(model_object()), "application/json");
    });
    using httplib::ContentReader;
    http.Post("/v1/chat/completions", [&s](const httplib::Request& req, httplib::Response& res,
                                           const ContentReader& reader) { s.answer(req, res, reader, true); });
    http.Post("/v1/completions", [&s](const httplib::Request& req, httplib::Response& res,
                                      const ContentReader& reader) { s.answer(req, res, reader, false); });
    http.Post("/v1/embeddings", [&s](const httplib::Request& req, httplib::Response& res, const ContentReader& reader) {
        s.embed(req, res, reader);
    });
    // A body sent anywhere else is read the same bounded way (the library would hold it
    // whole), then the path is refused: 404 from the error handler.
    const size_t limit = s.options.max_body_bytes;
    const auto elsewhere = [limit](const httplib::Request& req, httplib::Response& res, const ContentReader& reader) {
        read_body(req, res, reader, limit);
        res.status = 404;
    };
    http.Post(R"(.*)", elsewhere);
    http.Put(R"(.*)", elsewhere);
    http.Patch(R"(.*)", elsewhere);
    http.Delete(R"(.*)", elsewhere);
    http.Get("/metrics", [&s](const httplib::Request& req, httplib::Response& res) {
        if (!s.authorized(req, res)) return;
        res.set_content(s.metrics(), "text/plain; version=0.0.4");
    });
    // Statuses that the library sets itself (404 for a path, 413 for a body) get a JSON body.
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        if (res.status == 413) {
            send_error(res, ApiError{413, "the request body is too large", "invalid_request_error", std::nullopt,
                                     std::nullopt});
        } else if (res.status == 404) {
            send_error(res, ApiError{404, fmt::format("no such endpoint: {} {}", req.method, req.path),
                                     "invalid_request_error", std::nullopt, std::nullopt});
        } else if (res.status != 204) {
            // The library's own refusals come before any handler: say what it could not read.
            std::string message = "the request could not be handled";
            if (res.status == 400) {
                message =
                    "the request is not valid HTTP/1.1: check its request line (METHOD /path HTTP/1.1), "
                    "its header lines (Name: value, each ending in CRLF) and its body's framing";
            } else if (res.status == 414) {
                message = "the request's path is too long";
            } else if (res.status == 416) {
                message = "the Range header cannot be read or satisfied: leave it out";
            }
            send_error(res, ApiError{res.status, message, "invalid_request_error", std::nullopt, std::nullopt});
        }
    });
    // cpp-httplib's default sets SO_REUSEPORT too, which lets a second server take the same
    // port silently (the kernel then splits the connections): only SO_REUSEADDR here, so a
    // port in use is an error.
    http.set_socket_options([](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    const int port = s.options.port == 0 ? http.bind_to_any_port(s.options.host)
                                         : (http.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1);
    if (port < 0) {
        return make_error(ErrorCode::io,
                          fmt::format("cannot listen on {}:{} (is the port in use?)", s.options.host, s.options.port));
    }
    s.running = true;
    s.accepting = true;
    if (s.options.read_engine_events && !s.router.joinable()) {
        // Until the destructor: the requests that a stop cancels still get their last event.
        s.routing = true;
        s.router = std::thread([state = state_] { state->route(); });
    }
    // A stop() that came before the library listens would be lost (it ignores a server
    // not running yet): stop() waits for listening to begin, or for this to see the request.
    s.phase = State::Phase::bound;
    if (s.stop_requested) {
        s.phase = State::Phase::done;
        s.accepting = false;
        s.running = false;
        return {};
    }
    if (on_listening) on_listening(port);
    http.listen_after_bind();  // returns once stopped and every request has been answered
    s.phase = State::Phase::done;
    s.accepting = false;
    s.running = false;
    return {};
}

void ApiServer::hold(std::string reason, std::chrono::seconds retry_after) {
    const std::lock_guard lock(state_->hold_mutex);
    state_->held = State::Hold{std::move(reason), retry_after};
}

void ApiServer::release() {
    const std::lock_guard lock(state_->hold_mutex);
    state_->held.reset();
}

bool ApiServer::deliver(const EngineEvent& event) {
    return state_->deliver(event);
}

void ApiServer::stop(std::chrono::milliseconds grace) {
    State& s = *state_;
    s.stop_requested = true;
    s.accepting = false;
    while (s.phase == State::Phase::bound && !s.http.is_running()) std::this_thread::sleep_for(1ms);
    s.http.stop();
    if (grace <= 0ms) {
        s.running = false;
        s.cancel_all();
        return;
    }
    // Streams in flight may finish until the deadline; then they are cancelled.
    const std::lock_guard lock(s.stop_mutex);
    if (s.drainer.joinable()) return;
    s.drainer = std::thread([state = state_, grace] {
        const auto deadline = Clock::now() + grace;
        std::unique_lock wait(state->stop_mutex);
        while (!state->closing && state->in_flight.load() > 0 && Clock::now() < deadline) {
            state->stop_changed.wait_for(wait, 100ms);
        }
        state->running = false;
        state->cancel_all();
    });
}

}  // namespace powerhouse::server
