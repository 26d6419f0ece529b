// The power limits Powerhouse changed, each with the limit before its first change, so that
// they can be put back one by one, all at once, or when the monitor goes (GpuMonitor's
// power-limit methods delegate here). The range check and the records live here, above the
// sources, so that NVML and simulated GPUs keep their books the same way.
//
// Thread-safety: none of its own; the monitor calls it under the mutex that serializes
// every call into the source.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "powerhouse/result.h"
#include "powerhouse/telemetry.h"
#include "telemetry/gpu_source.h"

namespace powerhouse::telemetry {

class PowerLimitBook {
public:
    Result<PowerLimits> read(GpuSource& source, uint32_t gpu) const;
    Result<PowerLimits> set(GpuSource& source, uint32_t gpu, double watts);
    Result<void> restore(GpuSource& source, uint32_t gpu);
    Result<void> restore_all(GpuSource& source);
    std::vector<PowerLimitChange> changes(const GpuSource& source) const;

private:
    // Milliwatts, as NVML takes them, so that "set back to what it was" compares exactly.
    struct Record {
        uint32_t before_mw = 0;
        uint32_t now_mw = 0;
    };
    std::map<uint32_t, Record> records_;  // by GPU index
};

}  // namespace powerhouse::telemetry
