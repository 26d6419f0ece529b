#include "backend/cpu/quant_dot.h"

#include <cmath>
#include <cstring>

#include "tensor/dequantize.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define POWERHOUSE_X86 1
#endif

namespace powerhouse::cpu {

namespace {

constexpr int kBlock = 32;

template <class T>
T load_block(const void* base, int64_t index) {
    T block;
    std::memcpy(&block, static_cast<const std::byte*>(base) + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
    return block;
}

// Scale and rounded values of one block of 32 activations.
float quantize_block(const float* x, int8_t* qs) {
    float amax = 0.0f;
    for (int i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int i = 0; i < kBlock; ++i) qs[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
    return d;
}

// Low nibbles are elements 0..15 of a block, high nibbles 16..31.
inline int dot_nibbles(const uint8_t* qs, const int8_t* y, int offset) {
    int sum = 0;
    for (int j = 0; j < 16; ++j) {
        sum += ((qs[j] & 0x0F) - offset) * y[j];
        sum += ((qs[j] >> 4) - offset) * y[j + 16];
    }
    return sum;
}

inline int dot_q5(const uint8_t* qs, const uint8_t* qh_bytes, const int8_t* y, int offset) {
    uint32_t qh;
    std::memcpy(&qh, qh_bytes, 4);
    int sum = 0;
    for (int j = 0; j < 16; ++j) {
        const int lo = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
        const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
        sum += (lo - offset) * y[j] + (hi - offset) * y[j + 16];
    }
    return sum;
}

#ifdef POWERHOUSE_X86
// Sum of products of 32 signed bytes, for a block of Q8_0 weights.
__attribute__((target("avx2,fma"))) inline __m256 dot_i8_avx2(__m256i x, __m256i y, __m256 acc, float scale) {
    const __m256i ax = _mm256_sign_epi8(x, x);
    const __m256i sy = _mm256_sign_epi8(y, x);
    const __m256i pairs = _mm256_maddubs_epi16(ax, sy);
    const __m256i sums = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
    return _mm256_fmadd_ps(_mm256_set1_ps(scale), _mm256_cvtepi32_ps(sums), acc);
}

__attribute__((target("avx2,fma"))) inline float hsum_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// 32 nibbles as bytes: low nibbles in the first 16 bytes, high nibbles in the last 16.
__attribute__((target("avx2,fma"))) inline __m256i unpack_nibbles_avx2(const uint8_t* qs) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

__attribute__((target("avx2,fma"))) float dot_q4_1_avx2(const void* w, const void* a, int64_t nb) {
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
        const auto x = load_block<BlockQ4_1>(w, b);
        const auto y = load_block<BlockQ8_1>(a, b);
        mins += f16_to_f32(x.m) * f16_to_f32(y.s);
        const __m256i qx = unpack_nibbles_avx2(x.qs);  // unsigned 0..15
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs));
        const __m256i pairs = _mm256_maddubs_epi16(qx, qy);
        const __m256i sums = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16_to_f32(x.d) * f16_to_f32(y.d)), _mm256_cvtepi32_ps(sums), acc);
    }
    return hsum_avx2(acc) + mins;
}

__attribute__((target("avx2,fma"))) float dot_q8_0_avx2(const void* w, const void* a, int64_t nb) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const auto x = load_block<BlockQ8_0>(w, b);
        const auto y = load_block<BlockQ8_0>(a, b);
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs));
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs));
        acc = dot_i8_avx2(qx, qy, acc, f16_to_f32(x.d) * f16_to_f32(y.d));
    }
    return hsum_avx2(acc);
}

__attribute__((target("avx2,fma"))) float dot_q4_0_avx2(const void* w, const void* a, int64_t nb) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const auto x = load_block<BlockQ4_0>(w, b);
        const auto y = load_block<BlockQ8_0>(a, b);
        const __m256i qx = _mm256_sub_epi8(unpack_nibbles_avx2(x.qs), _mm256_set1_epi8(8));
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs));
        acc = dot_i8_avx2(qx, qy, acc, f16_to_f32(x.d) * f16_to_f32(y.d));
    }
    return hsum_avx2(acc);
}

__attribute__((target("avx2,fma"))) float dot_f32_avx2(const float* x, const float* y, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
    float sum = hsum_avx2(acc);
    for (; i < n; ++i) sum += x[i] * y[i];
    return sum;
}

bool has_avx2() {
    static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return yes;
}
#else
bool has_avx2() { return false; }
#endif

float dot_f32(const float* x, const float* y, int64_t n) {
#ifdef POWERHOUSE_X86
    if (has_avx2()) return dot_f32_avx2(x, y, n);
#endif
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += x[i] * y[i];
    return sum;
}

}  // namespace

GgmlType activation_type(GgmlType weight_type) {
    switch (weight_type) {
        case GgmlType::q4_0:
        case GgmlType::q5_0:
        case GgmlType::q8_0:
            return GgmlType::q8_0;
        case GgmlType::q4_1:
        case GgmlType::q5_1:
            return GgmlType::q8_1;
        default:
            return GgmlType::f32;
    }
}

size_t activation_bytes(GgmlType weight_type, int64_t n) {
    switch (activation_type(weight_type)) {
        case GgmlType::q8_0:
            return static_cast<size_t>(n / kBlock) * sizeof(BlockQ8_0);
        case GgmlType::q8_1:
            return static_cast<size_t>(n / kBlock) * sizeof(BlockQ8_1);
        default:
            return static_cast<size_t>(n) * sizeof(float);
    }
}

void quantize_activations(GgmlType weight_type, const float* x, void* out, int64_t n) {
    switch (activation_type(weight_type)) {
        case GgmlType::q8_0: {
            auto* blocks = static_cast<BlockQ8_0*>(out);
            for (int64_t b = 0; b < n / kBlock; ++b) {
                blocks[b].d = f32_to_f16(quantize_block(x + b * kBlock, blocks[b].qs));
            }
            return;
        }
        case GgmlType::q8_1: {
            auto* blocks = static_cast<BlockQ8_1*>(out);
            for (int64_t b = 0; b < n / kBlock; ++b) {
                const float d = quantize_block(x + b * kBlock, blocks[b].qs);
                int sum = 0;
                for (int8_t q : blocks[b].qs) sum += q;
                blocks[b].d = f32_to_f16(d);
                blocks[b].s = f32_to_f16(d * static_cast<float>(sum));
            }
            return;
        }
        default:
            std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
    }
}

float dot_row(GgmlType weight_type, const void* w, const void* a, int64_t n, float* scratch) {
    const int64_t nb = n / kBlock;
    switch (weight_type) {
        case GgmlType::q4_0: {
#ifdef POWERHOUSE_X86
            if (has_avx2()) return dot_q4_0_avx2(w, a, nb);
#endif
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; ++b) {
                const auto x = load_block<BlockQ4_0>(w, b);
                const auto y = load_block<BlockQ8_0>(a, b);
                sum += f16_to_f32(x.d) * f16_to_f32(y.d) * static_cast<float>(dot_nibbles(x.qs, y.qs, 8));
            }
            return sum;
        }
        case GgmlType::q4_1: {
#ifdef POWERHOUSE_X86
            if (has_avx2()) return dot_q4_1_avx2(w, a, nb);
#endif
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; ++b) {
                const auto x = load_block<BlockQ4_1>(w, b);
                const auto y = load_block<BlockQ8_1>(a, b);
                sum += f16_to_f32(x.d) * f16_to_f32(y.d) * static_cast<float>(dot_nibbles(x.qs, y.qs, 0)) +
                       f16_to_f32(x.m) * f16_to_f32(y.s);
            }
            return sum;
        }
        case GgmlType::q5_0: {
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; ++b) {
                const auto x = load_block<BlockQ5_0>(w, b);
                const auto y = load_block<BlockQ8_0>(a, b);
                sum += f16_to_f32(x.d) * f16_to_f32(y.d) * static_cast<float>(dot_q5(x.qs, x.qh, y.qs, 16));
            }
            return sum;
        }
        case GgmlType::q5_1: {
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; ++b) {
                const auto x = load_block<BlockQ5_1>(w, b);
                const auto y = load_block<BlockQ8_1>(a, b);
                sum += f16_to_f32(x.d) * f16_to_f32(y.d) * static_cast<float>(dot_q5(x.qs, x.qh, y.qs, 0)) +
                       f16_to_f32(x.m) * f16_to_f32(y.s);
            }
            return sum;
        }
        case GgmlType::q8_0: {
#ifdef POWERHOUSE_X86
            if (has_avx2()) return dot_q8_0_avx2(w, a, nb);
#endif
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; ++b) {
                const auto x = load_block<BlockQ8_0>(w, b);
                const auto y = load_block<BlockQ8_0>(a, b);
                int isum = 0;
                for (int j = 0; j < kBlock; ++j) isum += x.qs[j] * y.qs[j];
                sum += f16_to_f32(x.d) * f16_to_f32(y.d) * static_cast<float>(isum);
            }
            return sum;
        }
        case GgmlType::f32:
            return dot_f32(static_cast<const float*>(w), static_cast<const float*>(a), n);
        default:
            dequantize_row(weight_type, w, scratch, n);
            return dot_f32(scratch, static_cast<const float*>(a), n);
    }
}

}  // namespace powerhouse::cpu
