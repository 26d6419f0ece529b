// The small kernels of a decoder step: RMS norm, element-wise sums and gates, RoPE, the
// embedding lookup, the KV cache writes and greedy argmax. Each mirrors the CPU backend's
// formula (engine/src/backend/cpu: vec.cpp, cpu_backend.cpp, attention.cpp), so that the
// two agree to float rounding; the tests hold them to it (tests/kernels/ops_kernel_test).
//
// Positions are read from device memory (pos0), never passed by value: a CUDA graph
// captured once replays the decode step at every position.
//
// Thread-safety: see powerhouse_kernels.h.
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>

#include "norm.cuh"
#include "powerhouse_kernels.h"
#include "rows.cuh"
#include "type_dispatch.cuh"

namespace powerhouse::kernels {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t n, int threads = kThreads) {
    const int64_t blocks = (n + threads - 1) / threads;
    return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

int last_error() {
    return static_cast<int>(cudaGetLastError());
}

__global__ void __launch_bounds__(kNormThreads)
    rms_norm_kernel(const float* x, float* y, const float* __restrict__ weight, int64_t n, float eps) {
    rms_norm_row(x + static_cast<int64_t>(blockIdx.x) * n, y + static_cast<int64_t>(blockIdx.x) * n, weight, n, eps);
}

template <class Op>
__global__ void map_kernel(int64_t n, Op op) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) op(i);
}

template <class Op>
int map(int64_t n, cudaStream_t stream, Op op) {
    if (n < 0) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    map_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, op);
    return last_error();
}


// One thread per rotated pair; grid (n_heads + n_heads2, n_tokens): the first n_heads
// blocks of a token rotate x's heads, the others x2's (Q and K in one launch; n_heads2 0:
// x alone).
__global__ void rope_kernel(float* x, int n_heads, float* x2, int head_dim, int rope_dims, int neox, float theta_scale, float freq_scale,
                            const float* __restrict__ freq_factors, float ext_factor, float attn_factor,
                            float corr_low, float corr_high, PhRows rows) {
    const int pair = static_cast<int>(threadIdx.x);
    if (pair >= rope_dims / 2) return;
    const int t = static_cast<int>(blockIdx.y);
    const int b = static_cast<int>(blockIdx.x);
    const int n_heads2 = static_cast<int>(gridDim.x) - n_heads;
    float* head = b < n_heads ? x + (static_cast<int64_t>(t) * n_heads + b) * head_dim
                              : x2 + (static_cast<int64_t>(t) * n_heads2 + (b - n_heads)) * head_dim;
    // The angle as ggml builds it: the position times theta_scale once per earlier pair, in
    // f32, in that order (the CPU backend's loop).
    float theta = static_cast<float>(row_position(rows, t));
    for (int i = 0; i < pair; ++i) theta = __fmul_rn(theta, theta_scale);
    const float ff = freq_factors != nullptr ? freq_factors[pair] : 1.0f;
    const float original = __fdiv_rn(theta, ff);
    float angle = __fmul_rn(freq_scale, original);
    float magnitude = attn_factor;
    if (ext_factor != 0.0f) {  // YaRN: the ramp between the scaled and the original angle
        const float y = (static_cast<float>(pair) - corr_low) / fmaxf(0.001f, corr_high - corr_low);
        const float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * ext_factor;
        angle = angle * (1.0f - mix) + original * mix;
        magnitude *= 1.0f + 0.1f * logf(1.0f / freq_scale);
    }
    float s = 0.0f;
    float c = 0.0f;
    sincosf(angle, &s, &c);
    s *= magnitude;
    c *= magnitude;
    const int i0 = neox ? pair : 2 * pair;
    const int i1 = neox ? pair + rope_dims / 2 : 2 * pair + 1;
    const float x0 = head[i0];
    const float x1 = head[i1];
    head[i0] = x0 * c - x1 * s;
    head[i1] = x0 * s + x1 * c;
}

// One thread block per token: its factor once, then the row.
__global__ void scale_by_position_kernel(float* x, int64_t width, float temperature, float length, PhRows rows) {
    const int t = static_cast<int>(blockIdx.x);
    const float steps = floorf(__fdiv_rn(static_cast<float>(row_position(rows, t)), length));
    const float factor = static_cast<float>(log(static_cast<double>(steps) + 1.0) * temperature + 1.0);
    float* row = x + static_cast<int64_t>(t) * width;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) row[i] *= factor;
}

// One thread block per token; threads over groups of 8 values.
template <class Traits>
__global__ void get_rows_kernel(const uint8_t* __restrict__ table, size_t row_bytes, const int32_t* __restrict__ ids,
                                int64_t width, float* __restrict__ y) {
    using Block = typename Traits::Block;
    const int t = static_cast<int>(blockIdx.x);
    const auto* blocks = reinterpret_cast<const Block*>(table + static_cast<size_t>(ids[t]) * row_bytes);
    float* out = y + static_cast<int64_t>(t) * width;
    for (int64_t e = static_cast<int64_t>(threadIdx.x) * 8; e < width; e += static_cast<int64_t>(blockDim.x) * 8) {
        float v[8];
        Traits::decode8(blocks[e / Traits::kBlockSize], static_cast<int>(e % Traits::kBlockSize), v);
#pragma unroll
        for (int k = 0; k < 8; ++k) out[e + k] = v[k];
    }
}

__global__ void kv_store_f16_kernel(const float* __restrict__ k, const float* __restrict__ v, uint16_t* k_cache,
                                    uint16_t* v_cache, size_t row_elems, int64_t width, int n_tokens, PhRows rows) {
    const int64_t total = width * n_tokens;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
        const int64_t t = i / width;
        const int64_t e = i % width;
        const int tt = static_cast<int>(t);
        const size_t at =
            static_cast<size_t>(cache_row(rows, tt, row_position(rows, tt))) * row_elems + static_cast<size_t>(e);
        k_cache[at] = f32_to_f16_bits(k[i]);
        v_cache[at] = f32_to_f16_bits(v[i]);
    }
}

// One warp per block of 32 values, as the CPU's quantize_block: d = amax / 127, values
// times 127 / amax rounded to nearest even.
__device__ void quantize_q8_0_block(const float* x, BlockQ8_0* out, int lane) {
    const float value = x[lane];
    float amax = fabsf(value);
    for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    const float d = __fdiv_rn(amax, 127.0f);
    const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
    out->qs[lane] = static_cast<int8_t>(rintf(__fmul_rn(value, id)));
    if (lane == 0) out->d = f32_to_f16_bits(d);
}

__global__ void kv_store_q8_0_kernel(const float* __restrict__ k, const float* __restrict__ v, uint8_t* k_cache,
                                     uint8_t* v_cache, size_t row_bytes, int64_t width, int n_tokens, PhRows rows) {
    const int64_t blocks_per_row = width / kQK;
    const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x % 32);
    if (warp >= blocks_per_row * n_tokens) return;
    const int64_t t = warp / blocks_per_row;
    const int64_t b = warp % blocks_per_row;
    const int tt = static_cast<int>(t);
    const size_t at = static_cast<size_t>(cache_row(rows, tt, row_position(rows, tt))) * row_bytes +
                      static_cast<size_t>(b) * sizeof(BlockQ8_0);
    quantize_q8_0_block(k + t * width + b * kQK, reinterpret_cast<BlockQ8_0*>(k_cache + at), lane);
    quantize_q8_0_block(v + t * width + b * kQK, reinterpret_cast<BlockQ8_0*>(v_cache + at), lane);
}

__global__ void set_i32_kernel(int32_t* dst, int32_t value) {
    *dst = value;
}

__global__ void argmax_kernel(const float* __restrict__ x, int n, int32_t* out) {
    // As the sampler's argmax: strictly greater than -inf, so NaN and -inf are never chosen.
    float best = -INFINITY;
    int index = INT_MAX;
    for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) {
        if (x[i] > best) {
            best = x[i];
            index = i;
        }
    }
    // Ties keep the smaller index; every thread's candidate is the first of its own maxima.
    for (int offset = 16; offset > 0; offset /= 2) {
        const float other = __shfl_xor_sync(0xffffffffu, best, offset);
        const int other_index = __shfl_xor_sync(0xffffffffu, index, offset);
        if (other > best || (other == best && other_index < index)) {
            best = other;
            index = other_index;
        }
    }
    __shared__ float bests[32];
    __shared__ int indices[32];
    const int warp = static_cast<int>(threadIdx.x / 32);
    if (threadIdx.x % 32 == 0) {
        bests[warp] = best;
        indices[warp] = index;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) {
            if (bests[w] > best || (bests[w] == best && indices[w] < index)) {
                best = bests[w];
                index = indices[w];
            }
        }
        *out = index == INT_MAX ? -1 : index;
    }
}

}  // namespace
}  // namespace powerhouse::kernels

using namespace powerhouse::kernels;

extern "C" int ph_rms_norm(const float* x, float* y, const float* weight, int64_t n, int64_t rows, float eps,
                           cudaStream_t stream) {
    if (x == nullptr || y == nullptr || weight == nullptr || n <= 0 || rows < 0 || rows > INT_MAX) {
        return cudaErrorInvalidValue;
    }
    if (rows == 0) return cudaSuccess;
    // Four values a thread where the row allows (a 4096-wide row: 1024 threads), whole warps.
    rms_norm_kernel<<<static_cast<unsigned>(rows), norm_threads(n), 0, stream>>>(x, y, weight, n, eps);
    return last_error();
}

extern "C" int ph_add(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
    if (a == nullptr || b == nullptr || y == nullptr) return cudaErrorInvalidValue;
    return map(n, stream, [=] __device__(int64_t i) { y[i] = a[i] + b[i]; });
}

extern "C" int ph_scale(const float* a, float* y, float value, int64_t n, cudaStream_t stream) {
    if (a == nullptr || y == nullptr) return cudaErrorInvalidValue;
    return map(n, stream, [=] __device__(int64_t i) { y[i] = a[i] * value; });
}

extern "C" int ph_add_bias(float* y, const float* bias, int64_t width, int64_t rows, cudaStream_t stream) {
    if (y == nullptr || bias == nullptr || width <= 0 || rows < 0) return cudaErrorInvalidValue;
    return map(width * rows, stream, [=] __device__(int64_t i) { y[i] += bias[i % width]; });
}

extern "C" int ph_swiglu(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
    if (a == nullptr || b == nullptr || y == nullptr) return cudaErrorInvalidValue;
    return map(n, stream, [=] __device__(int64_t i) { y[i] = swiglu_value(a[i], b[i]); });
}

extern "C" int ph_geglu(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
    if (a == nullptr || b == nullptr || y == nullptr) return cudaErrorInvalidValue;
    return map(n, stream, [=] __device__(int64_t i) { y[i] = geglu_value(a[i], b[i]); });
}

extern "C" int ph_accumulate(float* dst, const float* src, int64_t n, cudaStream_t stream) {
    if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
    return map(n, stream, [=] __device__(int64_t i) { dst[i] += src[i]; });
}

extern "C" int ph_rope(float* x, int64_t n_heads, int n_tokens, int head_dim, int rope_dims, int neox, float base,
                       float freq_scale, const float* freq_factors, const int32_t* pos0, cudaStream_t stream) {
    return ph_rope_yarn(x, n_heads, n_tokens, head_dim, rope_dims, neox, base, freq_scale, freq_factors, 0.0f, 1.0f,
                        0.0f, 0.0f, pos0, stream);
}

extern "C" int ph_rope_yarn(float* x, int64_t n_heads, int n_tokens, int head_dim, int rope_dims, int neox,
                            float base, float freq_scale, const float* freq_factors, float ext_factor,
                            float attn_factor, float corr_low, float corr_high, const int32_t* pos0,
                            cudaStream_t stream) {
    return ph_rope_rows(x, n_heads, n_tokens, head_dim, rope_dims, neox, base, freq_scale, freq_factors, ext_factor,
                        attn_factor, corr_low, corr_high, rows_from(pos0), stream);
}

extern "C" int ph_rope_rows(float* x, int64_t n_heads, int n_tokens, int head_dim, int rope_dims, int neox,
                            float base, float freq_scale, const float* freq_factors, float ext_factor,
                            float attn_factor, float corr_low, float corr_high, PhRows rows, cudaStream_t stream) {
    return ph_rope_rows_pair(x, n_heads, nullptr, 0, n_tokens, head_dim, rope_dims, neox, base, freq_scale,
                             freq_factors, ext_factor, attn_factor, corr_low, corr_high, rows, stream);
}

extern "C" int ph_rope_rows_pair(float* x, int64_t n_heads, float* x2, int64_t n_heads2, int n_tokens, int head_dim,
                                 int rope_dims, int neox, float base, float freq_scale, const float* freq_factors,
                                 float ext_factor, float attn_factor, float corr_low, float corr_high, PhRows rows,
                                 cudaStream_t stream) {
    if (x == nullptr || (n_heads2 != 0 && x2 == nullptr) || !rows_valid(rows) || n_heads < 0 || n_heads2 < 0 ||
        n_heads + n_heads2 > 65535 || n_tokens < 0 || n_tokens > 65535 || rope_dims <= 0 || rope_dims % 2 != 0 ||
        rope_dims > head_dim || rope_dims > 2048) {
        return cudaErrorInvalidValue;
    }
    if (n_heads + n_heads2 == 0 || n_tokens == 0) return cudaSuccess;
    const float theta_scale = powf(base, -2.0f / static_cast<float>(rope_dims));
    const int threads = ((rope_dims / 2 + 31) / 32) * 32;
    rope_kernel<<<dim3(static_cast<unsigned>(n_heads + n_heads2), static_cast<unsigned>(n_tokens)), threads, 0,
                  stream>>>(x, static_cast<int>(n_heads), x2, head_dim, rope_dims, neox, theta_scale, freq_scale,
                            freq_factors, ext_factor, attn_factor, corr_low, corr_high, rows);
    return last_error();
}

extern "C" int ph_scale_by_position(float* x, int64_t width, int n_tokens, float temperature, int length, PhRows rows,
                                    cudaStream_t stream) {
    if (x == nullptr || !rows_valid(rows) || width < 0 || n_tokens < 0 || n_tokens > 65535 || length <= 0) {
        return cudaErrorInvalidValue;
    }
    if (width == 0 || n_tokens == 0) return cudaSuccess;
    scale_by_position_kernel<<<static_cast<unsigned>(n_tokens), 256, 0, stream>>>(x, width, temperature,
                                                                                  static_cast<float>(length), rows);
    return last_error();
}

extern "C" int ph_get_rows(uint32_t ggml_type_id, const void* table, size_t row_bytes, const int32_t* ids, int n,
                           int64_t width, float* y, cudaStream_t stream) {
    if (table == nullptr || ids == nullptr || y == nullptr || n < 0 || width <= 0) return cudaErrorInvalidValue;
    return with_traits(ggml_type_id, [&](auto traits) -> int {
        using Traits = decltype(traits);
        if (width % Traits::kBlockSize != 0 || width % 8 != 0) return cudaErrorInvalidValue;
        if (n == 0) return cudaSuccess;
        get_rows_kernel<Traits><<<static_cast<unsigned>(n), 128, 0, stream>>>(static_cast<const uint8_t*>(table),
                                                                               row_bytes, ids, width, y);
        return last_error();
    });
}

extern "C" int ph_kv_store(int kv_type, const float* k, const float* v, void* k_cache, void* v_cache, size_t row_bytes,
                           int64_t width, int n_tokens, const int32_t* pos0, cudaStream_t stream) {
    return ph_kv_store_rows(kv_type, k, v, k_cache, v_cache, row_bytes, width, n_tokens, rows_from(pos0), stream);
}

extern "C" int ph_kv_store_rows(int kv_type, const float* k, const float* v, void* k_cache, void* v_cache,
                                size_t row_bytes, int64_t width, int n_tokens, PhRows rows, cudaStream_t stream) {
    if (k == nullptr || v == nullptr || k_cache == nullptr || v_cache == nullptr || !rows_valid(rows) || width <= 0 ||
        n_tokens < 0) {
        return cudaErrorInvalidValue;
    }
    if (n_tokens == 0) return cudaSuccess;
    if (kv_type == PH_KV_F16) {
        if (row_bytes < static_cast<size_t>(width) * 2 || row_bytes % 2 != 0) return cudaErrorInvalidValue;
        kv_store_f16_kernel<<<grid_for(width * n_tokens), kThreads, 0, stream>>>(
            k, v, static_cast<uint16_t*>(k_cache), static_cast<uint16_t*>(v_cache), row_bytes / 2, width, n_tokens,
            rows);
        return last_error();
    }
    if (kv_type == PH_KV_Q8_0) {
        if (width % kQK != 0 || row_bytes < static_cast<size_t>(width / kQK) * sizeof(BlockQ8_0)) {
            return cudaErrorInvalidValue;
        }
        const int64_t warps = width / kQK * n_tokens;
        const int64_t blocks = (warps * 32 + kThreads - 1) / kThreads;
        if (blocks > INT_MAX) return cudaErrorInvalidValue;
        kv_store_q8_0_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
            k, v, static_cast<uint8_t*>(k_cache), static_cast<uint8_t*>(v_cache), row_bytes, width, n_tokens, rows);
        return last_error();
    }
    return cudaErrorInvalidValue;
}

extern "C" int ph_set_i32(int32_t* dst, int32_t value, cudaStream_t stream) {
    if (dst == nullptr) return cudaErrorInvalidValue;
    set_i32_kernel<<<1, 1, 0, stream>>>(dst, value);
    return last_error();
}

extern "C" int ph_argmax(const float* x, int n, int32_t* out, cudaStream_t stream) {
    if (x == nullptr || out == nullptr || n <= 0) return cudaErrorInvalidValue;
    argmax_kernel<<<1, 1024, 0, stream>>>(x, n, out);
    return last_error();
}
