// The AVX-512 VNNI products of interleaved weights (interleave.h). Per super-block of a
// group of sixteen rows: the scales are decoded once into row lanes; per sub-block of 32
// elements, eight vectors of bytes (four consecutive weights of each of the sixteen rows)
// are unpacked once and multiplied with every token's activations, four at a time broadcast
// from memory by vpdpbusd itself; a lane's sums are its row's exact integers, so no
// horizontal sums are needed. Per token and super-block, with I and M the integers of
// quant_dot_impl.h, the float order is dot_k's:
//   acc = fma(I, dy * d, acc); acc = fma(M, dy * -dmin, acc)   (Q6_K: the first only)
// Every function carries PH_TARGET, as in quant_dot_simd.inc: the rest of the program is
// built for baseline x86-64 and runs this only after quant_dot.cpp checked the processor.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/interleave.h"
#include "backend/cpu/quant_dot.h"
#include "tensor/quant_blocks.h"

// GCC 12 reports the undefined source operands inside its own 512-bit intrinsics (the
// unmasked forms) as "may be used uninitialized"; the masked spelling of every one of them
// would only obscure the arithmetic.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define PH_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#if defined(__clang__)
#define PH_UNROLL _Pragma("unroll")
#else
#define PH_UNROLL _Pragma("GCC unroll 8")
#endif

namespace powerhouse::cpu::detail {
namespace {

constexpr int kMaxTokens = 8;  // tokens per pass over a group's super-blocks
constexpr size_t kQsAt = offsetof(BlockQ8_K, qs), kBsumsAt = offsetof(BlockQ8_K, bsums);
constexpr __mmask16 kAll = 0xFFFF;

PH_TARGET inline int32_t load_i32(const std::byte* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

PH_TARGET inline __m512i load512(const std::byte* p) {
    return _mm512_loadu_si512(p);
}

PH_TARGET inline __m512i bytes(int v) {
    return _mm512_set1_epi8(static_cast<char>(v));
}

// 128-bit lane i (0..3) of v: the instruction takes the lane as an immediate, which a loop's
// counter is not, unrolled or not, for every compiler (clang refuses it).
PH_TARGET inline __m128i lane128(__m512i v, int i) {
    switch (i) {
        case 0:
            return _mm512_extracti32x4_epi32(v, 0);
        case 1:
            return _mm512_extracti32x4_epi32(v, 1);
        case 2:
            return _mm512_extracti32x4_epi32(v, 2);
        default:
            return _mm512_extracti32x4_epi32(v, 3);
    }
}

// Lane r: sixteen f16 of rows 0..15 as floats.
PH_TARGET inline __m512 f16x16(const std::byte* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Lane r: the sum over the group's four vectors g[4k + q] (q < 4) times the activation
// quadruples at y + 4q, for sixteen rows.
PH_TARGET inline __m512i dot4(const __m512i* g, const std::byte* y) {
    __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), g[0], _mm512_set1_epi32(load_i32(y)));
    p = _mm512_dpbusd_epi32(p, g[1], _mm512_set1_epi32(load_i32(y + 4)));
    p = _mm512_dpbusd_epi32(p, g[2], _mm512_set1_epi32(load_i32(y + 8)));
    return _mm512_dpbusd_epi32(p, g[3], _mm512_set1_epi32(load_i32(y + 12)));
}

// Unit `q` (64 bytes) of a sub-block's nibbles: the low nibbles to g[q], the high to g[4 + q].
PH_TARGET inline void unpack_nibbles(const std::byte* units, __m512i* g) {
    PH_UNROLL for (int q = 0; q < 4; ++q) {
        const __m512i v = load512(units + 64 * q);
        g[q] = _mm512_and_si512(v, bytes(0x0F));
        g[4 + q] = _mm512_and_si512(_mm512_srli_epi16(v, 4), bytes(0x0F));
    }
}

// --- Q4_K and Q5_K ---------------------------------------------------------------------
// Q5_K: Q4_K's super-block with each sub-block's 256 bytes of nibbles followed by 64 bytes
// of fifth bits (bit k of byte 4r + e: that of vector k's element e of row r).

// The fifth bits of a Q5_K sub-block into bit 4 of g[0..7].
PH_TARGET inline void add_fifth_bits(const std::byte* unit, __m512i* g) {
    const __m512i h = load512(unit);
    const __m512i bit4 = bytes(0x10);
    // g | (h moved so that bit k lands on bit 4, masked): vpternlog with the mask.
    g[0] = _mm512_ternarylogic_epi32(g[0], _mm512_slli_epi16(h, 4), bit4, 0xF8);
    g[1] = _mm512_ternarylogic_epi32(g[1], _mm512_slli_epi16(h, 3), bit4, 0xF8);
    g[2] = _mm512_ternarylogic_epi32(g[2], _mm512_slli_epi16(h, 2), bit4, 0xF8);
    g[3] = _mm512_ternarylogic_epi32(g[3], _mm512_slli_epi16(h, 1), bit4, 0xF8);
    g[4] = _mm512_ternarylogic_epi32(g[4], h, bit4, 0xF8);
    g[5] = _mm512_ternarylogic_epi32(g[5], _mm512_srli_epi16(h, 1), bit4, 0xF8);
    g[6] = _mm512_ternarylogic_epi32(g[6], _mm512_srli_epi16(h, 2), bit4, 0xF8);
    g[7] = _mm512_ternarylogic_epi32(g[7], _mm512_srli_epi16(h, 3), bit4, 0xF8);
}

template <int T, bool kFifth>
PH_TARGET void q4k_group(const std::byte* w, int64_t nb, const std::byte* act, size_t act_stride, float* dst,
                         size_t dst_stride) {
    __m512 acc[T];
    PH_UNROLL for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const std::byte* blk = w + static_cast<size_t>(b) * (kFifth ? kQ5Bytes : kQ4Bytes);
        // Bytes 16j + r: sc[r][j] (sc_a, j < 4) and sc[r][j + 4] (sc_b); the mins alike.
        const __m512i lo = load512(blk + kQ4ScLo), ml = load512(blk + kQ4MLo), hi = load512(blk + kQ4Hi);
        const __m512i sc_a = _mm512_or_si512(_mm512_and_si512(lo, bytes(0x0F)),
                                             _mm512_and_si512(_mm512_slli_epi16(hi, 4), bytes(0x30)));
        const __m512i sc_b = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 4), bytes(0x0F)),
                                             _mm512_and_si512(_mm512_slli_epi16(hi, 2), bytes(0x30)));
        const __m512i m_a = _mm512_or_si512(_mm512_and_si512(ml, bytes(0x0F)), _mm512_and_si512(hi, bytes(0x30)));
        const __m512i m_b = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ml, 4), bytes(0x0F)),
                                            _mm512_and_si512(_mm512_srli_epi16(hi, 2), bytes(0x30)));
        __m512i isum[T];
        PH_UNROLL for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
        PH_UNROLL for (int j = 0; j < 8; ++j) {
            __m512i g[8];
            const std::byte* sub = blk + kQ4Qs + (kFifth ? kQ5Sub : 256) * j;
            unpack_nibbles(sub, g);
            if constexpr (kFifth) add_fifth_bits(sub + 256, g);
            const __m512i sc = _mm512_cvtepu8_epi32(lane128(j < 4 ? sc_a : sc_b, j % 4));
            PH_UNROLL for (int t = 0; t < T; ++t) {
                const std::byte* y = act + static_cast<size_t>(t) * act_stride +
                                     static_cast<size_t>(b) * sizeof(BlockQ8_K) + kQsAt + 32 * j;
                const __m512i p = _mm512_add_epi32(dot4(g, y), dot4(g + 4, y + 16));
                isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(p, sc));
            }
        }
        // The mins as int16 pairs (m[r][j], m[r][j + 4]) per row lane, against the pairs of
        // per-32 activation sums (bs32[j], bs32[j + 4]).
        const __m512i pairs_lo = _mm512_unpacklo_epi8(m_a, m_b), pairs_hi = _mm512_unpackhi_epi8(m_a, m_b);
        __m512i mins[4];
        PH_UNROLL for (int j = 0; j < 4; ++j) {
            mins[j] = _mm512_cvtepu8_epi16(_mm256_set_m128i(lane128(pairs_hi, j), lane128(pairs_lo, j)));
        }
        const __m512 d = f16x16(blk + kQ4D), dmin = f16x16(blk + kQ4Dmin);
        PH_UNROLL for (int t = 0; t < T; ++t) {
            const std::byte* y = act + static_cast<size_t>(t) * act_stride + static_cast<size_t>(b) * sizeof(BlockQ8_K);
            const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + kBsumsAt));
            const __m256i bs32 = _mm256_madd_epi16(bsums, _mm256_set1_epi16(1));  // bs32[0..7]
            const __m128i b_lo = _mm256_castsi256_si128(bs32), b_hi = _mm256_extracti128_si256(bs32, 1);
            alignas(16) int32_t bp[4];  // (bs32[j], bs32[j + 4]) as int16 pairs
            _mm_store_si128(reinterpret_cast<__m128i*>(bp),
                            _mm_or_si128(_mm_and_si128(b_lo, _mm_set1_epi32(0xFFFF)), _mm_slli_epi32(b_hi, 16)));
            __m512i msum = _mm512_setzero_si512();
            PH_UNROLL for (int j = 0; j < 4; ++j) msum = _mm512_dpwssd_epi32(msum, mins[j], _mm512_set1_epi32(bp[j]));
            float dy;
            std::memcpy(&dy, y, 4);
            const __m512 vdy = _mm512_set1_ps(dy);
            acc[t] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, isum[t]), _mm512_mul_ps(vdy, d), acc[t]);
            acc[t] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, msum),
                                     _mm512_mul_ps(vdy, _mm512_sub_ps(_mm512_setzero_ps(), dmin)), acc[t]);
        }
    }
    PH_UNROLL for (int t = 0; t < T; ++t) _mm512_storeu_ps(dst + static_cast<size_t>(t) * dst_stride, acc[t]);
}

// --- Q6_K ------------------------------------------------------------------------------

template <int T>
PH_TARGET void q6k_group(const std::byte* w, int64_t nb, const std::byte* act, size_t act_stride, float* dst,
                         size_t dst_stride) {
    __m512 acc[T];
    PH_UNROLL for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const std::byte* blk = w + static_cast<size_t>(b) * kQ6Bytes;
        // Per token: 32 * bsums[s] as int32, the offset's share of sub-block s.
        alignas(64) int32_t off[T][16];
        __m512i isum[T];
        PH_UNROLL for (int t = 0; t < T; ++t) {
            const std::byte* y = act + static_cast<size_t>(t) * act_stride + static_cast<size_t>(b) * sizeof(BlockQ8_K);
            const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + kBsumsAt));
            _mm512_store_si512(off[t], _mm512_slli_epi32(_mm512_cvtepi16_epi32(bsums), 5));
            isum[t] = _mm512_setzero_si512();
        }
        PH_UNROLL for (int j = 0; j < 8; ++j) {
            __m512i g[8];
            const std::byte* sub = blk + kQ6Q + kQ6Sub * j;
            unpack_nibbles(sub, g);
            // The top two bits: those of g[q] sit at bits 2q of unit h0, of g[4 + q] of h1.
            const __m512i h0 = load512(sub + 256), h1 = load512(sub + 320);
            // g | (the bits moved to 4..5, masked): vpternlog with the mask as its third operand.
            g[0] = _mm512_ternarylogic_epi32(g[0], _mm512_slli_epi16(h0, 4), bytes(0x30), 0xF8);
            g[4] = _mm512_ternarylogic_epi32(g[4], _mm512_slli_epi16(h1, 4), bytes(0x30), 0xF8);
            g[1] = _mm512_ternarylogic_epi32(g[1], _mm512_slli_epi16(h0, 2), bytes(0x30), 0xF8);
            g[5] = _mm512_ternarylogic_epi32(g[5], _mm512_slli_epi16(h1, 2), bytes(0x30), 0xF8);
            g[2] = _mm512_ternarylogic_epi32(g[2], h0, bytes(0x30), 0xF8);
            g[6] = _mm512_ternarylogic_epi32(g[6], h1, bytes(0x30), 0xF8);
            g[3] = _mm512_ternarylogic_epi32(g[3], _mm512_srli_epi16(h0, 2), bytes(0x30), 0xF8);
            g[7] = _mm512_ternarylogic_epi32(g[7], _mm512_srli_epi16(h1, 2), bytes(0x30), 0xF8);
            const __m512i sc0 = _mm512_cvtepi8_epi32(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kQ6Sc + 16 * (2 * j))));
            const __m512i sc1 = _mm512_cvtepi8_epi32(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kQ6Sc + 16 * (2 * j + 1))));
            PH_UNROLL for (int t = 0; t < T; ++t) {
                const std::byte* y = act + static_cast<size_t>(t) * act_stride +
                                     static_cast<size_t>(b) * sizeof(BlockQ8_K) + kQsAt + 32 * j;
                const __m512i p0 = _mm512_sub_epi32(dot4(g, y), _mm512_set1_epi32(off[t][2 * j]));
                const __m512i p1 = _mm512_sub_epi32(dot4(g + 4, y + 16), _mm512_set1_epi32(off[t][2 * j + 1]));
                isum[t] = _mm512_add_epi32(isum[t],
                                           _mm512_add_epi32(_mm512_mullo_epi32(p0, sc0), _mm512_mullo_epi32(p1, sc1)));
            }
        }
        const __m512 d = f16x16(blk + kQ6D);
        PH_UNROLL for (int t = 0; t < T; ++t) {
            const std::byte* y = act + static_cast<size_t>(t) * act_stride + static_cast<size_t>(b) * sizeof(BlockQ8_K);
            float dy;
            std::memcpy(&dy, y, 4);
            acc[t] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, isum[t]), _mm512_mul_ps(_mm512_set1_ps(dy), d),
                                     acc[t]);
        }
    }
    PH_UNROLL for (int t = 0; t < T; ++t) _mm512_storeu_ps(dst + static_cast<size_t>(t) * dst_stride, acc[t]);
}

template <int T>
PH_TARGET void group_tokens(GgmlType type, const std::byte* w, int64_t nb, const std::byte* act, size_t act_stride,
                            float* dst, size_t dst_stride) {
    if (type == GgmlType::q4_k) {
        q4k_group<T, false>(w, nb, act, act_stride, dst, dst_stride);
    } else if (type == GgmlType::q5_k) {
        q4k_group<T, true>(w, nb, act, act_stride, dst, dst_stride);
    } else {
        q6k_group<T>(w, nb, act, act_stride, dst, dst_stride);
    }
}

}  // namespace

PH_TARGET void dot_rows_interleaved_avx512(GgmlType type, int64_t n, const std::byte* w, int groups,
                                           const std::byte* act, size_t act_stride, int tokens, float* dst,
                                           size_t dst_stride) {
    const int64_t nb = n / QK_K;
    const size_t group_bytes = static_cast<size_t>(nb) * interleaved_block_bytes(type);
    for (int g = 0; g < groups; ++g) {
        const std::byte* wg = w + static_cast<size_t>(g) * group_bytes;
        for (int t0 = 0; t0 < tokens; t0 += kMaxTokens) {
            const std::byte* a = act + static_cast<size_t>(t0) * act_stride;
            float* out = dst + static_cast<size_t>(t0) * dst_stride + static_cast<size_t>(g) * kInterleaveRows;
            switch (std::min(kMaxTokens, tokens - t0)) {
                case 1:
                    group_tokens<1>(type, wg, nb, a, act_stride, out, dst_stride);
                    break;
                case 2:
                    group_tokens<2>(type, wg, nb, a, act_stride, out, dst_stride);
                    break;
                case 3:
                    group_tokens<3>(type, wg, nb, a, act_stride, out, dst_stride);
                    break;
                case 4:
                    group_tokens<4>(type, wg, nb, a, act_stride, out, dst_stride);
                    break;
                case 5:
                    group_tokens<5>(type, wg, nb, a, act_stride, out, dst_stride);
                    break;
                case 6:
                    group_tokens<6>(type, wg, nb, a, act_stride, out, dst_stride);
                    break;
                case 7:
                    group_tokens<7>(type, wg, nb, a, act_stride, out, dst_stride);
                    break;
                default:
                    group_tokens<8>(type, wg, nb, a, act_stride, out, dst_stride);
                    break;
            }
        }
    }
}

}  // namespace powerhouse::cpu::detail
#endif
