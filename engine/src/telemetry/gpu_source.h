// Where GPU readings come from: NVML (nvml_source.cpp) or simulated GPUs
// (simulated_source.cpp). The monitor (gpu_monitor.cpp) samples one source on its thread.
//
// Thread-safety: a source is used by one thread at a time (the monitor serializes calls).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "powerhouse/telemetry.h"

namespace powerhouse::telemetry {

class GpuSource {
public:
    virtual ~GpuSource() = default;
    // Empty when GPUs can be read; else what is wrong, for the user.
    virtual const std::string& status() const = 0;
    virtual const std::string& description() const = 0;  // "NVML (driver 575.51.03)"
    virtual bool simulated() const = 0;
    // Empty when every GPU's Xid events are watched; else why not (TelemetrySnapshot::xid_status).
    virtual const std::string& xid_status() const = 0;
    virtual const std::vector<GpuInfo>& gpus() const = 0;
    virtual const std::vector<GpuLink>& links() const = 0;
    // One reading per GPU (in gpus() order) at `time`, with the Xids seen since the last one
    // (xid_events) and `lost`; the monitor keeps last_xid and last_fatal_xid.
    virtual std::vector<GpuSample> sample(double time) = 0;
    virtual void report_activity(uint32_t gpu, float load, uint64_t memory_bytes) = 0;

    // The GPU's power limits (without PowerLimits::changed_from_w, which the monitor keeps).
    // Errors: no such GPU, or a lost one (power_limit_error's words).
    virtual Result<PowerLimits> power_limits(uint32_t gpu) = 0;
    // Asks the driver to set the limit; its refusals come back as power_limit_error()s. On
    // success gpus()[gpu].power_limit_w follows the limit now enforced.
    virtual Result<void> set_power_limit(uint32_t gpu, uint32_t milliwatts) = 0;
};

// Why a GPU's power limit could not be read or set: each gets its own words and ErrorCode
// (see GpuMonitor::set_power_limit).
enum class PowerLimitRefusal {
    no_permission,  // NVML_ERROR_NO_PERMISSION: not root
    not_supported,  // NVML_ERROR_NOT_SUPPORTED, or the library lacks the function
    out_of_range,   // NVML_ERROR_INVALID_ARGUMENT for a set, or caught before asking
    lost,           // NVML_ERROR_GPU_IS_LOST
    failed,         // anything else; `detail` quotes the driver
};
// `limits` gives the range for out_of_range (where known); `detail` is the driver's own
// words, added where they help ("Unknown Error (NVML error 999)").
Error power_limit_error(PowerLimitRefusal why, const GpuInfo& gpu, double watts, const PowerLimits& limits,
                        const std::string& detail = {});
// The error for a GPU index the source does not have.
Error no_such_gpu(uint32_t gpu, size_t count);

// An Xid seen at `time`, described.
inline XidEvent make_xid_event(uint32_t xid, double time) {
    return XidEvent{xid, time, xid_description(xid), xid_is_fatal(xid)};
}

// NVML from `library` (empty: libnvidia-ml.so.1).
std::unique_ptr<GpuSource> open_nvml_source(const std::filesystem::path& library);
// Simulated GPUs from a spec "NAME:GiB;NAME:GiB", each optionally failing
// (":xid=CODE@N", ":lost@N": see telemetry.h); a malformed spec gives a source with no GPUs
// whose status says what is wrong.
std::unique_ptr<GpuSource> open_simulated_source(const std::string& spec);

}  // namespace powerhouse::telemetry
