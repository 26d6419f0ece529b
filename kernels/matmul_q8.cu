// Matrix-vector products of the quantized weight types with 8-bit activations: the decode
// path as llama.cpp's CPU backend and Powerhouse's CPU engine compute it
// (engine/src/backend/cpu/quant_dot.h). The activations of each token are quantized once
// per product input (ph_quantize_activations) exactly as the CPU engine quantizes them, in
// blocks of 32 (Q8_0/Q8_1: scale max|x| / 127 rounded to f16) or of 256 (Q8_K: the scale
// from the element of largest magnitude), and each weight block's quants meet them in
// integer dot products (dp4a: four 8-bit products and a 32-bit sum in one instruction).
// The sums per block are exact integers, as on the CPU, so the GPU agrees with the CPU
// engine (and llama.cpp) up to the order of the float additions, and the expert choice of
// a mixture of experts, which hangs on those activations, is the CPU's too.
//
// Speed: a weight block is decoded with a few integer instructions per 4 weights instead of
// a float multiply and add per weight (ph_matmul, the f32-activation path), which is what
// kept that kernel far below the memory bandwidth on the K-quants.
//
// Shape of the work, two kernels. The wide kernel (Q4_K, Q5_K, Q6_K, Q8_0, Q4_0, Q4_1 where
// the row is whole spans of 256 and aligned for its loads; matvec_lanes.cuh): two rows a
// warp, eight lanes a span, 16-byte loads. The per-chunk kernel (the other types and rows):
// one warp per output row, four rows per block of 128 threads; lane l takes the row's
// 32-weight chunks l, l + 32, ... (a block of the 32-element types, or one eighth of a
// K-quant super-block). Both dot a weight's bytes, loaded once, with up to 8 tokens'
// activations (which stay in L1/L2), sum the lanes in shuffles, and run up to three
// products of one input in one launch, each optionally adding a residual.
//
// Activations of one token (ph_q8_activation_bytes(in) bytes, 16-byte aligned):
//   int8  q[in]          the quantized values
//   float d[in / 32]     each 32-chunk's scale (a Q8_K block's scale repeated 8 times)
//   float s[in / 32]     Q8_1's d * sum(q) rounded to f16 (the 32-element types' minimum)
//   int   sum16[in / 16] sums of q per 16 (the K-quants' minimums, the -8/-16/-32 offsets)
//
// Thread-safety: see powerhouse_kernels.h.
#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "dequantize.cuh"
#include "matvec_lanes.cuh"
#include "norm.cuh"
#include "powerhouse_kernels.h"

namespace powerhouse::kernels {
namespace {

constexpr int kRowsPerBlock = 4;
constexpr unsigned kFull = 0xffffffffu;

// The activation arrays of one token.
struct Act {
    const int8_t* q;
    const float* d;
    const float* s;
    const int* sum16;
};

__device__ __forceinline__ Act act_of(const uint8_t* base, int64_t in) {
    return {reinterpret_cast<const int8_t*>(base), reinterpret_cast<const float*>(base + in),
            reinterpret_cast<const float*>(base + in + in / 8), reinterpret_cast<const int*>(base + in + in / 4)};
}

__device__ __forceinline__ float f16_round(float x) {
    return f16_bits_to_f32(f32_to_f16_bits(x));
}

// Where the values to quantize come from: a row of floats, or a gate computed from two
// (and written out, as ph_swiglu / ph_geglu would, for whatever else reads it).
struct RowSource {
    const float* x;  // no __restrict__: the fused norm reads what its block just wrote
    int64_t stride;
    __device__ float operator()(int t, int64_t i) const { return x[t * stride + i]; }
};

template <int kGate>  // 0: SwiGLU, 1: GeGLU
struct GateSource {
    const float* a;
    const float* b;
    float* y;
    int64_t width;
    __device__ float operator()(int t, int64_t i) const {
        const int64_t at = t * width + i;
        const float v = kGate == 0 ? swiglu_value(a[at], b[at]) : geglu_value(a[at], b[at]);
        y[at] = v;
        return v;
    }
};

// Blocks of 32 (Q8_0, with Q8_1's sum): one warp per block, one value per lane; `base` the
// token's activation bytes.
template <class Source>
__device__ __forceinline__ void quantize_q8_32_warp(const Source& src, int t, int64_t block, int lane, int64_t in,
                                                    uint8_t* base) {
    const float v = src(t, block * 32 + lane);
    float amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(kFull, amax, o));
    // As the CPU: d = amax / 127, q = nearest-even(x * (127 / amax)), IEEE division.
    const float d = __fdiv_rn(amax, 127.0f);
    const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
    const int q = __float2int_rn(__fmul_rn(v, id));
    reinterpret_cast<int8_t*>(base)[block * 32 + lane] = static_cast<int8_t>(q);
    int sum16 = q;
#pragma unroll
    for (int o = 8; o > 0; o /= 2) sum16 += __shfl_xor_sync(kFull, sum16, o);
    const int sum32 = sum16 + __shfl_xor_sync(kFull, sum16, 16);
    if (lane % 16 == 0) reinterpret_cast<int*>(base + in + in / 4)[block * 2 + lane / 16] = sum16;
    if (lane == 0) {
        reinterpret_cast<float*>(base + in)[block] = f16_round(d);
        reinterpret_cast<float*>(base + in + in / 8)[block] = f16_round(__fmul_rn(d, static_cast<float>(sum32)));
    }
}

// Blocks of 256 (Q8_K, ggml's quantize_row_q8_K_ref): one warp per block, 8 values per lane.
template <class Source>
__device__ __forceinline__ void quantize_q8_k_warp(const Source& src, int t, int64_t block, int lane, int64_t in,
                                                   uint8_t* base) {
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = src(t, block * 256 + lane * 8 + e);
    // The first element of the largest magnitude, with its sign.
    float amax = 0.0f, max = 0.0f;
    int at = INT_MAX;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        if (fabsf(v[e]) > amax) {
            amax = fabsf(v[e]);
            max = v[e];
            at = lane * 8 + e;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
        const float other_amax = __shfl_xor_sync(kFull, amax, o);
        const float other_max = __shfl_xor_sync(kFull, max, o);
        const int other_at = __shfl_xor_sync(kFull, at, o);
        if (other_amax > amax || (other_amax == amax && other_at < at)) {
            amax = other_amax;
            max = other_max;
            at = other_at;
        }
    }
    int8_t* q = reinterpret_cast<int8_t*>(base) + block * 256 + lane * 8;
    int sum8 = 0;
    float d = 0.0f;
    if (amax == 0.0f) {
#pragma unroll
        for (int e = 0; e < 8; ++e) q[e] = 0;
    } else {
        const float iscale = __fdiv_rn(-127.0f, max);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int value = static_cast<int>(fminf(127.0f, rintf(__fmul_rn(iscale, v[e]))));
            q[e] = static_cast<int8_t>(value);
            sum8 += value;
        }
        d = __fdiv_rn(1.0f, iscale);
    }
    const int sum16 = sum8 + __shfl_xor_sync(kFull, sum8, 1);
    if (lane % 2 == 0) reinterpret_cast<int*>(base + in + in / 4)[block * 16 + lane / 2] = sum16;
    if (lane < 8) {
        reinterpret_cast<float*>(base + in)[block * 8 + lane] = d;
        reinterpret_cast<float*>(base + in + in / 8)[block * 8 + lane] = 0.0f;
    }
}

template <bool kPer256, class Source>
__device__ __forceinline__ void quantize_warp(const Source& src, int t, int64_t block, int lane, int64_t in,
                                              uint8_t* base) {
    if constexpr (kPer256) {
        quantize_q8_k_warp(src, t, block, lane, in, base);
    } else {
        quantize_q8_32_warp(src, t, block, lane, in, base);
    }
}

// Grid (warp groups, tokens): one warp per activation block.
template <bool kPer256, class Source>
__global__ void quantize_kernel(Source src, int64_t in, uint8_t* __restrict__ act, size_t act_stride) {
    const int64_t block = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (block >= in / (kPer256 ? 256 : 32)) return;  // the whole warp
    const int t = static_cast<int>(blockIdx.y);
    quantize_warp<kPer256>(src, t, block, static_cast<int>(threadIdx.x % 32), in, act + t * act_stride);
}

// One block per row (norm_threads(in) threads, as ph_rms_norm): the row normalized into y,
// then quantized from y by the block's warps.
template <bool kPer256>
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_quantize_kernel(const float* x, float* y, const float* __restrict__ weight, int64_t in, float eps,
                             uint8_t* __restrict__ act, size_t act_stride) {
    const int t = static_cast<int>(blockIdx.x);
    rms_norm_row(x + t * in, y + t * in, weight, in, eps);
    __syncthreads();  // the row's values in y, for every warp of the block
    const RowSource src{y, in};
    const int warps = static_cast<int>(blockDim.x / 32);
    for (int64_t block = threadIdx.x / 32; block < in / (kPer256 ? 256 : 32); block += warps) {
        quantize_warp<kPer256>(src, t, block, static_cast<int>(threadIdx.x % 32), in, act + t * act_stride);
    }
}

// Loads of 4 weight bytes at the alignment the block layout allows.
__device__ __forceinline__ int load4_a4(const uint8_t* p) {
    return *reinterpret_cast<const int*>(p);
}
__device__ __forceinline__ int load4_a2(const uint8_t* p) {
    const auto* h = reinterpret_cast<const uint16_t*>(p);
    return static_cast<int>(static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 16));
}
__device__ __forceinline__ int load4_a1(const uint8_t* p) {
    return static_cast<int>(static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                            (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24));
}
__device__ __forceinline__ float load_f16(const uint8_t* p) {
    return f16_bits_to_f32(*reinterpret_cast<const uint16_t*>(p));
}

// Bits 0..3 of `bits` to bit 4 of bytes 0..3 (the fifth bit of four Q5 values).
__device__ __forceinline__ int spread_bit4(uint32_t bits) {
    return static_cast<int>(((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25));
}

__device__ __forceinline__ int dot4(int a, int b, int c) {
    return __dp4a(a, b, c);
}

// Each weight type: kAlign (the byte alignment its loads need of the row start and
// stride), W (one chunk's weights in registers), load(row, c) and dot(w, act, c, a) with
// a[8] the chunk's 32 activations as packed bytes.

struct Q8_0Dot {
    static constexpr int kAlign = 2;
    struct W {
        int q[8];
        float d;
    };
    __device__ static W load(const uint8_t* row, int64_t c) {
        const uint8_t* b = row + c * 34;
        W w;
        w.d = load_f16(b);
#pragma unroll
        for (int i = 0; i < 8; ++i) w.q[i] = load4_a2(b + 2 + 4 * i);
        return w;
    }
    __device__ static float dot(const W& w, const Act& act, int64_t c, const int a[8]) {
        int s = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) s = dot4(w.q[i], a[i], s);
        return w.d * act.d[c] * static_cast<float>(s);
    }
};

// Q4_0/Q4_1/MXFP4: 16 bytes of nibbles, low nibbles the first 16 values, high the last.
__device__ __forceinline__ int nibble_dot(const int q[4], const int a[8]) {
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        s = dot4(q[i] & 0x0F0F0F0F, a[i], s);
        s = dot4((q[i] >> 4) & 0x0F0F0F0F, a[4 + i], s);
    }
    return s;
}

struct Q4_0Dot {
    static constexpr int kAlign = 2;
    struct W {
        int q[4];
        float d;
    };
    __device__ static W load(const uint8_t* row, int64_t c) {
        const uint8_t* b = row + c * 18;
        W w;
        w.d = load_f16(b);
#pragma unroll
        for (int i = 0; i < 4; ++i) w.q[i] = load4_a2(b + 2 + 4 * i);
        return w;
    }
    __device__ static float dot(const W& w, const Act& act, int64_t c, const int a[8]) {
        const int s = nibble_dot(w.q, a) - 8 * (act.sum16[2 * c] + act.sum16[2 * c + 1]);
        return w.d * act.d[c] * static_cast<float>(s);
    }
};

struct Q4_1Dot {
    static constexpr int kAlign = 4;
    struct W {
        int q[4];
        float d, m;
    };
    __device__ static W load(const uint8_t* row, int64_t c) {
        const uint8_t* b = row + c * 20;
        W w;
        w.d = load_f16(b);
        w.m = load_f16(b + 2);
#pragma unroll
        for (int i = 0; i < 4; ++i) w.q[i] = load4_a4(b + 4 + 4 * i);
        return w;
    }
    __device__ static float dot(const W& w, const Act& act, int64_t c, const int a[8]) {
        return w.d * act.d[c] * static_cast<float>(nibble_dot(w.q, a)) + w.m * act.s[c];
    }
};

// Q5_0/Q5_1: nibbles as Q4, bit i of qh the fifth bit of value i.
__device__ __forceinline__ int q5_dot(const int q[4], uint32_t qh, const int a[8]) {
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        s = dot4((q[i] & 0x0F0F0F0F) | spread_bit4(qh >> (4 * i)), a[i], s);
        s = dot4(((q[i] >> 4) & 0x0F0F0F0F) | spread_bit4(qh >> (16 + 4 * i)), a[4 + i], s);
    }
    return s;
}

struct Q5_0Dot {
    static constexpr int kAlign = 2;
    struct W {
        int q[4];
        uint32_t qh;
        float d;
    };
    __device__ static W load(const uint8_t* row, int64_t c) {
        const uint8_t* b = row + c * 22;
        W w;
        w.d = load_f16(b);
        w.qh = static_cast<uint32_t>(load4_a2(b + 2));
#pragma unroll
        for (int i = 0; i < 4; ++i) w.q[i] = load4_a2(b + 6 + 4 * i);
        return w;
    }
    __device__ static float dot(const W& w, const Act& act, int64_t c, const int a[8]) {
        const int s = q5_dot(w.q, w.qh, a) - 16 * (act.sum16[2 * c] + act.sum16[2 * c + 1]);
        return w.d * act.d[c] * static_cast<float>(s);
    }
};

struct Q5_1Dot {
    static constexpr int kAlign = 4;
    struct W {
        int q[4];
        uint32_t qh;
        float d, m;
    };
    __device__ static W load(const uint8_t* row, int64_t c) {
        const uint8_t* b = row + c * 24;
        W w;
        w.d = load_f16(b);
        w.m = load_f16(b + 2);
        w.qh = static_cast<uint32_t>(load4_a4(b + 4));
#pragma unroll
        for (int i = 0; i < 4; ++i) w.q[i] = load4_a4(b + 8 + 4 * i);
        return w;
    }
    __device__ static float dot(const W& w, const Act& act, int64_t c, const int a[8]) {
        return w.d * act.d[c] * static_cast<float>(q5_dot(w.q, w.qh, a)) + w.m * act.s[c];
    }
};

// Four E2M1 codes (one per byte, 0..15) to their doubled values as signed bytes.
__device__ __forceinline__ int mxfp4_bytes(int codes) {
    const auto u = static_cast<uint32_t>(codes);
    const uint32_t sel = (u & 7u) | ((u >> 4) & 0x70u) | ((u >> 8) & 0x700u) | ((u >> 12) & 0x7000u);
    const uint32_t positive = __byte_perm(0x03020100u, 0x0C080604u, sel);  // 0 1 2 3 4 6 8 12
    const uint32_t negative = __byte_perm(0xFDFEFF00u, 0xF4F8FAFCu, sel);  // 0 -1 -2 -3 -4 -6 -8 -12
    const uint32_t sign = ((u & 0x08080808u) >> 3) * 0xFFu;
    return static_cast<int>((positive & ~sign) | (negative & sign));
}

struct MXFP4Dot {
    static constexpr int kAlign = 1;
    struct W {
        int q[4];
        float scale;
    };
    __device__ static W load(const uint8_t* row, int64_t c) {
        const uint8_t* b = row + c * 17;
        W w;
        w.scale = mxfp4_half_scale(b[0]);
#pragma unroll
        for (int i = 0; i < 4; ++i) w.q[i] = load4_a1(b + 1 + 4 * i);
        return w;
    }
    __device__ static float dot(const W& w, const Act& act, int64_t c, const int a[8]) {
        int s = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            s = dot4(mxfp4_bytes(w.q[i] & 0x0F0F0F0F), a[i], s);
            s = dot4(mxfp4_bytes((w.q[i] >> 4) & 0x0F0F0F0F), a[4 + i], s);
        }
        return w.scale * act.d[c] * static_cast<float>(s);
    }
};

// K-quants: chunk c is sub-block (c % 8) of super-block c / 8, 32 values.

struct Q2_KDot {
    static constexpr int kAlign = 4;
    struct W {
        int q[8];
        int scale[2], min[2];
        float d, dmin;
    };
    __device__ static W load(const uint8_t* row, int64_t c) {
        const uint8_t* b = row + (c / 8) * 84;
        const int sub = static_cast<int>(c % 8);
        // Value i = 128h + 32k + j: bits 2k.. of qs[32h + j].
        const uint8_t* qs = b + 16 + 32 * (sub / 4);
        const int shift = 2 * (sub % 4);
        W w;
#pragma unroll
        for (int i = 0; i < 8; ++i) w.q[i] = (load4_a4(qs + 4 * i) >> shift) & 0x03030303;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int sm = b[2 * sub + h];
            w.scale[h] = sm & 0x0F;
            w.min[h] = sm >> 4;
        }
        w.d = load_f16(b + 80);
        w.dmin = load_f16(b + 82);
        return w;
    }
    __device__ static float dot(const W& w, const Act& act, int64_t c, const int a[8]) {
        int s[2] = {0, 0};
#pragma unroll
        for (int i = 0; i < 8; ++i) s[i / 4] = dot4(w.q[i], a[i], s[i / 4]);
        const int sums = w.scale[0] * s[0] + w.scale[1] * s[1];
        const int mins = w.min[0] * act.sum16[2 * c] + w.min[1] * act.sum16[2 * c + 1];
        return act.d[c] * (w.d * static_cast<float>(sums) - w.dmin * static_cast<float>(mins));
    }
};

struct Q3_KDot {
    static constexpr int kAlign = 2;
    struct W {
        int q[8];
        int scale[2];
        float d;
    };
    __device__ static W load(const uint8_t* row, int64_t c) {
        const uint8_t* b = row + (c / 8) * 110;
        const int sub = static_cast<int>(c % 8);
        // Low two bits as Q2_K's, the third from bit `sub` of hmask[j]: set means +0, clear -4.
        const uint8_t* qs = b + 32 + 32 * (sub / 4);
        const int shift = 2 * (sub % 4);
        W w;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int low = (load4_a2(qs + 4 * i) >> shift) & 0x03030303;
            const int high = ((load4_a2(b + 4 * i) >> sub) & 0x01010101) << 2;
            w.q[i] = low | high;
        }
        const uint8_t* scales = b + 96;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int s = 2 * sub + h;
            const int lo = (s < 8 ? scales[s] : scales[s - 8] >> 4) & 0x0F;
            const int hi = (scales[8 + s % 4] >> (2 * (s / 4))) & 0x03;
            w.scale[h] = (lo | (hi << 4)) - 32;
        }
        w.d = load_f16(b + 108);
        return w;
    }
    __device__ static float dot(const W& w, const Act& act, int64_t c, const int a[8]) {
        int s[2] = {0, 0};
#pragma unroll
        for (int i = 0; i < 8; ++i) s[i / 4] = dot4(w.q[i], a[i], s[i / 4]);
        s[0] -= 4 * act.sum16[2 * c];
        s[1] -= 4 * act.sum16[2 * c + 1];
        return w.d * act.d[c] * static_cast<float>(w.scale[0] * s[0] + w.scale[1] * s[1]);
    }
};

// Q4_K/Q5_K: sub-block s is 32 bytes of qs from 32 * (s / 2), low nibbles for even s.
__device__ __forceinline__ void k4_scales(const uint8_t* b, int sub, float& dl, float& ml) {
    int sc = 0, m = 0;
    k4_scale_min(b + 4, sub, sc, m);
    dl = load_f16(b) * static_cast<float>(sc);
    ml = load_f16(b + 2) * static_cast<float>(m);
}

struct Q4_KDot {
    static constexpr int kAlign = 4;
    struct W {
        int q[8];
        float dl, ml;
    };
    __device__ static W load(const uint8_t* row, int64_t c) {
        const uint8_t* b = row + (c / 8) * 144;
        const int sub = static_cast<int>(c % 8);
        const uint8_t* qs = b + 16 + 32 * (sub / 2);
        const int shift = 4 * (sub % 2);
        W w;
#pragma unroll
        for (int i = 0; i < 8; ++i) w.q[i] = (load4_a4(qs + 4 * i) >> shift) & 0x0F0F0F0F;
        k4_scales(b, sub, w.dl, w.ml);
        return w;
    }
    __device__ static float dot(const W& w, const Act& act, int64_t c, const int a[8]) {
        int s = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) s = dot4(w.q[i], a[i], s);
        const int sum = act.sum16[2 * c] + act.sum16[2 * c + 1];
        return act.d[c] * (w.dl * static_cast<float>(s) - w.ml * static_cast<float>(sum));
    }
};

struct Q5_KDot {
    static constexpr int kAlign = 4;
    using W = Q4_KDot::W;
    __device__ static W load(const uint8_t* row, int64_t c) {
        const uint8_t* b = row + (c / 8) * 176;
        const int sub = static_cast<int>(c % 8);
        const uint8_t* qs = b + 48 + 32 * (sub / 2);
        const int shift = 4 * (sub % 2);
        W w;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int low = (load4_a4(qs + 4 * i) >> shift) & 0x0F0F0F0F;
            const int high = ((load4_a4(b + 16 + 4 * i) >> sub) & 0x01010101) << 4;
            w.q[i] = low | high;
        }
        k4_scales(b, sub, w.dl, w.ml);
        return w;
    }
    __device__ static float dot(const W& w, const Act& act, int64_t c, const int a[8]) {
        return Q4_KDot::dot(w, act, c, a);
    }
};

struct Q6_KDot {
    static constexpr int kAlign = 2;
    struct W {
        int q[8];
        int scale[2];
        float d;
    };
    __device__ static W load(const uint8_t* row, int64_t c) {
        const uint8_t* b = row + (c / 8) * 210;
        const int sub = static_cast<int>(c % 8);
        // Value i = 128h + r: low nibble r / 64 of ql[64h + r % 64], bits 2 (r / 32).. of
        // qh[32h + r % 32]; minus 32.
        const int h = sub / 4;
        const int r0 = 32 * (sub % 4);
        const uint8_t* ql = b + 64 * h + r0 % 64;
        const uint8_t* qh = b + 128 + 32 * h;
        const int low_shift = 4 * (r0 / 64);
        const int high_shift = 2 * (r0 / 32);
        W w;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int low = (load4_a2(ql + 4 * i) >> low_shift) & 0x0F0F0F0F;
            const int high = ((load4_a2(qh + 4 * i) >> high_shift) & 0x03030303) << 4;
            w.q[i] = low | high;
        }
        const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
        w.scale[0] = scales[2 * sub];
        w.scale[1] = scales[2 * sub + 1];
        w.d = load_f16(b + 208);
        return w;
    }
    __device__ static float dot(const W& w, const Act& act, int64_t c, const int a[8]) {
        int s[2] = {0, 0};
#pragma unroll
        for (int i = 0; i < 8; ++i) s[i / 4] = dot4(w.q[i], a[i], s[i / 4]);
        s[0] -= 32 * act.sum16[2 * c];
        s[1] -= 32 * act.sum16[2 * c + 1];
        return w.d * act.d[c] * static_cast<float>(w.scale[0] * s[0] + w.scale[1] * s[1]);
    }
};

// The products of one launch: up to kMaxSet matrices that read the same activations (Q, K
// and V; gate and up), each with its own rows and output, the warps of the grid dealt out
// to them in order.
constexpr int kMaxSet = PH_MAX_PRODUCTS;

struct SetEntry {
    const uint8_t* w;
    size_t row_stride;
    int64_t rows;
    float* y;
    int64_t y_stride;
    const float* residual;  // added to the product where not null (may be y)
};

struct ProductSet {
    SetEntry p[kMaxSet];
    int64_t first_warp[kMaxSet + 1];  // product m has warps first_warp[m] .. first_warp[m + 1] - 1
    int count;
};

// The product that warp `warp` works on and its first row there, for rows_per_warp rows a
// warp; false for the warps past the last.
__device__ __forceinline__ bool locate(const ProductSet& set, int64_t warp, int rows_per_warp, SetEntry& e,
                                       int64_t& row0) {
#pragma unroll
    for (int m = 0; m < kMaxSet; ++m) {
        if (m < set.count && warp < set.first_warp[m + 1]) {
            e = set.p[m];
            row0 = (warp - set.first_warp[m]) * rows_per_warp;
            return true;
        }
    }
    return false;
}

// y[t][row] = sum (+ residual[t][row] where there is one: the residual add of the layer,
// in the product's launch).
__device__ __forceinline__ void store_row(const SetEntry& e, int t, int64_t row, float sum) {
    const int64_t at = t * e.y_stride + row;
    e.y[at] = e.residual != nullptr ? e.residual[at] + sum : sum;
}

template <class T, int kTokens>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    matmul_q8_kernel(ProductSet set, int64_t in, const uint8_t* __restrict__ act, size_t act_stride) {
    SetEntry e;
    int64_t row = 0;
    if (!locate(set, static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32, 1, e, row)) return;
    const int lane = static_cast<int>(threadIdx.x % 32);
    const uint8_t* weights = e.w + static_cast<size_t>(row) * e.row_stride;
    const int64_t chunks = in / 32;
    float acc[kTokens];
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
#pragma unroll 2
    for (int64_t c = lane; c < chunks; c += 32) {
        const typename T::W wc = T::load(weights, c);
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
            const Act a = act_of(act + t * act_stride, in);
            const auto* packed = reinterpret_cast<const int4*>(a.q + 32 * c);
            const int4 p0 = packed[0];
            const int4 p1 = packed[1];
            const int values[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
            acc[t] += T::dot(wc, a, c, values);
        }
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
        float s = acc[t];
#pragma unroll
        for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(kFull, s, o);
        if (lane == 0) store_row(e, t, row, s);
    }
}

// The wide products (matvec_lanes.cuh: Q4_K, Q5_K, Q6_K, Q8_0, Q4_0, Q4_1): each warp takes
// two rows (the activations it loads serve both), eight lanes a span of 256 weights, four
// spans of each row at a step, the weight bytes read by 16-byte loads that the neighbours'
// loads continue. The per-chunk kernel above needs eight 4-byte (Q8_0: sixteen 2-byte)
// loads per 32 weights, spread over the row: 25 to 50% of the memory bandwidth on an H200.
constexpr int kWideWarps = 4;
constexpr int kWideRows = 2;  // rows per warp

template <class T, int kTokens>
__global__ void __launch_bounds__(kWideWarps * 32)
    wide_kernel(ProductSet set, int64_t in, const uint8_t* __restrict__ act, size_t act_stride) {
    SetEntry e;
    int64_t row0 = 0;
    if (!locate(set, static_cast<int64_t>(blockIdx.x) * kWideWarps + threadIdx.x / 32, kWideRows, e, row0)) return;
    const bool second = row0 + 1 < e.rows;
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int j = lane % 8;
    const uint8_t* w0 = e.w + static_cast<size_t>(row0) * e.row_stride;
    const uint8_t* w1 = second ? w0 + e.row_stride : w0;  // a lone last row reads itself twice
    const int64_t blocks = in / 256;
    float acc[kWideRows][kTokens];
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[0][t] = acc[1][t] = 0.0f;
#pragma unroll 2
    for (int64_t b = lane / 8; b < blocks; b += 4) {
        const lanes::LaneWeights l0 = T::load(w0 + b * T::kBlockBytes, j);
        const lanes::LaneWeights l1 = T::load(w1 + b * T::kBlockBytes, j);
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
            const lanes::LaneAct la = lanes::load_act<T>(act + t * act_stride, in, b, j);
            acc[0][t] += T::dot(l0, la);
            acc[1][t] += T::dot(l1, la);
        }
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
        float s0 = acc[0][t], s1 = acc[1][t];
#pragma unroll
        for (int o = 16; o > 0; o /= 2) {
            s0 += __shfl_xor_sync(kFull, s0, o);
            s1 += __shfl_xor_sync(kFull, s1, o);
        }
        if (lane == 0) store_row(e, t, row0, s0);
        if (lane == 1 && second) store_row(e, t, row0 + 1, s1);
    }
}

// Calls fn(T{}, per_256) for a quantized type with an 8-bit path; cudaErrorNotSupported
// for the others.
template <class Fn>
int with_q8_type(uint32_t type_id, Fn&& fn) {
    switch (static_cast<TypeId>(type_id)) {
        case TypeId::q4_0: return fn(Q4_0Dot{}, false);
        case TypeId::q4_1: return fn(Q4_1Dot{}, false);
        case TypeId::q5_0: return fn(Q5_0Dot{}, false);
        case TypeId::q5_1: return fn(Q5_1Dot{}, false);
        case TypeId::q8_0: return fn(Q8_0Dot{}, false);
        case TypeId::mxfp4: return fn(MXFP4Dot{}, false);
        case TypeId::q2_k: return fn(Q2_KDot{}, true);
        case TypeId::q3_k: return fn(Q3_KDot{}, true);
        case TypeId::q4_k: return fn(Q4_KDot{}, true);
        case TypeId::q5_k: return fn(Q5_KDot{}, true);
        case TypeId::q6_k: return fn(Q6_KDot{}, true);
        default: return cudaErrorNotSupported;
    }
}

// Whether a product's rows all start on 16 bytes, as the wide lanes of every type but Q6_K
// need (kNeeds16).
bool rows_aligned16(const PhProduct& p) {
    return reinterpret_cast<uintptr_t>(p.w) % 16 == 0 && p.row_stride % 16 == 0;
}

// The wide kernel's lanes of a type, where it has them and every matrix of the set suits
// its loads (16-byte aligned rows, except Q6_K's: its loads shift, the 2 bytes that
// ph_matmul_q8_usable asks do) and `in` is whole spans of 256; else fn(nullptr): the
// per-chunk kernel.
template <class Fn>
int with_wide_type(uint32_t type_id, const PhProduct* products, int count, int64_t in, Fn&& fn) {
    bool aligned16 = true;
    for (int m = 0; m < count; ++m) aligned16 = aligned16 && rows_aligned16(products[m]);
    // The lanes of L where the rows suit its loads, else the per-chunk kernel.
    const auto wide = [&](auto* lanes_of) -> int {
        using L = std::remove_pointer_t<decltype(lanes_of)>;
        return L::kNeeds16 && !aligned16 ? fn(nullptr) : fn(lanes_of);
    };
    if (in % 256 != 0) return fn(nullptr);
    switch (static_cast<TypeId>(type_id)) {
        case TypeId::q4_k: return wide(static_cast<lanes::Q4_KLanes*>(nullptr));
        case TypeId::q5_k: return wide(static_cast<lanes::Q5_KLanes*>(nullptr));
        case TypeId::q6_k: return wide(static_cast<lanes::Q6_KLanes*>(nullptr));
        case TypeId::q8_0: return wide(static_cast<lanes::Q8_0Lanes*>(nullptr));
        case TypeId::q4_0: return wide(static_cast<lanes::Q4_0Lanes*>(nullptr));
        case TypeId::q4_1: return wide(static_cast<lanes::Q4_1Lanes*>(nullptr));
        default: return fn(nullptr);
    }
}

// One launch over every row of the set for kTokens tokens (token t0 on): the wide kernel
// where the type has lanes (L not nullptr_t), else the per-chunk kernel of T.
template <class T, class L, int kTokens>
int launch_q8(const PhProduct* products, int count, int t0, int64_t in, const uint8_t* act, size_t act_stride,
              cudaStream_t stream) {
    constexpr bool kWide = !std::is_same_v<L, std::nullptr_t>;
    constexpr int kRowsPerWarp = kWide ? kWideRows : 1;
    constexpr int kWarpsPerBlock = kWide ? kWideWarps : kRowsPerBlock;
    ProductSet set{};
    set.count = count;
    set.first_warp[0] = 0;
    for (int m = 0; m < count; ++m) {
        const PhProduct& p = products[m];
        const int64_t shift = static_cast<int64_t>(t0) * p.y_stride;
        set.p[m] = SetEntry{static_cast<const uint8_t*>(p.w), p.row_stride, p.rows, p.y + shift, p.y_stride,
                            p.residual != nullptr ? p.residual + shift : nullptr};
        set.first_warp[m + 1] = set.first_warp[m] + (p.rows + kRowsPerWarp - 1) / kRowsPerWarp;
    }
    const int64_t warps = set.first_warp[count];
    const auto grid = static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
    const uint8_t* at = act + static_cast<size_t>(t0) * act_stride;
    if constexpr (kWide) {
        wide_kernel<std::remove_pointer_t<L>, kTokens><<<grid, kWarpsPerBlock * 32, 0, stream>>>(set, in, at,
                                                                                                 act_stride);
    } else {
        matmul_q8_kernel<T, kTokens><<<grid, kWarpsPerBlock * 32, 0, stream>>>(set, in, at, act_stride);
    }
    return static_cast<int>(cudaGetLastError());
}

int activation_arguments_ok(int64_t in, const void* act, size_t act_stride) {
    return in > 0 && act != nullptr && act_stride >= ph_q8_activation_bytes(in) && act_stride % 16 == 0 &&
           (reinterpret_cast<uintptr_t>(act) & 15u) == 0;
}

int matmul_q8_set(uint32_t ggml_type_id, const PhProduct* products, int count, int64_t in, const void* act,
                  size_t act_stride, int n_tokens, cudaStream_t stream) {
    if (products == nullptr || count < 1 || count > kMaxSet || n_tokens < 0 ||
        !activation_arguments_ok(in, act, act_stride)) {
        return cudaErrorInvalidValue;
    }
    int64_t total_rows = 0;
    for (int m = 0; m < count; ++m) {
        const PhProduct& p = products[m];
        if (p.w == nullptr || p.y == nullptr || p.rows < 0 || p.y_stride < p.rows ||
            !ph_matmul_q8_usable(ggml_type_id, p.w, p.row_stride)) {
            return cudaErrorInvalidValue;
        }
        total_rows += p.rows;
    }
    if (total_rows > int64_t{INT_MAX} * kRowsPerBlock) return cudaErrorInvalidValue;
    if (total_rows == 0 || n_tokens == 0) return cudaSuccess;
    return with_q8_type(ggml_type_id, [&](auto dot, bool per_256) -> int {
        using T = decltype(dot);
        if (in % (per_256 ? 256 : 32) != 0) return cudaErrorInvalidValue;
        return with_wide_type(ggml_type_id, products, count, in, [&](auto lanes_of) -> int {
            using L = decltype(lanes_of);
            const auto* a = static_cast<const uint8_t*>(act);
            // Groups of 8 tokens, then 4, 2 and 1: each weight is read ceil(n / 8) times.
            int t = 0;
            while (t < n_tokens) {
                const int left = n_tokens - t;
                int status = 0;
                int step = 1;
                if (left >= 8) {
                    status = launch_q8<T, L, 8>(products, count, t, in, a, act_stride, stream);
                    step = 8;
                } else if (left >= 4) {
                    status = launch_q8<T, L, 4>(products, count, t, in, a, act_stride, stream);
                    step = 4;
                } else if (left >= 2) {
                    status = launch_q8<T, L, 2>(products, count, t, in, a, act_stride, stream);
                    step = 2;
                } else {
                    status = launch_q8<T, L, 1>(products, count, t, in, a, act_stride, stream);
                }
                if (status != 0) return status;
                t += step;
            }
            return cudaSuccess;
        });
    });
}

// Activations of a type: per_256 (Q8_K) or blocks of 32; cudaErrorInvalidValue when `in`
// is not a whole number of them.
template <class Fn>
int with_activation_blocks(uint32_t ggml_type_id, int64_t in, Fn&& fn) {
    return with_q8_type(ggml_type_id, [&](auto, bool per_256) -> int {
        if (in % (per_256 ? 256 : 32) != 0) return cudaErrorInvalidValue;
        return per_256 ? fn(std::true_type{}) : fn(std::false_type{});
    });
}

constexpr int kQuantizeWarps = 8;

template <bool kPer256, class Source>
int launch_quantize(const Source& src, int64_t in, int n_tokens, void* act, size_t act_stride, cudaStream_t stream) {
    const int64_t warps = in / (kPer256 ? 256 : 32);
    const dim3 grid(static_cast<unsigned>((warps + kQuantizeWarps - 1) / kQuantizeWarps),
                    static_cast<unsigned>(n_tokens));
    quantize_kernel<kPer256><<<grid, kQuantizeWarps * 32, 0, stream>>>(src, in, static_cast<uint8_t*>(act),
                                                                         act_stride);
    return static_cast<int>(cudaGetLastError());
}

}  // namespace
}  // namespace powerhouse::kernels

using namespace powerhouse::kernels;

extern "C" size_t ph_q8_activation_bytes(int64_t in) {
    if (in <= 0) return 0;
    return (static_cast<size_t>(in) * 3 / 2 + 15) / 16 * 16;
}

extern "C" int ph_matmul_q8_usable(uint32_t ggml_type_id, const void* w, size_t row_stride) {
    return with_q8_type(ggml_type_id, [&](auto dot, bool) -> int {
               using T = decltype(dot);
               return reinterpret_cast<uintptr_t>(w) % T::kAlign == 0 && row_stride % T::kAlign == 0 ? 0 : 1;
           }) == 0
               ? 1
               : 0;
}

extern "C" int ph_quantize_activations(uint32_t ggml_type_id, const float* x, int64_t x_stride, int64_t in,
                                       int n_tokens, void* act, size_t act_stride, cudaStream_t stream) {
    if (x == nullptr || n_tokens < 0 || n_tokens > 65535 || x_stride < in ||
        !activation_arguments_ok(in, act, act_stride)) {
        return cudaErrorInvalidValue;
    }
    if (n_tokens == 0) return cudaSuccess;
    return with_activation_blocks(ggml_type_id, in, [&](auto per_256) -> int {
        return launch_quantize<decltype(per_256)::value>(RowSource{x, x_stride}, in, n_tokens, act, act_stride, stream);
    });
}

extern "C" int ph_rms_norm_quantize(uint32_t ggml_type_id, const float* x, float* y, const float* weight, int64_t in,
                                    int n_tokens, float eps, void* act, size_t act_stride, cudaStream_t stream) {
    if (x == nullptr || y == nullptr || weight == nullptr || n_tokens < 0 || n_tokens > 65535 ||
        !activation_arguments_ok(in, act, act_stride)) {
        return cudaErrorInvalidValue;
    }
    if (n_tokens == 0) return cudaSuccess;
    return with_activation_blocks(ggml_type_id, in, [&](auto per_256) -> int {
        rms_norm_quantize_kernel<decltype(per_256)::value><<<static_cast<unsigned>(n_tokens), norm_threads(in), 0,
                                                             stream>>>(x, y, weight, in, eps,
                                                                       static_cast<uint8_t*>(act), act_stride);
        return static_cast<int>(cudaGetLastError());
    });
}

extern "C" int ph_gate_quantize(uint32_t ggml_type_id, int gate, const float* a, const float* b, float* y, int64_t in,
                                int n_tokens, void* act, size_t act_stride, cudaStream_t stream) {
    if (a == nullptr || b == nullptr || y == nullptr || (gate != PH_GATE_SILU && gate != PH_GATE_GELU) ||
        n_tokens < 0 || n_tokens > 65535 || !activation_arguments_ok(in, act, act_stride)) {
        return cudaErrorInvalidValue;
    }
    if (n_tokens == 0) return cudaSuccess;
    return with_activation_blocks(ggml_type_id, in, [&](auto per_256) -> int {
        constexpr bool kPer256 = decltype(per_256)::value;
        return gate == PH_GATE_SILU
                   ? launch_quantize<kPer256>(GateSource<0>{a, b, y, in}, in, n_tokens, act, act_stride, stream)
                   : launch_quantize<kPer256>(GateSource<1>{a, b, y, in}, in, n_tokens, act, act_stride, stream);
    });
}

extern "C" int ph_matmul_q8(uint32_t ggml_type_id, const void* w, size_t row_stride, int64_t rows, int64_t in,
                            const void* act, size_t act_stride, int n_tokens, float* y, int64_t y_stride,
                            cudaStream_t stream) {
    const PhProduct product{w, row_stride, rows, y, y_stride, nullptr};
    return matmul_q8_set(ggml_type_id, &product, 1, in, act, act_stride, n_tokens, stream);
}

extern "C" int ph_matmul_q8_residual(uint32_t ggml_type_id, const void* w, size_t row_stride, int64_t rows, int64_t in,
                                     const void* act, size_t act_stride, int n_tokens, float* y, int64_t y_stride,
                                     const float* residual, cudaStream_t stream) {
    if (residual == nullptr) return cudaErrorInvalidValue;
    const PhProduct product{w, row_stride, rows, y, y_stride, residual};
    return matmul_q8_set(ggml_type_id, &product, 1, in, act, act_stride, n_tokens, stream);
}

extern "C" int ph_matmul_q8_set(uint32_t ggml_type_id, const PhProduct* products, int count, int64_t in,
                                const void* act, size_t act_stride, int n_tokens, cudaStream_t stream) {
    if (products == nullptr || count < 1 || count > kMaxSet) return cudaErrorInvalidValue;
    bool mixed = false;
    for (int m = 1; m < count; ++m) mixed = mixed || rows_aligned16(products[m]) != rows_aligned16(products[0]);
    if (!mixed) return matmul_q8_set(ggml_type_id, products, count, in, act, act_stride, n_tokens, stream);
    // One kernel serves a whole set, and alone an aligned product may take another than a
    // misaligned one (the wide kernel against the per-chunk one, whose sums go in another
    // order): a launch each keeps every product's ph_matmul_q8 bits. The whole set is checked
    // first (a call with no tokens checks and launches nothing), so that a bad product
    // launches none.
    for (int m = 0; m < count; ++m) {
        const int status = matmul_q8_set(ggml_type_id, &products[m], 1, in, act, act_stride, 0, stream);
        if (status != cudaSuccess) return status;
    }
    for (int m = 0; m < count; ++m) {
        const int status = matmul_q8_set(ggml_type_id, &products[m], 1, in, act, act_stride, n_tokens, stream);
        if (status != cudaSuccess) return status;
    }
    return cudaSuccess;
}
