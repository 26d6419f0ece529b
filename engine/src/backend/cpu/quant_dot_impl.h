// Internal to the CPU backend's dot products (quant_dot.h): the entry points of each
// instruction-set variant, and the common form the K-quants are brought into before their
// dot products.
//
// Every K-quant super-block (256 weights) decodes to unsigned bytes u (0..63) in element
// order, sixteen scales sc and mins m (one per 16 elements) and two f32 scales, with
//   weight[i] = d * sc[i / 16] * (u[i] - offset) - dmin * m[i / 16]
// (Q6_K: offset 32, Q3_K: offset 4, others 0; Q3_K and Q6_K have no mins). Against Q8_K
// activations y (scale dy, group sums bsums) a super-block's dot product is then
//   dy * (d * (sum_s sc[s] * (u . y)_s - offset * sum_s sc[s] * bsums[s]) - dmin * sum_s m[s] * bsums[s])
// with every sum an exact integer: the same value ggml computes, to float rounding.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

namespace powerhouse::cpu::detail {

struct alignas(32) KDecoded {
    uint8_t u[QK_K];
    int16_t sc[16];
    int16_t m[16];
    float d = 0.0f;
    float dmin = 0.0f;
    int offset = 0;
};

// Q8_K activations of up to kTileTokens tokens, one super-block, laid out for products that
// take one weight byte quadruple against sixteen tokens at once (vpdpbusd with a broadcast):
// q[s][t] holds elements 4s .. 4s + 3 of token t plus 128 (unsigned, so that the weights can
// be the signed operand, broadcast from memory), bs[p][t] its bsums 2p and 2p + 1, d[t] its
// scale. Tokens past the end have zero bsums and scale.
inline constexpr int kTileTokens = 16;
struct TileQ8K {
    uint8_t q[QK_K / 4][kTileTokens][4];
    int16_t bs[8][kTileTokens][2];
    float d[kTileTokens];
};
static_assert(sizeof(TileQ8K) == 4672);

// The same for the 32-element activations (Q8_0, Q8_1) of the original quant types, one
// block: q[s][t] elements 4s .. 4s + 3 of token t plus 128, d its scale and s Q8_1's
// d * sum (0 for Q8_0), as floats.
struct TileQ8 {
    uint8_t q[8][kTileTokens][4];
    float d[kTileTokens];
    float s[kTileTokens];
};
static_assert(sizeof(TileQ8) == 640);

// A super-block in plain C++ (the vector variants decode in registers, 32 bytes at a time).
void decode_k_scalar(GgmlType type, const std::byte* block, KDecoded& out);

using DotRowsFn = void (*)(GgmlType type, int64_t n, const std::byte* w, size_t w_stride, int rows,
                           const std::byte* act, size_t act_stride, int tokens, float* dst, size_t dst_stride);

void dot_rows_scalar(GgmlType type, int64_t n, const std::byte* w, size_t w_stride, int rows, const std::byte* act,
                     size_t act_stride, int tokens, float* dst, size_t dst_stride);
#if defined(__x86_64__)
void dot_rows_avx2(GgmlType type, int64_t n, const std::byte* w, size_t w_stride, int rows, const std::byte* act,
                   size_t act_stride, int tokens, float* dst, size_t dst_stride);
void dot_rows_avx512(GgmlType type, int64_t n, const std::byte* w, size_t w_stride, int rows, const std::byte* act,
                     size_t act_stride, int tokens, float* dst, size_t dst_stride);

// The tiled products (quant_dot.h's dot_rows_tiled): tiles [n_tiles][blocks of a row] of
// TileQ8K (K-quants) or TileQ8 (the others). AVX-512 VNNI: every quantized type; AVX2: all
// but Q8_0.
void dot_rows_tiled_avx512(GgmlType type, int64_t n, const std::byte* w, size_t w_stride, int rows,
                           const std::byte* tiles, int tokens, float* dst, size_t dst_stride);
void dot_rows_tiled_avx2(GgmlType type, int64_t n, const std::byte* w, size_t w_stride, int rows,
                         const std::byte* tiles, int tokens, float* dst, size_t dst_stride);

// Activations in `act_type` (an activation_type()), same bytes as the plain code.
void quantize_activations_avx2(GgmlType act_type, const float* x, std::byte* out, int64_t n);
void quantize_activations_avx512(GgmlType act_type, const float* x, std::byte* out, int64_t n);
#endif

// The plain conversion of elements [begin, n) of a float-type activation row (F16, BF16,
// F32), for the vector variants' tails.
void quantize_activations_tail(GgmlType act_type, const float* x, std::byte* out, int64_t begin, int64_t n);

}  // namespace powerhouse::cpu::detail
