// The AVX2 products of interleaved Q4_K and Q5_K weights (interleave.h): the AVX-512
// variant's scheme (interleave_avx512.cpp) with 256-bit vectors, so a group's sixteen rows
// are taken in two halves of eight, the lanes of a vector being rows 8h .. 8h + 7. Without
// vpdpbusd, products go through vpmaddubsw into 16-bit sums, as many as fit without
// overflow, then vpmaddwd with each row's scale in both halves of its lane: for Q4_K all
// eight vectors of a sub-block (8 x 2 x 15 x 127 < 2^15), for Q5_K four (4 x 2 x 31 x 127).
// Per token and super-block the float order is dot_k's, so results equal dot_rows(avx2) bit
// for bit. (Q6_K was written too and measured no faster than the file's rows with AVX2,
// cpu_kernel_bench: from RAM 17.8 against 17.4 GB/s, prompts 5% slower; it keeps them.)
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/interleave.h"
#include "backend/cpu/quant_dot.h"
#include "tensor/quant_blocks.h"

#define PH_TARGET __attribute__((target("avx2,fma,f16c")))
#if defined(__clang__)
#define PH_UNROLL _Pragma("unroll")
#else
#define PH_UNROLL _Pragma("GCC unroll 8")
#endif

namespace powerhouse::cpu::detail {
namespace {

constexpr int kMaxTokens = 4;  // tokens per pass: their sums and the group's vectors fit 16 registers
constexpr size_t kQsAt = offsetof(BlockQ8_K, qs), kBsumsAt = offsetof(BlockQ8_K, bsums);


PH_TARGET inline int32_t load_i32(const std::byte* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

PH_TARGET inline __m256i load256(const std::byte* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

PH_TARGET inline __m128i load128(const std::byte* p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

PH_TARGET inline __m128i load64(const std::byte* p) {
    return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}

PH_TARGET inline __m256i bytes(int v) {
    return _mm256_set1_epi8(static_cast<char>(v));
}

// Eight int32 lanes v (within int16) as (v, v) int16 pairs, the form vpmaddwd scales a
// pair sum with: the low half from v, the high half from v shifted up.
PH_TARGET inline __m256i pairs(__m256i v) {
    return _mm256_blend_epi16(v, _mm256_slli_epi32(v, 16), 0xAA);
}

// Half `h` (rows 8h .. 8h + 7) of a sub-block's four nibble units: low nibbles to g[q],
// high ones to g[4 + q].
PH_TARGET inline void unpack_nibbles(const std::byte* units, int h, __m256i* g) {
    PH_UNROLL for (int q = 0; q < 4; ++q) {
        const __m256i v = load256(units + 64 * q + 32 * h);
        g[q] = _mm256_and_si256(v, bytes(0x0F));
        g[4 + q] = _mm256_and_si256(_mm256_srli_epi16(v, 4), bytes(0x0F));
    }
}

// 16-bit sums of vectors g[k] (k in [from, to)) times the activation quadruples at y + 4k'
// (k' = k for k < 4, 16 + 4 (k - 4) bytes on for the high nibbles' vectors).
PH_TARGET inline __m256i products(const __m256i* g, const std::byte* y, int from, int to) {
    __m256i s = _mm256_setzero_si256();
    PH_UNROLL for (int k = from; k < to; ++k) {
        const size_t at = k < 4 ? 4 * static_cast<size_t>(k) : 16 + 4 * static_cast<size_t>(k - 4);
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(g[k], _mm256_set1_epi32(load_i32(y + at))));
    }
    return s;
}

// The scales and mins of a Q4_K/Q5_K super-block as bytes [j][row], j < 8.
struct K4Scales {
    alignas(16) uint8_t sc[8][16];
    alignas(16) uint8_t m[8][16];
};

PH_TARGET inline void decode_k4_scales(const std::byte* blk, K4Scales& out) {
    const __m128i low = _mm_set1_epi8(0x0F), top = _mm_set1_epi8(0x30);
    for (int j = 0; j < 4; ++j) {
        const __m128i lo = load128(blk + kQ4ScLo + 16 * j), ml = load128(blk + kQ4MLo + 16 * j);
        const __m128i hi = load128(blk + kQ4Hi + 16 * j);
        _mm_store_si128(reinterpret_cast<__m128i*>(out.sc[j]),
                        _mm_or_si128(_mm_and_si128(lo, low), _mm_and_si128(_mm_slli_epi16(hi, 4), top)));
        _mm_store_si128(reinterpret_cast<__m128i*>(out.sc[j + 4]),
                        _mm_or_si128(_mm_and_si128(_mm_srli_epi16(lo, 4), low), _mm_and_si128(_mm_slli_epi16(hi, 2), top)));
        _mm_store_si128(reinterpret_cast<__m128i*>(out.m[j]), _mm_or_si128(_mm_and_si128(ml, low), _mm_and_si128(hi, top)));
        _mm_store_si128(reinterpret_cast<__m128i*>(out.m[j + 4]),
                        _mm_or_si128(_mm_and_si128(_mm_srli_epi16(ml, 4), low), _mm_and_si128(_mm_srli_epi16(hi, 2), top)));
    }
}

// The fifth bits of half h of a Q5_K sub-block into bit 4 of g[0..7] (bit k for g[k]).
PH_TARGET inline void add_fifth_bits(const std::byte* unit, int h, __m256i* g) {
    const __m256i b = load256(unit + 32 * h);
    const __m256i bit4 = bytes(0x10);
    g[0] = _mm256_or_si256(g[0], _mm256_and_si256(_mm256_slli_epi16(b, 4), bit4));
    g[1] = _mm256_or_si256(g[1], _mm256_and_si256(_mm256_slli_epi16(b, 3), bit4));
    g[2] = _mm256_or_si256(g[2], _mm256_and_si256(_mm256_slli_epi16(b, 2), bit4));
    g[3] = _mm256_or_si256(g[3], _mm256_and_si256(_mm256_slli_epi16(b, 1), bit4));
    g[4] = _mm256_or_si256(g[4], _mm256_and_si256(b, bit4));
    g[5] = _mm256_or_si256(g[5], _mm256_and_si256(_mm256_srli_epi16(b, 1), bit4));
    g[6] = _mm256_or_si256(g[6], _mm256_and_si256(_mm256_srli_epi16(b, 2), bit4));
    g[7] = _mm256_or_si256(g[7], _mm256_and_si256(_mm256_srli_epi16(b, 3), bit4));
}

// Q4_K (kFifth false) and Q5_K, T tokens, one group: dst[t * dst_stride + r].
template <int T, bool kFifth>
PH_TARGET void q4k_group(const std::byte* w, int64_t nb, const std::byte* act, size_t act_stride, float* dst,
                         size_t dst_stride) {
    alignas(32) float acc[2][T][8] = {};
    K4Scales scales;
    for (int64_t b = 0; b < nb; ++b) {
        const std::byte* blk = w + static_cast<size_t>(b) * (kFifth ? kQ5Bytes : kQ4Bytes);
        decode_k4_scales(blk, scales);
        // Per token: the per-32 activation sums as int16 pairs (bs32[j], bs32[j + 4]).
        alignas(16) int32_t bp[T][4];
        float dy[T];
        PH_UNROLL for (int t = 0; t < T; ++t) {
            const std::byte* y = act + static_cast<size_t>(t) * act_stride + static_cast<size_t>(b) * sizeof(BlockQ8_K);
            const __m256i bs32 = _mm256_madd_epi16(load256(y + kBsumsAt), _mm256_set1_epi16(1));
            const __m128i lo = _mm256_castsi256_si128(bs32), hi = _mm256_extracti128_si256(bs32, 1);
            _mm_store_si128(reinterpret_cast<__m128i*>(bp[t]),
                            _mm_or_si128(_mm_and_si128(lo, _mm_set1_epi32(0xFFFF)), _mm_slli_epi32(hi, 16)));
            std::memcpy(&dy[t], y, 4);
        }
        for (int h = 0; h < 2; ++h) {
            __m256i isum[T];
            PH_UNROLL for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
            for (int j = 0; j < 8; ++j) {
                __m256i g[8];
                const std::byte* sub = blk + kQ4Qs + (kFifth ? kQ5Sub : 256) * static_cast<size_t>(j);
                unpack_nibbles(sub, h, g);
                if constexpr (kFifth) add_fifth_bits(sub + 256, h, g);
                const __m256i sc =
                    pairs(_mm256_cvtepu8_epi32(load64(reinterpret_cast<const std::byte*>(scales.sc[j]) + 8 * h)));
                PH_UNROLL for (int t = 0; t < T; ++t) {
                    const std::byte* y = act + static_cast<size_t>(t) * act_stride +
                                         static_cast<size_t>(b) * sizeof(BlockQ8_K) + kQsAt + 32 * static_cast<size_t>(j);
                    if constexpr (kFifth) {
                        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(products(g, y, 0, 4), sc));
                        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(products(g, y, 4, 8), sc));
                    } else {
                        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(products(g, y, 0, 8), sc));
                    }
                }
            }
            __m256i mins[4];
            PH_UNROLL for (int j = 0; j < 4; ++j) {
                const __m256i a = _mm256_cvtepu8_epi32(load64(reinterpret_cast<const std::byte*>(scales.m[j]) + 8 * h));
                const __m256i c =
                    _mm256_cvtepu8_epi32(load64(reinterpret_cast<const std::byte*>(scales.m[j + 4]) + 8 * h));
                mins[j] = _mm256_or_si256(a, _mm256_slli_epi32(c, 16));
            }
            const __m256 d = _mm256_cvtph_ps(load128(blk + kQ4D + 16 * static_cast<size_t>(h)));
            const __m256 neg_dmin = _mm256_xor_ps(_mm256_cvtph_ps(load128(blk + kQ4Dmin + 16 * static_cast<size_t>(h))),
                                                  _mm256_set1_ps(-0.0f));
            PH_UNROLL for (int t = 0; t < T; ++t) {
                __m256i msum = _mm256_setzero_si256();
                PH_UNROLL for (int j = 0; j < 4; ++j) {
                    msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mins[j], _mm256_set1_epi32(bp[t][j])));
                }
                const __m256 vdy = _mm256_set1_ps(dy[t]);
                __m256 a = _mm256_load_ps(acc[h][t]);
                a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(vdy, d), a);
                a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(vdy, neg_dmin), a);
                _mm256_store_ps(acc[h][t], a);
            }
        }
    }
    for (int t = 0; t < T; ++t) {
        std::memcpy(dst + static_cast<size_t>(t) * dst_stride, acc[0][t], 8 * sizeof(float));
        std::memcpy(dst + static_cast<size_t>(t) * dst_stride + 8, acc[1][t], 8 * sizeof(float));
    }
}

template <int T>
PH_TARGET void group_tokens(GgmlType type, const std::byte* w, int64_t nb, const std::byte* act, size_t act_stride,
                            float* dst, size_t dst_stride) {
    if (type == GgmlType::q4_k) {
        q4k_group<T, false>(w, nb, act, act_stride, dst, dst_stride);
    } else {
        q4k_group<T, true>(w, nb, act, act_stride, dst, dst_stride);
    }
}

}  // namespace

PH_TARGET void dot_rows_interleaved_avx2(GgmlType type, int64_t n, const std::byte* w, int groups, const std::byte* act,
                                         size_t act_stride, int tokens, float* dst, size_t dst_stride) {
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
                default:
                    group_tokens<4>(type, wg, nb, a, act_stride, out, dst_stride);
                    break;
            }
        }
    }
}

}  // namespace powerhouse::cpu::detail
#endif
