// How bench adds up per-device times into a decode step's time: the roofline of a step (each
// device's weight bytes at its peak bandwidth) and the GPU time a step took.
//
// Parts on one GPU (the same UUID, as cuda:0,0 places them) share its memory and its time:
// their times add. Parts on different GPUs add too under a layer split, where they take
// turns on a step; under a tensor split they work at once, so the step lasts as long as the
// slowest GPU. A device without a UUID (a CPU device) counts as a GPU of its own.
//
// Thread-safety: pure functions.
#pragma once

#include <span>

#include "powerhouse/device_types.h"
#include "powerhouse/plan.h"

namespace powerhouse::cli {

// `per_device[i]` belongs to usage[i]; both have the same length.
double step_time_over_gpus(std::span<const DeviceUsage> usage, std::span<const double> per_device, SplitMode split);

}  // namespace powerhouse::cli
