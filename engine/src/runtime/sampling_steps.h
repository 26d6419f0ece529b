// The steps of the sampler chain (powerhouse/sampler.h) as functions over plain spans, so
// that each step is tested on its own against hand-computed values.
//
// Filters work on a list of candidates and return how many they keep; the kept ones are
// moved to the front. The list must hold no NaN (the sampler drops NaN and -inf before
// filtering) and its largest logit must be finite.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "powerhouse/sampler.h"

namespace powerhouse::sampling {

// The canonical order: higher logit first, ties to the lower id. A strict total order on
// NaN-free candidates with distinct ids, so the kept sets and their order are the same with
// every standard library (std::nth_element and std::sort leave equal elements in any order).
inline bool comes_before(const TokenCandidate& a, const TokenCandidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Applies to `logits` the penalties of the tokens in `window` (llama.cpp's penalties sampler):
// for each distinct token t of the window that occurs c times and has a logit,
//   logit = logit > 0 ? logit / repeat_penalty : logit * repeat_penalty
//   logit -= c * frequency_penalty + presence_penalty
// Ids outside [0, logits.size()) are skipped. `counts`: scratch of at least logits.size()
// zeros, left all zero.
void apply_penalties(std::span<float> logits, std::span<const TokenId> window, const SamplingParams& params,
                     std::span<int32_t> counts);

// The index of the largest logit, ties to the lowest index; NaN never wins. kNoToken when
// `logits` is empty or holds only NaN and -inf.
TokenId argmax(std::span<const float> logits);

// Keeps the k candidates first in canonical order, sorted in that order. k <= 0 or
// k >= size: keeps all, in their order. O(n log k) for k <= 4096, else O(n + k log k).
size_t keep_top_k(std::span<TokenCandidate> candidates, int32_t k);

// Keeps the shortest canonical-order prefix whose probability (softmax of the candidates'
// logits, temperature 1) reaches p. `sorted`: the candidates are in canonical order (after
// top-k); then nothing moves. Otherwise the kept candidates come first in an order that
// depends only on the input (not on the standard library): those clearly above the cut in
// their input order, then those near it in canonical order. p >= 1: keeps all, in their order.
// Linear time plus a sort of the candidates near the cut. Up to rounding in the last bits of
// the sums, the cut is exactly where a full sort would put it.
size_t keep_top_p(std::span<TokenCandidate> candidates, float p, bool sorted);

// Keeps the candidates whose probability is at least min_p times the largest, i.e. whose
// logit is >= max_logit + ln(min_p) (llama.cpp's test), in their order. min_p <= 0: keeps all.
size_t keep_min_p(std::span<TokenCandidate> candidates, float min_p, float max_logit);

// Replaces each logit by its softmax weight at `temperature` (> 0), exp((logit - max_logit) /
// temperature), and returns the sum of the weights (>= 1: the max has weight 1). Subtracting
// the max before dividing keeps tiny temperatures from overflowing.
double to_weights(std::span<TokenCandidate> candidates, float temperature, float max_logit);

// The candidate whose cumulative weight interval [sum before it, sum with it) holds u * sum,
// u in [0, 1); `sum` must be what to_weights() returned for these candidates.
size_t draw(std::span<const TokenCandidate> weighted, double sum, double u);

// A double in [0, 1) from the top 53 bits of a 64-bit random value.
inline double unit_interval(uint64_t bits) {
    return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace powerhouse::sampling
