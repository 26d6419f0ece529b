// What throttling cost a generation (powerhouse/power.h): how long a GPU was slowed, why,
// and the tokens/s with and without.
#include <algorithm>

#include "powerhouse/power.h"

namespace powerhouse {

ThrottleSummary summarize_throttling(const std::vector<GpuSample>& samples, const std::vector<uint64_t>& tokens) {
    ThrottleSummary out;
    if (samples.empty()) return out;
    out.seconds = std::max(0.0, samples.back().time - samples.front().time);
    const bool counted = tokens.size() == samples.size();
    double slowed_tokens = 0, free_tokens = 0, free_seconds = 0, speed_lost = 0;
    int simulated_slowed = 0;
    for (size_t i = 1; i < samples.size(); ++i) {
        const GpuSample& s = samples[i];
        const double dt = std::max(0.0, s.time - samples[i - 1].time);
        const uint64_t mask = s.responding ? s.throttle_reasons.value_or(0) & kSlowdownReasons : 0;
        out.reasons |= mask;
        const double n = counted ? static_cast<double>(tokens[i]) : 0.0;
        if (mask != 0) {
            out.throttled_seconds += dt;
            slowed_tokens += n;
            if (s.simulated_speed) {
                speed_lost += 1.0 - *s.simulated_speed;
                ++simulated_slowed;
            }
        } else {
            free_seconds += dt;
            free_tokens += n;
        }
    }
    out.reason_names = throttle_reason_names(out.reasons);
    if (counted && out.throttled_seconds > 0) out.tokens_per_second_throttled = slowed_tokens / out.throttled_seconds;
    if (counted && free_seconds > 0) out.tokens_per_second_unthrottled = free_tokens / free_seconds;
    if (simulated_slowed > 0) out.simulated_speed_lost = speed_lost / simulated_slowed;
    return out;
}

}  // namespace powerhouse
