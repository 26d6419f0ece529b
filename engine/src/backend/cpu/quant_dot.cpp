#include "backend/cpu/quant_dot.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "backend/cpu/quant_dot_impl.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace powerhouse::cpu {

namespace {

// Scale and rounded values of one block of 32 activations.
float quantize_block(const float* x, int8_t* qs) {
    float amax = 0.0f;
    for (int i = 0; i < kQK; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int i = 0; i < kQK; ++i) qs[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
    return d;
}

// ggml's quantize_row_q8_K_ref: the scale comes from the element of largest magnitude
// (the first one, with its sign), values are rounded to nearest even and capped at 127.
void quantize_block_q8_k(const float* x, BlockQ8_K& y) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK_K; ++j) {
        const float ax = std::fabs(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (amax == 0.0f) {
        std::memset(&y, 0, sizeof y);
        return;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < QK_K; ++j) {
        y.qs[j] = static_cast<int8_t>(std::min(127.0f, std::nearbyint(iscale * x[j])));
    }
    for (int j = 0; j < QK_K / 16; ++j) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += y.qs[16 * j + i];
        y.bsums[j] = static_cast<int16_t>(sum);
    }
    y.d = 1.0f / iscale;
}

#if defined(__x86_64__)
// F16C (cpuid leaf 1, ecx bit 29): clang's __builtin_cpu_supports has no name for it.
bool has_f16c() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}
#endif

// __builtin_cpu_supports also checks that the OS saves the vector registers.
bool cpu_has(const char* feature) {
#if defined(__x86_64__)
    // __builtin_cpu_supports needs a literal; the list is small.
    const std::string_view f(feature);
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    if (f == "avx2") return avx2;
    if (f == "avx512") {
        return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    }
#else
    (void)feature;
#endif
    return false;
}

std::vector<KernelIsa> detect_isas() {
    std::vector<KernelIsa> isas{KernelIsa::scalar};
    if (cpu_has("avx2")) isas.push_back(KernelIsa::avx2);
    if (cpu_has("avx512")) isas.push_back(KernelIsa::avx512);
    return isas;
}

detail::DotRowsFn dot_rows_fn(KernelIsa isa) {
    switch (isa) {
#if defined(__x86_64__)
        case KernelIsa::avx2:
            return detail::dot_rows_avx2;
        case KernelIsa::avx512:
            return detail::dot_rows_avx512;
#endif
        default:
            return detail::dot_rows_scalar;
    }
}

}  // namespace

const char* isa_name(KernelIsa isa) {
    switch (isa) {
        case KernelIsa::scalar:
            return "scalar";
        case KernelIsa::avx2:
            return "avx2";
        case KernelIsa::avx512:
            return "avx512";
    }
    return "?";
}

std::span<const KernelIsa> available_isas() {
    static const std::vector<KernelIsa> isas = detect_isas();
    return isas;
}

KernelIsa best_isa() {
    static const KernelIsa best = [] {
        const std::span<const KernelIsa> isas = available_isas();
        if (const char* want = std::getenv("POWERHOUSE_CPU_ISA")) {
            for (KernelIsa isa : isas) {
                if (std::string_view(want) == isa_name(isa)) return isa;
            }
        }
        return isas.back();
    }();
    return best;
}

GgmlType activation_type(GgmlType weight_type) {
    switch (weight_type) {
        case GgmlType::q4_0:
        case GgmlType::q5_0:
        case GgmlType::q8_0:
        case GgmlType::mxfp4:
            return GgmlType::q8_0;
        case GgmlType::q4_1:
        case GgmlType::q5_1:
            return GgmlType::q8_1;
        case GgmlType::q2_k:
        case GgmlType::q3_k:
        case GgmlType::q4_k:
        case GgmlType::q5_k:
        case GgmlType::q6_k:
            return GgmlType::q8_k;
        case GgmlType::f16:
            return GgmlType::f16;
        case GgmlType::bf16:
            return GgmlType::bf16;
        default:
            return GgmlType::f32;
    }
}

int64_t activation_block(GgmlType weight_type) {
    switch (activation_type(weight_type)) {
        case GgmlType::q8_0:
        case GgmlType::q8_1:
            return kQK;
        case GgmlType::q8_k:
            return QK_K;
        default:
            return 1;
    }
}

bool has_dot(GgmlType weight_type) {
    switch (weight_type) {
        case GgmlType::f32:
        case GgmlType::f16:
        case GgmlType::bf16:
        case GgmlType::q4_0:
        case GgmlType::q4_1:
        case GgmlType::q5_0:
        case GgmlType::q5_1:
        case GgmlType::q8_0:
        case GgmlType::mxfp4:
        case GgmlType::q2_k:
        case GgmlType::q3_k:
        case GgmlType::q4_k:
        case GgmlType::q5_k:
        case GgmlType::q6_k:
            return true;
        default:
            return false;
    }
}

size_t activation_bytes(GgmlType weight_type, int64_t n) {
    switch (activation_type(weight_type)) {
        case GgmlType::q8_0:
            return static_cast<size_t>(n / kQK) * sizeof(BlockQ8_0);
        case GgmlType::q8_1:
            return static_cast<size_t>(n / kQK) * sizeof(BlockQ8_1);
        case GgmlType::q8_k:
            return static_cast<size_t>(n / QK_K) * sizeof(BlockQ8_K);
        case GgmlType::f16:
        case GgmlType::bf16:
            return static_cast<size_t>(n) * sizeof(uint16_t);
        default:
            return static_cast<size_t>(n) * sizeof(float);
    }
}

namespace detail {

void quantize_activations_tail(GgmlType act_type, const float* x, std::byte* out, int64_t begin, int64_t n) {
    for (int64_t i = begin; i < n; ++i) {
        if (act_type == GgmlType::f32) {
            std::memcpy(out + 4 * i, x + i, 4);
            continue;
        }
        const uint16_t h = act_type == GgmlType::f16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
    }
}

}  // namespace detail

void quantize_activations(KernelIsa isa, GgmlType weight_type, const float* x, void* out, int64_t n) {
    const GgmlType act = activation_type(weight_type);
#if defined(__x86_64__)
    if (isa == KernelIsa::avx2) return detail::quantize_activations_avx2(act, x, static_cast<std::byte*>(out), n);
    if (isa == KernelIsa::avx512) return detail::quantize_activations_avx512(act, x, static_cast<std::byte*>(out), n);
#endif
    (void)isa;
    switch (act) {
        case GgmlType::q8_0: {
            auto* blocks = static_cast<BlockQ8_0*>(out);
            for (int64_t b = 0; b < n / kQK; ++b) {
                blocks[b].d = f32_to_f16(quantize_block(x + b * kQK, blocks[b].qs));
            }
            return;
        }
        case GgmlType::q8_1: {
            auto* blocks = static_cast<BlockQ8_1*>(out);
            for (int64_t b = 0; b < n / kQK; ++b) {
                const float d = quantize_block(x + b * kQK, blocks[b].qs);
                int sum = 0;
                for (int8_t q : blocks[b].qs) sum += q;
                blocks[b].d = f32_to_f16(d);
                blocks[b].s = f32_to_f16(d * static_cast<float>(sum));
            }
            return;
        }
        case GgmlType::q8_k: {
            auto* blocks = static_cast<BlockQ8_K*>(out);
            for (int64_t b = 0; b < n / QK_K; ++b) quantize_block_q8_k(x + b * QK_K, blocks[b]);
            return;
        }
        case GgmlType::f16: {
            auto* h = static_cast<uint16_t*>(out);
            for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(x[i]);
            return;
        }
        case GgmlType::bf16: {
            auto* h = static_cast<uint16_t*>(out);
            for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(x[i]);
            return;
        }
        default:
            std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
    }
}

void quantize_activations(GgmlType weight_type, const float* x, void* out, int64_t n) {
    quantize_activations(best_isa(), weight_type, x, out, n);
}

bool has_tiled_dot(KernelIsa isa, GgmlType weight_type, int64_t n) {
#if defined(__x86_64__)
    if (isa != KernelIsa::avx512 && isa != KernelIsa::avx2) return false;
    if (isa == KernelIsa::avx2 && weight_type == GgmlType::q8_0) {
        return false;  // no faster than dot_rows there (quant_dot_simd.inc)
    }
    switch (activation_type(weight_type)) {
        case GgmlType::q8_k:
            return n % QK_K == 0;
        case GgmlType::q8_0:
        case GgmlType::q8_1:
            return n % kQK == 0;  // dot_legacy's tail of n / 32 % 4 blocks too (legacy_tail_block)
        default:
            return false;
    }
#else
    (void)isa, (void)weight_type, (void)n;
    return false;
#endif
}

size_t tiled_activation_bytes(GgmlType weight_type, int64_t n, int tokens) {
    const int64_t tiles = (tokens + detail::kTileTokens - 1) / detail::kTileTokens;
    if (activation_type(weight_type) == GgmlType::q8_k) {
        return static_cast<size_t>(tiles * (n / QK_K)) * sizeof(detail::TileQ8K);
    }
    return static_cast<size_t>(tiles * (n / kQK)) * sizeof(detail::TileQ8);
}

namespace {

void tile_q8_k(int64_t n, const std::byte* act, size_t act_stride, int tokens, detail::TileQ8K* out) {
    const int64_t nb = n / QK_K;
    for (int token = 0; token < tokens; ++token) {
        const int lane = token % detail::kTileTokens;
        detail::TileQ8K* tile = out + static_cast<int64_t>(token / detail::kTileTokens) * nb;
        const std::byte* row = act + static_cast<size_t>(token) * act_stride;
        for (int64_t b = 0; b < nb; ++b) {
            BlockQ8_K y;
            std::memcpy(&y, row + static_cast<size_t>(b) * sizeof(BlockQ8_K), sizeof y);
            detail::TileQ8K& t = tile[b];
            // Plus 128, as unsigned bytes: the unsigned operand of vpdpbusd (quant_dot_impl.h).
            for (int s = 0; s < QK_K / 4; ++s) {
                for (int e = 0; e < 4; ++e) t.q[s][lane][e] = static_cast<uint8_t>(y.qs[4 * s + e] + 128);
            }
            for (int p = 0; p < 8; ++p) {
                t.bs[p][lane][0] = y.bsums[2 * p];
                t.bs[p][lane][1] = y.bsums[2 * p + 1];
            }
            t.d[lane] = y.d;
        }
    }
}

// Q8_0 ({d, qs}) or Q8_1 ({d, s, qs}) rows.
void tile_q8(GgmlType act_type, int64_t n, const std::byte* act, size_t act_stride, int tokens, detail::TileQ8* out) {
    const int64_t nb = n / kQK;
    const bool q8_1 = act_type == GgmlType::q8_1;
    const size_t block = q8_1 ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
    const size_t qs_at = q8_1 ? offsetof(BlockQ8_1, qs) : offsetof(BlockQ8_0, qs);
    for (int token = 0; token < tokens; ++token) {
        const int lane = token % detail::kTileTokens;
        detail::TileQ8* tile = out + static_cast<int64_t>(token / detail::kTileTokens) * nb;
        const std::byte* row = act + static_cast<size_t>(token) * act_stride;
        for (int64_t b = 0; b < nb; ++b) {
            const std::byte* y = row + static_cast<size_t>(b) * block;
            int8_t qs[kQK];
            std::memcpy(qs, y + qs_at, kQK);
            uint16_t d, s = 0;
            std::memcpy(&d, y, 2);
            if (q8_1) std::memcpy(&s, y + 2, 2);
            detail::TileQ8& t = tile[b];
            for (int i = 0; i < 8; ++i) {
                for (int e = 0; e < 4; ++e) t.q[i][lane][e] = static_cast<uint8_t>(qs[4 * i + e] + 128);
            }
            t.d[lane] = f16_to_f32(d);
            t.s[lane] = q8_1 ? f16_to_f32(s) : 0.0f;
        }
    }
}

}  // namespace

void tile_activations(GgmlType weight_type, int64_t n, const void* act, size_t act_stride, int tokens, void* tiles) {
    std::memset(tiles, 0, tiled_activation_bytes(weight_type, n, tokens));
    const auto* rows = static_cast<const std::byte*>(act);
    const GgmlType act_type = activation_type(weight_type);
    if (act_type == GgmlType::q8_k) {
        tile_q8_k(n, rows, act_stride, tokens, static_cast<detail::TileQ8K*>(tiles));
    } else {
        tile_q8(act_type, n, rows, act_stride, tokens, static_cast<detail::TileQ8*>(tiles));
    }
}

void dot_rows_tiled(KernelIsa isa, GgmlType weight_type, int64_t n, const void* w, size_t w_stride, int rows,
                    const void* tiles, int tokens, float* dst, size_t dst_stride) {
#if defined(__x86_64__)
    if (has_tiled_dot(isa, weight_type, n)) {
        const auto tiled = isa == KernelIsa::avx512 ? detail::dot_rows_tiled_avx512 : detail::dot_rows_tiled_avx2;
        return tiled(weight_type, n, static_cast<const std::byte*>(w), w_stride, rows,
                     static_cast<const std::byte*>(tiles), tokens, dst, dst_stride);
    }
#endif
    // A caller that did not ask has_tiled_dot() first: a programming error, not an input's.
    (void)isa, (void)weight_type, (void)n, (void)w, (void)w_stride, (void)rows, (void)tiles, (void)tokens, (void)dst,
        (void)dst_stride;
    std::abort();
}

void dot_rows(KernelIsa isa, GgmlType weight_type, int64_t n, const void* w, size_t w_stride, int rows, const void* act,
              size_t act_stride, int tokens, float* dst, size_t dst_stride) {
    dot_rows_fn(isa)(weight_type, n, static_cast<const std::byte*>(w), w_stride, rows,
                     static_cast<const std::byte*>(act), act_stride, tokens, dst, dst_stride);
}

}  // namespace powerhouse::cpu
