#include "telemetry/power_limit_book.h"

#include <fmt/format.h>

#include <cmath>

namespace powerhouse {

namespace {

// Watts as a person writes them: "300", "287.5" (to NVML's milliwatt).
std::string watts_text(double watts) {
    return fmt::format("{}", std::round(watts * 1000.0) / 1000.0);
}

uint32_t to_milliwatts(double watts) {
    return static_cast<uint32_t>(std::lround(watts * 1000.0));
}

// "GPU 0 (NVIDIA GeForce RTX 4090)"; "GPU 0" where the driver gave no name.
std::string gpu_label(const GpuInfo& gpu) {
    const std::string plain = fmt::format("GPU {}", gpu.index);
    return gpu.name.empty() || gpu.name == plain ? plain : fmt::format("{} ({})", plain, gpu.name);
}

}  // namespace

std::string nvidia_smi_power_limit_command(uint32_t gpu, double watts) {
    return fmt::format("sudo nvidia-smi -i {} -pl {}", gpu, watts_text(watts));
}

namespace telemetry {

Error power_limit_error(PowerLimitRefusal why, const GpuInfo& gpu, double watts, const PowerLimits& limits,
                        const std::string& detail) {
    const std::string label = gpu_label(gpu);
    const std::string quoted = detail.empty() ? std::string() : fmt::format(" (the driver says: {})", detail);
    switch (why) {
        case PowerLimitRefusal::no_permission:
            return make_error(ErrorCode::io,
                              fmt::format("Powerhouse lacks the right to change the power limit of {}: the NVIDIA "
                                          "driver lets only root (or users its settings allow) do that. To set it "
                                          "yourself, run: {}",
                                          label, nvidia_smi_power_limit_command(gpu.index, watts)));
        case PowerLimitRefusal::not_supported:
            return make_error(ErrorCode::unsupported,
                              fmt::format("{} does not allow setting its power limit{}", label, quoted));
        case PowerLimitRefusal::out_of_range:
            if (limits.min_w && limits.max_w) {
                return make_error(
                    ErrorCode::invalid_argument,
                    fmt::format("{} takes a power limit from {} W to {} W; {} W is outside that range", label,
                                watts_text(*limits.min_w), watts_text(*limits.max_w), watts_text(watts)));
            }
            return make_error(ErrorCode::invalid_argument,
                              fmt::format("the driver refused {} W as the power limit of {}: outside the range it "
                                          "allows, which it does not report{}",
                                          watts_text(watts), label, quoted));
        case PowerLimitRefusal::lost:
            return make_error(ErrorCode::device_failed,
                              fmt::format("{} is lost (fallen off the bus, or gone until a reset): its power limit "
                                          "cannot be read or changed",
                                          label));
        case PowerLimitRefusal::failed:
            break;
    }
    return make_error(ErrorCode::internal, fmt::format("the driver could not set the power limit of {} to {} W{}",
                                                       label, watts_text(watts), quoted));
}

Error no_such_gpu(uint32_t gpu, size_t count) {
    return make_error(ErrorCode::invalid_argument,
                      count == 0 ? fmt::format("there is no GPU {}: no GPU was found", gpu)
                                 : fmt::format("there is no GPU {}: the GPUs are numbered 0 to {}", gpu, count - 1));
}

Result<PowerLimits> PowerLimitBook::read(GpuSource& source, uint32_t gpu) const {
    Result<PowerLimits> limits = source.power_limits(gpu);
    if (limits) {
        if (const auto it = records_.find(gpu); it != records_.end()) {
            limits->changed_from_w = it->second.before_mw / 1000.0;
        }
    }
    return limits;
}

Result<PowerLimits> PowerLimitBook::set(GpuSource& source, uint32_t gpu, double watts) {
    if (gpu >= source.gpus().size()) return no_such_gpu(gpu, source.gpus().size());
    const GpuInfo& info = source.gpus()[gpu];
    // Above any board's limit by far, and within NVML's unsigned milliwatts.
    if (!std::isfinite(watts) || watts <= 0 || watts > 100000) {
        return make_error(
            ErrorCode::invalid_argument,
            fmt::format("a power limit is a number of watts above 0 (for {}: {} given)", gpu_label(info), watts));
    }
    Result<PowerLimits> limits = source.power_limits(gpu);
    if (!limits) return std::move(limits).error();
    const uint32_t mw = to_milliwatts(watts);
    // Caught here rather than by the driver: the answer then names the range, and a user
    // without the right is not sent off to run a command the driver would refuse too.
    if ((limits->min_w && mw < to_milliwatts(*limits->min_w)) ||
        (limits->max_w && mw > to_milliwatts(*limits->max_w))) {
        return power_limit_error(PowerLimitRefusal::out_of_range, info, watts, *limits);
    }
    const std::optional<double> before = limits->current_w ? limits->current_w : limits->enforced_w;
    if (!before) {
        // Without the value before, the change could never be put back.
        return make_error(ErrorCode::unsupported,
                          fmt::format("{} does not report its power limit, so Powerhouse could not put it back: "
                                      "it is left as it is",
                                      gpu_label(info)));
    }
    if (Result<void> r = source.set_power_limit(gpu, mw); !r) return std::move(r).error();
    Record& record = records_.try_emplace(gpu, Record{to_milliwatts(*before), mw}).first->second;
    record.now_mw = mw;
    if (record.now_mw == record.before_mw) records_.erase(gpu);
    return read(source, gpu);
}

Result<void> PowerLimitBook::restore(GpuSource& source, uint32_t gpu) {
    const auto it = records_.find(gpu);
    if (it == records_.end()) return {};
    const uint32_t before = it->second.before_mw;
    if (Result<void> r = source.set_power_limit(gpu, before); !r) {
        Error e = std::move(r).error();
        e.message = fmt::format("GPU {}'s power limit is still {} W, not back at its {} W: {}", gpu,
                                watts_text(it->second.now_mw / 1000.0), watts_text(before / 1000.0), e.message);
        return e;
    }
    records_.erase(gpu);
    return {};
}

Result<void> PowerLimitBook::restore_all(GpuSource& source) {
    std::vector<uint32_t> gpus;
    for (const auto& [gpu, record] : records_) gpus.push_back(gpu);
    std::optional<Error> failed;
    for (const uint32_t gpu : gpus) {
        if (Result<void> r = restore(source, gpu); !r) {
            if (!failed)
                failed = std::move(r).error();
            else
                failed->message += "; " + r.error().message;
        }
    }
    if (failed) return *std::move(failed);
    return {};
}

std::vector<PowerLimitChange> PowerLimitBook::changes(const GpuSource& source) const {
    std::vector<PowerLimitChange> out;
    for (const auto& [gpu, record] : records_) {
        PowerLimitChange c;
        c.gpu = gpu;
        if (gpu < source.gpus().size()) c.uuid = source.gpus()[gpu].uuid;
        c.before_w = record.before_mw / 1000.0;
        c.now_w = record.now_mw / 1000.0;
        out.push_back(std::move(c));
    }
    return out;
}

}  // namespace telemetry
}  // namespace powerhouse
