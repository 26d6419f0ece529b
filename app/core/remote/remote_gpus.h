// The GPUs of remote machines, and the figures of the engines on them, from Prometheus
// samples (prometheus.h), in the local telemetry's own types (powerhouse/telemetry.h:
// GpuInfo, GpuSample), grouped by host, so that the dashboard and `gpus` show them as they
// show local GPUs.
//
// Understood exporters:
//   - NVIDIA's DCGM exporter (github.com/NVIDIA/dcgm-exporter, etc/default-counters.csv):
//     DCGM_FI_DEV_GPU_UTIL and MEM_COPY_UTIL (%), GPU_TEMP (C), FB_USED, FB_FREE and
//     FB_RESERVED (MiB), POWER_USAGE (W), POWER_MGMT_LIMIT (W), SM_CLOCK and MEM_CLOCK (MHz),
//     FAN_SPEED (%), TOTAL_ENERGY_CONSUMPTION (mJ); labels gpu, UUID, modelName, pci_bus_id,
//     Hostname, and GPU_I_ID / GPU_I_PROFILE for MIG instances (each its own entry). DCGM's
//     "blank" values (no reading: 2^31 - 16 and up, 2^47 for floats) read as no reading.
//   - Powerhouse's /metrics (app/server/api_server.cpp): powerhouse_gpu_up,
//     _utilization_ratio, _temperature_celsius, _memory_used_bytes, _memory_total_bytes,
//     _power_watts; labels gpu, uuid, name, simulated.
// Engine figures, one entry per engine and model (the names come from each engine's source):
//   - vLLM (docs.vllm.ai, "Production Metrics"): vllm:num_requests_running / _waiting,
//     vllm:gpu_cache_usage_perc or, since V1, vllm:kv_cache_usage_perc (a 0..1 fraction despite
//     the name), vllm:prompt_tokens_total, vllm:generation_tokens_total; labels model_name and
//     engine (one per data-parallel engine).
//   - SGLang (python/sglang/srt/metrics/collector.py, since moved to srt/observability/
//     metrics_collector.py): sglang:num_running_reqs, sglang:num_queue_reqs, sglang:token_usage
//     (0..1), sglang:gen_throughput (tokens/s over the last decode steps),
//     sglang:prompt_tokens_total, sglang:generation_tokens_total; labels model_name, and on the
//     scheduler's gauges tp_rank, pp_rank, moe_ep_rank and, with data parallelism, dp_rank.
//   - llama.cpp's server (`llama-server --metrics`, tools/server/, before that examples/server/):
//     llamacpp:requests_processing / _deferred, llamacpp:predicted_tokens_seconds,
//     llamacpp:prompt_tokens_total, llamacpp:tokens_predicted_total, and until mid-2025
//     (ggml-org/llama.cpp#13660 removed it) llamacpp:kv_cache_usage_ratio. No model label.
//   - Powerhouse: powerhouse_sequences_running / _waiting, powerhouse_kv_blocks{state=used|
//     total}, powerhouse_generation_tokens_per_second and the token counters.
// Series of one engine add up (data-parallel replicas, other label values) and their KV caches
// average; series that differ only in a rank label (SGLang's tp_rank, pp_rank, moe_ep_rank:
// every rank of a replica may report the replica's figures) count once. Counters give tokens/s
// only between two readings: counter_rate().
//
// The host is the sample's Hostname label (the DCGM exporter sets it), else the default host
// the caller gives (the metrics URL's host). Nothing here reads the network.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/telemetry.h"
#include "remote/prometheus.h"

namespace powerhouse::remote {

// What an inference engine on a host reports about its work.
struct RemoteEngineFigures {
    std::string engine;  // "vLLM", "SGLang", "llama.cpp", "Powerhouse"
    std::string model;   // the model_name label (vLLM, SGLang); "" when not given
    std::optional<double> requests_running;
    std::optional<double> requests_waiting;
    std::optional<double> kv_cache_usage;  // 0..1
    // An engine's own gauge (SGLang, llama.cpp, Powerhouse). llama.cpp's is the generation speed
    // of one request, averaged over the requests that finished since the server last reset it
    // (newer servers: at every scrape), not the server's total; its counters too move only when
    // a request finishes.
    std::optional<double> tokens_per_second;
    std::optional<double> generation_tokens_total;  // counters: see counter_rate()
    std::optional<double> prompt_tokens_total;
};

struct RemoteHost {
    std::string host;
    std::vector<std::string> sources;  // "DCGM exporter", "Powerhouse", "vLLM", "SGLang", "llama.cpp"
    // GpuInfo::index is the exporter's gpu label; the order is by it (MIG instances after
    // their GPU). `latest` has one reading per GPU, in the same order; its time is 0.
    std::vector<GpuInfo> gpus;
    std::vector<GpuSample> latest;
    std::vector<RemoteEngineFigures> engines;
};

// Hosts in the order they first appear in the samples.
std::vector<RemoteHost> remote_gpus(const std::vector<MetricSample>& samples, std::string_view default_host = "");

// A counter's rate between two readings `seconds` apart; nullopt when either is missing, the
// time is not positive, or the counter went back (the server restarted).
std::optional<double> counter_rate(std::optional<double> before, std::optional<double> after, double seconds);

}  // namespace powerhouse::remote
