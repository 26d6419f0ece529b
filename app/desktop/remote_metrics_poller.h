// Reads the Prometheus endpoints of remote machines (the DCGM exporter, vLLM's or a Powerhouse
// server's /metrics) every interval, never on the GUI thread, and hands each reading, or why
// there is none, to a callback. Each round reads every source at once, one thread per source,
// so a source that does not answer (it costs at most its timeouts, a few seconds) delays no
// other; the next round starts an interval after this one started, or when the last fetch
// ends if that is later. stop() cancels the fetches under way.
//
// Thread-safety: setSources, stop and the destructor may be called from any thread; the
// callback runs on the fetching threads, several at once, and must be quick and thread-safe
// (the app posts to the GUI thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "remote/prometheus.h"

struct MetricsSource {
    std::string name;  // the endpoint's display name
    std::string url;   // as the user gave it ("/metrics" added when it has no path)
    std::string caFile;
    // Sent as "Authorization: Bearer": the endpoint's key, given only when the metrics URL is
    // on the endpoint's own server (remote::same_origin). Never logged.
    std::string apiKey;
    bool operator==(const MetricsSource&) const = default;
};

struct MetricsReading {
    MetricsSource source;
    std::string url;                                         // normalised
    std::optional<powerhouse::remote::PrometheusText> text;  // nullopt: `error` says why
    std::string error;
    double time = 0;  // seconds since the poller was made (a steady clock)
};

class RemoteMetricsPoller {
public:
    using Callback = std::function<void(MetricsReading)>;
    RemoteMetricsPoller(std::chrono::milliseconds interval, Callback callback);
    ~RemoteMetricsPoller();
    RemoteMetricsPoller(const RemoteMetricsPoller&) = delete;
    RemoteMetricsPoller& operator=(const RemoteMetricsPoller&) = delete;

    // The sources read from the next round on (the first round starts at once); the thread
    // starts with the first non-empty list.
    void setSources(std::vector<MetricsSource> sources);
    void stop();

private:
    void run();
    MetricsReading read(const MetricsSource& source);

    const std::chrono::milliseconds m_interval;
    const Callback m_callback;
    const std::chrono::steady_clock::time_point m_start = std::chrono::steady_clock::now();
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::vector<MetricsSource> m_sources;  // guarded by m_mutex
    bool m_stop = false, m_changed = false;
    std::thread m_thread;
};
