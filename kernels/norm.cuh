// Device code shared by the small kernels (ops.cu) and the fused ones of the decode step
// (matmul_q8.cu: an RMS norm or a gated activation whose result is quantized for the next
// product in the same launch): the RMS norm of one row and the gates. One definition each,
// so that a fused kernel computes the unfused kernels' bits.
//
// Thread-safety: device functions without state.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace powerhouse::kernels {

// Sum over the block of one float per thread (blockDim.x a multiple of 32, at most 1024).
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float warp_sums[32];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    const int warp = static_cast<int>(threadIdx.x / 32);
    if (threadIdx.x % 32 == 0) warp_sums[warp] = v;
    __syncthreads();
    float total = 0.0f;
    const int warps = static_cast<int>(blockDim.x / 32);
    for (int i = 0; i < warps; ++i) total += warp_sums[i];
    __syncthreads();
    return total;
}

// One block per row. Rows of up to kNormThreads * kNormPerThread values (every model's
// width) are read once, into registers, with all loads in flight at once: a decode step
// normalizes one row, on one multiprocessor, so the kernel's time is its memory latency.
// Longer rows loop and read x twice.
constexpr int kNormThreads = 1024;
constexpr int kNormPerThread = 8;

// The block size of a row of n: four values a thread where the row allows (a 4096-wide
// row: 1024 threads), whole warps. The sum's order follows it, so every kernel that
// normalizes a row launches this many threads.
inline int norm_threads(int64_t n) {
    const int64_t wanted = (n + 3) / 4;
    const int64_t warps = (wanted + 31) / 32 * 32;
    return static_cast<int>(warps < 32 ? 32 : (warps > kNormThreads ? kNormThreads : warps));
}

// yr = xr / sqrt(mean(xr^2) + eps) * weight, by the whole block (blockDim.x threads). yr
// may be xr: each thread writes only what it read, after every thread has read.
__device__ __forceinline__ void rms_norm_row(const float* xr, float* yr, const float* __restrict__ weight, int64_t n,
                                             float eps) {
    const auto stride = static_cast<int64_t>(blockDim.x);
    if (n <= stride * kNormPerThread) {
        float v[kNormPerThread];
        float w[kNormPerThread];
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < kNormPerThread; ++k) {
            const int64_t i = threadIdx.x + k * stride;
            v[k] = i < n ? xr[i] : 0.0f;
            w[k] = i < n ? weight[i] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < kNormPerThread; ++k) sum = fmaf(v[k], v[k], sum);
        const float scale = 1.0f / sqrtf(block_sum(sum) / static_cast<float>(n) + eps);
#pragma unroll
        for (int k = 0; k < kNormPerThread; ++k) {
            const int64_t i = threadIdx.x + k * stride;
            if (i < n) yr[i] = (v[k] * scale) * w[k];
        }
        return;
    }
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += stride) sum = fmaf(xr[i], xr[i], sum);
    const float mean = block_sum(sum) / static_cast<float>(n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = threadIdx.x; i < n; i += stride) yr[i] = (xr[i] * scale) * weight[i];
}

__device__ __forceinline__ float gelu_tanh(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * x * (1.0f + 0.044715f * x * x)));
}

// The gates: silu(a) * b and gelu(a) * b.
__device__ __forceinline__ float swiglu_value(float a, float b) {
    return a / (1.0f + expf(-a)) * b;
}
__device__ __forceinline__ float geglu_value(float a, float b) {
    return gelu_tanh(a) * b;
}

}  // namespace powerhouse::kernels
