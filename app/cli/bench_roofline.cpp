#include "bench_roofline.h"

#include <algorithm>
#include <string>
#include <vector>

namespace powerhouse::cli {

double step_time_over_gpus(std::span<const DeviceUsage> usage, std::span<const double> per_device, SplitMode split) {
    // Each GPU's own sum, in the order the GPUs first appear.
    std::vector<std::string> gpus;
    std::vector<double> times;
    for (size_t i = 0; i < usage.size() && i < per_device.size(); ++i) {
        const std::string key = usage[i].uuid.empty() ? "device " + std::to_string(i) : usage[i].uuid;
        const auto at = std::find(gpus.begin(), gpus.end(), key);
        if (at == gpus.end()) {
            gpus.push_back(key);
            times.push_back(per_device[i]);
        } else {
            times[static_cast<size_t>(at - gpus.begin())] += per_device[i];
        }
    }
    if (times.empty()) return 0.0;
    if (split == SplitMode::tensor) return *std::max_element(times.begin(), times.end());
    double total = 0;
    for (double t : times) total += t;
    return total;
}

}  // namespace powerhouse::cli
