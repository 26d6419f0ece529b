// powerhouse-cli bench [-m MODEL] [-p 512] [-n 128] [-d 0] [-t THREADS] [-r 3] [-b BATCH] [--ctx N]
//                      [--seed S] [--devices cpu:N] [--split MODE] [--ratios 3,1]
//                      [--main-device N] [--kv-type f16|q8_0] [--parallel 1,4,16] [--json]
//                      [--power-sweep [--power-limits W,...] [--sweep-gpus G,...] [--apply best|knee|W]]
//                      [--price-per-kwh P [--hours-per-day H] [--watts W] [--currency NAME]
//                       [--hardware-price P --write-off-months M] [--cloud-price-per-hour P --cloud-gpu NAME]]
//
// Measures, the way llama-bench does, the speed of the engine on one model:
// - pp: prompt processing of p random token ids (uniform over the vocabulary, from a fixed
//   seed), decoded as one prompt into an empty cache (Model::truncate(0));
// - tg: generation of n tokens one at a time, right after that prompt (positions p..p+n-1),
//   each fed token being the argmax of the previous logits (greedy; no sampler);
// - -d N (llama-bench's -d, n_depth): pp and tg with N positions already in the cache. N
//   more random ids are decoded once, untimed, before the warm-up; every run then cuts the
//   cache back to them (Model::truncate(N)), so the prompt sits at positions N..N+p-1.
// - ttft: time to first token = the pp time + the first tg decode step;
// - peak resident memory of the process (getrusage ru_maxrss), load included.
// Tokens/s are the mean and sample standard deviation over the repetitions, after one
// untimed warm-up run. Per device of a split model: the time it worked and, of that, the
// time in transfers and all-reduces, for the prompt and per generated token.
// --parallel N,...: several sequences at once instead (bench_parallel.h).
// On GPUs, the power they drew while generating (their energy counters, where they have
// them): watts, tokens per joule, peak temperature, slowdown seen.
// --power-sweep: tg at several power limits instead (bench_power.h).
// --price-per-kwh: what the tokens cost over a day, a week and a month, and on a rented GPU
// (bench_costs.h).
// --json prints one JSON object instead of the tables.
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_costs.h"
#include "bench_parallel.h"
#include "bench_power.h"
#include "bench_roofline.h"
#include "commands.h"
#include "format.h"
#include "generation.h"
#include "gpu_power.h"
#include "powerhouse/model.h"
#include "powerhouse/model_info.h"
#include "powerhouse/telemetry.h"

namespace powerhouse::cli {
namespace {

struct BenchOptions {
    std::string model;
    int n_prompt = 512;
    int n_gen = 128;
    int depth = 0;  // positions in the cache before the prompt
    int threads = 0;
    int repetitions = 3;
    uint32_t n_batch = ModelOptions{}.n_batch;
    uint32_t n_ctx = 0;  // 0: p + n
    uint32_t seed = 42;
    DeviceChoice devices;
    bool json = false;
    bool unfused = false;
    std::vector<uint32_t> parallel;  // --parallel: sequences at once (bench_parallel.h)
    PowerSweepChoice sweep;          // --power-sweep (bench_power.h)
    CostChoice costs;                // --price-per-kwh ... (bench_costs.h)
};

struct Sample {
    double pp_seconds = 0;
    double tg_seconds = 0;
    double first_step_seconds = 0;  // the first tg decode
    // Per device: seconds worked and seconds communicating, in pp and in tg.
    std::vector<double> pp_busy, pp_comm, tg_busy, tg_comm;
    std::vector<double> tg_gpu;  // per device: GPU seconds in tg (CUDA events)
};

// Adds the time each device worked since `before` to busy and comm.
void add_device_time(const std::vector<DeviceUsage>& before, const std::vector<DeviceUsage>& after,
                     std::vector<double>& busy, std::vector<double>& comm) {
    busy.assign(after.size(), 0.0);
    comm.assign(after.size(), 0.0);
    for (size_t i = 0; i < after.size() && i < before.size(); ++i) {
        busy[i] = after[i].busy_seconds - before[i].busy_seconds;
        comm[i] = after[i].comm_seconds - before[i].comm_seconds;
    }
}

struct Stats {
    double mean = 0;
    double stddev = 0;  // sample standard deviation; 0 for one value
};

Stats stats_of(const std::vector<double>& values) {
    Stats s;
    if (values.empty()) return s;
    for (double v : values) s.mean += v;
    s.mean /= static_cast<double>(values.size());
    if (values.size() > 1) {
        double sq = 0;
        for (double v : values) sq += (v - s.mean) * (v - s.mean);
        s.stddev = std::sqrt(sq / static_cast<double>(values.size() - 1));
    }
    return s;
}

uint64_t peak_rss_bytes() {
    rusage usage{};
    if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
    return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

// A GPU's usage has a bandwidth; the CPU's has none.
bool is_gpu(const DeviceUsage& u) { return u.bandwidth_gb_s > 0; }

// "on (127 replays)", "off: the capture failed (...)".
std::string fast_path(bool on, uint64_t count, const char* what, const std::string& note) {
    if (on) return fmt::format("on ({} {})", count, what);
    return note.empty() ? std::string("off") : fmt::format("off: {}", note);
}

TokenId argmax(std::span<const float> logits) {
    return static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// One pp + tg run after the first `depth` cached positions (0: from an empty cache). A meter
// measures the GPUs' power over tg alone (its readings are taken outside the timed span).
Result<Sample> run_once(Model& model, uint32_t depth, const std::vector<TokenId>& prompt, int n_gen,
                        GpuPowerMeter* meter = nullptr) {
    using Clock = std::chrono::steady_clock;
    Sample sample;
    model.truncate(depth);
    const std::vector<DeviceUsage> start = model.device_usage();
    const auto pp_start = Clock::now();
    Result<std::span<const float>> logits = model.decode(prompt);
    if (!logits) return logits.error();
    sample.pp_seconds = std::chrono::duration<double>(Clock::now() - pp_start).count();
    const std::vector<DeviceUsage> after_pp = model.device_usage();
    add_device_time(start, after_pp, sample.pp_busy, sample.pp_comm);
    TokenId next = argmax(*logits);
    if (meter != nullptr) meter->begin();
    const auto tg_start = Clock::now();
    for (int i = 0; i < n_gen; ++i) {
        const TokenId one[] = {next};
        logits = model.decode(one);
        if (!logits) return logits.error();
        next = argmax(*logits);
        if (i == 0) sample.first_step_seconds = std::chrono::duration<double>(Clock::now() - tg_start).count();
    }
    sample.tg_seconds = std::chrono::duration<double>(Clock::now() - tg_start).count();
    if (meter != nullptr) meter->end();
    const std::vector<DeviceUsage> after_tg = model.device_usage();
    add_device_time(after_pp, after_tg, sample.tg_busy, sample.tg_comm);
    for (size_t i = 0; i < after_tg.size() && i < after_pp.size(); ++i) {
        sample.tg_gpu.push_back(after_tg[i].gpu_seconds - after_pp[i].gpu_seconds);
    }
    return sample;
}

std::string format_stats(const Stats& s) {
    return fmt::format("{:.2f} ± {:.2f}", s.mean, s.stddev);
}

int run_bench(const BenchOptions& options) {
    const uint64_t needed = static_cast<uint64_t>(options.depth) + static_cast<uint64_t>(options.n_prompt) +
                            static_cast<uint64_t>(options.n_gen);
    const std::string positions =
        fmt::format("-d {} + -p {} + -n {} = {} positions", options.depth, options.n_prompt, options.n_gen, needed);
    if (options.depth > 0 && !options.parallel.empty()) {
        return report_error(make_error(ErrorCode::invalid_argument, "--depth does not combine with --parallel"));
    }
    if (!options.parallel.empty() && (options.sweep.sweep || options.costs.wanted())) {
        return report_error(make_error(ErrorCode::invalid_argument,
                                       fmt::format("--{} does not combine with --parallel: it measures one sequence",
                                                   options.sweep.sweep ? "power-sweep" : "price-per-kwh")));
    }
    if (options.sweep.sweep && options.costs.wanted()) {
        return report_error(make_error(ErrorCode::invalid_argument,
                                       "--price-per-kwh does not combine with --power-sweep: run the bench at the "
                                       "limit you chose for the costs"));
    }
    if (Result<void> costs = check_costs(options.costs); !costs) return report_error(costs.error());
    if (options.n_ctx != 0 && needed > options.n_ctx) {
        return report_error(make_error(ErrorCode::invalid_argument,
                                       fmt::format("{} do not fit in --ctx {}", positions, options.n_ctx)));
    }
    if (needed > (1u << 24)) {
        return report_error(make_error(ErrorCode::invalid_argument, fmt::format("{}: too many", positions)));
    }
    Result<std::filesystem::path> path = model_or_default(options.model);
    if (!path) return report_error(path.error());
    Result<ModelInfo> info = inspect_model(*path);
    if (!info) return report_error(info.error());

    ModelOptions model_options;
    model_options.n_ctx = options.n_ctx != 0 ? options.n_ctx : static_cast<uint32_t>(needed);
    model_options.n_threads = options.threads;
    model_options.n_batch = options.n_batch;
    if (Result<void> r = apply_device_choice(options.devices, model_options); !r) return report_error(r.error());
    model_options.cuda_fused_ops = !options.unfused;
    if (!options.parallel.empty()) {
        // Every sequence's positions (one more arrives under load), and a block each of slack.
        const uint32_t most = *std::max_element(options.parallel.begin(), options.parallel.end()) + 1;
        model_options.max_sequences = most;
        model_options.kv_cache_tokens = static_cast<uint32_t>(most * (needed + model_options.kv_block_size));
    }
    // An interrupted sweep puts the limits back first; the signals are blocked before the
    // model's and the monitor's threads start, so that they inherit it.
    std::optional<RestoreLimitsOnSignal> on_signal;
    if (options.sweep.sweep) on_signal.emplace();
    const auto load_start = std::chrono::steady_clock::now();
    Result<Model> model = Model::load(*path, model_options);
    if (!model) return report_error(model.error());
    const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    if (needed > model->n_ctx()) {
        return report_error(make_error(ErrorCode::invalid_argument,
                                       fmt::format("{} do not fit in the context of {} (the model was trained for {})",
                                                   positions, model->n_ctx(), info->n_ctx_train)));
    }

    // What the parallel and sweep reports begin with.
    nlohmann::ordered_json header = {{"engine", "powerhouse"},
                                     {"model", path->string()},
                                     {"architecture", info->architecture},
                                     {"file_type", info->file_type},
                                     {"threads", options.threads},
                                     {"n_batch", options.n_batch},
                                     {"n_prompt", options.n_prompt},
                                     {"n_gen", options.n_gen},
                                     {"repetitions", options.repetitions},
                                     {"load_seconds", load_seconds}};
    if (!options.parallel.empty()) {
        nlohmann::ordered_json& out = header;
        ParallelBenchOptions po{options.parallel, options.n_prompt, options.n_gen, options.repetitions,
                                options.n_batch,  options.seed,     options.json,  out};
        if (!options.json) std::printf("%s\n", model->summary().device.c_str());
        const int status = run_parallel_bench(*model, po);
        if (status == 0 && options.json) std::puts(json_text(out, 2).c_str());
        return status;
    }

    // Random ids over the tokenizer's vocabulary (the embedding may have more rows).
    std::mt19937 rng(options.seed);
    std::uniform_int_distribution<TokenId> pick(0, model->tokenizer().n_vocab() - 1);
    std::vector<TokenId> prompt(static_cast<size_t>(options.n_prompt));
    for (TokenId& id : prompt) id = pick(rng);
    // The depth's ids come after the prompt's, so that -d leaves the prompt as it was.
    std::vector<TokenId> context(static_cast<size_t>(options.depth));
    for (TokenId& id : context) id = pick(rng);
    const auto depth = static_cast<uint32_t>(options.depth);
    double depth_seconds = 0;
    if (depth > 0) {
        model->truncate(0);
        const auto start = std::chrono::steady_clock::now();
        if (Result<std::span<const float>> filled = model->decode(context); !filled) {
            return report_error(filled.error());
        }
        depth_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }

    // The GPUs' power: where the model runs on GPUs, and for the sweep (simulated GPUs may
    // stand in for the CPU there). Sampled often, so that short runs still get readings.
    const std::vector<DeviceUsage> loaded = model->device_usage();
    const bool on_gpus = std::any_of(loaded.begin(), loaded.end(), [](const DeviceUsage& u) { return !u.uuid.empty(); });
    std::optional<GpuMonitor> monitor;
    if (on_gpus || options.sweep.sweep) {
        GpuMonitorOptions monitor_options;
        monitor_options.interval = std::chrono::milliseconds(200);
        monitor.emplace(options_from_environment(monitor_options));
        monitor->start();
    }
    std::optional<GpuPowerMeter> meter;
    if (on_gpus && !options.sweep.sweep) {
        ModelGpus gpus = model_gpus(monitor->sample_now(), loaded);
        if (!gpus.gpus.empty()) meter.emplace(*monitor, std::move(gpus));
    }
    MeasuredUse use;
    if (options.costs.wanted()) {
        if (std::isnan(options.costs.watts) && !meter) {
            return report_error(make_error(
                ErrorCode::unsupported,
                on_gpus ? "the GPUs the model runs on give no power readings here: give the power to count with --watts"
                        : "the model runs on the CPU, whose power Powerhouse cannot read: give the machine's power "
                          "while generating with --watts (from a power meter)"));
        }
        if (options.costs.cloud()) {
            Result<double> bytes = planned_bytes_per_token(
                *path, options.costs.cloud_gpu, model->n_ctx(),
                options.devices.kv_type == "q8_0" ? KvCacheType::q8_0 : KvCacheType::f16);
            if (!bytes) return report_error(bytes.error());
            use.cloud_bytes_per_token = *bytes;
        }
    }

    if (Result<Sample> warmup = run_once(*model, depth, prompt, options.n_gen); !warmup) {
        return report_error(warmup.error());
    }
    if (options.sweep.sweep) {
        const TimedGeneration generate = [&](GpuPowerMeter& step_meter) -> Result<TimedTokens> {
            TimedTokens timed;
            for (int r = 0; r < options.repetitions; ++r) {
                Result<Sample> sample = run_once(*model, depth, prompt, options.n_gen, &step_meter);
                if (!sample) return sample.error();
                timed.tokens += static_cast<uint64_t>(options.n_gen);
                timed.seconds += sample->tg_seconds;
            }
            return timed;
        };
        SweepReport report;
        report.test = fmt::format("{}, tg{} @ p{}{}, {} repetition{} per limit after 1 warm-up",
                                  info->name.empty() ? path->filename().string() : info->name, options.n_gen,
                                  options.n_prompt, depth > 0 ? fmt::format(" d{}", depth) : std::string(),
                                  options.repetitions, options.repetitions == 1 ? "" : "s");
        report.out = std::move(header);
        report.json = options.json;
        on_signal->watch(&*monitor);
        const int status = run_bench_power_sweep(options.sweep, *monitor, loaded, generate, std::move(report));
        on_signal->watch(nullptr);
        return status;
    }
    std::vector<Sample> samples;
    for (int r = 0; r < options.repetitions; ++r) {
        Result<Sample> sample = run_once(*model, depth, prompt, options.n_gen, meter ? &*meter : nullptr);
        if (!sample) return report_error(sample.error());
        samples.push_back(*sample);
    }
    std::vector<double> pp_rate, tg_rate, ttft_ms, pp_seconds, tg_seconds;
    for (const Sample& s : samples) {
        pp_rate.push_back(options.n_prompt / s.pp_seconds);
        tg_rate.push_back(options.n_gen / s.tg_seconds);
        ttft_ms.push_back((s.pp_seconds + s.first_step_seconds) * 1e3);
        pp_seconds.push_back(s.pp_seconds);
        tg_seconds.push_back(s.tg_seconds);
    }
    const Stats pp = stats_of(pp_rate), tg = stats_of(tg_rate), ttft = stats_of(ttft_ms);
    const int threads =
        options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const uint64_t peak = peak_rss_bytes();

    // Per device, the mean over the repetitions: seconds of the prompt, milliseconds per
    // generated token, worked and (of which) communicating.
    const std::vector<DeviceUsage> usage = model->device_usage();
    struct DeviceTime {
        double pp_busy = 0, pp_comm = 0, tg_busy_ms = 0, tg_comm_ms = 0;
    };
    std::vector<DeviceTime> device_time(usage.size());
    const double reps = static_cast<double>(samples.size());
    const double per_token_ms = options.n_gen > 0 ? 1e3 / options.n_gen : 0.0;
    for (const Sample& s : samples) {
        for (size_t i = 0; i < device_time.size() && i < s.tg_busy.size(); ++i) {
            device_time[i].pp_busy += s.pp_busy[i] / reps;
            device_time[i].pp_comm += s.pp_comm[i] / reps;
            device_time[i].tg_busy_ms += s.tg_busy[i] * per_token_ms / reps;
            device_time[i].tg_comm_ms += s.tg_comm[i] * per_token_ms / reps;
        }
    }
    // GPUs: the decode roofline. A step must read step_bytes on each device at its peak
    // bandwidth; the fastest possible step adds those times up as bench_roofline.h says
    // (parts on one GPU and GPUs taking turns add, GPUs of a tensor split overlap); the share
    // is that time over the measured one. GPU time per token (CUDA events), added up the same
    // way, against wall time shows what is spent outside the kernels: launches,
    // synchronization, sampling, the host.
    const SplitMode split = model->summary().split;
    std::vector<double> device_roofline(usage.size(), 0.0), device_gpu_ms(usage.size(), 0.0);
    uint64_t step_bytes = 0;
    for (size_t i = 0; i < usage.size(); ++i) {
        if (usage[i].bandwidth_gb_s <= 0) continue;
        device_roofline[i] = static_cast<double>(usage[i].step_bytes) / (usage[i].bandwidth_gb_s * 1e9);
        step_bytes += usage[i].step_bytes;
    }
    for (const Sample& s : samples) {
        for (size_t i = 0; i < s.tg_gpu.size() && i < device_gpu_ms.size(); ++i) {
            device_gpu_ms[i] += s.tg_gpu[i] * per_token_ms / reps;
        }
    }
    const double roofline_seconds = step_time_over_gpus(usage, device_roofline, split);
    const double tg_gpu_ms = step_time_over_gpus(usage, device_gpu_ms, split);
    const double roofline_share = roofline_seconds * tg.mean;
    const double tg_wall_ms = tg.mean > 0 ? 1e3 / tg.mean : 0.0;

    // The GPUs' power over the timed generations, as the sweep counts a step's.
    std::optional<MeasuredPower> power;
    if (meter) {
        double seconds = 0;
        for (const double t : tg_seconds) seconds += t;
        power = measured_power(*meter, static_cast<uint64_t>(options.n_gen) * samples.size(), seconds);
    }
    if (options.costs.wanted()) {
        use.tokens_per_second = tg.mean;
        use.roofline_share = roofline_seconds > 0 ? roofline_share : 0.0;
        if (!std::isnan(options.costs.watts)) {
            use.watts = options.costs.watts;
            use.watts_source = "given with --watts";
        } else if (power && power->point.average_w) {
            use.watts = *power->point.average_w;
            use.watts_source = "measured on " + power->source;
        } else {
            return report_error(make_error(ErrorCode::unsupported,
                                           "the GPUs gave no power readings while generating: give the power to "
                                           "count with --watts"));
        }
    }
    const auto per_device_json = [&] {
        nlohmann::ordered_json list = nlohmann::ordered_json::array();
        for (size_t i = 0; i < usage.size(); ++i) {
            list.push_back({{"name", usage[i].name},
                            {"part", usage[i].part},
                            {"weight_bytes", usage[i].weight_bytes},
                            {"kv_cache_bytes", usage[i].kv_cache_bytes},
                            {"pp_busy_seconds", device_time[i].pp_busy},
                            {"pp_comm_seconds", device_time[i].pp_comm},
                            {"tg_busy_ms_per_token", device_time[i].tg_busy_ms},
                            {"tg_comm_ms_per_token", device_time[i].tg_comm_ms},
                            {"planned_bytes", usage[i].planned_bytes},
                            {"allocated_bytes",
                             usage[i].weight_bytes + usage[i].kv_cache_bytes + usage[i].scratch_bytes},
                            {"bandwidth_gb_s", usage[i].bandwidth_gb_s},
                            {"step_bytes", usage[i].step_bytes}});
            if (is_gpu(usage[i])) {
                // Whether the fast paths ran: a silent fallback would halve the figures above.
                list.back().update({{"cuda_graphs", usage[i].cuda_graphs},
                                    {"graph_replays", usage[i].graph_replays},
                                    {"graphs_note", usage[i].graphs_note},
                                    {"cublas", usage[i].cublas},
                                    {"cublas_gemms", usage[i].cublas_gemms},
                                    {"cublas_note", usage[i].cublas_note},
                                    {"fused_launches", usage[i].fused_launches}});
            }
        }
        return list;
    };

    if (options.json) {
        const auto stats_json = [](const Stats& s) {
            return nlohmann::ordered_json{{"mean", s.mean}, {"stddev", s.stddev}};
        };
        nlohmann::ordered_json out = {
            {"engine", "powerhouse"},
            {"model", path->string()},
            {"architecture", info->architecture},
            {"file_type", info->file_type},
            {"model_size_bytes", info->weight_bytes},
            {"file_size_bytes", info->file_size},
            {"n_params", info->n_params},
            {"threads", threads},
            {"n_batch", options.n_batch},
            {"kv_type", options.devices.kv_type},
            {"devices", options.devices.devices},
            {"split", split_mode_name(model->summary().split)},
            {"fused_ops", !options.unfused},
            {"kv_cache_bytes", model->kv_cache_bytes()},
            {"n_ctx", model->n_ctx()},
            {"repetitions", options.repetitions},
            {"warmup_runs", 1},
            {"seed", options.seed},
            {"tg_input", "argmax"},
            {"load_seconds", load_seconds},
            {"depth", options.depth},
            {"depth_seconds", depth_seconds},
            {"pp", {{"tokens", options.n_prompt}, {"tokens_per_second", stats_json(pp)}, {"seconds", pp_seconds}}},
            {"tg", {{"tokens", options.n_gen}, {"tokens_per_second", stats_json(tg)}, {"seconds", tg_seconds}}},
            {"ttft_ms", stats_json(ttft)},
            {"peak_rss_bytes", peak},
            {"per_device", per_device_json()},
            {"roofline", roofline_seconds > 0 ? nlohmann::ordered_json{{"step_bytes", step_bytes},
                                                                         {"seconds_per_token", roofline_seconds},
                                                                         {"share", roofline_share},
                                                                         {"tg_gpu_ms_per_token", tg_gpu_ms},
                                                                         {"tg_wall_ms_per_token", tg_wall_ms}}
                                              : nlohmann::ordered_json()},
        };
        if (power) out["power"] = power_json(*power, meter->gpus().gpus);
        if (options.costs.wanted()) {
            if (Result<void> costs = report_costs(options.costs, use, true, out); !costs) {
                return report_error(costs.error());
            }
        }
        std::puts(json_text(out, 2).c_str());
        return 0;
    }
    const std::string name = info->name.empty() ? path->filename().string() : info->name;
    const std::string common_size = format_bytes(info->weight_bytes);
    const std::string common_params = format_count(info->n_params);
    // As llama-bench names them: "pp512 @ d4096", "tg128 @ p512 d4096".
    const std::string at_depth = depth > 0 ? fmt::format(" d{}", depth) : std::string();
    std::vector<std::vector<std::string>> rows = {
        {name, info->file_type, common_size, common_params, fmt::format("{}", threads),
         fmt::format("pp{}{}", options.n_prompt, depth > 0 ? " @" + at_depth : std::string()), format_stats(pp)},
        {name, info->file_type, common_size, common_params, fmt::format("{}", threads),
         fmt::format("tg{} @ p{}{}", options.n_gen, options.n_prompt, at_depth), format_stats(tg)},
    };
    std::fputs(format_table({"model", "type", "size", "params", "threads", "test", "t/s"}, rows).c_str(), stdout);
    std::printf("\ntime to first token  %.1f ± %.1f ms (pp%d + one decode step)\n", ttft.mean, ttft.stddev,
                options.n_prompt);
    std::printf("peak resident memory %s\n", format_bytes(peak).c_str());
    std::printf("%d repetitions after 1 warm-up; batch %u, context %u; tg feeds the argmax token\n",
                options.repetitions, options.n_batch, model->n_ctx());
    if (depth > 0) std::printf("depth %u positions, decoded once in %.1f s (untimed)\n", depth, depth_seconds);
    if (roofline_seconds > 0) {
        std::printf("decode roofline      %.1f%% (%s of weights per token at peak bandwidth: %.3f ms; measured "
                    "%.3f ms, of which the GPU worked %.3f ms)\n",
                    100.0 * roofline_share, format_bytes(step_bytes).c_str(), roofline_seconds * 1e3, tg_wall_ms,
                    tg_gpu_ms);
    }
    if (power) std::printf("GPU power            %s\n", power_text(*power).c_str());
    std::printf("\n%s\n", model->summary().device.c_str());
    std::vector<std::vector<std::string>> device_rows;
    for (size_t i = 0; i < usage.size(); ++i) {
        const DeviceTime& t = device_time[i];
        device_rows.push_back({usage[i].name, usage[i].part, format_bytes(usage[i].weight_bytes),
                               format_bytes(usage[i].kv_cache_bytes), fmt::format("{:.3f}", t.pp_busy),
                               fmt::format("{:.3f}", t.pp_comm), fmt::format("{:.2f}", t.tg_busy_ms),
                               fmt::format("{:.3f}", t.tg_comm_ms)});
    }
    std::fputs(format_table({"device", "holds", "weights", "KV cache", "pp busy s", "pp comm s", "tg busy ms/t",
                             "tg comm ms/t"},
                            device_rows)
                   .c_str(),
               stdout);
    for (const DeviceUsage& u : usage) {
        if (!is_gpu(u)) continue;
        const std::string graphs = fast_path(u.cuda_graphs, u.graph_replays, "replays", u.graphs_note);
        const std::string cublas = fast_path(u.cublas, u.cublas_gemms, "GEMMs", u.cublas_note);
        std::printf("%s: CUDA graphs %s; cuBLAS %s; fused launches %llu\n", u.name.c_str(), graphs.c_str(),
                    cublas.c_str(), static_cast<unsigned long long>(u.fused_launches));
    }
    if (options.costs.wanted()) {
        nlohmann::ordered_json unused;
        if (Result<void> costs = report_costs(options.costs, use, false, unused); !costs) {
            return report_error(costs.error());
        }
    }
    return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
    auto options = std::make_shared<BenchOptions>();
    CLI::App* sub = app.add_subcommand("bench", "Measure prompt processing and generation speed (like llama-bench)");
    sub->add_option("-m,--model", options->model, "Model file (.gguf); default: the model set up by scripts/run");
    sub->add_option("-p,--n-prompt", options->n_prompt, "Prompt tokens to process as one batch")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 24));
    sub->add_option("-n,--n-gen", options->n_gen, "Tokens to generate one at a time after the prompt")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 24));
    sub->add_option("-d,--depth", options->depth,
                    "Positions already in the cache when pp and tg are measured: that many random tokens are "
                    "decoded first, untimed (llama-bench's -d)")
        ->capture_default_str()
        ->check(CLI::Range(0, 1 << 24));
    sub->add_option("-t,--threads", options->threads, "CPU threads (default: all cores)")->check(CLI::Range(0, 1024));
    sub->add_option("-r,--repetitions", options->repetitions, "Timed runs, after one warm-up run")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    sub->add_option("-b,--batch", options->n_batch, "Prompt tokens the engine processes together")
        ->capture_default_str()
        ->check(CLI::Range(1u, 1u << 16));
    sub->add_option("--ctx", options->n_ctx, "Context length (KV cache positions); default: d + p + n")
        ->check(CLI::Range(1u, 1u << 24));
    sub->add_option("--seed", options->seed, "Seed of the random prompt tokens")->capture_default_str();
    add_device_options(*sub, options->devices);
    sub->add_option("--parallel", options->parallel,
                    "Sequences generating at once, e.g. 1,4,16: aggregate speed and time to first token under "
                    "load (continuous batching) instead of the single-sequence figures")
        ->delimiter(',')
        ->check(CLI::Range(1u, 256u));
    add_power_sweep_options(*sub, options->sweep);
    add_cost_options(*sub, options->costs);
    sub->add_flag("--unfused", options->unfused,
                  "GPUs: every op its own launch (no norm or gate fused with the quantizing for the next product, "
                  "no product with the residual add), to measure what fusing saves");
    sub->add_flag("--json", options->json, "Print one JSON object instead of the table");
    return {sub, [options] { return run_bench(*options); }};
}

}  // namespace powerhouse::cli
