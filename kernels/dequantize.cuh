// Device-side decoding of ggml blocks: for each quantized type, a traits struct whose
// decode8() turns 8 consecutive elements of one block into f32. The dequantize kernels
// (dequantize.cu) use them, and so will the fused dequantize + matrix-vector kernels, so
// that the arithmetic of every type is written down once on the GPU.
//
// Bit-exactness: the results must equal engine/src/tensor/dequantize.cpp (the CPU
// reference, itself bit-exact with the PyPI `gguf` package) bit for bit. That needs the
// same operations in the same order, each rounded on its own. nvcc contracts a * b + c
// into an FMA by default (-fmad=true), which rounds once and changes the last bit, so
// every multiply and add below is an explicit __fmul_rn/__fadd_rn/__fsub_rn: those
// intrinsics are never contracted, whatever the -fmad setting of the file that includes
// this header. (dequantize.cu is also built with -fmad=false, as a second guard.)
//
// Thread-safety: pure device functions.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "quant_blocks.cuh"

namespace powerhouse::kernels {

// IEEE binary16 bits -> f32, exact for every pattern (NaN payloads included), the same
// integer recipe as the engine's f16_to_f32 so that even NaNs agree bit for bit.
__device__ __forceinline__ float f16_bits_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return __uint_as_float(sign | 0x7f80'0000u | (mant << 13));
    if (exp == 0) {
        // Zero or subnormal: mant * 2^-24 is exact (and a normal f32, so FTZ cannot bite).
        const float v = __fmul_rn(static_cast<float>(mant), 0x1p-24f);
        return sign ? -v : v;
    }
    return __uint_as_float(sign | ((exp << 23) + (112u << 23)) | (mant << 13));
}

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) {
    return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

// f32 -> binary16 bits, round to nearest even (the engine's f32_to_f16). The hardware
// conversion does exactly that for every non-NaN input (subnormals and overflow to inf
// included); NaNs take the engine's rule (keep sign and top payload bits, never become
// inf) instead of the hardware's canonical NaN.
__device__ __forceinline__ uint16_t f32_to_f16_bits(float x) {
    const uint32_t bits = __float_as_uint(x);
    const uint32_t abs = bits & 0x7fff'ffffu;
    if (abs > 0x7f80'0000u) {
        uint32_t payload = (abs >> 13) & 0x3ffu;
        if (payload == 0) payload = 1;
        return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7c00u | payload);
    }
    return __half_as_ushort(__float2half_rn(x));
}

// Q5_0/Q5_1 keep the fifth bits in 4 bytes that are not 4-byte aligned inside the block.
__device__ __forceinline__ uint32_t load_u32_le(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
           (static_cast<uint32_t>(p[3]) << 24);
}

// Each traits struct: Block, kBlockSize (elements), and decode8(block, i0, v) writing
// x[i0..i0+8) with i0 a multiple of 8. Eight elements never straddle a (sub-)block
// whose scale changes every 16 or 32 elements, so each call computes its scales once.

struct Q4_0Traits {
    using Block = BlockQ4_0;
    static constexpr int kBlockSize = kQK;
    __device__ static void decode8(const Block& b, int i0, float v[8]) {
        const float d = f16_bits_to_f32(b.d);
        const int j0 = i0 % 16;
        const int shift = i0 < 16 ? 0 : 4;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int q = (b.qs[j0 + e] >> shift) & 0x0F;
            v[e] = __fmul_rn(d, static_cast<float>(q - 8));
        }
    }
};

struct Q4_1Traits {
    using Block = BlockQ4_1;
    static constexpr int kBlockSize = kQK;
    __device__ static void decode8(const Block& b, int i0, float v[8]) {
        const float d = f16_bits_to_f32(b.d);
        const float m = f16_bits_to_f32(b.m);
        const int j0 = i0 % 16;
        const int shift = i0 < 16 ? 0 : 4;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int q = (b.qs[j0 + e] >> shift) & 0x0F;
            v[e] = __fadd_rn(__fmul_rn(d, static_cast<float>(q)), m);
        }
    }
};

// The 5-bit value of element i: low nibble as Q4_0, bit 4 is bit i of the qh word.
__device__ __forceinline__ int q5_value(const uint8_t* qs, uint32_t qh, int i) {
    const int nibble = (qs[i % 16] >> (i < 16 ? 0 : 4)) & 0x0F;
    return nibble | static_cast<int>(((qh >> i) & 1u) << 4);
}

struct Q5_0Traits {
    using Block = BlockQ5_0;
    static constexpr int kBlockSize = kQK;
    __device__ static void decode8(const Block& b, int i0, float v[8]) {
        const float d = f16_bits_to_f32(b.d);
        const uint32_t qh = load_u32_le(b.qh);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            v[e] = __fmul_rn(d, static_cast<float>(q5_value(b.qs, qh, i0 + e) - 16));
        }
    }
};

struct Q5_1Traits {
    using Block = BlockQ5_1;
    static constexpr int kBlockSize = kQK;
    __device__ static void decode8(const Block& b, int i0, float v[8]) {
        const float d = f16_bits_to_f32(b.d);
        const float m = f16_bits_to_f32(b.m);
        const uint32_t qh = load_u32_le(b.qh);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            v[e] = __fadd_rn(__fmul_rn(d, static_cast<float>(q5_value(b.qs, qh, i0 + e))), m);
        }
    }
};

struct Q8_0Traits {
    using Block = BlockQ8_0;
    static constexpr int kBlockSize = kQK;
    __device__ static void decode8(const Block& b, int i0, float v[8]) {
        const float d = f16_bits_to_f32(b.d);
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = __fmul_rn(static_cast<float>(b.qs[i0 + e]), d);
    }
};

// 2^(e - 128) for every exponent byte (the engine's mxfp4_half_scale): the f32 subnormals
// 2^-128 and 2^-127 for e = 0 and 1, never inf or NaN.
__device__ __forceinline__ float mxfp4_half_scale(uint8_t e) {
    return __uint_as_float(e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23);
}

// The doubled E2M1 value of a 4-bit code: magnitudes 0 1 2 3 4 6 8 12 packed as nibbles of
// one constant (no table in memory), bit 3 the sign; code 8 is 0, not -0.
__device__ __forceinline__ int mxfp4_value(int code) {
    const int magnitude = static_cast<int>((0xC8643210u >> (4 * (code & 7))) & 0x0Fu);
    return (code & 8) ? -magnitude : magnitude;
}

// Each product is exact, or inf for e >= 253 with large codes, as on the CPU.
struct MXFP4Traits {
    using Block = BlockMXFP4;
    static constexpr int kBlockSize = kQK;
    __device__ static void decode8(const Block& b, int i0, float v[8]) {
        const float d = mxfp4_half_scale(b.e);
        const int j0 = i0 % 16;
        const int shift = i0 < 16 ? 0 : 4;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int q = (b.qs[j0 + e] >> shift) & 0x0F;
            v[e] = __fmul_rn(d, static_cast<float>(mxfp4_value(q)));
        }
    }
};

// K-quants: the sub-block factors are rounded to f32 first (d * scale, dmin * min), then
// applied per element, as the reference does.

struct Q2_KTraits {
    using Block = BlockQ2_K;
    static constexpr int kBlockSize = QK_K;
    __device__ static void decode8(const Block& b, int i0, float v[8]) {
        const float d = f16_bits_to_f32(b.d);
        const float dmin = f16_bits_to_f32(b.dmin);
        const uint8_t sm = b.scales[i0 / 16];
        const float dl = __fmul_rn(d, static_cast<float>(sm & 0x0F));
        const float ml = __fmul_rn(dmin, static_cast<float>(sm >> 4));
        // i = 128*h + 32*k + j: bits 2k..2k+1 of qs[32*h + j].
        const uint8_t* qs = b.qs + 32 * (i0 / 128) + i0 % 32;
        const int shift = 2 * ((i0 % 128) / 32);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int q = (qs[e] >> shift) & 0x03;
            v[e] = __fsub_rn(__fmul_rn(dl, static_cast<float>(q)), ml);
        }
    }
};

struct Q3_KTraits {
    using Block = BlockQ3_K;
    static constexpr int kBlockSize = QK_K;
    __device__ static void decode8(const Block& b, int i0, float v[8]) {
        const float d = f16_bits_to_f32(b.d);
        // The one 6-bit scale of sub-block s (the engine's unpack_q3_k_scales, for one s).
        const int s = i0 / 16;
        const int lo = (s < 8 ? b.scales[s] : b.scales[s - 8] >> 4) & 0x0F;
        const int hi = (b.scales[8 + s % 4] >> (2 * (s / 4))) & 0x03;
        const float dl = __fmul_rn(d, static_cast<float>((lo | (hi << 4)) - 32));
        const uint8_t* qs = b.qs + 32 * (i0 / 128) + i0 % 32;
        const int shift = 2 * ((i0 % 128) / 32);
        const int hbit = i0 / 32;
        const uint8_t* hmask = b.hmask + i0 % 32;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int q_lo = (qs[e] >> shift) & 0x03;
            const int q_hi = (hmask[e] >> hbit) & 0x01;
            v[e] = __fmul_rn(dl, static_cast<float>(q_hi ? q_lo : q_lo - 4));
        }
    }
};

// Scale and min of sub-block s of Q4_K/Q5_K (the engine's unpack_k4_scales, for one s).
__device__ __forceinline__ void k4_scale_min(const uint8_t* p, int s, int& sc, int& m) {
    if (s < 4) {
        sc = p[s] & 0x3F;
        m = p[s + 4] & 0x3F;
    } else {
        sc = (p[s + 4] & 0x0F) | ((p[s - 4] >> 6) << 4);
        m = (p[s + 4] >> 4) | ((p[s] >> 6) << 4);
    }
}

// Q4_K and Q5_K share everything but the fifth bit (qh == nullptr for Q4_K).
__device__ __forceinline__ void decode8_k4(uint16_t d_bits, uint16_t dmin_bits, const uint8_t* scales,
                                           const uint8_t* qs, const uint8_t* qh, int i0, float v[8]) {
    const float d = f16_bits_to_f32(d_bits);
    const float dmin = f16_bits_to_f32(dmin_bits);
    const int s = i0 / 32;
    int sc = 0;
    int m = 0;
    k4_scale_min(scales, s, sc, m);
    const float dl = __fmul_rn(d, static_cast<float>(sc));
    const float ml = __fmul_rn(dmin, static_cast<float>(m));
    const int j0 = i0 % 32;
    const uint8_t* q4 = qs + 32 * (s / 2) + j0;
    const int shift = 4 * (s % 2);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        int q = (q4[e] >> shift) & 0x0F;
        if (qh) q |= ((qh[j0 + e] >> s) & 0x01) << 4;
        v[e] = __fsub_rn(__fmul_rn(dl, static_cast<float>(q)), ml);
    }
}

struct Q4_KTraits {
    using Block = BlockQ4_K;
    static constexpr int kBlockSize = QK_K;
    __device__ static void decode8(const Block& b, int i0, float v[8]) {
        decode8_k4(b.d, b.dmin, b.scales, b.qs, nullptr, i0, v);
    }
};

struct Q5_KTraits {
    using Block = BlockQ5_K;
    static constexpr int kBlockSize = QK_K;
    __device__ static void decode8(const Block& b, int i0, float v[8]) {
        decode8_k4(b.d, b.dmin, b.scales, b.qs, b.qh, i0, v);
    }
};

struct Q6_KTraits {
    using Block = BlockQ6_K;
    static constexpr int kBlockSize = QK_K;
    __device__ static void decode8(const Block& b, int i0, float v[8]) {
        const float d = f16_bits_to_f32(b.d);
        const float dl = __fmul_rn(d, static_cast<float>(b.scales[i0 / 16]));
        // i = 128*h + r: low nibble r/64 of ql[64*h + r%64], bits 2*(r/32).. of qh[32*h + r%32].
        const int h = i0 / 128;
        const int r0 = i0 % 128;
        const uint8_t* ql = b.ql + 64 * h + r0 % 64;
        const uint8_t* qh = b.qh + 32 * h + r0 % 32;
        const int lo_shift = 4 * (r0 / 64);
        const int hi_shift = 2 * (r0 / 32);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int lo = (ql[e] >> lo_shift) & 0x0F;
            const int hi = (qh[e] >> hi_shift) & 0x03;
            v[e] = __fmul_rn(dl, static_cast<float>((lo | (hi << 4)) - 32));
        }
    }
};

}  // namespace powerhouse::kernels
