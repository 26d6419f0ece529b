#include "remote_metrics_poller.h"

#include "remote/remote_engine.h"
#include "remote/remote_url.h"

RemoteMetricsPoller::RemoteMetricsPoller(std::chrono::milliseconds interval, Callback callback)
    : m_interval(interval), m_callback(std::move(callback)) {}

RemoteMetricsPoller::~RemoteMetricsPoller() {
    stop();
}

void RemoteMetricsPoller::setSources(std::vector<MetricsSource> sources) {
    std::lock_guard lock(m_mutex);
    if (m_stop) return;
    m_sources = std::move(sources);
    m_changed = true;
    if (!m_thread.joinable() && !m_sources.empty()) m_thread = std::thread([this] { run(); });
    m_wake.notify_all();
}

void RemoteMetricsPoller::stop() {
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
        m_wake.notify_all();
    }
    if (m_thread.joinable()) m_thread.join();
}

MetricsReading RemoteMetricsPoller::read(const MetricsSource& source) {
    MetricsReading reading;
    reading.source = source;
    auto url = powerhouse::remote::normalize_metrics_url(source.url);
    if (!url) {
        reading.url = source.url;
        reading.error = url.error().message;
    } else {
        reading.url = *url;
        powerhouse::remote::ConnectionOptions options;
        options.ca_file = source.caFile;
        options.api_key = source.apiKey;
        options.connect_timeout = std::chrono::seconds(3);
        options.first_byte_timeout = std::chrono::seconds(5);
        options.idle_timeout = std::chrono::seconds(5);
        auto text = powerhouse::remote::fetch_metrics(*url, options, [this] {
            std::lock_guard lock(m_mutex);
            return m_stop;
        });
        if (text) {
            reading.text = std::move(text).value();
        } else {
            reading.error = text.error().message;
        }
    }
    reading.time = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    return reading;
}

void RemoteMetricsPoller::run() {
    for (;;) {
        std::vector<MetricsSource> sources;
        {
            std::lock_guard lock(m_mutex);
            if (m_stop) return;
            sources = m_sources;
            m_changed = false;
        }
        const auto round = std::chrono::steady_clock::now();
        std::vector<std::thread> fetches;
        fetches.reserve(sources.size());
        for (const MetricsSource& source : sources) {
            fetches.emplace_back([this, &source] {
                MetricsReading reading = read(source);
                {
                    std::lock_guard lock(m_mutex);
                    if (m_stop) return;
                }
                m_callback(std::move(reading));
            });
        }
        for (std::thread& fetch : fetches) fetch.join();
        std::unique_lock lock(m_mutex);
        m_wake.wait_until(lock, round + m_interval, [this] { return m_stop || m_changed; });
        if (m_stop) return;
    }
}
