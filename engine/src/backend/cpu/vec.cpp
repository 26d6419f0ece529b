#include "backend/cpu/vec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/half.h"
#include "tensor/quant_blocks.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define PH_AVX2 __attribute__((target("avx2,fma,f16c")))
// The tile kernels once more with AVX-512's 32 vector registers (still 256-bit vectors):
// room for twice the queries per pass. The blocks below are forced inline into it.
#define PH_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl")))
#define PH_BLOCK __attribute__((target("avx2,fma,f16c"), always_inline)) inline
#endif

// The tile kernels' loops over registers must unroll, or the accumulators live on the stack.
#if defined(__clang__)
#define PH_UNROLL _Pragma("unroll")
#else
#define PH_UNROLL _Pragma("GCC unroll 16")
#endif

namespace powerhouse::cpu {

namespace {

#if defined(__x86_64__)
PH_AVX2 inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// exp(x) for x in [-88, 88] (clamped): x = n ln2 + r with |r| <= ln2 / 2, e^r by a
// degree-6 polynomial (relative error ~2 ulp), 2^n added to the exponent bits.
PH_AVX2 inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

PH_AVX2 void rms_norm_avx2(const float* x, float* y, const float* weight, int64_t n, float eps) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        acc = _mm256_fmadd_ps(v, v, acc);
    }
    double sum = hsum8(acc);
    for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    const __m256 s = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), s), _mm256_loadu_ps(weight + i)));
    }
    for (; i < n; ++i) y[i] = (x[i] * scale) * weight[i];
}

PH_AVX2 void swiglu_avx2(const float* a, const float* b, float* dst, size_t n) {
    size_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(a + i);
        const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(b + i)));
    }
    for (; i < n; ++i) dst[i] = a[i] / (1.0f + std::exp(-a[i])) * b[i];
}

PH_AVX2 void add_avx2(const float* a, const float* b, float* dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; ++i) dst[i] = a[i] + b[i];
}

PH_AVX2 double exp_sum_avx2(float* x, size_t n, float max) {
    size_t i = 0;
    __m256 acc = _mm256_setzero_ps();
    const __m256 m = _mm256_set1_ps(max);
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    double sum = hsum8(acc);
    for (; i < n; ++i) {
        x[i] = std::exp(x[i] - max);
        sum += x[i];
    }
    return sum;
}

PH_AVX2 void axpy_f16_avx2(float a, const uint16_t* x, float* y, size_t n) {
    size_t i = 0;
    const __m256 va = _mm256_set1_ps(a);
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, v, _mm256_loadu_ps(y + i)));
    }
    for (; i < n; ++i) y[i] += a * _cvtsh_ss(x[i]);
}

PH_AVX2 void axpy_q8_0_avx2(float a, const void* x, float* y, size_t n) {
    const auto* bytes = static_cast<const std::byte*>(x);
    for (size_t b = 0; b < n / kQK; ++b) {
        const std::byte* blk = bytes + b * sizeof(BlockQ8_0);
        uint16_t d;
        std::memcpy(&d, blk, 2);
        const __m256 s = _mm256_set1_ps(a * _cvtsh_ss(d));
        for (int j = 0; j < kQK; j += 8) {
            const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + j));
            const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
            float* out = y + b * kQK + static_cast<size_t>(j);
            _mm256_storeu_ps(out, _mm256_fmadd_ps(s, v, _mm256_loadu_ps(out)));
        }
    }
}

PH_AVX2 float scale_max_avx2(float* x, size_t n, float scale) {
    size_t i = 0;
    const __m256 s = _mm256_set1_ps(scale);
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), s);
        _mm256_storeu_ps(x + i, v);
        m = _mm256_max_ps(m, v);
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float max = _mm_cvtss_f32(h);
    for (; i < n; ++i) {
        x[i] *= scale;
        max = std::max(max, x[i]);
    }
    return max;
}

PH_AVX2 void scale_round_f16_avx2(float* x, size_t n, float a) {
    size_t i = 0;
    const __m256 s = _mm256_set1_ps(a);
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(x + i), s), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; ++i) x[i] = f16_to_f32(f32_to_f16(x[i] * a));
}

// Rows of a tile as the kernels read them, 8 values at a time: f32, or F16 converted on
// the way into the registers (no f32 copy is stored: stores waiting on loads from memory
// would fill the store buffer and cap the loads in flight).
struct F32Rows {
    const float* p;
    size_t stride;  // floats
    PH_AVX2 __m256 load8(int r, size_t d) const { return _mm256_loadu_ps(p + static_cast<size_t>(r) * stride + d); }
    PH_AVX2 float load1(int r, size_t d) const { return p[static_cast<size_t>(r) * stride + d]; }
};

struct F16Rows {
    const std::byte* p;
    size_t stride;  // bytes
    PH_AVX2 __m256 load8(int r, size_t d) const {
        return _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + static_cast<size_t>(r) * stride + 2 * d)));
    }
    PH_AVX2 float load1(int r, size_t d) const {
        uint16_t h;
        std::memcpy(&h, p + static_cast<size_t>(r) * stride + 2 * d, 2);
        return _cvtsh_ss(h);
    }
};

// One key row against Q queries, each product in the order of quant_dot's single-token F16
// product (dot_float<1>), the order attention used before it took tiles, so that answers
// stay bit for bit what they were: four sums of 8 lanes over steps of 32 values, added as
// (s0 + s1) + (s2 + s3), then 8 values at a time, the lanes (hsum8), the last values one by
// one. Each key vector read serves Q queries.
template <int Q>
PH_BLOCK void dot_row_f16(const float* q, size_t q_stride, const F16Rows& k, int r, size_t n, float* s,
                          size_t s_stride) {
    __m256 acc[Q][4];
    PH_UNROLL for (int i = 0; i < Q; ++i) {
        PH_UNROLL for (int j = 0; j < 4; ++j) acc[i][j] = _mm256_setzero_ps();
    }
    size_t d = 0;
    for (; d + 32 <= n; d += 32) {
        PH_UNROLL for (int j = 0; j < 4; ++j) {
            const __m256 x = k.load8(r, d + 8 * static_cast<size_t>(j));
            PH_UNROLL for (int i = 0; i < Q; ++i) {
                const __m256 y =
                    _mm256_loadu_ps(q + static_cast<size_t>(i) * q_stride + d + 8 * static_cast<size_t>(j));
                acc[i][j] = _mm256_fmadd_ps(x, y, acc[i][j]);
            }
        }
    }
    PH_UNROLL for (int i = 0; i < Q; ++i) {
        acc[i][0] = _mm256_add_ps(_mm256_add_ps(acc[i][0], acc[i][1]), _mm256_add_ps(acc[i][2], acc[i][3]));
    }
    for (; d + 8 <= n; d += 8) {
        const __m256 x = k.load8(r, d);
        PH_UNROLL for (int i = 0; i < Q; ++i) {
            acc[i][0] = _mm256_fmadd_ps(x, _mm256_loadu_ps(q + static_cast<size_t>(i) * q_stride + d), acc[i][0]);
        }
    }
    PH_UNROLL for (int i = 0; i < Q; ++i) {
        const float* qi = q + static_cast<size_t>(i) * q_stride;
        float sum = hsum8(acc[i][0]);
        for (size_t e = d; e < n; ++e) sum += k.load1(r, e) * qi[e];
        s[static_cast<size_t>(i) * s_stride + static_cast<size_t>(r)] = sum;
    }
}

// Queries in blocks of QB, then smaller blocks for the rest.
template <int QB>
PH_BLOCK void dot_row_queries(const float* q, size_t q_stride, int nq, const F16Rows& k, int r, size_t n, float* s,
                              size_t s_stride) {
    int i = 0;
    for (; i + QB <= nq; i += QB) {
        dot_row_f16<QB>(q + static_cast<size_t>(i) * q_stride, q_stride, k, r, n, s + static_cast<size_t>(i) * s_stride,
                        s_stride);
    }
    if constexpr (QB > 1) {
        if (i < nq) {
            dot_row_queries<QB / 2>(q + static_cast<size_t>(i) * q_stride, q_stride, nq - i, k, r, n,
                                    s + static_cast<size_t>(i) * s_stride, s_stride);
        }
    }
}

template <int QB>
PH_BLOCK void dot_tile_f16_body(const float* q, size_t q_stride, int nq, const void* k, size_t k_stride, int rows,
                                size_t n, float* s, size_t s_stride) {
    const F16Rows keys{static_cast<const std::byte*>(k), k_stride};
    for (int r = 0; r < rows; ++r) dot_row_queries<QB>(q, q_stride, nq, keys, r, n, s, s_stride);
}

PH_AVX2 void dot_tile_f16_avx2(const float* q, size_t q_stride, int nq, const void* k, size_t k_stride, int rows,
                               size_t n, float* s, size_t s_stride) {
    dot_tile_f16_body<2>(q, q_stride, nq, k, k_stride, rows, n, s, s_stride);
}

PH_AVX512 void dot_tile_f16_avx512(const float* q, size_t q_stride, int nq, const void* k, size_t k_stride, int rows,
                                   size_t n, float* s, size_t s_stride) {
    dot_tile_f16_body<4>(q, q_stride, nq, k, k_stride, rows, n, s, s_stride);
}

// The integer sums of four vectors of 8 int32: lane j of the result is the sum of a[j]'s.
PH_BLOCK __m128i hsum4x8_epi32(const __m256i* a) {
    const __m256i u = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
    return _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
}

PH_BLOCK float f16_at(const std::byte* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

// Q8_0 keys against Q8_0 queries, R rows (1 or 4) and Q queries, block by block: the exact
// integer sum of each block (|q| times k with q's sign, as ggml's AVX2 path), then times
// the two blocks' scales, summed over the blocks in f32 (as quant_dot's Q8_0 product).
template <int R, int Q>
PH_BLOCK void dot_q8_0_block_avx2(const std::byte* q, size_t q_stride, const std::byte* k, size_t k_stride, int r0,
                                  size_t nb, float* s, size_t s_stride) {
    constexpr size_t kBlock = sizeof(BlockQ8_0);
    const std::byte* k0 = k + static_cast<size_t>(r0) * k_stride;
    __m128 acc4[Q];
    float acc1[Q];
    PH_UNROLL for (int i = 0; i < Q; ++i) {
        acc4[i] = _mm_setzero_ps();
        acc1[i] = 0.0f;
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (size_t b = 0; b < nb; ++b) {
        __m256i kv[R];
        PH_UNROLL for (int r = 0; r < R; ++r) {
            kv[r] = _mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(k0 + static_cast<size_t>(r) * k_stride + b * kBlock + 2));
        }
        __m128 dk = _mm_setzero_ps();
        if constexpr (R == 4) {
            dk = _mm_setr_ps(f16_at(k0 + b * kBlock), f16_at(k0 + k_stride + b * kBlock),
                             f16_at(k0 + 2 * k_stride + b * kBlock), f16_at(k0 + 3 * k_stride + b * kBlock));
        }
        PH_UNROLL for (int i = 0; i < Q; ++i) {
            const std::byte* qb = q + static_cast<size_t>(i) * q_stride + b * kBlock;
            const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + 2));
            const __m256i u = _mm256_abs_epi8(qv);
            __m256i sums[R];
            PH_UNROLL for (int r = 0; r < R; ++r) {
                sums[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_sign_epi8(kv[r], qv)), ones);
            }
            const float dq = f16_at(qb);
            if constexpr (R == 4) {
                acc4[i] = _mm_fmadd_ps(_mm_mul_ps(dk, _mm_set1_ps(dq)), _mm_cvtepi32_ps(hsum4x8_epi32(sums)), acc4[i]);
            } else {
                const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(sums[0]), _mm256_extracti128_si256(sums[0], 1));
                const __m128i h2 = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
                const int total = _mm_cvtsi128_si32(_mm_add_epi32(h2, _mm_shuffle_epi32(h2, 0xb1)));
                // One fused multiply-add, as a lane of the four rows' path: the same sum either way.
                acc1[i] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(f16_at(k0 + b * kBlock) * dq),
                                                     _mm_set_ss(static_cast<float>(total)), _mm_set_ss(acc1[i])));
            }
        }
    }
    PH_UNROLL for (int i = 0; i < Q; ++i) {
        float* si = s + static_cast<size_t>(i) * s_stride + r0;
        if constexpr (R == 4) {
            _mm_storeu_ps(si, acc4[i]);
        } else {
            si[0] = acc1[i];
        }
    }
}

template <int R, int QB>
PH_BLOCK void dot_q8_0_rows_of_queries(const std::byte* q, size_t q_stride, int nq, const std::byte* k, size_t k_stride,
                                       int r0, size_t nb, float* s, size_t s_stride) {
    int i = 0;
    for (; i + QB <= nq; i += QB) {
        dot_q8_0_block_avx2<R, QB>(q + static_cast<size_t>(i) * q_stride, q_stride, k, k_stride, r0, nb,
                                   s + static_cast<size_t>(i) * s_stride, s_stride);
    }
    if constexpr (QB > 1) {
        if (i < nq) {
            dot_q8_0_rows_of_queries<R, QB / 2>(q + static_cast<size_t>(i) * q_stride, q_stride, nq - i, k, k_stride,
                                                r0, nb, s + static_cast<size_t>(i) * s_stride, s_stride);
        }
    }
}

template <int QB>
PH_BLOCK void dot_tile_q8_0_body(const void* q, size_t q_stride, int nq, const void* k, size_t k_stride, int rows,
                                 size_t n, float* s, size_t s_stride) {
    const auto* qb = static_cast<const std::byte*>(q);
    const auto* kb = static_cast<const std::byte*>(k);
    int r = 0;
    for (; r + 4 <= rows; r += 4)
        dot_q8_0_rows_of_queries<4, QB>(qb, q_stride, nq, kb, k_stride, r, n / kQK, s, s_stride);
    for (; r < rows; ++r) dot_q8_0_rows_of_queries<1, QB>(qb, q_stride, nq, kb, k_stride, r, n / kQK, s, s_stride);
}

PH_AVX2 void dot_tile_q8_0_avx2(const void* q, size_t q_stride, int nq, const void* k, size_t k_stride, int rows,
                                size_t n, float* s, size_t s_stride) {
    dot_tile_q8_0_body<2>(q, q_stride, nq, k, k_stride, rows, n, s, s_stride);
}

PH_AVX512 void dot_tile_q8_0_avx512(const void* q, size_t q_stride, int nq, const void* k, size_t k_stride, int rows,
                                    size_t n, float* s, size_t s_stride) {
    dot_tile_q8_0_body<4>(q, q_stride, nq, k, k_stride, rows, n, s, s_stride);
}

// W vectors (8 floats each) of the accumulators of Q queries stay in registers while the
// value rows pass: each value vector loaded serves Q queries.
template <class Rows, int Q, int W>
PH_BLOCK void accumulate_block_avx2(const float* w, size_t w_stride, const Rows& v, size_t d, int rows, float* acc,
                                    size_t acc_stride) {
    __m256 a[Q][W];
    PH_UNROLL for (int i = 0; i < Q; ++i) {
        PH_UNROLL for (int j = 0; j < W; ++j) a[i][j] =
            _mm256_loadu_ps(acc + static_cast<size_t>(i) * acc_stride + 8 * j);
    }
    for (int r = 0; r < rows; ++r) {
        __m256 x[W];
        PH_UNROLL for (int j = 0; j < W; ++j) x[j] = v.load8(r, d + 8 * static_cast<size_t>(j));
        PH_UNROLL for (int i = 0; i < Q; ++i) {
            const __m256 b = _mm256_broadcast_ss(w + static_cast<size_t>(i) * w_stride + static_cast<size_t>(r));
            PH_UNROLL for (int j = 0; j < W; ++j) a[i][j] = _mm256_fmadd_ps(b, x[j], a[i][j]);
        }
    }
    PH_UNROLL for (int i = 0; i < Q; ++i) {
        PH_UNROLL for (int j = 0; j < W; ++j)
            _mm256_storeu_ps(acc + static_cast<size_t>(i) * acc_stride + 8 * j, a[i][j]);
    }
}

template <class Rows, int W, int QB>
PH_BLOCK void accumulate_columns(const float* w, size_t w_stride, int nq, const Rows& v, size_t d, int rows, float* acc,
                                 size_t acc_stride) {
    int i = 0;
    for (; i + QB <= nq; i += QB) {
        accumulate_block_avx2<Rows, QB, W>(w + static_cast<size_t>(i) * w_stride, w_stride, v, d, rows,
                                           acc + static_cast<size_t>(i) * acc_stride + d, acc_stride);
    }
    if constexpr (QB > 1) {
        if (i < nq) {
            accumulate_columns<Rows, W, QB / 2>(w + static_cast<size_t>(i) * w_stride, w_stride, nq - i, v, d, rows,
                                                acc + static_cast<size_t>(i) * acc_stride, acc_stride);
        }
    }
}

template <int QB, class Rows>
PH_BLOCK void accumulate_tile_body(const float* w, size_t w_stride, int nq, const Rows& v, int rows, size_t n,
                                   float* acc, size_t acc_stride) {
    size_t d = 0;
    for (; d + 32 <= n; d += 32) accumulate_columns<Rows, 4, QB>(w, w_stride, nq, v, d, rows, acc, acc_stride);
    for (; d + 8 <= n; d += 8) accumulate_columns<Rows, 1, QB>(w, w_stride, nq, v, d, rows, acc, acc_stride);
    for (int i = 0; i < nq && d < n; ++i) {
        for (int r = 0; r < rows; ++r) {
            const float wr = w[static_cast<size_t>(i) * w_stride + static_cast<size_t>(r)];
            for (size_t e = d; e < n; ++e) acc[static_cast<size_t>(i) * acc_stride + e] += wr * v.load1(r, e);
        }
    }
}

// Q8_0 values, a block (32 values, four vectors) at a time: each query's weight times the
// block's scale once (as axpy_q8_0), then the integers as floats, shared by Q queries.
template <int Q>
PH_BLOCK void accumulate_q8_0_block_avx2(const float* w, size_t w_stride, const std::byte* v, size_t v_stride, size_t b,
                                         int rows, float* acc, size_t acc_stride) {
    __m256 a[Q][4];
    PH_UNROLL for (int i = 0; i < Q; ++i) {
        PH_UNROLL for (int j = 0; j < 4; ++j) a[i][j] =
            _mm256_loadu_ps(acc + static_cast<size_t>(i) * acc_stride + 8 * j);
    }
    for (int r = 0; r < rows; ++r) {
        const std::byte* blk = v + static_cast<size_t>(r) * v_stride + b * sizeof(BlockQ8_0);
        uint16_t dh;
        std::memcpy(&dh, blk, 2);
        const float d = _cvtsh_ss(dh);
        __m256 x[4];
        PH_UNROLL for (int j = 0; j < 4; ++j) {
            const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + 8 * j));
            x[j] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
        }
        PH_UNROLL for (int i = 0; i < Q; ++i) {
            const __m256 s = _mm256_set1_ps(w[static_cast<size_t>(i) * w_stride + static_cast<size_t>(r)] * d);
            PH_UNROLL for (int j = 0; j < 4; ++j) a[i][j] = _mm256_fmadd_ps(s, x[j], a[i][j]);
        }
    }
    PH_UNROLL for (int i = 0; i < Q; ++i) {
        PH_UNROLL for (int j = 0; j < 4; ++j)
            _mm256_storeu_ps(acc + static_cast<size_t>(i) * acc_stride + 8 * j, a[i][j]);
    }
}

template <int QB>
PH_BLOCK void accumulate_q8_0_blocks(const float* w, size_t w_stride, int nq, const std::byte* v, size_t v_stride,
                                     size_t b, int rows, float* acc, size_t acc_stride) {
    int i = 0;
    for (; i + QB <= nq; i += QB) {
        accumulate_q8_0_block_avx2<QB>(w + static_cast<size_t>(i) * w_stride, w_stride, v, v_stride, b, rows,
                                       acc + static_cast<size_t>(i) * acc_stride, acc_stride);
    }
    if constexpr (QB > 1) {
        if (i < nq) {
            accumulate_q8_0_blocks<QB / 2>(w + static_cast<size_t>(i) * w_stride, w_stride, nq - i, v, v_stride, b,
                                           rows, acc + static_cast<size_t>(i) * acc_stride, acc_stride);
        }
    }
}

template <int QB>
PH_BLOCK void accumulate_tile_q8_0_body(const float* w, size_t w_stride, int nq, const void* v, size_t v_stride,
                                        int rows, size_t n, float* acc, size_t acc_stride) {
    for (size_t b = 0; b < n / kQK; ++b) {
        accumulate_q8_0_blocks<QB>(w, w_stride, nq, static_cast<const std::byte*>(v), v_stride, b, rows, acc + b * kQK,
                                   acc_stride);
    }
}

// The entry points of the weighted sums, per instruction set.
PH_AVX2 void accumulate_tile_avx2(const float* w, size_t w_stride, int nq, const float* v, size_t v_stride, int rows,
                                  size_t n, float* acc, size_t acc_stride) {
    accumulate_tile_body<2>(w, w_stride, nq, F32Rows{v, v_stride}, rows, n, acc, acc_stride);
}
PH_AVX512 void accumulate_tile_avx512(const float* w, size_t w_stride, int nq, const float* v, size_t v_stride,
                                      int rows, size_t n, float* acc, size_t acc_stride) {
    accumulate_tile_body<4>(w, w_stride, nq, F32Rows{v, v_stride}, rows, n, acc, acc_stride);
}
PH_AVX2 void accumulate_tile_f16_avx2(const float* w, size_t w_stride, int nq, const void* v, size_t v_stride, int rows,
                                      size_t n, float* acc, size_t acc_stride) {
    accumulate_tile_body<2>(w, w_stride, nq, F16Rows{static_cast<const std::byte*>(v), v_stride}, rows, n, acc,
                            acc_stride);
}
PH_AVX512 void accumulate_tile_f16_avx512(const float* w, size_t w_stride, int nq, const void* v, size_t v_stride,
                                          int rows, size_t n, float* acc, size_t acc_stride) {
    accumulate_tile_body<4>(w, w_stride, nq, F16Rows{static_cast<const std::byte*>(v), v_stride}, rows, n, acc,
                            acc_stride);
}
PH_AVX2 void accumulate_tile_q8_0_avx2(const float* w, size_t w_stride, int nq, const void* v, size_t v_stride,
                                       int rows, size_t n, float* acc, size_t acc_stride) {
    accumulate_tile_q8_0_body<2>(w, w_stride, nq, v, v_stride, rows, n, acc, acc_stride);
}
PH_AVX512 void accumulate_tile_q8_0_avx512(const float* w, size_t w_stride, int nq, const void* v, size_t v_stride,
                                           int rows, size_t n, float* acc, size_t acc_stride) {
    accumulate_tile_q8_0_body<4>(w, w_stride, nq, v, v_stride, rows, n, acc, acc_stride);
}
#endif

}  // namespace

void rms_norm_row(KernelIsa isa, const float* x, float* y, const float* weight, int64_t n, float eps) {
#if defined(__x86_64__)
    if (isa != KernelIsa::scalar) return rms_norm_avx2(x, y, weight, n, eps);
#endif
    (void)isa;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * weight[i];
}

void swiglu(KernelIsa isa, const float* a, const float* b, float* dst, size_t n) {
#if defined(__x86_64__)
    if (isa != KernelIsa::scalar) return swiglu_avx2(a, b, dst, n);
#endif
    (void)isa;
    for (size_t i = 0; i < n; ++i) dst[i] = a[i] / (1.0f + std::exp(-a[i])) * b[i];
}

void add(KernelIsa isa, const float* a, const float* b, float* dst, size_t n) {
#if defined(__x86_64__)
    if (isa != KernelIsa::scalar) return add_avx2(a, b, dst, n);
#endif
    (void)isa;
    for (size_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}

double exp_sum(KernelIsa isa, float* x, size_t n, float max) {
#if defined(__x86_64__)
    if (isa != KernelIsa::scalar) return exp_sum_avx2(x, n, max);
#endif
    (void)isa;
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - max);
        sum += x[i];
    }
    return sum;
}

void axpy_f16(KernelIsa isa, float a, const uint16_t* x, float* y, size_t n) {
#if defined(__x86_64__)
    if (isa != KernelIsa::scalar) return axpy_f16_avx2(a, x, y, n);
#endif
    (void)isa;
    for (size_t i = 0; i < n; ++i) y[i] += a * f16_to_f32(x[i]);
}

void axpy_q8_0(KernelIsa isa, float a, const void* x, float* y, size_t n) {
#if defined(__x86_64__)
    if (isa != KernelIsa::scalar) return axpy_q8_0_avx2(a, x, y, n);
#endif
    (void)isa;
    const auto* bytes = static_cast<const std::byte*>(x);
    for (size_t b = 0; b < n / kQK; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk, bytes + b * sizeof(BlockQ8_0), sizeof blk);
        const float s = a * f16_to_f32(blk.d);
        for (int j = 0; j < kQK; ++j) y[b * kQK + static_cast<size_t>(j)] += s * static_cast<float>(blk.qs[j]);
    }
}

float scale_max(KernelIsa isa, float* x, size_t n, float scale) {
#if defined(__x86_64__)
    if (isa != KernelIsa::scalar) return scale_max_avx2(x, n, scale);
#endif
    (void)isa;
    float max = -INFINITY;
    for (size_t i = 0; i < n; ++i) {
        x[i] *= scale;
        max = std::max(max, x[i]);
    }
    return max;
}

void scale_round_f16(KernelIsa isa, float* x, size_t n, float a) {
#if defined(__x86_64__)
    if (isa != KernelIsa::scalar) return scale_round_f16_avx2(x, n, a);
#endif
    (void)isa;
    for (size_t i = 0; i < n; ++i) x[i] = f16_to_f32(f32_to_f16(x[i] * a));
}

void dot_tile_f16(KernelIsa isa, const float* q, size_t q_stride, int nq, const void* k, size_t k_stride, int rows,
                  size_t n, float* s, size_t s_stride) {
#if defined(__x86_64__)
    if (isa == KernelIsa::avx512) return dot_tile_f16_avx512(q, q_stride, nq, k, k_stride, rows, n, s, s_stride);
    if (isa != KernelIsa::scalar) return dot_tile_f16_avx2(q, q_stride, nq, k, k_stride, rows, n, s, s_stride);
#endif
    (void)isa;
    for (int i = 0; i < nq; ++i) {
        const float* qi = q + static_cast<size_t>(i) * q_stride;
        for (int r = 0; r < rows; ++r) {
            const std::byte* kr = static_cast<const std::byte*>(k) + static_cast<size_t>(r) * k_stride;
            float sum = 0.0f;
            for (size_t d = 0; d < n; ++d) {
                uint16_t h;
                std::memcpy(&h, kr + 2 * d, 2);
                sum += qi[d] * f16_to_f32(h);
            }
            s[static_cast<size_t>(i) * s_stride + static_cast<size_t>(r)] = sum;
        }
    }
}

void dot_tile_q8_0(KernelIsa isa, const void* q, size_t q_stride, int nq, const void* k, size_t k_stride, int rows,
                   size_t n, float* s, size_t s_stride) {
#if defined(__x86_64__)
    if (isa == KernelIsa::avx512) return dot_tile_q8_0_avx512(q, q_stride, nq, k, k_stride, rows, n, s, s_stride);
    if (isa != KernelIsa::scalar) return dot_tile_q8_0_avx2(q, q_stride, nq, k, k_stride, rows, n, s, s_stride);
#endif
    (void)isa;
    for (int i = 0; i < nq; ++i) {
        for (int r = 0; r < rows; ++r) {
            float sum = 0.0f;
            for (size_t b = 0; b < n / kQK; ++b) {
                BlockQ8_0 x, y;
                std::memcpy(&x, static_cast<const std::byte*>(q) + static_cast<size_t>(i) * q_stride + b * sizeof x,
                            sizeof x);
                std::memcpy(&y, static_cast<const std::byte*>(k) + static_cast<size_t>(r) * k_stride + b * sizeof y,
                            sizeof y);
                int total = 0;
                for (int j = 0; j < kQK; ++j) total += x.qs[j] * y.qs[j];
                sum += f16_to_f32(y.d) * f16_to_f32(x.d) * static_cast<float>(total);
            }
            s[static_cast<size_t>(i) * s_stride + static_cast<size_t>(r)] = sum;
        }
    }
}

namespace {

// The plain weighted sums, with value(r, e) the e-th value of row r as f32.
template <class Value>
void accumulate_tile_scalar(const float* w, size_t w_stride, int nq, int rows, size_t n, float* acc, size_t acc_stride,
                            Value&& value) {
    for (int i = 0; i < nq; ++i) {
        float* a = acc + static_cast<size_t>(i) * acc_stride;
        for (int r = 0; r < rows; ++r) {
            const float wr = w[static_cast<size_t>(i) * w_stride + static_cast<size_t>(r)];
            for (size_t e = 0; e < n; ++e) a[e] += wr * value(r, e);
        }
    }
}

}  // namespace

void accumulate_tile(KernelIsa isa, const float* w, size_t w_stride, int nq, const float* v, size_t v_stride, int rows,
                     size_t n, float* acc, size_t acc_stride) {
#if defined(__x86_64__)
    if (isa == KernelIsa::avx512) return accumulate_tile_avx512(w, w_stride, nq, v, v_stride, rows, n, acc, acc_stride);
    if (isa != KernelIsa::scalar) return accumulate_tile_avx2(w, w_stride, nq, v, v_stride, rows, n, acc, acc_stride);
#endif
    (void)isa;
    accumulate_tile_scalar(w, w_stride, nq, rows, n, acc, acc_stride,
                           [&](int r, size_t e) { return v[static_cast<size_t>(r) * v_stride + e]; });
}

void accumulate_tile_f16(KernelIsa isa, const float* w, size_t w_stride, int nq, const void* v, size_t v_stride,
                         int rows, size_t n, float* acc, size_t acc_stride) {
#if defined(__x86_64__)
    if (isa == KernelIsa::avx512) {
        return accumulate_tile_f16_avx512(w, w_stride, nq, v, v_stride, rows, n, acc, acc_stride);
    }
    if (isa != KernelIsa::scalar)
        return accumulate_tile_f16_avx2(w, w_stride, nq, v, v_stride, rows, n, acc, acc_stride);
#endif
    const auto* bytes = static_cast<const std::byte*>(v);
    (void)isa;
    accumulate_tile_scalar(w, w_stride, nq, rows, n, acc, acc_stride, [&](int r, size_t e) {
        uint16_t h;
        std::memcpy(&h, bytes + static_cast<size_t>(r) * v_stride + 2 * e, 2);
        return f16_to_f32(h);
    });
}

void accumulate_tile_q8_0(KernelIsa isa, const float* w, size_t w_stride, int nq, const void* v, size_t v_stride,
                          int rows, size_t n, float* acc, size_t acc_stride) {
#if defined(__x86_64__)
    if (isa == KernelIsa::avx512) {
        return accumulate_tile_q8_0_avx512(w, w_stride, nq, v, v_stride, rows, n, acc, acc_stride);
    }
    if (isa != KernelIsa::scalar)
        return accumulate_tile_q8_0_avx2(w, w_stride, nq, v, v_stride, rows, n, acc, acc_stride);
#endif
    (void)isa;
    const auto* bytes = static_cast<const std::byte*>(v);
    for (int i = 0; i < nq; ++i) {
        float* a = acc + static_cast<size_t>(i) * acc_stride;
        for (int r = 0; r < rows; ++r) {
            const float wr = w[static_cast<size_t>(i) * w_stride + static_cast<size_t>(r)];
            for (size_t b = 0; b < n / kQK; ++b) {
                BlockQ8_0 blk;
                std::memcpy(&blk, bytes + static_cast<size_t>(r) * v_stride + b * sizeof(BlockQ8_0), sizeof blk);
                const float s = wr * f16_to_f32(blk.d);
                for (int j = 0; j < kQK; ++j) a[b * kQK + static_cast<size_t>(j)] += s * static_cast<float>(blk.qs[j]);
            }
        }
    }
}

}  // namespace powerhouse::cpu
