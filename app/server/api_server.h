// An OpenAI-compatible HTTP API over the engine (issue 19) on cpp-httplib: GET /health,
// GET /v1/models, POST /v1/chat/completions and /v1/completions (streaming as server-sent
// events or not; logprobs; tools with the model's own tool-call format; a reasoning model's
// thinking as `reasoning_content`; response_format json_object and json_schema, and
// llama.cpp's `grammar` field, by constrained sampling), GET /metrics for Prometheus. Each
// request is a GenerateCommand of the engine, so requests from many clients are batched
// together (powerhouse/scheduler.h); a client that goes away cancels its generation.
// Request parsing is in requests.h, the shapes of the answers in replies.h.
//
// When a device fails mid-answer the engine recovers by itself (its RecoveryPolicy): the
// answers in flight pause while the model loads again and then go on, streams kept open by
// SSE comments; /health and /metrics say what happened, and while no model can answer,
// requests get 503 with the reason (server_health.h). The owner may hold new requests off
// for a while (hold()), with the reason in the 503 and in /health.
//
// Safe by default: serve() refuses a non-loopback address without an API key; keys are
// compared in constant time and never logged; bodies are limited; every field the server
// reads is validated, and a bad request gets an OpenAI-style error object with its status.
//
// Thread-safety: serve() blocks its thread; stop() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "powerhouse/engine.h"
#include "powerhouse/result.h"
#include "powerhouse/telemetry.h"
#include "powerhouse/tool_calls.h"

namespace powerhouse::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;                   // 0: any free port (port() says which)
    std::string api_key;               // empty: none (only on a loopback address)
    std::string model_id;              // the name /v1/models lists and requests must use
    uint32_t n_vocab = 0;              // the model's vocabulary size: logit_bias's ids are checked against it
    size_t max_body_bytes = 8u << 20;  // 413 past this
    int max_waiting = 64;              // requests in flight beyond which new ones get 429
    int io_timeout_seconds = 30;       // a client that sends or reads nothing for this long is dropped
    // True: the server is the engine's one reader of events (powerhouse-cli serve). False:
    // the owner reads them (the desktop app, which chats on the same engine) and hands every
    // one to deliver().
    bool read_engine_events = true;
    // How the model writes tool calls: ModelSummary::tool_format of the model served.
    ToolCallFormat tool_format = ToolCallFormat::generic;
    // Speculative decoding by prompt lookup for every request (GenerationSettings::lookup);
    // a request's "speculative.n_max" (llama.cpp's server field) overrides max_draft.
    LookupSettings lookup;
    // Each GPU's load, temperature, memory and power for /metrics (a GpuMonitor's snapshot);
    // unset: no GPU metrics.
    std::function<TelemetrySnapshot()> telemetry;
    // Origins a browser page may call the API from ("*": any). Empty: CORS is off.
    std::vector<std::string> cors_origins;
    // Called with each RecoveryEvent the server sees, on the thread that hands it the engine's
    // events (for a log: powerhouse-cli serve prints them). It must be quick.
    std::function<void(const RecoveryEvent&)> on_recovery;
};

// Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost).
bool is_loopback(const std::string& host);

class ApiServer {
public:
    // `engine` has the model loaded; `n_ctx` bounds max_tokens.
    ApiServer(Engine& engine, uint32_t n_ctx, ServerOptions options);
    ~ApiServer();
    ApiServer(const ApiServer&) = delete;
    ApiServer& operator=(const ApiServer&) = delete;

    // Binds, calls `on_listening(port)` once it accepts, and serves until stop(). Fails
    // (without serving) for a public address without an API key, or a port in use.
    Result<void> serve(const std::function<void(int port)>& on_listening = {});
    // Stops accepting (new requests get 503, /health says "stopping"). Requests in flight may
    // finish for `grace`; then they are cancelled and end at their next step. serve()
    // returns once every request has been answered.
    void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

    // While held, new completion requests get 503 with `reason` (and Retry-After when
    // `retry_after` is positive) and /health says "busy" with the reason; requests already in
    // flight go on. For the owner's exclusive work on the same engine: the desktop app's
    // efficiency sweep, which other requests sharing the GPUs would skew. Any thread.
    void hold(std::string reason, std::chrono::seconds retry_after = std::chrono::seconds(0));
    void release();

    // The server's request ids are kFirstRequestId and up; an owner that submits its own
    // generations to the same engine keeps its ids below.
    static constexpr uint64_t kFirstRequestId = uint64_t{1} << 40;
    static bool owns_request(uint64_t request_id) { return request_id >= kFirstRequestId; }
    // With read_engine_events false: an event the owner read from the engine. True when it
    // was one of the server's requests' (the owner should then ignore it); scheduler and
    // recovery events (and an unload, which only a failed device causes while a server
    // runs) are recorded and left to the owner too. Any thread.
    bool deliver(const EngineEvent& event);

    struct State;
    struct Channel;  // one request's events (api_server.cpp)

private:
    std::shared_ptr<State> state_;
};

}  // namespace powerhouse::server
