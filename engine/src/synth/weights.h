// The data of synthetic tensors: random, reproducible, and shaped like a real
// initialisation so that a model runs with bounded activations through all its layers:
//  - matrices ~N(0, 0.02^2) (approximately normal, see random.h), quantized with the
//    engine's reference quantizers (quantize.h);
//  - norm weights 1 + N(0, 0.1^2): near 1, yet distinct enough that a kernel that skips
//    them gives visibly different results;
//  - biases ~N(0, 0.02^2);
//  - rope_freqs.weight: Llama 3.1's rope scaling factors, computed, not random; Phi-3.5's
//    LongRoPE factors (rope_factors_long/short.weight): the published values.
// Row r of tensor T draws from a stream keyed by (seed, T's name, r), so the bytes do not
// depend on the thread count, and a tensor's data does not depend on which other tensors
// the file holds.
//
// Quantized tensors larger than the pool (SynthOptions::pool_weights) are assembled from
// a per-tensor pool of blocks, each quantized from fresh random data and picked at random
// for every position: the reference K-quantizer (~1 us per weight) would need an hour for
// an 8B model. F32, F16 and BF16 tensors are always converted row by row.
//
// Thread-safety: fill_tensor runs its own worker threads and calls `progress` on the
// calling thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "powerhouse/result.h"
#include "synth/tensor_plan.h"

namespace powerhouse::synth {

inline constexpr float kMatrixStd = 0.02f;
inline constexpr float kNormStd = 0.1f;
inline constexpr float kBiasStd = 0.02f;

struct WeightOptions {
    uint64_t seed = 0;
    unsigned threads = 1;
    uint32_t pool_weights = 1u << 18;  // 0: quantize every row
    float rope_freq_base = 10000.0f;   // for rope_freqs
};

// Rows of the tensor written so far; return false to cancel.
using RowProgressFn = std::function<bool(int64_t rows_done)>;

// Writes the data of `tensor` into `out` (exactly tensor.spec.n_bytes() bytes).
Result<void> fill_tensor(const PlannedTensor& tensor, std::span<std::byte> out, const WeightOptions& options,
                         const RowProgressFn& progress = {});

// Llama 3.1's rope frequency factors (factor 8, low/high frequency factors 1 and 4,
// original context 8192), as convert_hf_to_gguf.py stores them in rope_freqs.weight.
std::vector<float> llama3_rope_factors(uint32_t head_dim, float freq_base);

}  // namespace powerhouse::synth
