#include "runtime/guess_cost.h"

#include <algorithm>
#include <cmath>

namespace powerhouse {

namespace {

constexpr double kMeanWeight = 0.25;  // a new timing's share of the running mean
constexpr double kRecordFade = 0.9;   // a round's weight after the next (half in ~7 rounds)
constexpr double kMargin = 1.01;      // guessing must beat not guessing by this much

}  // namespace

void StepCost::observe(uint32_t rows, double seconds) {
    if (rows == 0 || !(seconds > 0) || !std::isfinite(seconds)) return;
    double& mean = mean_[std::min(rows, kMaxRows)];
    mean = mean == 0 ? seconds : mean + kMeanWeight * (seconds - mean);
}

std::optional<double> StepCost::seconds(uint32_t rows) const {
    const uint32_t r = std::max<uint32_t>(rows, 1);
    if (r <= kMaxRows && mean_[r] > 0) return mean_[r];
    // The nearest timed counts below and above; else the two nearest on one side.
    int below = -1, below2 = -1, above = -1, above2 = -1;
    for (int n = static_cast<int>(std::min(r, kMaxRows)); n >= 1; --n) {
        if (mean_[n] == 0) continue;
        if (below < 0) {
            below = n;
        } else {
            below2 = n;
            break;
        }
    }
    for (int n = static_cast<int>(r) + 1; n <= static_cast<int>(kMaxRows); ++n) {
        if (mean_[n] == 0) continue;
        if (above < 0) {
            above = n;
        } else {
            above2 = n;
            break;
        }
    }
    int a = -1, b = -1;
    if (below >= 0 && above >= 0) {
        a = below, b = above;
    } else if (below2 >= 0) {
        a = below2, b = below;
    } else if (above2 >= 0) {
        a = above, b = above2;
    } else {
        return std::nullopt;
    }
    // More rows never take less: noise that says so gives the time of the nearest count timed.
    const double slope = (mean_[b] - mean_[a]) / (b - a);
    const auto x = static_cast<double>(r);
    if (slope < 0) return std::abs(x - a) <= std::abs(x - b) ? mean_[a] : mean_[b];
    return std::max(mean_[a] + slope * (x - a), 0.0);
}

void GuessRecord::update(uint32_t made, uint32_t kept_now) {
    if (made == 0) return;
    kept = kRecordFade * kept + kept_now;
    missed = kRecordFade * missed + (kept_now < made ? 1.0 : 0.0);
}

double expected_kept(double rate, uint32_t k) {
    double sum = 0, term = 1;
    for (uint32_t i = 0; i < k; ++i) {
        term *= rate;
        sum += term;
    }
    return sum;
}

std::optional<uint32_t> guesses_that_pay(const StepCost& cost, uint32_t rows, double value, double rate, uint32_t limit,
                                         double seconds_per_guess) {
    const std::optional<double> base = cost.seconds(rows);
    if (!base) return std::nullopt;
    const double without = value / *base;
    uint32_t best = 0;
    double best_rate = without * kMargin;
    for (uint32_t k = 1; k <= limit; ++k) {
        const std::optional<double> t = cost.seconds(rows + k);
        if (!t) return std::nullopt;
        const double with = (value + expected_kept(rate, k)) / (*t + k * seconds_per_guess);
        if (with > best_rate) {
            best = k;
            best_rate = with;
        }
    }
    return best;
}

}  // namespace powerhouse
