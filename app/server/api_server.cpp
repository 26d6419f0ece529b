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

// A chat request (messages) or a text completion (raw prompt), as the engine takes it.
struct GenRequest {
    std::vector<ChatMessage> messages;
    std::optional<std::string> prompt;
    GenerationSettings settings;
    bool stream = false;
    bool include_usage = false;
};

std::optional<ApiError> check_model(const json& body, const std::string& model_id) {
    if (!body.is_object()) return bad("", "the body must be a JSON object");
    if (!body.contains("model") || !body["model"].is_string()) return bad("model", "'model' must be a string");
    if (body["model"].get<std::string>() != model_id) {
        return ApiError{404, fmt::format("the model '{}' does not exist; this server serves '{}'",
                                         body["model"].get<std::string>(), model_id),
                        "invalid_request_error", std::string("model"), std::string("model_not_found")};
    }
    return std::nullopt;
}

std::optional<ApiError> parse_options(const json& body, uint32_t n_ctx, int64_t default_max_tokens, GenRequest& r);

// A chat request, or what is wrong with it.
std::variant<GenRequest, ApiError> parse_chat(const json& body, const std::string& model_id, uint32_t n_ctx) {
    if (auto e = check_model(body, model_id)) return *e;
    GenRequest r;
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
    if (body.contains("logprobs") && body["logprobs"] == true) {
        return bad("logprobs", "logprobs are not supported by this server yet");
    }
    if (auto e = parse_options(body, n_ctx, 512, r)) return *e;
    return r;
}

// A text completion (the prompt tokenized with its special tokens, as llama-server does), or
// what is wrong with it.
std::variant<GenRequest, ApiError> parse_completion(const json& body, const std::string& model_id, uint32_t n_ctx) {
    if (auto e = check_model(body, model_id)) return *e;
    GenRequest r;
    if (!body.contains("prompt")) return bad("prompt", "'prompt' is required");
    const json& prompt = body["prompt"];
    if (prompt.is_string()) {
        r.prompt = prompt.get<std::string>();
    } else if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) {
        r.prompt = prompt[0].get<std::string>();
    } else {
        return bad("prompt", "'prompt' must be a string (one prompt; token arrays are not supported yet)");
    }
    if (r.prompt->empty()) return bad("prompt", "'prompt' is empty");
    if (body.contains("echo") && body["echo"] == true) return bad("echo", "echo is not supported by this server yet");
    if (body.contains("suffix") && !body["suffix"].is_null()) {
        return bad("suffix", "suffix is not supported by this server yet");
    }
    if (body.contains("logprobs") && !body["logprobs"].is_null() && body["logprobs"] != 0) {
        return bad("logprobs", "logprobs are not supported by this server yet");
    }
    if (body.contains("best_of") && !body["best_of"].is_null() && body["best_of"] != 1) {
        return bad("best_of", "'best_of' must be 1");
    }
    if (auto e = parse_options(body, n_ctx, 16, r)) return *e;  // OpenAI's default for completions
    return r;
}

// The sampling, length, stop and stream fields both endpoints share.
std::optional<ApiError> parse_options(const json& body, uint32_t n_ctx, int64_t default_max_tokens, GenRequest& r) {
    if (body.contains("n") && !body["n"].is_null() && body["n"] != 1) return bad("n", "'n' must be 1");
    int64_t max_tokens = default_max_tokens;
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
    return std::nullopt;
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
            if (const auto* st = std::get_if<SchedulerEvent>(&*event)) {
                const std::lock_guard lock(stats_mutex);
                scheduler = st->stats;
                continue;
            }
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

    // Counters for /metrics.
    std::atomic<uint64_t> requests[2] = {0, 0};  // chat, text completions
    std::atomic<uint64_t> errors{0};
    std::atomic<uint64_t> prompt_tokens{0}, generated_tokens{0};
    std::mutex stats_mutex;
    SchedulerStats scheduler;  // the engine's last SchedulerEvent

    // POST /v1/chat/completions (chat) or /v1/completions.
    void answer(const httplib::Request& req, httplib::Response& res, bool chat);
    std::string metrics();
};

void ApiServer::State::answer(const httplib::Request& req, httplib::Response& res, bool chat) {
    ++requests[chat ? 0 : 1];
    if (!authorized(req, res)) {
        ++errors;
        return;
    }
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) {
        ++errors;
        send_error(res, bad("", "the body is not valid JSON (or not valid UTF-8)"));
        return;
    }
    std::variant<GenRequest, ApiError> parsed =
        chat ? parse_chat(body, options.model_id, n_ctx) : parse_completion(body, options.model_id, n_ctx);
    if (const auto* e = std::get_if<ApiError>(&parsed)) {
        ++errors;
        send_error(res, *e);
        return;
    }
    GenRequest request = std::get<GenRequest>(std::move(parsed));
    if (in_flight.fetch_add(1) >= options.max_waiting) {
        in_flight.fetch_sub(1);
        ++errors;
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
    command.raw_prompt = std::move(request.prompt);
    command.settings = request.settings;
    engine.submit(std::move(command));
    const std::string completion_id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", id);
    const char* object = chat ? "chat.completion" : "text_completion";
    const char* chunk_object = chat ? "chat.completion.chunk" : "text_completion";
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
    const auto usage_of = [this](const DoneEvent& d) {
        const auto prompt = static_cast<int64_t>(d.prompt_ids.size());
        const auto completion = static_cast<int64_t>(d.generated_ids.size());
        prompt_tokens += static_cast<uint64_t>(prompt);
        generated_tokens += static_cast<uint64_t>(completion);
        return json{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
    };

    if (!request.stream) {
        for (;;) {
            std::optional<EngineEvent> e = next(1000ms);
            if (!e) continue;
            if (const auto* d = std::get_if<DoneEvent>(&*e)) {
                json choice = {{"index", 0}, {"logprobs", nullptr},
                               {"finish_reason", finish_reason(d->stats.stop_reason)}};
                if (chat) {
                    choice["message"] = {{"role", "assistant"}, {"content", d->text}};
                } else {
                    choice["text"] = d->text;
                }
                const json out = {{"id", completion_id},
                                  {"object", object},
                                  {"created", created},
                                  {"model", model},
                                  {"choices", json::array({std::move(choice)})},
                                  {"usage", usage_of(*d)}};
                res.set_content(out.dump(), "application/json");
                break;
            }
            if (const auto* err = std::get_if<ErrorEvent>(&*e)) {
                ++errors;
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
    // A chat chunk carries a delta; a text completion's chunk its text.
    const auto chunk = [=](json delta, json reason) {
        json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", std::move(reason)}};
        if (chat) {
            choice["delta"] = std::move(delta);
        } else {
            choice["text"] = delta.value("content", "");
        }
        json c = {{"id", completion_id},
                  {"object", chunk_object},
                  {"created", created},
                  {"model", model},
                  {"choices", json::array({std::move(choice)})}};
        if (include_usage) c["usage"] = nullptr;
        return "data: " + c.dump() + "\n\n";
    };
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [=, this](size_t, httplib::DataSink& sink) {
            if (!stream->started && chat) {
                const std::string first = chunk({{"role", "assistant"}, {"content", ""}}, nullptr);
                if (!sink.write(first.data(), first.size())) return false;
            }
            stream->started = true;
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
                        const json u = {{"id", completion_id},     {"object", chunk_object},
                                        {"created", created},      {"model", model},
                                        {"choices", json::array()}, {"usage", usage_of(*d)}};
                        out += "data: " + u.dump() + "\n\n";
                    }
                    out += "data: [DONE]\n\n";
                    stream->finished = true;
                } else if (const auto* err = std::get_if<ErrorEvent>(&*e)) {
                    ++errors;
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

// Prometheus text format (version 0.0.4).
std::string ApiServer::State::metrics() {
    SchedulerStats st;
    {
        const std::lock_guard lock(stats_mutex);
        st = scheduler;
    }
    std::string out;
    const auto metric = [&](const char* name, const char* type, const char* help, const std::string& samples) {
        out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}", name, help, name, type, samples);
    };
    metric("powerhouse_requests_total", "counter", "Generation requests received, by endpoint.",
           fmt::format("powerhouse_requests_total{{endpoint=\"chat\"}} {}\n"
                       "powerhouse_requests_total{{endpoint=\"completions\"}} {}\n",
                       requests[0].load(), requests[1].load()));
    metric("powerhouse_request_errors_total", "counter", "Requests answered with an error.",
           fmt::format("powerhouse_request_errors_total {}\n", errors.load()));
    metric("powerhouse_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
           fmt::format("powerhouse_prompt_tokens_total {}\n", prompt_tokens.load()));
    metric("powerhouse_generated_tokens_total", "counter", "Tokens generated for finished requests.",
           fmt::format("powerhouse_generated_tokens_total {}\n", generated_tokens.load()));
    metric("powerhouse_requests_in_flight", "gauge", "Requests being answered or waiting.",
           fmt::format("powerhouse_requests_in_flight {}\n", in_flight.load()));
    metric("powerhouse_sequences_running", "gauge", "Sequences the engine is generating.",
           fmt::format("powerhouse_sequences_running {}\n", st.running));
    metric("powerhouse_sequences_waiting", "gauge", "Requests waiting for a sequence or KV blocks.",
           fmt::format("powerhouse_sequences_waiting {}\n", st.waiting));
    metric("powerhouse_kv_blocks", "gauge", "KV cache blocks: in use (by sequences or cached prefixes) and in all.",
           fmt::format("powerhouse_kv_blocks{{state=\"used\"}} {}\npowerhouse_kv_blocks{{state=\"total\"}} {}\n",
                       st.kv.total_blocks - st.kv.free_blocks, st.kv.total_blocks));
    return out;
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
              [&s](const httplib::Request& req, httplib::Response& res) { s.answer(req, res, true); });
    http.Post("/v1/completions",
              [&s](const httplib::Request& req, httplib::Response& res) { s.answer(req, res, false); });
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
