// An OpenAI-compatible HTTP API over the engine (issue 19): GET /health, GET /v1/models and
// POST /v1/chat/completions, streaming as server-sent events or not, on cpp-httplib. Each
// request is a GenerateCommand of the engine, so requests from many clients are batched
// together (powerhouse/scheduler.h); a client that goes away cancels its generation.
//
// Safe by default: serve() refuses a non-loopback address without an API key; keys are
// compared in constant time and never logged; bodies are limited; every field the server
// reads is validated, and a bad request gets an OpenAI-style error object with its status.
//
// Thread-safety: serve() blocks its thread; stop() may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "powerhouse/engine.h"
#include "powerhouse/result.h"

namespace powerhouse::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;                    // 0: any free port (port() says which)
    std::string api_key;                // empty: none (only on a loopback address)
    std::string model_id;               // the name /v1/models lists and requests must use
    size_t max_body_bytes = 8u << 20;   // 413 past this
    int max_waiting = 64;               // requests in flight beyond which new ones get 429
    int io_timeout_seconds = 30;        // a client that sends or reads nothing for this long is dropped
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
    // Stops accepting; requests in flight are cancelled and end at the next step.
    void stop();

    struct State;

private:
    std::shared_ptr<State> state_;
};

}  // namespace powerhouse::server
