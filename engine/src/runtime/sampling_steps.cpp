// The steps of the sampler chain: penalties, argmax, top-k, top-p, min-p, weights and the draw.
#include "runtime/sampling_steps.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "tensor/argmax.h"

namespace powerhouse::sampling {

void apply_penalties(std::span<float> logits, std::span<const TokenId> window, const SamplingParams& params,
                     std::span<int32_t> counts) {
    const auto n_vocab = static_cast<TokenId>(logits.size());
    for (TokenId id : window) {
        if (id >= 0 && id < n_vocab) ++counts[static_cast<size_t>(id)];
    }
    // Second pass over the window: each distinct token is penalized once, at its first
    // occurrence, and its count is cleared so that the scratch is all zero again.
    for (TokenId id : window) {
        if (id < 0 || id >= n_vocab) continue;
        int32_t& count = counts[static_cast<size_t>(id)];
        if (count == 0) continue;
        float& logit = logits[static_cast<size_t>(id)];
        logit = logit > 0.0f ? logit / params.repeat_penalty : logit * params.repeat_penalty;
        logit -= static_cast<float>(count) * params.frequency_penalty + params.presence_penalty;
        count = 0;
    }
}

TokenId argmax(std::span<const float> logits) {
    static_assert(kNoToken == -1, "powerhouse::argmax returns -1 for no value");
    return powerhouse::argmax(logits);
}

size_t keep_top_k(std::span<TokenCandidate> candidates, int32_t k) {
    if (k <= 0 || static_cast<size_t>(k) >= candidates.size()) return candidates.size();
    const auto kept = static_cast<size_t>(k);
    const auto first = candidates.begin();
    const auto middle = first + static_cast<std::ptrdiff_t>(kept);
    // A small k: heap selection, about one comparison per candidate (0.5 ms for 256k tokens
    // where nth_element takes 4). A large k: the heap costs n log k, nth_element is linear.
    if (kept <= 4096) {
        std::partial_sort(first, middle, candidates.end(), comes_before);
    } else {
        std::nth_element(first, middle, candidates.end(), comes_before);
        std::sort(first, middle, comes_before);
    }
    return kept;
}

namespace {

// Candidates in canonical order already: one scan.
size_t keep_top_p_sorted(std::span<const TokenCandidate> candidates, float p) {
    const float max_logit = candidates.front().logit;
    double total = 0.0;
    for (const TokenCandidate& c : candidates) total += std::exp(c.logit - max_logit);
    const double target = static_cast<double>(p) * total;
    double cumulative = 0.0;
    for (size_t i = 0; i < candidates.size(); ++i) {
        cumulative += std::exp(candidates[i].logit - max_logit);
        if (cumulative >= target) return i + 1;
    }
    return candidates.size();  // rounding kept the sum just below p * total: keep everything
}

// Moves the candidates for which keep() holds to [from, returned), in their relative order
// (the others, behind them, are permuted).
template <class Keep>
size_t gather(std::span<TokenCandidate> candidates, size_t from, Keep keep) {
    size_t end = from;
    for (size_t i = from; i < candidates.size(); ++i) {
        if (keep(candidates[i])) std::swap(candidates[end++], candidates[i]);
    }
    return end;
}

// Unsorted candidates: a histogram of probability mass over buckets of logit finds the bucket
// where the cumulative mass reaches p; the buckets above it are kept whole and unsorted, and
// only the boundary bucket is sorted to find the exact cut. Linear, where sorting the kept
// prefix of a flat distribution over 256k tokens took tens of milliseconds.
size_t keep_top_p_unsorted(std::span<TokenCandidate> candidates, float p) {
    constexpr size_t kBuckets = 1024;
    constexpr float kRange = 32.0f;  // logits below max - kRange share the last bucket
    constexpr float kScale = static_cast<float>(kBuckets) / kRange;

    float max_logit = -INFINITY;
    for (const TokenCandidate& c : candidates) max_logit = std::max(max_logit, c.logit);
    // Monotone in the logit, so the buckets follow the canonical order; bucket 0 is the top.
    const auto bucket_of = [max_logit](float logit) {
        const float distance = (max_logit - logit) * kScale;  // >= 0; +inf for a huge spread
        return distance < static_cast<float>(kBuckets - 1) ? static_cast<size_t>(distance) : kBuckets - 1;
    };

    std::array<double, kBuckets> mass{};
    for (const TokenCandidate& c : candidates) mass[bucket_of(c.logit)] += std::exp(c.logit - max_logit);
    double total = 0.0;
    for (double m : mass) total += m;
    const double target = static_cast<double>(p) * total;

    // The buckets needed whole.
    double cumulative = 0.0;
    size_t bucket = 0;
    while (bucket < kBuckets && cumulative + mass[bucket] < target) cumulative += mass[bucket++];
    size_t kept = gather(candidates, 0, [&](const TokenCandidate& c) { return bucket_of(c.logit) < bucket; });

    // The boundary bucket, sorted; the next ones only if rounding pushes the cut past it.
    // Buckets without mass hold no candidate that could reach the target.
    for (; bucket < kBuckets; ++bucket) {
        if (mass[bucket] == 0.0) continue;
        const size_t begin = kept;
        kept = gather(candidates, begin, [&](const TokenCandidate& c) { return bucket_of(c.logit) == bucket; });
        const auto at = [&](size_t i) { return candidates.begin() + static_cast<std::ptrdiff_t>(i); };
        std::sort(at(begin), at(kept), comes_before);
        for (size_t i = begin; i < kept; ++i) {
            cumulative += std::exp(candidates[i].logit - max_logit);
            if (cumulative >= target) return i + 1;
        }
    }
    return candidates.size();
}

}  // namespace

size_t keep_top_p(std::span<TokenCandidate> candidates, float p, bool sorted) {
    if (p >= 1.0f || candidates.size() <= 1) return candidates.size();
    return sorted ? keep_top_p_sorted(candidates, p) : keep_top_p_unsorted(candidates, p);
}

size_t keep_min_p(std::span<TokenCandidate> candidates, float min_p, float max_logit) {
    if (min_p <= 0.0f) return candidates.size();
    const float min_logit = max_logit + std::log(min_p);
    // Compacts in place, keeping the order (std::stable_partition would allocate).
    size_t kept = 0;
    for (const TokenCandidate& c : candidates) {
        if (c.logit >= min_logit) candidates[kept++] = c;
    }
    return kept;
}

double to_weights(std::span<TokenCandidate> candidates, float temperature, float max_logit) {
    double sum = 0.0;
    for (TokenCandidate& c : candidates) {
        c.logit = std::exp((c.logit - max_logit) / temperature);
        sum += c.logit;
    }
    return sum;
}

size_t draw(std::span<const TokenCandidate> weighted, double sum, double u) {
    const double target = u * sum;
    double cumulative = 0.0;
    size_t last_positive = 0;
    for (size_t i = 0; i < weighted.size(); ++i) {
        // The same additions in the same order as to_weights(), so the last cumulative equals
        // `sum` exactly and target < sum always lands inside the loop.
        cumulative += weighted[i].logit;
        if (weighted[i].logit > 0.0f) {
            last_positive = i;
            if (target < cumulative) return i;
        }
    }
    return last_positive;
}

}  // namespace powerhouse::sampling
