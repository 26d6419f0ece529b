#include "remote/remote_gpus.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <span>
#include <utility>

namespace powerhouse::remote {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// DCGM's "no reading" values (dcgm_structs.h: DCGM_INT32_BLANK 0x7ffffff0, DCGM_INT64_BLANK
// 0x7ffffffffffffff0, DCGM_FP64_BLANK 140737488355328.0), and the codes just above them.
constexpr double kDcgmInt32Blank = 2147483632.0;
constexpr double kDcgmFp64Blank = 140737488355328.0;
constexpr double kDcgmInt64Blank = 9223372036854775792.0;

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}

uint32_t parse_index(std::string_view text) {
    uint32_t value = 0;
    std::from_chars(text.data(), text.data() + text.size(), value);
    return value;
}

std::optional<uint32_t> percent(double v) {
    if (!std::isfinite(v) || v < 0) return std::nullopt;
    return static_cast<uint32_t>(std::lround(std::min(v, 100.0)));
}

std::optional<uint32_t> whole(double v) {
    if (!std::isfinite(v) || v < 0 || v >= kDcgmInt32Blank) return std::nullopt;
    return static_cast<uint32_t>(std::lround(v));
}

std::optional<double> real(double v) {
    if (!std::isfinite(v) || v < 0) return std::nullopt;
    return v;
}

// What an engine's metric feeds.
enum class Figure {
    running,
    waiting,
    kv_usage,  // 0..1; replicas average
    kv_used_blocks,
    kv_total_blocks,
    tokens_per_second,
    generation_total,
    prompt_total,
};

struct EngineMetric {
    std::string_view name;  // after the engine's prefix
    Figure figure;
    // Only samples with this label value (Powerhouse's kv_blocks{state=...}); "" for any.
    std::string_view label = "";
    std::string_view label_value = "";
};

struct EngineFormat {
    const char* engine;
    std::string_view prefix;
    std::string_view model_label;  // "" where the engine names no model
    // Labels that tell apart the ranks of one replica, which may each report its figures.
    std::span<const std::string_view> rank_labels;
    std::span<const EngineMetric> metrics;
};

// vLLM: gpu_cache_usage_perc before V1, kv_cache_usage_perc since.
constexpr std::array kVllmMetrics{
    EngineMetric{"num_requests_running", Figure::running},
    EngineMetric{"num_requests_waiting", Figure::waiting},
    EngineMetric{"gpu_cache_usage_perc", Figure::kv_usage},
    EngineMetric{"kv_cache_usage_perc", Figure::kv_usage},
    EngineMetric{"generation_tokens_total", Figure::generation_total},
    EngineMetric{"prompt_tokens_total", Figure::prompt_total},
};

// SGLang: the scheduler's gauges and the tokenizer's counters. The scheduler of attention-TP
// rank 0 of each data-parallel replica reports; with enable_metrics_for_all_schedulers every
// rank does, with the same figures.
constexpr std::array kSglangMetrics{
    EngineMetric{"num_running_reqs", Figure::running},
    EngineMetric{"num_queue_reqs", Figure::waiting},
    EngineMetric{"token_usage", Figure::kv_usage},
    EngineMetric{"gen_throughput", Figure::tokens_per_second},
    EngineMetric{"generation_tokens_total", Figure::generation_total},
    EngineMetric{"prompt_tokens_total", Figure::prompt_total},
};
constexpr std::array<std::string_view, 3> kSglangRankLabels{"tp_rank", "pp_rank", "moe_ep_rank"};

// llama.cpp's server. prompt_tokens_seconds (prompt speed) and tokens_predicted_seconds_total
// (seconds spent) look alike but are not the generation speed.
constexpr std::array kLlamaCppMetrics{
    EngineMetric{"requests_processing", Figure::running},
    EngineMetric{"requests_deferred", Figure::waiting},
    EngineMetric{"kv_cache_usage_ratio", Figure::kv_usage},
    EngineMetric{"predicted_tokens_seconds", Figure::tokens_per_second},
    EngineMetric{"tokens_predicted_total", Figure::generation_total},
    EngineMetric{"prompt_tokens_total", Figure::prompt_total},
};

// Powerhouse (app/server/api_server.cpp); its GPUs are read before this (powerhouse_gpu_).
constexpr std::array kPowerhouseMetrics{
    EngineMetric{"sequences_running", Figure::running},
    EngineMetric{"sequences_waiting", Figure::waiting},
    EngineMetric{"kv_blocks", Figure::kv_used_blocks, "state", "used"},
    EngineMetric{"kv_blocks", Figure::kv_total_blocks, "state", "total"},
    EngineMetric{"generation_tokens_per_second", Figure::tokens_per_second},
    EngineMetric{"generated_tokens_total", Figure::generation_total},
    EngineMetric{"prompt_tokens_total", Figure::prompt_total},
};

constexpr std::array kEngineFormats{
    EngineFormat{"vLLM", "vllm:", "model_name", {}, kVllmMetrics},
    EngineFormat{"SGLang", "sglang:", "model_name", kSglangRankLabels, kSglangMetrics},
    EngineFormat{"llama.cpp", "llamacpp:", "", {}, kLlamaCppMetrics},
    EngineFormat{"Powerhouse", "powerhouse_", "", {}, kPowerhouseMetrics},
};

const EngineMetric* find_metric(const EngineFormat& format, std::string_view name, const MetricSample& s) {
    for (const EngineMetric& m : format.metrics) {
        if (m.name == name && (m.label.empty() || s.label(m.label) == m.label_value)) return &m;
    }
    return nullptr;
}

// The sample's labels but the model and the rank labels: one key per replica (and per other
// label value, such as SGLang's priority), the same for every rank of it.
std::string series_key(const EngineFormat& format, const MetricSample& s) {
    std::string key;
    for (const auto& [name, value] : s.labels) {
        if (name == format.model_label ||
            std::find(format.rank_labels.begin(), format.rank_labels.end(), name) != format.rank_labels.end()) {
            continue;
        }
        key += name;
        key += '=';
        key += value;
        key += '\n';
    }
    return key;
}

struct GpuSlot {
    std::string key;  // uuid (or the gpu label), plus the MIG instance
    uint32_t mig = 0;
    GpuInfo info;
    GpuSample sample;
    std::optional<double> fb_used, fb_free, fb_reserved;  // MiB (DCGM)
    std::optional<double> bytes_used, bytes_total;        // Powerhouse
};

struct EngineSlot {
    RemoteEngineFigures figures;
    std::vector<std::pair<Figure, std::string>> counted;  // series already added, by series_key()
    double kv_sum = 0;
    int kv_count = 0;
    std::optional<double> kv_used_blocks, kv_total_blocks;
};

struct HostSlot {
    RemoteHost host;
    std::vector<GpuSlot> gpus;
    std::vector<EngineSlot> engines;
};

class Builder {
public:
    explicit Builder(std::string_view default_host) : default_host_(default_host) {}

    void add(const MetricSample& s) {
        if (starts_with(s.name, "DCGM_FI_")) {
            dcgm(s);
        } else if (starts_with(s.name, "powerhouse_gpu_")) {
            powerhouse_gpu(s);
        } else {
            for (const EngineFormat& format : kEngineFormats) {
                if (starts_with(s.name, format.prefix)) {
                    engine_sample(format, s);
                    break;
                }
            }
        }
    }

    std::vector<RemoteHost> finish() {
        std::vector<RemoteHost> out;
        for (HostSlot& h : hosts_) {
            std::stable_sort(h.gpus.begin(), h.gpus.end(), [](const GpuSlot& a, const GpuSlot& b) {
                return a.info.index != b.info.index ? a.info.index < b.info.index : a.mig < b.mig;
            });
            for (GpuSlot& g : h.gpus) {
                if (g.fb_used || g.fb_free) {
                    const double used = g.fb_used.value_or(0), free = g.fb_free.value_or(0);
                    if (g.fb_used) g.sample.memory_used = static_cast<uint64_t>(used * kMiB);
                    if (g.fb_free) g.sample.memory_free = static_cast<uint64_t>(free * kMiB);
                    if (g.fb_used && g.fb_free) {
                        g.info.memory_total = static_cast<uint64_t>((used + free + g.fb_reserved.value_or(0)) * kMiB);
                    }
                }
                if (g.bytes_used) g.sample.memory_used = static_cast<uint64_t>(*g.bytes_used);
                if (g.bytes_total) g.info.memory_total = static_cast<uint64_t>(*g.bytes_total);
                if (g.bytes_used && g.bytes_total && *g.bytes_total >= *g.bytes_used) {
                    g.sample.memory_free = static_cast<uint64_t>(*g.bytes_total - *g.bytes_used);
                }
                h.host.gpus.push_back(std::move(g.info));
                h.host.latest.push_back(std::move(g.sample));
            }
            for (EngineSlot& e : h.engines) {
                if (e.kv_count > 0) e.figures.kv_cache_usage = e.kv_sum / e.kv_count;
                if (e.kv_used_blocks && e.kv_total_blocks && *e.kv_total_blocks > 0) {
                    e.figures.kv_cache_usage = *e.kv_used_blocks / *e.kv_total_blocks;
                }
                h.host.engines.push_back(std::move(e.figures));
            }
            out.push_back(std::move(h.host));
        }
        return out;
    }

private:
    HostSlot& host(std::string_view name, const char* source) {
        auto it = std::find_if(hosts_.begin(), hosts_.end(), [&](const HostSlot& h) { return h.host.host == name; });
        if (it == hosts_.end()) {
            hosts_.emplace_back();
            hosts_.back().host.host = std::string(name);
            it = hosts_.end() - 1;
        }
        std::vector<std::string>& sources = it->host.sources;
        if (std::find(sources.begin(), sources.end(), source) == sources.end()) sources.emplace_back(source);
        return *it;
    }

    GpuSlot& gpu(HostSlot& h, std::string_view uuid, std::string_view index, std::string_view mig) {
        std::string key = uuid.empty() ? "gpu " + std::string(index) : std::string(uuid);
        if (!mig.empty()) key += " mig " + std::string(mig);
        auto it = std::find_if(h.gpus.begin(), h.gpus.end(), [&](const GpuSlot& g) { return g.key == key; });
        if (it != h.gpus.end()) return *it;
        GpuSlot& g = h.gpus.emplace_back();
        g.key = std::move(key);
        g.info.index = parse_index(index);
        g.info.uuid = std::string(uuid);
        if (!mig.empty()) g.mig = parse_index(mig) + 1;
        return g;
    }

    EngineSlot& engine(const char* name, std::string_view model) {
        HostSlot& h = host(default_host_, name);
        auto it = std::find_if(h.engines.begin(), h.engines.end(), [&](const EngineSlot& e) {
            return e.figures.engine == name && e.figures.model == model;
        });
        if (it != h.engines.end()) return *it;
        EngineSlot& e = h.engines.emplace_back();
        e.figures.engine = name;
        e.figures.model = std::string(model);
        return e;
    }

    void dcgm(const MetricSample& s) {
        const std::string_view host_name = s.label("Hostname").value_or(default_host_);
        const std::string_view mig = s.label("GPU_I_ID").value_or("");
        HostSlot& h = host(host_name, "DCGM exporter");
        GpuSlot& g = gpu(h, s.label("UUID").value_or(""), s.label("gpu").value_or("0"), mig);
        if (g.info.name.empty()) {
            g.info.name = std::string(s.label("modelName").value_or("NVIDIA GPU"));
            if (!mig.empty()) g.info.name += " MIG " + std::string(s.label("GPU_I_PROFILE").value_or(mig));
        }
        if (g.info.pci_bus_id.empty()) {
            if (auto bus = s.label("pci_bus_id")) g.info.pci_bus_id = normalize_pci_bus_id(*bus);
        }
        const std::string_view field = std::string_view(s.name).substr(8);  // after "DCGM_FI_"
        const double v = s.value;
        const bool blank = !std::isfinite(v) ||
                           v >= (field == "DEV_TOTAL_ENERGY_CONSUMPTION"                         ? kDcgmInt64Blank
                                 : field == "DEV_POWER_USAGE" || field == "DEV_POWER_MGMT_LIMIT" ? kDcgmFp64Blank
                                                                                                 : kDcgmInt32Blank);
        if (blank) return;
        GpuSample& r = g.sample;
        if (field == "DEV_GPU_UTIL") {
            r.gpu_utilization = percent(v);
        } else if (field == "DEV_MEM_COPY_UTIL") {
            r.memory_utilization = percent(v);
        } else if (field == "DEV_GPU_TEMP") {
            r.temperature_c = whole(v);
        } else if (field == "DEV_FB_USED") {
            g.fb_used = real(v);
        } else if (field == "DEV_FB_FREE") {
            g.fb_free = real(v);
        } else if (field == "DEV_FB_RESERVED") {
            g.fb_reserved = real(v);
        } else if (field == "DEV_POWER_USAGE") {
            r.power_w = real(v);
        } else if (field == "DEV_POWER_MGMT_LIMIT") {
            g.info.power_limit_w = real(v);
        } else if (field == "DEV_SM_CLOCK") {
            r.sm_clock_mhz = whole(v);
        } else if (field == "DEV_MEM_CLOCK") {
            r.memory_clock_mhz = whole(v);
        } else if (field == "DEV_FAN_SPEED") {
            r.fan_percent = percent(v);
        } else if (field == "DEV_TOTAL_ENERGY_CONSUMPTION") {
            if (auto mj = real(v)) r.energy_j = *mj / 1000.0;
        }
    }

    void powerhouse_gpu(const MetricSample& s) {
        HostSlot& h = host(default_host_, "Powerhouse");
        GpuSlot& g = gpu(h, s.label("uuid").value_or(""), s.label("gpu").value_or("0"), "");
        if (g.info.name.empty()) g.info.name = std::string(s.label("name").value_or("GPU"));
        g.info.simulated = s.label("simulated").value_or("") == "true";
        const std::string_view field = std::string_view(s.name).substr(15);  // after "powerhouse_gpu_"
        const double v = s.value;
        GpuSample& r = g.sample;
        if (field == "up") {
            r.responding = v != 0;
            if (!r.responding) r.problem = "the server reports that this GPU does not answer";
        } else if (field == "utilization_ratio") {
            r.gpu_utilization = percent(v * 100.0);
        } else if (field == "temperature_celsius") {
            r.temperature_c = whole(v);
        } else if (field == "memory_used_bytes") {
            g.bytes_used = real(v);
        } else if (field == "memory_total_bytes") {
            g.bytes_total = real(v);
        } else if (field == "power_watts") {
            r.power_w = real(v);
        }
    }

    void engine_sample(const EngineFormat& format, const MetricSample& s) {
        const std::string_view name = std::string_view(s.name).substr(format.prefix.size());
        const EngineMetric* metric = find_metric(format, name, s);
        if (metric == nullptr || !std::isfinite(s.value)) return;
        const std::string_view model = format.model_label.empty() ? "" : s.label(format.model_label).value_or("");
        EngineSlot& e = engine(format.engine, model);
        std::pair<Figure, std::string> series{metric->figure, series_key(format, s)};
        if (std::find(e.counted.begin(), e.counted.end(), series) != e.counted.end()) return;
        e.counted.push_back(std::move(series));
        RemoteEngineFigures& f = e.figures;
        auto add = [&](std::optional<double>& field) { field = field.value_or(0) + s.value; };
        switch (metric->figure) {
            case Figure::running:
                add(f.requests_running);
                break;
            case Figure::waiting:
                add(f.requests_waiting);
                break;
            case Figure::kv_usage:
                e.kv_sum += s.value;
                ++e.kv_count;
                break;
            case Figure::kv_used_blocks:
                add(e.kv_used_blocks);
                break;
            case Figure::kv_total_blocks:
                add(e.kv_total_blocks);
                break;
            case Figure::tokens_per_second:
                add(f.tokens_per_second);
                break;
            case Figure::generation_total:
                add(f.generation_tokens_total);
                break;
            case Figure::prompt_total:
                add(f.prompt_tokens_total);
                break;
        }
    }

    std::string default_host_;
    std::vector<HostSlot> hosts_;
};

}  // namespace

std::vector<RemoteHost> remote_gpus(const std::vector<MetricSample>& samples, std::string_view default_host) {
    Builder builder(default_host);
    for (const MetricSample& s : samples) builder.add(s);
    return builder.finish();
}

std::optional<double> counter_rate(std::optional<double> before, std::optional<double> after, double seconds) {
    if (!before || !after || !(seconds > 0) || *after < *before) return std::nullopt;
    return (*after - *before) / seconds;
}

}  // namespace powerhouse::remote
