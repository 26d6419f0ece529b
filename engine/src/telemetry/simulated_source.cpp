// Simulated GPUs: plausible readings for machines without GPUs. Each GPU follows the load
// and memory the engine reports for it: utilization tracks the load with a little noise,
// power moves between idle and the board's limit, temperature follows power with a lag, and
// clocks and fan follow both. The noise is a fixed-seed generator, so runs repeat.
//
// A GPU can fail on cue (":xid=CODE@N", ":lost@N" after its NAME:GiB), so that the app's
// end-to-end tests see what a real failure shows: the Xid event, then a lost GPU.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <random>
#include <string_view>
#include <utility>

#include "powerhouse/plan.h"
#include "telemetry/gpu_source.h"

namespace powerhouse::telemetry {
namespace {

// Board power limit by name, for the power readings' scale.
double power_limit_for(const std::string& name) {
    struct Known {
        const char* part;
        double watts;
    };
    static constexpr Known known[] = {{"4090", 450}, {"5090", 575}, {"3090", 350}, {"4080", 320}, {"A100", 400},
                                      {"H100", 700}, {"H200", 700}, {"L40", 300},  {"A6000", 300}};
    for (const Known& k : known) {
        if (name.find(k.part) != std::string::npos) return k.watts;
    }
    return 300;
}

// How a simulated GPU fails; sample numbers count its samples from 1.
struct SimulatedFailure {
    std::vector<std::pair<uint32_t, uint64_t>> xids;  // (Xid, the sample that reports it), in spec order
    std::optional<uint64_t> lost_from;
};

struct SimulatedGpu {
    float load = 0;           // what the engine reported
    uint64_t engine_bytes = 0;
    double temperature = 32;  // degrees, lagging behind power
    double power = 0;
    double last_time = -1;
    SimulatedFailure failure;
    uint64_t samples = 0;
};

template <class T>
bool parse_number(std::string_view text, T& value) {
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc() && ptr == text.data() + text.size() && !text.empty();
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
}

// One ";" item's failure options, taken off its end; `item` keeps the NAME:GiB before them.
// Options are recognised by their start ("xid", "lost"), so a misspelt one is an error
// here rather than a puzzling "not NAME:GiB".
Result<SimulatedFailure> take_failure(std::string& item) {
    const std::string whole = item;
    SimulatedFailure failure;
    for (size_t colon = item.rfind(':'); colon != std::string::npos; colon = item.rfind(':')) {
        const std::string_view option = trim(std::string_view(item).substr(colon + 1));
        uint32_t xid = 0;
        uint64_t at = 0;
        bool ok = false;
        if (option.rfind("xid", 0) == 0) {
            const size_t sign = option.find('@');
            ok = option.rfind("xid=", 0) == 0 && sign != std::string_view::npos &&
                 parse_number(option.substr(4, sign - 4), xid) && parse_number(option.substr(sign + 1), at);
            if (ok) failure.xids.emplace_back(xid, at);
        } else if (option.rfind("lost", 0) == 0) {
            ok = option.rfind("lost@", 0) == 0 && parse_number(option.substr(5), at);
            if (ok) failure.lost_from = std::min(failure.lost_from.value_or(at), at);
        } else {
            break;
        }
        if (!ok || at == 0) {
            return make_error(ErrorCode::invalid_argument,
                              fmt::format("device \"{}\": \"{}\" is not xid=CODE@N or lost@N, N counting the GPU's "
                                          "samples from 1 (for example \"RTX 4090:24:xid=79@3\")",
                                          whole, option));
        }
        item.erase(colon);
    }
    if (item.find_first_not_of(' ') == std::string::npos) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("device \"{}\" has no NAME:GiB before its failure", whole));
    }
    std::reverse(failure.xids.begin(), failure.xids.end());
    // A GPU that fell off the bus answers "GPU is lost" from then on.
    for (const auto& [code, at] : failure.xids) {
        if (code == 79) failure.lost_from = std::min(failure.lost_from.value_or(at), at);
    }
    return failure;
}

class SimulatedSource final : public GpuSource {
public:
    explicit SimulatedSource(const std::string& spec);

    const std::string& status() const override { return status_; }
    const std::string& description() const override { return description_; }
    bool simulated() const override { return true; }
    const std::string& xid_status() const override { return xid_status_; }
    const std::vector<GpuInfo>& gpus() const override { return gpus_; }
    const std::vector<GpuLink>& links() const override { return links_; }
    std::vector<GpuSample> sample(double time) override;
    void report_activity(uint32_t gpu, float load, uint64_t memory_bytes) override {
        if (gpu >= state_.size()) return;
        state_[gpu].load = std::clamp(load, 0.0f, 1.0f);
        state_[gpu].engine_bytes = memory_bytes;
    }

private:
    std::string status_;
    std::string description_ = "simulated";
    std::string xid_status_;  // always empty: every simulated GPU reports the Xids it is given
    std::vector<GpuInfo> gpus_;
    std::vector<GpuLink> links_;
    std::vector<SimulatedGpu> state_;
    std::mt19937 noise_{20261202};
};

SimulatedSource::SimulatedSource(const std::string& spec) {
    // The same NAME:GiB list as the planner's --devices, once the failures are taken off.
    std::vector<SimulatedFailure> failures;
    std::string devices_spec;
    for (size_t at = 0; at < spec.size();) {
        const size_t end = std::min(spec.find(';', at), spec.size());
        std::string item = spec.substr(at, end - at);
        at = end + 1;
        if (item.find_first_not_of(' ') == std::string::npos) continue;  // as parse_device_spec does
        Result<SimulatedFailure> failure = take_failure(item);
        if (!failure) {
            status_ = "simulated GPUs: " + failure.error().message;
            return;
        }
        failures.push_back(std::move(failure).value());
        devices_spec += item + ";";
    }
    Result<std::vector<DeviceDesc>> devices = parse_device_spec(devices_spec);
    if (!devices) {
        status_ = "simulated GPUs: " + devices.error().message;
        return;
    }
    for (const DeviceDesc& d : *devices) {
        GpuInfo info;
        info.index = static_cast<uint32_t>(gpus_.size());
        info.name = d.name;
        info.uuid = fmt::format("GPU-51a1a7ed-0000-4000-8000-{:012x}", info.index);
        info.pci_bus_id = fmt::format("0000:{:02x}:00.0", 0x41 + info.index);
        info.memory_total = d.total_bytes;
        info.pcie_generation = 4;
        info.pcie_width = 16;
        info.pcie_max_generation = 4;
        info.pcie_max_width = 16;
        info.power_limit_w = power_limit_for(d.name);
        info.ecc_enabled = d.name.find("A100") != std::string::npos || d.name.find("H1") != std::string::npos ||
                           d.name.find("H2") != std::string::npos;
        info.xid_events_watched = true;
        info.simulated = true;
        gpus_.push_back(std::move(info));
        state_.emplace_back();
        state_.back().failure = failures[state_.size() - 1];
    }
    if (gpus_.empty() && status_.empty()) status_ = "no simulated GPUs given";
    // Data-centre parts come in NVLink-connected groups.
    for (uint32_t a = 0; a < gpus_.size(); ++a) {
        for (uint32_t b = a + 1; b < gpus_.size(); ++b) {
            if (gpus_[a].name == gpus_[b].name && gpus_[a].ecc_enabled.value_or(false)) links_.push_back({a, b, 12});
        }
    }
}

std::vector<GpuSample> SimulatedSource::sample(double time) {
    std::normal_distribution<double> jitter(0.0, 1.0);
    std::vector<GpuSample> samples;
    for (size_t i = 0; i < gpus_.size(); ++i) {
        const GpuInfo& info = gpus_[i];
        SimulatedGpu& g = state_[i];
        const double limit = info.power_limit_w.value_or(300);
        const double idle = 0.06 * limit;
        const double target_power = idle + (0.92 * limit - idle) * g.load;
        const double dt = g.last_time < 0 ? 1.0 : std::max(0.0, time - g.last_time);
        g.last_time = time;
        g.power = std::clamp(target_power + jitter(noise_) * 0.01 * limit, 0.5 * idle, limit);
        // Temperature approaches 30 + 50 * (power / limit) with a time constant of ~8 s.
        const double target_temperature = 30.0 + 50.0 * g.power / limit;
        g.temperature += (target_temperature - g.temperature) * (1.0 - std::exp(-dt / 8.0));

        GpuSample s;
        s.time = time;
        const double util = std::clamp(g.load * 100.0 + (g.load > 0 ? jitter(noise_) * 2.0 : 0.0), 0.0, 100.0);
        s.gpu_utilization = static_cast<uint32_t>(std::lround(util));
        s.memory_utilization = static_cast<uint32_t>(std::lround(util * 0.8));
        const uint64_t used = std::min<uint64_t>(info.memory_total, 300ull * 1024 * 1024 + g.engine_bytes);
        s.memory_used = used;
        s.memory_free = info.memory_total - used;
        s.temperature_c = static_cast<uint32_t>(std::lround(g.temperature));
        s.power_w = std::round(g.power * 10.0) / 10.0;
        s.sm_clock_mhz = static_cast<uint32_t>(g.load > 0 ? 2520 - 150 * g.load : 210);
        s.memory_clock_mhz = g.load > 0 ? 10501u : 405u;
        s.fan_percent = static_cast<uint32_t>(std::clamp(30.0 + (g.temperature - 40.0) * 1.5, 30.0, 100.0));
        s.process_memory = g.engine_bytes;
        s.throttle_reasons = g.load > 0 ? 0ull : 1ull;  // idle
        s.ecc_uncorrected = info.ecc_enabled.value_or(false) ? std::optional<uint64_t>(0) : std::nullopt;
        // Failing: the readings above are still drawn, so the other GPUs read as without it.
        ++g.samples;
        if (g.failure.lost_from && g.samples >= *g.failure.lost_from) {
            s = GpuSample{};
            s.time = time;
            s.responding = false;
            s.lost = true;
            s.problem = fmt::format("GPU {} not responding: GPU is lost (simulated)", i);
        }
        for (const auto& [code, at] : g.failure.xids) {
            if (at == g.samples) s.xid_events.push_back(make_xid_event(code, time));
        }
        samples.push_back(std::move(s));
    }
    return samples;
}

}  // namespace

std::unique_ptr<GpuSource> open_simulated_source(const std::string& spec) {
    return std::make_unique<SimulatedSource>(spec);
}

}  // namespace powerhouse::telemetry
