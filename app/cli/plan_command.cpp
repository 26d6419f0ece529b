// powerhouse-cli plan [-m MODEL] [--devices "RTX 4090:24;A100:80" | cpu:N] [--split auto|single|layer|tensor]
//                     [--ratios 3,1] [--use 0,2] [--main N] [--ctx N] [--kv-type f16|q8_0]
//                     [--reserve-mib N] [--batch N] [--json]
//
// Where the model would go on the devices, and whether it fits, without loading it: the
// planner's DevicePlan as a table (or JSON). Devices: --devices, else the GPUs the monitor
// sees (real, or POWERHOUSE_SIMULATE_GPUS), else the CPU with the memory available now.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "format.h"
#include "generation.h"
#include "powerhouse/plan.h"
#include "powerhouse/telemetry.h"

namespace powerhouse::cli {
namespace {

struct PlanCommandOptions {
    std::string model;
    std::string devices;
    std::string split = "auto";
    std::vector<double> ratios;
    std::vector<uint32_t> use;
    uint32_t main = 0;
    uint32_t n_ctx = 4096;
    std::string kv_type = "f16";
    uint64_t reserve_mib = 512;
    uint32_t n_batch = 512;
    std::string experts_in_ram = "auto";
    double ram_gib = 0;  // 0: this machine's available memory
    bool json = false;
};

Result<std::vector<DeviceDesc>> find_devices(const std::string& spec, std::string& source) {
    if (spec == "cpu" || spec.rfind("cpu:", 0) == 0) {
        source = "virtual CPU devices";
        return cpu_devices(spec);
    }
    if (!spec.empty()) {
        source = "--devices";
        return parse_device_spec(spec);
    }
    GpuMonitor monitor(options_from_environment());
    const TelemetrySnapshot s = monitor.sample_now();
    if (!s.gpus.empty()) {
        source = s.simulated ? "simulated GPUs" : s.source;
        std::vector<DeviceDesc> out;
        for (size_t i = 0; i < s.gpus.size(); ++i) {
            DeviceDesc d;
            d.name = s.gpus[i].name;
            d.uuid = s.gpus[i].uuid;
            d.total_bytes = s.gpus[i].memory_total;
            d.free_bytes = s.latest[i].memory_free.value_or(d.total_bytes);
            d.bandwidth_gb_s = guess_bandwidth_gb_s(d.name);
            out.push_back(d);
        }
        return out;
    }
    source = fmt::format("the CPU ({})", s.status.empty() ? "no GPU" : s.status);
    return cpu_devices("cpu");
}

std::string range(uint32_t begin, uint32_t end) {
    return end == begin + 1 ? fmt::format("{}", begin) : fmt::format("{}-{}", begin, end - 1);
}

nlohmann::ordered_json to_json(const ModelShape& m, const std::vector<DeviceDesc>& devices, const DevicePlan& plan) {
    nlohmann::ordered_json out = {{"model", m.name},
                                  {"weight_bytes", m.weight_bytes()},
                                  {"mode", split_mode_name(plan.mode)},
                                  {"reason", plan.reason},
                                  {"n_ctx", plan.n_ctx},
                                  {"experts_in_ram_layers", plan.experts_in_ram_layers},
                                  {"ram_expert_bytes", plan.ram_expert_bytes},
                                  {"ram_budget_bytes", plan.ram_budget_bytes},
                                  {"kv_type", kv_cache_type_name(plan.kv_type)},
                                  {"transfers_per_token", plan.transfers_per_token},
                                  {"transfer_bytes_per_token", plan.transfer_bytes_per_token},
                                  {"allreduces_per_token", plan.allreduces_per_token},
                                  {"allreduce_bytes_per_token", plan.allreduce_bytes_per_token},
                                  {"estimated_tokens_per_second", plan.tokens_per_second}};
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const DeviceAssignment& a : plan.devices) {
        list.push_back({{"device", a.device},
                        {"name", devices[a.device].name},
                        {"uuid", devices[a.device].uuid},
                        {"first_layer", a.first_layer},
                        {"n_layers", a.n_layers},
                        {"kv_head_begin", a.kv_head_begin},
                        {"kv_head_end", a.kv_head_end},
                        {"ff_begin", a.ff_begin},
                        {"ff_end", a.ff_end},
                        {"expert_begin", a.expert_begin},
                        {"expert_end", a.expert_end},
                        {"embedding", a.embedding},
                        {"output", a.output},
                        {"weight_bytes", a.weight_bytes},
                        {"kv_cache_bytes", a.kv_cache_bytes},
                        {"scratch_bytes", a.scratch_bytes},
                        {"comm_bytes", a.comm_bytes},
                        {"total_bytes", a.total_bytes()},
                        {"budget_bytes", a.budget_bytes}});
    }
    out["devices"] = std::move(list);
    return out;
}

void print_plan(const ModelShape& m, const std::vector<DeviceDesc>& devices, const DevicePlan& plan,
                const std::string& source) {
    const bool moe = m.n_expert > 0;
    const std::string experts = moe ? fmt::format(", {} experts of which {} used", m.n_expert, m.n_expert_used) : "";
    std::printf("Model:   %s (%u layers, %u KV heads%s, %s of weights)\n", m.name.c_str(), m.n_layer, m.n_head_kv,
                experts.c_str(), format_bytes(m.weight_bytes()).c_str());
    std::printf("Devices: %zu from %s; context %u, KV cache %s\n", devices.size(), source.c_str(), plan.n_ctx,
                kv_cache_type_name(plan.kv_type));
    std::printf("Plan:    %s split (%s)\n\n", split_mode_name(plan.mode), plan.reason.c_str());
    std::printf("%-22s %-8s %-9s %-11s %11s %11s %10s %10s %23s\n", "Device", "Layers", "KV heads",
                moe ? "Experts" : "FFN columns",
                "Weights", "KV cache", "Scratch", "Comm", "Total / usable");
    for (const DeviceAssignment& a : plan.devices) {
        std::string label = fmt::format("{} {}", a.device, devices[a.device].name);
        if (label.size() > 22) label = label.substr(0, 21) + "~";
        std::string extra;
        if (a.embedding) extra += " +embedding";
        if (a.output) extra += " +output";
        std::printf("%-22s %-8s %-9s %-11s %11s %11s %10s %10s %23s%s\n", label.c_str(),
                    range(a.first_layer, a.first_layer + a.n_layers).c_str(), range(a.kv_head_begin, a.kv_head_end).c_str(),
                    (moe ? range(a.expert_begin, a.expert_end) : range(a.ff_begin, a.ff_end)).c_str(),
                    format_bytes(a.weight_bytes).c_str(),
                    format_bytes(a.kv_cache_bytes).c_str(), format_bytes(a.scratch_bytes).c_str(),
                    format_bytes(a.comm_bytes).c_str(),
                    fmt::format("{} / {}", format_bytes(a.total_bytes()), format_bytes(a.budget_bytes)).c_str(),
                    extra.c_str());
    }
    if (plan.experts_in_ram_layers > 0) {
        const std::string layers = plan.experts_in_ram_layers == 1
                                       ? std::string("layer 0")
                                       : fmt::format("layers 0-{}", plan.experts_in_ram_layers - 1);
        const std::string of = plan.ram_budget_bytes > 0 ? fmt::format(" of {} free", format_bytes(plan.ram_budget_bytes))
                                                         : std::string();
        std::printf("%-22s experts of %s: %s%s, run by the CPU\n", "System RAM", layers.c_str(),
                    format_bytes(plan.ram_expert_bytes).c_str(), of.c_str());
    }
    std::printf("\nPer token: %u transfer%s (%s), %u all-reduce%s (%s); estimated %.0f tokens/s if memory-bandwidth "
                "bound\n",
                plan.transfers_per_token, plan.transfers_per_token == 1 ? "" : "s",
                format_bytes(plan.transfer_bytes_per_token).c_str(), plan.allreduces_per_token,
                plan.allreduces_per_token == 1 ? "" : "s", format_bytes(plan.allreduce_bytes_per_token).c_str(),
                plan.tokens_per_second);
}

int run_plan(const PlanCommandOptions& options) {
    Result<std::filesystem::path> path = model_or_default(options.model);
    if (!path) return report_error(path.error());
    Result<ModelShape> shape = read_model_shape(*path);
    if (!shape) return report_error(shape.error());
    std::string source;
    Result<std::vector<DeviceDesc>> devices = find_devices(options.devices, source);
    if (!devices) return report_error(devices.error());
    Result<SplitMode> mode = parse_split_mode(options.split);
    if (!mode) return report_error(mode.error());

    PlanOptions o;
    o.mode = *mode;
    o.ratios = options.ratios;
    o.use = options.use;
    o.main_device = options.main;
    o.n_ctx = options.n_ctx;
    o.kv_type = options.kv_type == "q8_0" ? KvCacheType::q8_0 : KvCacheType::f16;
    o.reserve_bytes = options.reserve_mib << 20;
    o.n_batch = options.n_batch;
    Result<int32_t> experts = parse_experts_in_ram(options.experts_in_ram);
    if (!experts) return report_error(experts.error());
    o.experts_in_ram = *experts;
    if (options.ram_gib > 0) {
        o.ram_bytes = static_cast<uint64_t>(options.ram_gib * static_cast<double>(uint64_t{1} << 30));
    } else if (Result<std::vector<DeviceDesc>> ram = cpu_devices("cpu"); ram && !ram->empty()) {
        o.ram_bytes = ram->front().free_bytes;
    }
    Result<DevicePlan> plan = plan_devices(*shape, *devices, o);
    if (!plan) return report_error(plan.error());
    if (options.json) {
        std::printf("%s\n", json_text(to_json(*shape, *devices, *plan), 2).c_str());
    } else {
        print_plan(*shape, *devices, *plan, source);
    }
    return 0;
}

}  // namespace

Command add_plan_command(CLI::App& app) {
    auto options = std::make_shared<PlanCommandOptions>();
    CLI::App* sub = app.add_subcommand("plan", "Show how a model would be split across the devices, without loading it");
    sub->add_option("-m,--model", options->model, "Model file (.gguf); default: the model set up by scripts/run");
    sub->add_option("--devices", options->devices, "Devices as NAME:GiB;NAME:GiB (default: this machine's GPUs)");
    sub->add_option("--split", options->split, "auto, single, layer or tensor")->capture_default_str();
    sub->add_option("--ratios", options->ratios, "Split ratios, one per device used (e.g. 3,1)")->delimiter(',');
    sub->add_option("--use", options->use, "Devices to use, by index (default: all)")->delimiter(',');
    sub->add_option("--main", options->main, "Main device (single and tensor split put the output layer there)");
    sub->add_option("--ctx", options->n_ctx, "Context length")->check(CLI::Range(16u, 1u << 24))->capture_default_str();
    sub->add_option("--kv-type", options->kv_type, "KV cache type")
        ->check(CLI::IsMember({"f16", "q8_0"}))
        ->capture_default_str();
    sub->add_option("--reserve-mib", options->reserve_mib, "Memory to keep free on every device (MiB)")
        ->capture_default_str();
    sub->add_option("--batch", options->n_batch, "Prompt tokens processed together")
        ->check(CLI::Range(1u, 65536u))
        ->capture_default_str();
    add_experts_in_ram_option(*sub, options->experts_in_ram);
    sub->add_option("--ram", options->ram_gib, "System memory free for experts in RAM, in GiB (default: this "
                                               "machine's available memory)")
        ->check(CLI::Range(0.0, 1048576.0));
    sub->add_flag("--json", options->json, "Print the plan as JSON");
    return {sub, [options] { return run_plan(*options); }};
}

}  // namespace powerhouse::cli
