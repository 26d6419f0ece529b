#include "tensor/quantize.h"

#include <cassert>
#include <cmath>
#include <cstring>

#include "tensor/half.h"
#include "tensor/quant_blocks.h"
#include "tensor/quantize_k.h"

namespace powerhouse {
namespace {

template <class Block>
void store_block(unsigned char* dst, int64_t index, const Block& b) {
    std::memcpy(dst + index * static_cast<int64_t>(sizeof(Block)), &b, sizeof(Block));
}

// Truncation toward zero into [0, hi], as numpy's trunc + astype(uint8) + clip does for
// the values gguf produces; NaN (only from non-finite input) gives 0 rather than UB.
int trunc_clamped(float v, int hi) {
    if (!(v >= 0.0f)) return 0;
    if (v >= static_cast<float>(hi)) return hi;
    return static_cast<int>(v);
}

// x * y rounded to f32 on its own. gguf (numpy) rounds the product before adding the
// offset; an FMA would round once and, for values within an ulp of a level boundary, pick
// another level. Where the target has FMA instructions a volatile stops compilers from
// fusing (GCC does by default outside ISO mode: -ffp-contract=fast); x86 without FMA
// cannot fuse, and there the loops stay vectorizable (10x faster). A fused build fails
// the fixture's 'near-boundaries' rows.
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__FMA__) && !defined(__FMA4__)
float mul_rounded(float x, float y) {
    return x * y;
}
#else
float mul_rounded(float x, float y) {
    volatile float product = x * y;
    return product;
}
#endif

// 1/d, or 0 when d is 0, as gguf's np.where(d == 0, 0, 1 / d).
float inverse_or_zero(float d) {
    return d == 0.0f ? 0.0f : 1.0f / d;
}

// The element of largest magnitude, keeping its sign; the first one on ties
// (numpy's argmax, ggml's strict comparison).
float signed_absmax(const float* x, int n) {
    float amax = std::fabs(x[0]);
    float max = x[0];
    for (int j = 1; j < n; ++j) {
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

void min_max(const float* x, int n, float& min, float& max) {
    min = x[0];
    max = x[0];
    for (int j = 1; j < n; ++j) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
}

// Nibbles of 32 values in 0..15 (or the low nibbles of 0..31): q[j] low, q[j + 16] high.
void pack_nibbles(const int q[kQK], uint8_t qs[kQK / 2]) {
    for (int j = 0; j < kQK / 2; ++j) {
        qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + kQK / 2] & 0x0F) << 4));
    }
}

// Bit 4 of each of 32 values, value j at bit j of a little-endian uint32.
void pack_fifth_bits(const int q[kQK], uint8_t qh[4]) {
    uint32_t bits = 0;
    for (int j = 0; j < kQK; ++j) bits |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    std::memcpy(qh, &bits, 4);
}

// Symmetric types: the largest-magnitude element maps to the most negative level,
// d = max / -(levels / 2); q = trunc(x / d + levels / 2 + 0.5).
template <class Block>
Block quantize_symmetric(const float* x, int levels) {
    Block b{};
    const float half = static_cast<float>(levels / 2);
    const float d = signed_absmax(x, kQK) / -half;
    const float id = inverse_or_zero(d);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) {
        q[j] = trunc_clamped(mul_rounded(x[j], id) + (half + 0.5f), levels - 1);
    }
    b.d = f32_to_f16(d);
    pack_nibbles(q, b.qs);
    if constexpr (requires(Block & blk) { blk.qh; }) pack_fifth_bits(q, b.qh);
    return b;
}

// Types with a min: d = (max - min) / (levels - 1); q = trunc((x - min) / d + 0.5).
template <class Block>
Block quantize_with_min(const float* x, int levels) {
    Block b{};
    float min;
    float max;
    min_max(x, kQK, min, max);
    const float d = (max - min) / static_cast<float>(levels - 1);
    const float id = inverse_or_zero(d);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) {
        q[j] = trunc_clamped(mul_rounded(x[j] - min, id) + 0.5f, levels - 1);
    }
    b.d = f32_to_f16(d);
    b.m = f32_to_f16(min);
    pack_nibbles(q, b.qs);
    if constexpr (requires(Block & blk) { blk.qh; }) pack_fifth_bits(q, b.qh);
    return b;
}

BlockQ8_0 quantize_q8_0_block(const float* x) {
    BlockQ8_0 b{};
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = inverse_or_zero(d);
    for (int j = 0; j < kQK; ++j) {
        // Round half away from zero (roundf; gguf's np_roundf).
        float v = std::round(x[j] * id);
        if (!(v >= -127.0f)) v = -127.0f;  // only reachable with non-finite input
        if (v > 127.0f) v = 127.0f;
        b.qs[j] = static_cast<int8_t>(v);
    }
    b.d = f32_to_f16(d);
    return b;
}

// gguf's MXFP4 exponent: e = floor(log2(max|x|)) - 2 + 127, so d = 2^(e - 128) =
// 2^(f - 3) with f = floor(log2(max|x|)): max|x| in [2^f, 2^(f+1)) lands between the
// doubled codes 8 d = 2^f and 12 d = 1.5 * 2^f, and anything above 1.5 * 2^f clips to
// the largest code (ggml's choice). Two details of numpy decide the byte and are copied:
// - log2 is evaluated in f32 (the input's type), so an amax a few ulps below a power of
//   two whose log2 rounds up to the integer takes the next exponent (7.9999995 gives
//   e = 128, not 127). The f32 rounding of the double log2 reproduces that; checked
//   against numpy for every positive finite f32 by scripts/fixtures/make_quant_fixture.py
//   --check-log2.
// - the float result is cast to uint8 modulo 256, so amax below 2^-125 (where the
//   exponent would be negative) gives e in 232..255: a huge scale under which every
//   element is code 0, i.e. the block decodes to zeros.
// amax = 0, NaN or inf give e = 0, as gguf's np.where(d > 0, ...) and numpy's cast do.
uint8_t mxfp4_exponent(float amax) {
    if (!(amax > 0.0f) || !std::isfinite(amax)) return 0;
    const float log2_f32 = static_cast<float>(std::log2(static_cast<double>(amax)));
    const int e = static_cast<int>(std::floor(log2_f32)) - 2 + 127;
    return static_cast<uint8_t>(static_cast<unsigned>(e) & 0xFFu);
}

// Each element takes the code whose value d * v is nearest: gguf's argmin over
// |d * v - x| evaluated in f32 (the subtraction rounds, so near-ties follow f32), the
// lowest code on ties, so ties go to the smaller magnitude and a zero to code 0 (also
// for -0). A NaN error (only from non-finite input) wins at once, as numpy's argmin
// returns the first NaN. d * v is exact or overflows to inf for every e, so an FMA
// cannot change the result.
BlockMXFP4 quantize_mxfp4_block(const float* x) {
    BlockMXFP4 b{};
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) {
        const float a = std::fabs(x[j]);
        if (a > amax || std::isnan(a)) amax = a;  // np.max propagates NaN
        if (std::isnan(a)) break;
    }
    b.e = mxfp4_exponent(amax);
    const float d = mxfp4_half_scale(b.e);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) {
        int best = 0;
        float best_err = std::fabs(d * static_cast<float>(kMxfp4Values[0]) - x[j]);
        if (!std::isnan(best_err)) {
            for (int k = 1; k < 16; ++k) {
                const float err = std::fabs(d * static_cast<float>(kMxfp4Values[k]) - x[j]);
                if (std::isnan(err)) {
                    best = k;
                    break;
                }
                if (err < best_err) {
                    best = k;
                    best_err = err;
                }
            }
        }
        q[j] = best;
    }
    pack_nibbles(q, b.qs);
    return b;
}

template <class Block, class Encode>
void quantize_blocks(const float* src, unsigned char* dst, int64_t n_blocks, int block_size, Encode encode) {
    for (int64_t ib = 0; ib < n_blocks; ++ib) store_block(dst, ib, encode(src + ib * block_size));
}

}  // namespace

void quantize_row(GgmlType type, const float* src, void* dst, int64_t n) {
    const TypeTraits& traits = type_traits(type);
    assert(traits.has_reference);
    assert(n >= 0 && n % traits.block_size == 0);
    auto* out = static_cast<unsigned char*>(dst);
    const int64_t nb = n / traits.block_size;
    switch (type) {
        case GgmlType::f32:
            std::memcpy(out, src, static_cast<size_t>(n) * sizeof(float));
            return;
        case GgmlType::f16:
            for (int64_t i = 0; i < n; ++i) {
                const uint16_t h = f32_to_f16(src[i]);
                std::memcpy(out + 2 * i, &h, 2);
            }
            return;
        case GgmlType::bf16:
            for (int64_t i = 0; i < n; ++i) {
                const uint16_t h = f32_to_bf16(src[i]);
                std::memcpy(out + 2 * i, &h, 2);
            }
            return;
        case GgmlType::q4_0:
            return quantize_blocks<BlockQ4_0>(src, out, nb, kQK,
                                              [](const float* x) { return quantize_symmetric<BlockQ4_0>(x, 16); });
        case GgmlType::q4_1:
            return quantize_blocks<BlockQ4_1>(src, out, nb, kQK,
                                              [](const float* x) { return quantize_with_min<BlockQ4_1>(x, 16); });
        case GgmlType::q5_0:
            return quantize_blocks<BlockQ5_0>(src, out, nb, kQK,
                                              [](const float* x) { return quantize_symmetric<BlockQ5_0>(x, 32); });
        case GgmlType::q5_1:
            return quantize_blocks<BlockQ5_1>(src, out, nb, kQK,
                                              [](const float* x) { return quantize_with_min<BlockQ5_1>(x, 32); });
        case GgmlType::q8_0:
            return quantize_blocks<BlockQ8_0>(src, out, nb, kQK, quantize_q8_0_block);
        case GgmlType::mxfp4:
            return quantize_blocks<BlockMXFP4>(src, out, nb, kQK, quantize_mxfp4_block);
        case GgmlType::q2_k:
            return quantize_blocks<BlockQ2_K>(src, out, nb, QK_K, detail::quantize_block_q2_k);
        case GgmlType::q3_k:
            return quantize_blocks<BlockQ3_K>(src, out, nb, QK_K, detail::quantize_block_q3_k);
        case GgmlType::q4_k:
            return quantize_blocks<BlockQ4_K>(src, out, nb, QK_K, detail::quantize_block_q4_k);
        case GgmlType::q5_k:
            return quantize_blocks<BlockQ5_K>(src, out, nb, QK_K, detail::quantize_block_q5_k);
        case GgmlType::q6_k:
            return quantize_blocks<BlockQ6_K>(src, out, nb, QK_K, detail::quantize_block_q6_k);
        default:
            assert(false && "quantize_row: type without a reference");
            return;
    }
}

}  // namespace powerhouse
