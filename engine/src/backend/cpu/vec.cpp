#include "backend/cpu/vec.h"

#include <cmath>
#include <cstring>

#include "tensor/half.h"
#include "tensor/quant_blocks.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define PH_AVX2 __attribute__((target("avx2,fma,f16c")))
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

}  // namespace powerhouse::cpu
