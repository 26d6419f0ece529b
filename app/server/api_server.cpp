#include "api_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

namespace powerhouse::server {

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A request's events, routed to it by the server's one reader of the engine's events.
struct Channel {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<EngineEvent> events;
};

// An OpenAI-style error: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::optional<std::string> param;
    std::optional<std::string> code;
};

json error_body(const ApiError& e) {
    return {{"error",
             {{"message", e.message},
              {"type", e.type},
              {"param", e.param ? json(*e.param) : json(nullptr)},
              {"code", e.code ? json(*e.code) : json(nullptr)}}}};
}

void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(error_body(e).dump(), "application/json");
}

// A 400 about `param` (empty: the body as a whole).
ApiError bad(std::string param, std::string message) {
    return ApiError{400, std::move(message), "invalid_request_error",
                    param.empty() ? std::nullopt : std::optional<std::string>(std::move(param)), std::nullopt};
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

// The text of a message's content: a string, or an array of {"type": "text", "text": ...}.
std::optional<std::string> content_text(const json& content) {
    if (content.is_string()) return content.get<std::string>();
    if (content.is_null()) return std::string();
    if (!content.is_array()) return std::nullopt;
    std::string text;
    for (const json& part : content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
            return std::nullopt;
        }
        text += part["text"].get<std::string>();
    }
    return text;
}

// A number field within [lo, hi], or the default when absent or null.
std::optional<ApiError> read_number(const json& body, const char* name, double lo, double hi, float& out) {
    if (!body.contains(name) || body[name].is_null()) return std::nullopt;
    if (!body[name].is_number()) return bad(name, fmt::format("'{}' must be a number", name));
    const double v = body[name].get<double>();
    if (!(v >= lo && v <= hi)) return bad(name, fmt::format("'{}' must be between {} and {}", name, lo, hi));
    out = static_cast<float>(v);
    return std::nullopt;
}

struct ChatRequest {
    std::vector<ChatMessage> messages;
    GenerationSettings settings;
    bool stream = false;
    bool include_usage = false;
};

// The request as the engine takes it, or what is wrong with it.
std::variant<ChatRequest, ApiError> parse_chat(const json& body, const std::string& model_id, uint32_t n_ctx) {
    if (!body.is_object()) return bad("", "the body must be a JSON object");
    if (!body.contains("model") || !body["model"].is_string()) return bad("model", "'model' must be a string");
    if (body["model"].get<std::string>() != model_id) {
        return ApiError{404, fmt::format("the model '{}' does not exist; this server serves '{}'",
                                         body["model"].get<std::string>(), model_id),
                        "invalid_request_error", std::string("model"), std::string("model_not_found")};
    }
    ChatRequest r;
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
        return bad("messages", "'messages' must be a non-empty array");
    }
    for (size_t i = 0; i < body["messages"].size(); ++i) {
        const json& m = body["messages"][i];
        const std::string where = fmt::format("messages[{}]", i);
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
            return bad(where, fmt::format("{} must be an object with a 'role'", where));
        }
        const std::string role = m["role"].get<std::string>();
        if (role != "system" && role != "user" && role != "assistant" && role != "developer") {
            return bad(where + ".role", fmt::format("{}: the role '{}' is not supported here (system, developer, user, "
                                                    "assistant)",
                                                    where, role));
        }
        const std::optional<std::string> text = content_text(m.contains("content") ? m["content"] : json(nullptr));
        if (!text) return bad(where + ".content", where + ".content must be a string or an array of text parts");
        r.messages.push_back({role == "developer" ? "system" : role, *text});
    }
    // What this server does not do yet is refused, never ignored.
    if (body.contains("tools") && !body["tools"].is_null() && !(body["tools"].is_array() && body["tools"].empty())) {
        return bad("tools", "tools are not supported by this server yet");
    }
    if (body.contains("response_format") && body["response_format"].is_object() &&
        body["response_format"].value("type", "text") != "text") {
        return bad("response_format", "only response_format {\"type\": \"text\"} is supported yet");
    }
    if (body.value("logprobs", false) == true) return bad("logprobs", "logprobs are not supported by this server yet");
    if (body.contains("n") && !body["n"].is_null() && body["n"] != 1) return bad("n", "'n' must be 1");

    int64_t max_tokens = 512;
    for (const char* name : {"max_tokens", "max_completion_tokens"}) {
        if (!body.contains(name) || body[name].is_null()) continue;
        if (!body[name].is_number_integer()) return bad(name, fmt::format("'{}' must be an integer", name));
        max_tokens = body[name].get<int64_t>();
        if (max_tokens < 1 || max_tokens > n_ctx) {
            return bad(name, fmt::format("'{}' must be between 1 and the context length, {}", name, n_ctx));
        }
    }
    r.settings.max_tokens = static_cast<int32_t>(max_tokens);
    SamplingParams& p = r.settings.sampling;
    p.temperature = 1.0f;  // OpenAI's default
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    if (auto e = read_number(body, "temperature", 0.0, 2.0, p.temperature)) return *e;
    if (auto e = read_number(body, "top_p", 0.0, 1.0, p.top_p)) return *e;
    if (auto e = read_number(body, "presence_penalty", -2.0, 2.0, p.presence_penalty)) return *e;
    if (auto e = read_number(body, "frequency_penalty", -2.0, 2.0, p.frequency_penalty)) return *e;
    if (body.contains("seed") && !body["seed"].is_null()) {
        if (!body["seed"].is_number_integer()) return bad("seed", "'seed' must be an integer");
        p.seed = static_cast<uint64_t>(body["seed"].get<int64_t>());
    }
    if (body.contains("stop") && !body["stop"].is_null()) {
        const json& stop = body["stop"];
        if (stop.is_string()) {
            r.settings.stop.push_back(stop.get<std::string>());
        } else if (stop.is_array() && stop.size() <= 4 &&
                   std::all_of(stop.begin(), stop.end(), [](const json& s) { return s.is_string(); })) {
            for (const json& s : stop) r.settings.stop.push_back(s.get<std::string>());
        } else {
            return bad("stop", "'stop' must be a string or an array of up to 4 strings");
        }
    }
    if (body.contains("stream") && !body["stream"].is_null()) {
        if (!body["stream"].is_boolean()) return bad("stream", "'stream' must be true or false");
        r.stream = body["stream"].get<bool>();
    }
    if (body.contains("stream_options") && body["stream_options"].is_object()) {
        const json& so = body["stream_options"];
        if (so.contains("include_usage")) {
            if (!so["include_usage"].is_boolean()) {
                return bad("stream_options.include_usage", "'include_usage' must be true or false");
            }
            r.include_usage = so["include_usage"].get<bool>();
        }
    }
    return r;
}

const char* finish_reason(StopReason reason) {
    switch (reason) {
        case StopReason::length:
        case StopReason::context:
            return "length";
        default:
            return "stop";
    }
}

ApiError engine_error(const Error& e) {
    switch (e.code) {
        case ErrorCode::invalid_argument:
        case ErrorCode::context_full:
        case ErrorCode::out_of_memory:
            return ApiError{400, e.message, "invalid_request_error", std::nullopt,
                            e.code == ErrorCode::context_full ? std::optional<std::string>("context_length_exceeded")
                                                              : std::nullopt};
        default:
            return ApiError{500, e.message, "server_error", std::nullopt, std::nullopt};
    }
}

}  // namespace

bool is_loopback(const std::string& host) {
    return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

struct ApiServer::State {
    Engine& engine;
    uint32_t n_ctx;
    ServerOptions options;
    httplib::Server http;
    std::atomic<bool> running{false};  // accepting; streams end when it drops
    std::atomic<bool> routing{false};  // the router reads events until the server is gone
    std::atomic<uint64_t> next_id{uint64_t{1} << 40};  // apart from other users of the engine
    std::atomic<int> in_flight{0};
    std::mutex channels_mutex;
    std::map<uint64_t, std::shared_ptr<Channel>> channels;
    std::thread router;

    State(Engine& e, uint32_t ctx, ServerOptions o) : engine(e), n_ctx(ctx), options(std::move(o)) {}

    // The one reader of the engine's events: each goes to the request it names.
    void route() {
        while (routing) {
            std::optional<EngineEvent> event = engine.wait_event(50ms);
            if (!event) continue;
            uint64_t id = 0;
            if (const auto* t = std::get_if<TokenEvent>(&*event)) id = t->request_id;
            if (const auto* d = std::get_if<DoneEvent>(&*event)) id = d->request_id;
            if (const auto* e = std::get_if<ErrorEvent>(&*event)) id = e->request_id;
            std::shared_ptr<Channel> channel;
            {
                const std::lock_guard lock(channels_mutex);
                auto it = channels.find(id);
                if (it != channels.end()) channel = it->second;
            }
            if (!channel) continue;
            {
                const std::lock_guard lock(channel->mutex);
                channel->events.push_back(std::move(*event));
            }
            channel->ready.notify_all();
        }
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

    bool authorized(const httplib::Request& req, httplib::Response& res) const {
        if (options.api_key.empty()) return true;
        const std::string header = req.get_header_value("Authorization");
        const std::string prefix = "Bearer ";
        if (header.rfind(prefix, 0) == 0 && same_key(header.substr(prefix.size()), options.api_key)) return true;
        send_error(res, ApiError{401, "a valid API key is needed: send 'Authorization: Bearer <key>'",
                                 "invalid_request_error", std::nullopt, std::string("invalid_api_key")});
        return false;
    }

    void chat(const httplib::Request& req, httplib::Response& res);
};

void ApiServer::State::chat(const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) {
        send_error(res, bad("", "the body is not valid JSON (or not valid UTF-8)"));
        return;
    }
    std::variant<ChatRequest, ApiError> parsed = parse_chat(body, options.model_id, n_ctx);
    if (const auto* e = std::get_if<ApiError>(&parsed)) {
        send_error(res, *e);
        return;
    }
    ChatRequest request = std::get<ChatRequest>(std::move(parsed));
    if (in_flight.fetch_add(1) >= options.max_waiting) {
        in_flight.fetch_sub(1);
        send_error(res, ApiError{429, fmt::format("the server is busy ({} requests in flight): try again shortly",
                                                  options.max_waiting),
                                 "rate_limit_error", std::nullopt, std::nullopt});
        return;
    }
    const uint64_t id = next_id.fetch_add(1);
    std::shared_ptr<Channel> channel = open(id);
    GenerateCommand command;
    command.request_id = id;
    command.messages = std::move(request.messages);
    command.settings = request.settings;
    engine.submit(std::move(command));
    const std::string completion_id = fmt::format("chatcmpl-{}", id);
    const auto created = static_cast<int64_t>(std::time(nullptr));
    const std::string model = options.model_id;

    // The next event for this request, waiting up to `timeout`.
    const auto next = [channel](std::chrono::milliseconds timeout) -> std::optional<EngineEvent> {
        std::unique_lock lock(channel->mutex);
        if (!channel->ready.wait_for(lock, timeout, [&] { return !channel->events.empty(); })) return std::nullopt;
        EngineEvent e = std::move(channel->events.front());
        channel->events.pop_front();
        return e;
    };
    const auto usage_of = [](const DoneEvent& d) {
        const auto prompt = static_cast<int64_t>(d.prompt_ids.size());
        const auto completion = static_cast<int64_t>(d.generated_ids.size());
        return json{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
    };

    if (!request.stream) {
        for (;;) {
            std::optional<EngineEvent> e = next(1000ms);
            if (!e) continue;
            if (const auto* d = std::get_if<DoneEvent>(&*e)) {
                const json out = {{"id", completion_id},
                                  {"object", "chat.completion"},
                                  {"created", created},
                                  {"model", model},
                                  {"choices",
                                   json::array({{{"index", 0},
                                                 {"message", {{"role", "assistant"}, {"content", d->text}}},
                                                 {"logprobs", nullptr},
                                                 {"finish_reason", finish_reason(d->stats.stop_reason)}}})},
                                  {"usage", usage_of(*d)}};
                res.set_content(out.dump(), "application/json");
                break;
            }
            if (const auto* err = std::get_if<ErrorEvent>(&*e)) {
                send_error(res, engine_error(err->error));
                break;
            }
        }
        close(id);
        in_flight.fetch_sub(1);
        return;
    }

    // Streaming: one chunk per piece of text, then the finish reason, the usage when asked,
    // and [DONE]. A client that stops reading cancels the generation.
    struct Stream {
        bool started = false;
        bool finished = false;
    };
    auto stream = std::make_shared<Stream>();
    const bool include_usage = request.include_usage;
    const auto chunk = [=](json delta, json reason) {
        json c = {{"id", completion_id},
                  {"object", "chat.completion.chunk"},
                  {"created", created},
                  {"model", model},
                  {"choices", json::array({{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr},
                                            {"finish_reason", std::move(reason)}}})}};
        if (include_usage) c["usage"] = nullptr;
        return "data: " + c.dump() + "\n\n";
    };
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [=, this](size_t, httplib::DataSink& sink) {
            if (!stream->started) {
                stream->started = true;
                const std::string first = chunk({{"role", "assistant"}, {"content", ""}}, nullptr);
                if (!sink.write(first.data(), first.size())) return false;
            }
            for (;;) {
                if (!sink.is_writable() || !running) return false;  // the client is gone, or the server stops
                std::optional<EngineEvent> e = next(100ms);
                if (!e) continue;
                std::string out;
                if (const auto* t = std::get_if<TokenEvent>(&*e)) {
                    out = chunk({{"content", t->text}}, nullptr);
                } else if (const auto* d = std::get_if<DoneEvent>(&*e)) {
                    out = chunk(json::object(), finish_reason(d->stats.stop_reason));
                    if (include_usage) {
                        const json u = {{"id", completion_id},     {"object", "chat.completion.chunk"},
                                        {"created", created},      {"model", model},
                                        {"choices", json::array()}, {"usage", usage_of(*d)}};
                        out += "data: " + u.dump() + "\n\n";
                    }
                    out += "data: [DONE]\n\n";
                    stream->finished = true;
                } else if (const auto* err = std::get_if<ErrorEvent>(&*e)) {
                    out = "data: " + error_body(engine_error(err->error)).dump() + "\n\ndata: [DONE]\n\n";
                    stream->finished = true;
                } else {
                    continue;
                }
                if (!sink.write(out.data(), out.size())) return false;
                if (stream->finished) {
                    sink.done();
                    return true;
                }
            }
        },
        [=, this](bool) {
            // Ended or aborted: a generation still running is cancelled (within one step).
            if (!stream->finished) {
                engine.submit(CancelCommand{id});
                // Its DoneEvent may still come; the channel goes first, so it is dropped.
            }
            close(id);
            in_flight.fetch_sub(1);
        });
}

ApiServer::ApiServer(Engine& engine, uint32_t n_ctx, ServerOptions options)
    : state_(std::make_shared<State>(engine, n_ctx, std::move(options))) {}

ApiServer::~ApiServer() {
    stop();
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
    http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(R"({"status":"ok"})", "application/json");
    });
    http.Get("/v1/models", [&s](const httplib::Request& req, httplib::Response& res) {
        if (!s.authorized(req, res)) return;
        const json out = {{"object", "list"},
                          {"data", json::array({{{"id", s.options.model_id},
                                                 {"object", "model"},
                                                 {"created", static_cast<int64_t>(std::time(nullptr))},
                                                 {"owned_by", "powerhouse"}}})}};
        res.set_content(out.dump(), "application/json");
    });
    http.Post("/v1/chat/completions",
              [&s](const httplib::Request& req, httplib::Response& res) { s.chat(req, res); });
    // Statuses that the library sets itself (404 for a path, 413 for a body) get a JSON body.
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        if (res.status == 413) {
            send_error(res, ApiError{413, "the request body is too large", "invalid_request_error", std::nullopt,
                                     std::nullopt});
        } else if (res.status == 404) {
            send_error(res, ApiError{404, fmt::format("no such endpoint: {} {}", req.method, req.path),
                                     "invalid_request_error", std::nullopt, std::nullopt});
        } else {
            send_error(res, ApiError{res.status, "the request could not be handled", "invalid_request_error",
                                     std::nullopt, std::nullopt});
        }
    });
    const int port = s.options.port == 0 ? http.bind_to_any_port(s.options.host)
                                         : (http.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1);
    if (port < 0) {
        return make_error(ErrorCode::io, fmt::format("cannot listen on {}:{} (is the port in use?)", s.options.host,
                                                     s.options.port));
    }
    s.running = true;
    // Until the destructor: the requests that a stop cancels still get their last event.
    s.routing = true;
    s.router = std::thread([state = state_] { state->route(); });
    if (on_listening) on_listening(port);
    http.listen_after_bind();
    s.running = false;
    return {};
}

void ApiServer::stop() {
    State& s = *state_;
    s.running = false;
    s.http.stop();
    s.engine.submit(CancelCommand{0});
}

}  // namespace powerhouse::server
