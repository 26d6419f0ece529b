// Causal self-attention over the KV cache, flash-decoding style (DESIGN.md section 5).
//
// Work: the positions a query sees are cut into n_splits chunks; thread block (split, head,
// token) reduces one chunk with an online softmax and writes its running maximum m, sum
// l and weighted values acc[head_dim] to `partial`; a second kernel rescales and adds the
// chunks of each (token, head). A long context thus spreads over many blocks even for one
// token (decode), and a chunk that lies past the token's position (or before its sliding
// window) costs one early exit, which is what lets one CUDA graph replay the step at any
// position: the grid depends on n_ctx, never on the position.
//
// Inside a block, 4 warps take the chunk's positions four at a time in turn (the four
// positions' K and V rows all loaded before the first is used: four in flight per warp,
// where one at a time left each warp waiting on one row's latency); lane l holds elements
// l, l + 32, ... of the head (at most 8), so a warp reads each cached K or V row with
// coalesced loads and reduces q.k with shuffles. A head size that is not a multiple of 32
// (16, 80, 112) leaves the top lanes of the last group idle: they hold zeros and read
// nothing. For a Q8_0 cache (head sizes a multiple of 32), element l + 32i is value l of
// block i, so each iteration of the lane's loop is one block with one scale.
//
// Numerics: for an F16 cache the query is rounded to F16 first, as the CPU backend (and
// llama.cpp) does before its product with the F16 keys; scores, exponentials and sums are
// f32. The CPU additionally rounds the probabilities to F16 before the product with V; the
// online softmax here normalizes at the end instead, a difference within F16 rounding.
//
// Thread-safety: see powerhouse_kernels.h.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "dequantize.cuh"
#include "powerhouse_kernels.h"
#include "rows.cuh"

namespace powerhouse::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kKeys = 4;        // positions a warp loads at once
constexpr int kMaxPerLane = 8;  // head_dim <= 256

// Element i * 32 + lane of a cached row of head_dim elements; 0 past its end.
template <int kKvType>
__device__ __forceinline__ float load_kv(const uint8_t* row, int i, int lane, int head_dim) {
    if constexpr (kKvType == PH_KV_F16) {
        const int e = i * 32 + lane;
        return e < head_dim ? f16_bits_to_f32(reinterpret_cast<const uint16_t*>(row)[e]) : 0.0f;
    } else {
        const auto* block = reinterpret_cast<const BlockQ8_0*>(row) + i;
        return f16_bits_to_f32(block->d) * static_cast<float>(block->qs[lane]);
    }
}

template <int kKvType, int kPerLane>
__global__ void __launch_bounds__(kWarps * 32)
    attention_split_kernel(const float* __restrict__ q, const uint8_t* __restrict__ k_cache,
                           const uint8_t* __restrict__ v_cache, size_t row_bytes, int n_head, int group,
                           int head_dim, float scale, uint32_t window, int chunk, float* __restrict__ partial,
                           PhRows rows) {
    constexpr int kSlots = kPerLane * 32;  // head_dim rounded up to the warp
    const int split = static_cast<int>(blockIdx.x);
    const int h = static_cast<int>(blockIdx.y);
    const int t = static_cast<int>(blockIdx.z);
    const int warp = static_cast<int>(threadIdx.x / 32);
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int n_splits = static_cast<int>(gridDim.x);
    float* out = partial + ((static_cast<int64_t>(t) * n_head + h) * n_splits + split) * (head_dim + 2);

    // Positions [first, n_keys) are visible to this token; this block takes its chunk.
    const int n_keys = row_position(rows, t) + 1;
    const int first = window != 0 && n_keys > static_cast<int>(window) ? n_keys - static_cast<int>(window) : 0;
    const int j0 = max(first, split * chunk);
    const int j1 = min(n_keys, (split + 1) * chunk);
    if (j0 >= j1) {
        if (threadIdx.x == 0) {
            out[0] = -INFINITY;
            out[1] = 0.0f;
        }
        for (int e = static_cast<int>(threadIdx.x); e < head_dim; e += blockDim.x) out[2 + e] = 0.0f;
        return;
    }

    const float* qh = q + (static_cast<int64_t>(t) * n_head + h) * head_dim;
    float qv[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        const int e = i * 32 + lane;
        const float value = e < head_dim ? qh[e] : 0.0f;
        qv[i] = kKvType == PH_KV_F16 ? f16_bits_to_f32(f32_to_f16_bits(value)) : value;
    }
    const size_t head_bytes = kKvType == PH_KV_F16 ? static_cast<size_t>(head_dim) * sizeof(uint16_t)
                                                   : static_cast<size_t>(head_dim / 32) * sizeof(BlockQ8_0);
    const size_t head_offset = static_cast<size_t>(h / group) * head_bytes;

    float m = -INFINITY;
    float l = 0.0f;
    float acc[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) acc[i] = 0.0f;
    // Each warp takes kKeys consecutive positions at a time and loads all their K and V
    // elements before it uses any, so that kKeys rows per warp are in flight instead of one;
    // the softmax then takes the positions in order, as one at a time would.
    for (int j = j0 + warp * kKeys; j < j1; j += kWarps * kKeys) {
        const int count = min(kKeys, j1 - j);
        float dot[kKeys];
        float v[kKeys][kPerLane];
#pragma unroll
        for (int u = 0; u < kKeys; ++u) {
            // Positions past the chunk's end repeat its first (loaded, never used).
            const auto row = static_cast<size_t>(cache_row(rows, t, u < count ? j + u : j));
            const uint8_t* k_row = k_cache + row * row_bytes + head_offset;
            const uint8_t* v_row = v_cache + row * row_bytes + head_offset;
            dot[u] = 0.0f;
#pragma unroll
            for (int i = 0; i < kPerLane; ++i) {
                dot[u] = fmaf(qv[i], load_kv<kKvType>(k_row, i, lane, head_dim), dot[u]);
                v[u][i] = load_kv<kKvType>(v_row, i, lane, head_dim);
            }
        }
        for (int offset = 16; offset > 0; offset /= 2) {
#pragma unroll
            for (int u = 0; u < kKeys; ++u) dot[u] += __shfl_xor_sync(0xffffffffu, dot[u], offset);
        }
#pragma unroll
        for (int u = 0; u < kKeys; ++u) {
            if (u >= count) break;
            const float s = dot[u] * scale;
            const float m_new = fmaxf(m, s);
            // 0 on the first position (m = -inf); a score of -inf (only from infinite
            // activations) must not make exp(-inf - -inf) a NaN that the combine would spread.
            const float correction = m == -INFINITY ? 0.0f : expf(m - m_new);
            const float p = m_new == -INFINITY ? 0.0f : expf(s - m_new);
            l = l * correction + p;
#pragma unroll
            for (int i = 0; i < kPerLane; ++i) acc[i] = fmaf(p, v[u][i], acc[i] * correction);
            m = m_new;
        }
    }

    // Combine the warps: rescale each to the block's maximum.
    __shared__ float warp_m[kWarps];
    __shared__ float warp_l[kWarps];
    __shared__ float warp_acc[kWarps][kSlots];
    if (lane == 0) {
        warp_m[warp] = m;
        warp_l[warp] = l;
    }
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) warp_acc[warp][i * 32 + lane] = acc[i];
    __syncthreads();
    float block_m = -INFINITY;
    for (int w = 0; w < kWarps; ++w) block_m = fmaxf(block_m, warp_m[w]);
    float weights[kWarps];
    float block_l = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
        weights[w] = warp_m[w] == -INFINITY ? 0.0f : expf(warp_m[w] - block_m);
        block_l += warp_l[w] * weights[w];
    }
    if (threadIdx.x == 0) {
        out[0] = block_m;
        out[1] = block_l;
    }
    for (int e = static_cast<int>(threadIdx.x); e < head_dim; e += blockDim.x) {
        float sum = 0.0f;
        for (int w = 0; w < kWarps; ++w) sum += warp_acc[w][e] * weights[w];
        out[2 + e] = sum;
    }
}

// One block per (head, token), one thread per element of the head.
__global__ void attention_combine_kernel(const float* __restrict__ partial, float* __restrict__ out, int n_head,
                                         int head_dim, int n_splits, const float* __restrict__ sinks) {
    const int h = static_cast<int>(blockIdx.x);
    const int t = static_cast<int>(blockIdx.y);
    const int e = static_cast<int>(threadIdx.x);
    const float* parts = partial + (static_cast<int64_t>(t) * n_head + h) * n_splits * (head_dim + 2);
    float m = -INFINITY;
    for (int s = 0; s < n_splits; ++s) m = fmaxf(m, parts[s * (head_dim + 2)]);
    // An attention sink: a logit in the softmax's denominator with no value.
    if (sinks != nullptr) m = fmaxf(m, sinks[h]);
    float l = sinks != nullptr ? expf(sinks[h] - m) : 0.0f;
    float sum = 0.0f;
    for (int s = 0; s < n_splits; ++s) {
        const float* part = parts + s * (head_dim + 2);
        if (part[0] == -INFINITY) continue;
        const float w = expf(part[0] - m);
        l += part[1] * w;
        sum += part[2 + e] * w;
    }
    out[(static_cast<int64_t>(t) * n_head + h) * head_dim + e] = l > 0.0f ? sum / l : 0.0f;
}

template <int kKvType>
int launch_splits(int per_lane, dim3 grid, const float* q, const uint8_t* k, const uint8_t* v, size_t row_bytes,
                  int n_head, int group, int head_dim, float scale, uint32_t window, int chunk, float* partial,
                  PhRows rows, cudaStream_t stream) {
#define PH_ATTENTION_CASE(N)                                                                                   \
    case N:                                                                                                    \
        attention_split_kernel<kKvType, N><<<grid, kWarps * 32, 0, stream>>>(                                \
            q, k, v, row_bytes, n_head, group, head_dim, scale, window, chunk, partial, rows);                 \
        break;
    switch (per_lane) {
        PH_ATTENTION_CASE(1)
        PH_ATTENTION_CASE(2)
        PH_ATTENTION_CASE(3)
        PH_ATTENTION_CASE(4)
        PH_ATTENTION_CASE(5)
        PH_ATTENTION_CASE(6)
        PH_ATTENTION_CASE(7)
        PH_ATTENTION_CASE(8)
        default:
            return cudaErrorInvalidValue;
    }
#undef PH_ATTENTION_CASE
    return static_cast<int>(cudaGetLastError());
}

}  // namespace
}  // namespace powerhouse::kernels

using namespace powerhouse::kernels;

extern "C" size_t ph_attention_partial_floats(int n_tokens, int n_head, int head_dim, int n_splits) {
    if (n_tokens <= 0 || n_head <= 0 || head_dim <= 0 || n_splits <= 0) return 0;
    return static_cast<size_t>(n_tokens) * static_cast<size_t>(n_head) * static_cast<size_t>(n_splits) *
           (static_cast<size_t>(head_dim) + 2);
}

extern "C" int ph_attention(int kv_type, const float* q, const void* k_cache, const void* v_cache, size_t row_bytes,
                            float* out, int n_tokens, int n_head, int n_head_kv, int head_dim, float scale,
                            uint32_t window, int n_ctx, int n_splits, float* partial, const int32_t* pos0,
                            cudaStream_t stream) {
    return ph_attention_sinks(kv_type, q, k_cache, v_cache, row_bytes, out, n_tokens, n_head, n_head_kv, head_dim,
                              scale, window, n_ctx, n_splits, partial, nullptr, pos0, stream);
}

extern "C" int ph_attention_sinks(int kv_type, const float* q, const void* k_cache, const void* v_cache,
                                  size_t row_bytes, float* out, int n_tokens, int n_head, int n_head_kv, int head_dim,
                                  float scale, uint32_t window, int n_ctx, int n_splits, float* partial,
                                  const float* sinks, const int32_t* pos0, cudaStream_t stream) {
    return ph_attention_rows(kv_type, q, k_cache, v_cache, row_bytes, out, n_tokens, n_head, n_head_kv, head_dim, scale,
                             window, n_ctx, n_splits, partial, sinks, rows_from(pos0), stream);
}

extern "C" int ph_attention_rows(int kv_type, const float* q, const void* k_cache, const void* v_cache,
                                 size_t row_bytes, float* out, int n_tokens, int n_head, int n_head_kv, int head_dim,
                                 float scale, uint32_t window, int n_ctx, int n_splits, float* partial,
                                 const float* sinks, PhRows rows, cudaStream_t stream) {
    if (q == nullptr || k_cache == nullptr || v_cache == nullptr || out == nullptr || partial == nullptr ||
        !rows_valid(rows) || n_tokens < 0 || n_tokens > 65535 || n_head <= 0 || n_head > 65535 || n_head_kv <= 0 ||
        n_head % n_head_kv != 0 || head_dim <= 0 || head_dim > kMaxPerLane * 32 || n_ctx <= 0 || n_splits <= 0 ||
        n_splits > n_ctx || (kv_type != PH_KV_F16 && kv_type != PH_KV_Q8_0) ||
        (kv_type == PH_KV_Q8_0 && head_dim % 32 != 0)) {
        return cudaErrorInvalidValue;
    }
    if (n_tokens == 0) return cudaSuccess;
    const int chunk = (n_ctx + n_splits - 1) / n_splits;
    const dim3 grid(static_cast<unsigned>(n_splits), static_cast<unsigned>(n_head), static_cast<unsigned>(n_tokens));
    const int per_lane = (head_dim + 31) / 32;
    const int group = n_head / n_head_kv;
    const auto* k = static_cast<const uint8_t*>(k_cache);
    const auto* v = static_cast<const uint8_t*>(v_cache);
    const int status =
        kv_type == PH_KV_F16
            ? launch_splits<PH_KV_F16>(per_lane, grid, q, k, v, row_bytes, n_head, group, head_dim, scale, window,
                                       chunk, partial, rows, stream)
            : launch_splits<PH_KV_Q8_0>(per_lane, grid, q, k, v, row_bytes, n_head, group, head_dim, scale, window,
                                        chunk, partial, rows, stream);
    if (status != 0) return status;
    attention_combine_kernel<<<dim3(static_cast<unsigned>(n_head), static_cast<unsigned>(n_tokens)), head_dim, 0,
                               stream>>>(partial, out, n_head, head_dim, n_splits, sinks);
    return static_cast<int>(cudaGetLastError());
}
