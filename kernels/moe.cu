// The routed feed-forward of mixture-of-experts models on the GPU, the same steps as the CPU
// backend (engine/src/backend/cpu/moe.cpp): each token's router scores to its chosen experts
// and weights; the rows of the tokens that chose one expert gathered, so that the expert's
// matrices multiply them together (ph_matmul); their outputs, weighted, scattered into each
// token's slot; the slots summed in order. The host groups the tokens by expert between
// ph_moe_route and the products (it needs the choices to know which matrices to read).
//
// Thread-safety: see powerhouse_kernels.h.
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "powerhouse_kernels.h"

namespace powerhouse::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxExperts = 512;  // as the engine (arch::kMaxExperts)
constexpr int kMaxUsed = 64;

int last_error() {
    return static_cast<int>(cudaGetLastError());
}

unsigned grid_for(int64_t n) {
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

// One block per token; thread 0 chooses (n_expert at most 512, k at most 64: a few
// thousand comparisons), the others load the scores.
__global__ void route_kernel(const float* scores, int n_expert, int k, int gating, int normalize,
                             const float* selection_bias, float weights_scale, int32_t* ids, float* weights) {
    __shared__ float probs[kMaxExperts];
    __shared__ float select[kMaxExperts];
    __shared__ unsigned char taken[kMaxExperts];
    const float* row = scores + static_cast<int64_t>(blockIdx.x) * n_expert;
    for (int e = static_cast<int>(threadIdx.x); e < n_expert; e += static_cast<int>(blockDim.x)) {
        probs[e] = row[e];
        taken[e] = 0;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    if (gating == 0) {  // softmax over every expert, the sum in double as the CPU does
        float max = -FLT_MAX;
        for (int e = 0; e < n_expert; ++e) max = fmaxf(max, probs[e]);
        double sum = 0.0;
        for (int e = 0; e < n_expert; ++e) {
            probs[e] = expf(probs[e] - max);
            sum += probs[e];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int e = 0; e < n_expert; ++e) probs[e] *= inv;
    } else if (gating == 2) {  // a sigmoid of each score
        for (int e = 0; e < n_expert; ++e) probs[e] = 1.0f / (1.0f + expf(-probs[e]));
    }
    // Chosen by the probability plus the selection bias, weighted by the probability.
    for (int e = 0; e < n_expert; ++e) select[e] = selection_bias != nullptr ? probs[e] + selection_bias[e] : probs[e];
    int32_t* out_ids = ids + static_cast<int64_t>(blockIdx.x) * k;
    float* out_w = weights + static_cast<int64_t>(blockIdx.x) * k;
    for (int s = 0; s < k; ++s) {  // the largest not yet taken; equal ones: the lower index
        int best = -1;
        for (int e = 0; e < n_expert; ++e) {
            if (!taken[e] && (best < 0 || select[e] > select[best])) best = e;
        }
        taken[best] = 1;
        out_ids[s] = best;
        out_w[s] = probs[best];
    }
    if (gating == 1) {  // a softmax over the chosen scores
        const float max = out_w[0];
        double sum = 0.0;
        for (int s = 0; s < k; ++s) {
            out_w[s] = expf(out_w[s] - max);
            sum += out_w[s];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int s = 0; s < k; ++s) out_w[s] *= inv;
    }
    if (normalize != 0) {
        double sum = 0.0;
        for (int s = 0; s < k; ++s) sum += out_w[s];
        const float total = fmaxf(static_cast<float>(sum), 6.103515625e-5f);
        for (int s = 0; s < k; ++s) out_w[s] /= total;
    }
    if (weights_scale != 0.0f && weights_scale != 1.0f) {
        for (int s = 0; s < k; ++s) out_w[s] *= weights_scale;
    }
}

// dst[i] = src[pairs[i] / k]: the rows of the tokens of the (token, slot) pairs.
__global__ void gather_kernel(const float* src, int64_t width, const int32_t* pairs, int k, float* dst,
                              int64_t total) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
        const int64_t row = i / width;
        dst[i] = src[static_cast<int64_t>(pairs[row] / k) * width + i % width];
    }
}

// slots[pairs[i]] = src[i] * weights[pairs[i]].
__global__ void scatter_kernel(const float* src, int64_t width, const int32_t* pairs, const float* weights,
                               float* slots, int64_t total) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
        const int32_t pair = pairs[i / width];
        slots[static_cast<int64_t>(pair) * width + i % width] = src[i] * weights[pair];
    }
}

// dst[t] = slots[t][0] + slots[t][1] + ... in slot order (as the CPU and llama.cpp add them).
__global__ void sum_slots_kernel(const float* slots, int k, int64_t width, float* dst, int64_t total) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
        const int64_t t = i / width;
        const float* row = slots + t * k * width + i % width;
        float sum = row[0];
        for (int s = 1; s < k; ++s) sum += row[s * width];
        dst[i] = sum;
    }
}

// gpt-oss's clamped SwiGLU: x * sigmoid(alpha x) * (y + 1), x at most limit, y in +-limit.
__global__ void swiglu_oai_kernel(const float* a, const float* b, float* y, int64_t n, float alpha, float limit) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float x = fminf(a[i], limit);
        const float u = fminf(fmaxf(b[i], -limit), limit);
        y[i] = x / (1.0f + expf(alpha * -x)) * (u + 1.0f);
    }
}

}  // namespace
}  // namespace powerhouse::kernels

using namespace powerhouse::kernels;

extern "C" int ph_moe_route(const float* scores, int n_tokens, int n_expert, int k, int gating, int normalize,
                            const float* selection_bias, float weights_scale, int32_t* ids, float* weights,
                            cudaStream_t stream) {
    if (scores == nullptr || ids == nullptr || weights == nullptr || n_tokens < 0 || n_tokens > 65535 ||
        n_expert <= 0 || n_expert > kMaxExperts || k <= 0 || k > kMaxUsed || k > n_expert || gating < 0 || gating > 2) {
        return cudaErrorInvalidValue;
    }
    if (n_tokens == 0) return cudaSuccess;
    route_kernel<<<static_cast<unsigned>(n_tokens), 128, 0, stream>>>(scores, n_expert, k, gating, normalize,
                                                                      selection_bias, weights_scale, ids, weights);
    return last_error();
}

extern "C" int ph_moe_gather(const float* src, int64_t width, const int32_t* pairs, int k, int n, float* dst,
                             cudaStream_t stream) {
    if (src == nullptr || pairs == nullptr || dst == nullptr || width <= 0 || n < 0 || k <= 0) {
        return cudaErrorInvalidValue;
    }
    if (n == 0) return cudaSuccess;
    const int64_t total = width * n;
    gather_kernel<<<grid_for(total), kThreads, 0, stream>>>(src, width, pairs, k, dst, total);
    return last_error();
}

extern "C" int ph_moe_scatter(const float* src, int64_t width, const int32_t* pairs, const float* weights, int n,
                              float* slots, cudaStream_t stream) {
    if (src == nullptr || pairs == nullptr || weights == nullptr || slots == nullptr || width <= 0 || n < 0) {
        return cudaErrorInvalidValue;
    }
    if (n == 0) return cudaSuccess;
    const int64_t total = width * n;
    scatter_kernel<<<grid_for(total), kThreads, 0, stream>>>(src, width, pairs, weights, slots, total);
    return last_error();
}

extern "C" int ph_moe_sum_slots(const float* slots, int n_tokens, int k, int64_t width, float* dst,
                                cudaStream_t stream) {
    if (slots == nullptr || dst == nullptr || n_tokens < 0 || k <= 0 || width <= 0) return cudaErrorInvalidValue;
    if (n_tokens == 0) return cudaSuccess;
    const int64_t total = width * n_tokens;
    sum_slots_kernel<<<grid_for(total), kThreads, 0, stream>>>(slots, k, width, dst, total);
    return last_error();
}

extern "C" int ph_swiglu_oai(const float* a, const float* b, float* y, int64_t n, float alpha, float limit,
                             cudaStream_t stream) {
    if (a == nullptr || b == nullptr || y == nullptr || n < 0) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    swiglu_oai_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, b, y, n, alpha, limit);
    return last_error();
}
