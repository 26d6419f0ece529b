// Dot products between rows of weights, as stored in the model file, and activations
// converted to the format llama.cpp's CPU backend pairs with each weight type (ggml's
// vec_dot_type), so that results agree with llama.cpp to float rounding:
//   Q4_0, Q5_0, Q8_0      against Q8_0 activations
//   MXFP4                 against Q8_0 (the doubled E2M1 values as integers, scaled by
//                         2^(e - 128) * d per block)
//   Q4_1, Q5_1            against Q8_1 (Q8_0 plus the block sum, for the weights' minimum)
//   Q2_K .. Q6_K          against Q8_K (256-element blocks, f32 scale, sums per 16)
//   F16 / BF16            against activations rounded to F16 / BF16, products summed in f32
//   F32                   against F32
// Products are exact integers per block (per super-block for the K-quants), scaled once,
// so only the order of the float additions differs from llama.cpp.
//
// Activations are quantized with round-to-nearest-even: Q8_0/Q8_1 with a scale of
// max|x| / 127 as llama.cpp's AVX2 path does, Q8_K as ggml's quantize_row_q8_K_ref.
//
// Every kernel exists in several instruction-set variants (KernelIsa), chosen at run time
// from what the processor supports; the scalar variant always exists and is the reference
// the others are tested against (tests/engine/cpu/cpu_kernel_test.cpp).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "tensor/dtype.h"

namespace powerhouse::cpu {

// Q8_1: Q8_0 plus s = d * sum(qs), both f16.
struct BlockQ8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[32];
};

// Q8_K: x[i] = d * qs[i]; bsums[j] = sum of qs[16j .. 16j + 15].
struct BlockQ8_K {
    float d;
    int8_t qs[256];
    int16_t bsums[16];
};
static_assert(sizeof(BlockQ8_K) == 292);

enum class KernelIsa { scalar, avx2, avx512 };

const char* isa_name(KernelIsa isa);

// The variants this processor can run, scalar first.
std::span<const KernelIsa> available_isas();

// The fastest available variant, unless the environment variable POWERHOUSE_CPU_ISA
// names another available one ("scalar", "avx2", "avx512"), for benchmarks and bisection.
KernelIsa best_isa();

// The format activations take for a dot with weights of `weight_type`.
GgmlType activation_type(GgmlType weight_type);

// Elements per activation block (1 for f32/f16/bf16): rows must be a multiple of it.
int64_t activation_block(GgmlType weight_type);

// Bytes of `n` activations in activation_type(weight_type).
size_t activation_bytes(GgmlType weight_type, int64_t n);

// Converts n floats (a multiple of activation_block) to activation_type(weight_type).
// Every variant writes the same bytes.
void quantize_activations(KernelIsa isa, GgmlType weight_type, const float* x, void* out, int64_t n);
// With best_isa().
void quantize_activations(GgmlType weight_type, const float* x, void* out, int64_t n);

// A block of dot products: for r < rows and t < tokens,
//   dst[t * dst_stride + r] = (row r of w, n elements) . (activations of token t)
// where row r starts at w + r * w_stride bytes and token t's activations (prepared by
// quantize_activations) at act + t * act_stride bytes. Each weight block is decoded once
// for up to four tokens (eight in the AVX-512 variant).
void dot_rows(KernelIsa isa, GgmlType weight_type, int64_t n, const void* w, size_t w_stride, int rows, const void* act,
              size_t act_stride, int tokens, float* dst, size_t dst_stride);

// Whether dot_rows handles `weight_type`.
bool has_dot(GgmlType weight_type);

// Batches of tokens against quantized weights: the activations, quantized as for dot_rows,
// are regrouped into tiles of sixteen tokens (tile_activations), and each decoded weight
// block is then used for every token of the batch, sixteen tokens per instruction with
// AVX-512 VNNI, eight with AVX2. The results equal dot_rows' bit for bit (the same exact
// integers per block, the same float order), so that a token gives the same logits alone
// and in any batch.
// The K-quants, and the 32-element types (Q4_0 .. Q8_0, MXFP4) at any width; with AVX2 not
// Q8_0.
bool has_tiled_dot(KernelIsa isa, GgmlType weight_type, int64_t n);
// Bytes of the tiles of `tokens` activation rows of `n` elements.
size_t tiled_activation_bytes(GgmlType weight_type, int64_t n, int tokens);
// Regroups `tokens` rows made by quantize_activations (token t at act + t * act_stride).
void tile_activations(GgmlType weight_type, int64_t n, const void* act, size_t act_stride, int tokens, void* tiles);
// dst[t * dst_stride + r] for r < rows, t < tokens, as dot_rows writes it.
void dot_rows_tiled(KernelIsa isa, GgmlType weight_type, int64_t n, const void* w, size_t w_stride, int rows,
                    const void* tiles, int tokens, float* dst, size_t dst_stride);

}  // namespace powerhouse::cpu
