// Simulated GPUs: plausible readings for machines without GPUs. Each GPU follows the load
// and memory the engine reports for it: utilization tracks the load with a little noise,
// power moves between idle and what the load draws under the GPU's power limit, temperature
// follows power with a lag, and clocks and fan follow both. The noise is a fixed-seed
// generator, so runs repeat.
//
// Power limits: each GPU has a default and a range by its name (power_spec_for), and a limit
// that set_power_limit() changes. The power model (simulate_power) makes the draw, the core
// clock and a speed factor (GpuSample::simulated_speed) follow the limit the way a
// memory-bound decode does on a real board, so that the efficiency sweep finds a best limit
// inside the range, not at an end. It is a model: every figure it gives is marked simulated.
//
// A GPU can fail on cue (":xid=CODE@N", ":lost@N" after its NAME:GiB), so that the app's
// end-to-end tests see what a real failure shows: the Xid event, then a lost GPU; and it can
// refuse to change its power limit (":power=denied" as without root, ":power=fixed" as a
// board that does not allow it), so that they see those answers too.
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

// A board's power limits (W): the default it boots with and the range the driver allows,
// after the published figures (consumer boards may go above their default, data-centre ones
// not).
struct PowerSpec {
    const char* part;
    double default_w, min_w, max_w;
};

PowerSpec power_spec_for(const std::string& name) {
    static constexpr PowerSpec known[] = {
        {"5090", 575, 400, 600}, {"4090", 450, 150, 600}, {"4080", 320, 150, 320}, {"3090", 350, 100, 400},
        {"A100", 400, 100, 400}, {"H100", 700, 200, 700}, {"H200", 700, 200, 700}, {"L40", 300, 100, 300},
        {"A6000", 300, 100, 300},
    };
    for (const PowerSpec& k : known) {
        if (name.find(k.part) != std::string::npos) return k;
    }
    return {"", 300, 150, 300};
}

// The power model. At full clocks a GPU draws idle (6% of its default limit) plus what the
// load adds (up to 92% of the default at load 1). Of that added draw 30% is memory, which the
// core clock does not change, and 70% the core, which draws clock x voltage^2 with the voltage
// following the clock down to 80% and staying there below: the core's draw falls as the
// cube of the clock, then linearly. Under a limit below the draw, the clock drops until the
// draw fits. A decoded token spends 80% of its time on memory and 20% on the core, so its
// speed is 1 / (0.2 / clock + 0.8). With these numbers an RTX 4090 (default 450 W, drawing
// 414 W unlimited) keeps 97% of its speed at 315 W and 93% at 270 W, as owners who sweep
// their limits report, and its tokens per joule peak near half its default, below which
// the clock falls faster than the power.
constexpr double kIdleShare = 0.06, kFullShare = 0.92;
constexpr double kMemoryPowerShare = 0.3, kVoltageFloor = 0.8, kMinClock = 0.05, kMemoryBoundTime = 0.8;

struct PowerState {
    double watts = 0;
    double clock = 1;  // share of the full core clock
    double speed = 1;  // share of the full speed
};

PowerState simulate_power(double default_w, double limit_w, double load) {
    const double idle = kIdleShare * default_w;
    const double added = load * (kFullShare * default_w - idle);
    PowerState p{idle + added, 1.0, 1.0};
    if (p.watts <= limit_w || added <= 0) return p;
    // The core's share of its full draw that fits: c^3 above the voltage floor, else c * floor^2.
    const double core = ((limit_w - idle) / added - kMemoryPowerShare) / (1.0 - kMemoryPowerShare);
    const double floor_core = kVoltageFloor * kVoltageFloor * kVoltageFloor;
    const double c = std::clamp(core >= floor_core ? std::cbrt(core) : core / (kVoltageFloor * kVoltageFloor),
                                kMinClock, 1.0);
    const double v = std::max(c, kVoltageFloor);
    p.clock = c;
    p.watts = idle + added * (kMemoryPowerShare + (1.0 - kMemoryPowerShare) * c * v * v);
    p.speed = 1.0 / ((1.0 - kMemoryBoundTime) / c + kMemoryBoundTime);
    return p;
}

// How a simulated GPU fails; sample numbers count its samples from 1.
struct SimulatedFailure {
    std::vector<std::pair<uint32_t, uint64_t>> xids;  // (Xid, the sample that reports it), in spec order
    std::optional<uint64_t> lost_from;
    std::optional<PowerLimitRefusal> power;  // how setting its power limit is refused
};

struct SimulatedGpu {
    float load = 0;           // what the engine reported
    uint64_t engine_bytes = 0;
    double temperature = 32;  // degrees, lagging behind power
    double power = 0;
    double last_time = -1;
    PowerSpec power_spec{};
    double limit_w = 0;       // the power limit set now
    SimulatedFailure failure;
    uint64_t samples = 0;
    bool lost() const { return failure.lost_from && samples >= *failure.lost_from; }
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
        } else if (option.rfind("power", 0) == 0) {
            at = 1;  // no sample number: refused from the start
            ok = option == "power=denied" || option == "power=fixed";
            if (ok) failure.power = option == "power=denied" ? PowerLimitRefusal::no_permission
                                                             : PowerLimitRefusal::not_supported;
        } else {
            break;
        }
        if (!ok || at == 0) {
            return make_error(ErrorCode::invalid_argument,
                              fmt::format("device \"{}\": \"{}\" is not xid=CODE@N, lost@N (N counting the GPU's "
                                          "samples from 1), power=denied or power=fixed (for example "
                                          "\"RTX 4090:24:xid=79@3\")",
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
    Result<PowerLimits> power_limits(uint32_t gpu) override;
    Result<void> set_power_limit(uint32_t gpu, uint32_t milliwatts) override;
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
        const PowerSpec power = power_spec_for(d.name);
        info.power_limit_w = power.default_w;
        info.ecc_enabled = d.name.find("A100") != std::string::npos || d.name.find("H1") != std::string::npos ||
                           d.name.find("H2") != std::string::npos;
        info.xid_events_watched = true;
        info.simulated = true;
        gpus_.push_back(std::move(info));
        state_.emplace_back();
        state_.back().failure = failures[state_.size() - 1];
        state_.back().power_spec = power;
        state_.back().limit_w = power.default_w;
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
        const double board = g.power_spec.default_w;
        const PowerState p = simulate_power(board, g.limit_w, g.load);
        const double dt = g.last_time < 0 ? 1.0 : std::max(0.0, time - g.last_time);
        g.last_time = time;
        g.power = std::clamp(p.watts + jitter(noise_) * 0.01 * board, 0.5 * kIdleShare * board, g.limit_w);
        // Temperature approaches 30 + 50 * (power / default limit) with a time constant of ~8 s.
        const double target_temperature = 30.0 + 50.0 * g.power / board;
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
        s.sm_clock_mhz = static_cast<uint32_t>(g.load > 0 ? (2520 - 150 * g.load) * p.clock : 210);
        s.memory_clock_mhz = g.load > 0 ? 10501u : 405u;
        s.fan_percent = static_cast<uint32_t>(std::clamp(30.0 + (g.temperature - 40.0) * 1.5, 30.0, 100.0));
        s.process_memory = g.engine_bytes;
        s.throttle_reasons = g.load <= 0 ? 0x1ull : p.clock < 1.0 ? 0x4ull : 0ull;  // idle; power cap
        s.simulated_speed = p.speed;
        s.ecc_uncorrected = info.ecc_enabled.value_or(false) ? std::optional<uint64_t>(0) : std::nullopt;
        // Failing: the readings above are still drawn, so the other GPUs read as without it.
        ++g.samples;
        if (g.lost()) {
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

Result<PowerLimits> SimulatedSource::power_limits(uint32_t gpu) {
    if (gpu >= state_.size()) return no_such_gpu(gpu, state_.size());
    const SimulatedGpu& g = state_[gpu];
    PowerLimits out;
    out.gpu = gpu;
    out.simulated = true;
    if (g.lost()) return power_limit_error(PowerLimitRefusal::lost, gpus_[gpu], 0, out);
    out.current_w = out.enforced_w = g.limit_w;
    out.default_w = g.power_spec.default_w;
    out.min_w = g.power_spec.min_w;
    out.max_w = g.power_spec.max_w;
    return out;
}

Result<void> SimulatedSource::set_power_limit(uint32_t gpu, uint32_t milliwatts) {
    if (gpu >= state_.size()) return no_such_gpu(gpu, state_.size());
    SimulatedGpu& g = state_[gpu];
    const double watts = milliwatts / 1000.0;
    if (g.lost()) return power_limit_error(PowerLimitRefusal::lost, gpus_[gpu], watts, {});
    if (g.failure.power) {
        return power_limit_error(*g.failure.power, gpus_[gpu], watts, {},
                                 *g.failure.power == PowerLimitRefusal::not_supported ? "Not Supported (simulated)"
                                                                                      : "");
    }
    if (watts < g.power_spec.min_w || watts > g.power_spec.max_w) {
        Result<PowerLimits> range = power_limits(gpu);
        return power_limit_error(PowerLimitRefusal::out_of_range, gpus_[gpu], watts, range ? *range : PowerLimits{});
    }
    g.limit_w = watts;
    gpus_[gpu].power_limit_w = watts;
    return {};
}

}  // namespace

std::unique_ptr<GpuSource> open_simulated_source(const std::string& spec) {
    return std::make_unique<SimulatedSource>(spec);
}

}  // namespace powerhouse::telemetry
