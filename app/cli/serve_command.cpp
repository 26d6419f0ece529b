// powerhouse-cli serve [-m MODEL] [--host 127.0.0.1] [--port 8080] [--api-key-file FILE]
//                      [--parallel N] [--cors-origin ORIGIN]... [--shutdown-grace SECONDS]
//                      [--io-timeout SECONDS] [--on-device-failure replan|retry|stop]
//                      [--step-deadline SECONDS] [--lookup-draft N] [--draft-model FILE]
//                      [--draft-tokens N] [--guess-always]
//                      [--ctx N] [-t THREADS] [--devices ...] [--split ...] [--chat-template FILE]
//
// Serves the model over the OpenAI API (app/server/api_server.h) until SIGINT or SIGTERM:
// loads it on the engine thread, prints "serving MODEL on http://HOST:PORT" once it
// accepts (PORT is the one bound when --port 0 asks for any free one). On a signal it stops
// accepting, lets the answers in flight finish for --shutdown-grace seconds, cancels what
// is left, and exits. A non-loopback --host needs an API key. /metrics carries the GPUs'
// telemetry (NVML, or POWERHOUSE_SIMULATE_GPUS). When a device fails (a step's error, no
// answer within --step-deadline, or the monitor's word that a GPU is lost), the engine
// carries on as --on-device-failure says: each banner is printed on stderr, and /health
// and /metrics show it (app/server/server_health.h). --chat-template FILE replaces the model's
// chat template for every request (the tool format is then read from it).
#include <fmt/format.h>
#include <signal.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "engine_answer.h"
#include "format.h"
#include "generation.h"
#include "powerhouse/engine.h"
#include "powerhouse/telemetry.h"

#ifdef POWERHOUSE_HAS_SERVER
#include "api_server.h"
#endif

namespace powerhouse::cli {
namespace {

struct ServeOptions {
    ModelChoice model;
    std::string host = "127.0.0.1";
    int port = 8080;
    std::string api_key_file;
    uint32_t parallel = 4;
    std::vector<std::string> cors_origins;
    double shutdown_grace = 10.0;
    int io_timeout = 30;
    LookupSettings lookup;
};

#ifdef POWERHOUSE_HAS_SERVER

// The driver's word on a GPU (lost, or a fatal Xid) goes to the engine, which moves the
// model off it at once (DeviceFailedCommand), rather than when a step first fails there.
// Each GPU once. The monitor must go before the engine.
void watch_gpu_failures(GpuMonitor& monitor, Engine& engine) {
    struct Reported {
        std::mutex mutex;
        std::set<std::string> uuids;
    };
    auto reported = std::make_shared<Reported>();
    monitor.subscribe([&engine, reported](const TelemetrySnapshot& t) {
        const std::lock_guard lock(reported->mutex);
        for (size_t i = 0; i < t.gpus.size() && i < t.latest.size(); ++i) {
            const GpuSample& sample = t.latest[i];
            if (!gpu_failed(sample) || !reported->uuids.insert(t.gpus[i].uuid).second) continue;
            DeviceFailedCommand failed;
            failed.uuid = t.gpus[i].uuid;
            failed.cause = sample.last_fatal_xid ? fmt::format("Xid {}, {}", sample.last_fatal_xid->xid,
                                                               sample.last_fatal_xid->description)
                                                 : std::string("the driver reports it lost");
            failed.stopped_answering = sample.lost;
            engine.submit(std::move(failed));
        }
    });
}

int run_serve(const ServeOptions& options) {
    server::ServerOptions so;
    so.host = options.host;
    so.port = options.port;
    if (!options.api_key_file.empty()) {
        Result<std::string> key = read_api_key_file(options.api_key_file);
        if (!key) return report_error(key.error());
        so.api_key = *key;
    }
    if (!server::is_loopback(so.host) && so.api_key.empty()) {
        return report_error(make_error(ErrorCode::invalid_argument,
                                       fmt::format("serving on {} lets other machines use the model: give an API key "
                                                   "with --api-key-file, or serve on 127.0.0.1",
                                                   so.host)));
    }
    Result<ModelToLoad> to_load = resolve_model(options.model);
    if (!to_load) return report_error(to_load.error());
    to_load->options.max_sequences = options.parallel;

    // SIGINT and SIGTERM go to one thread that stops the server; every other thread blocks
    // them (the mask is inherited, so it is set before any thread starts).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    Engine engine;
    engine.submit(to_load->load_command());
    ModelSummary loaded;
    if (!wait_loaded(engine, false, loaded)) return 1;
    so.model_id = to_load->path.stem().string();
    so.n_vocab = loaded.n_vocab;
    so.tool_format = loaded.tool_format;
    so.cors_origins = options.cors_origins;
    so.io_timeout_seconds = options.io_timeout;
    so.lookup = options.lookup;
    so.on_recovery = print_recovery;
    GpuMonitor monitor(options_from_environment());  // after the engine: destroyed before it
    watch_gpu_failures(monitor, engine);
    monitor.start();
    so.telemetry = [&monitor] { return monitor.snapshot(); };
    server::ApiServer api(engine, loaded.n_ctx, so);
    std::thread waiter([&] {
        int signal = 0;
        sigwait(&signals, &signal);
        api.stop(std::chrono::milliseconds(static_cast<int64_t>(options.shutdown_grace * 1000)));
    });
    Result<void> served = api.serve([&](int port) {
        std::printf("serving %s on http://%s:%d\n", so.model_id.c_str(), so.host.c_str(), port);
        std::fflush(stdout);
    });
    if (!served) {
        pthread_kill(waiter.native_handle(), SIGTERM);  // release the waiter
        waiter.join();
        return report_error(served.error());
    }
    waiter.join();
    return 0;
}

#else

int run_serve(const ServeOptions&) {
    return report_error(
        make_error(ErrorCode::unsupported, "this build has no API server: it needs cpp-httplib (libcpp-httplib-dev)"));
}

#endif

}  // namespace

Command add_serve_command(CLI::App& app) {
    auto options = std::make_shared<ServeOptions>();
    CLI::App* sub = app.add_subcommand("serve", "Serve the model over the OpenAI API (chat completions)");
    add_model_options(*sub, options->model);
    add_failure_options(*sub, options->model.failure);
    add_chat_template_option(*sub, options->model);
    add_draft_options(*sub, options->model);
    sub->add_option("--host", options->host, "Address to listen on (not loopback: needs --api-key-file)")
        ->capture_default_str();
    sub->add_option("--port", options->port, "Port; 0: any free one")
        ->capture_default_str()
        ->check(CLI::Range(0, 65535));
    sub->add_option("--api-key-file", options->api_key_file,
                    "File holding the key clients must send as a bearer token");
    sub->add_option("--parallel", options->parallel, "Requests generated at once")
        ->capture_default_str()
        ->check(CLI::Range(1u, 64u));
    sub->add_option("--cors-origin", options->cors_origins,
                    "An origin (https://app.example) whose web pages may call the API; \"*\": any. Repeatable; "
                    "none: CORS is off");
    sub->add_option("--io-timeout", options->io_timeout,
                    "Seconds a client may stay silent while sending its request or not read its answer")
        ->capture_default_str()
        ->check(CLI::Range(1, 3600));
    sub->add_option("--shutdown-grace", options->shutdown_grace,
                    "Seconds the answers in flight may take to finish after SIGTERM")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 3600.0));
    add_lookup_option(*sub, options->lookup);
    return {sub, [options] { return run_serve(*options); }};
}

}  // namespace powerhouse::cli
