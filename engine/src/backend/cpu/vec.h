// Element-wise kernels of the CPU backend over f32 rows: RMS norm, SwiGLU, sums, the
// exponentials of a softmax, the scaled accumulations of attention over the KV cache, and
// the tile kernels of attention (several queries against the same rows of keys and values). Each has an AVX2 path,
// chosen at run time (quant_dot.h's best_isa), and a plain one; both compute the same formulas, the exponential to
// within a few ulp of std::exp, the tile kernels' sums in another order.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/quant_dot.h"

namespace powerhouse::cpu {

// y = x / sqrt(mean(x^2) + eps) * weight, over n elements (y may be x).
void rms_norm_row(KernelIsa isa, const float* x, float* y, const float* weight, int64_t n, float eps);

// dst = silu(a) * b = a / (1 + exp(-a)) * b.
void swiglu(KernelIsa isa, const float* a, const float* b, float* dst, size_t n);

// dst = a + b (dst may be a or b).
void add(KernelIsa isa, const float* a, const float* b, float* dst, size_t n);

// x[i] = exp(x[i] - max); returns the sum of the new values.
double exp_sum(KernelIsa isa, float* x, size_t n, float max);

// y += a * x for x in F16 (raw bits), n elements.
void axpy_f16(KernelIsa isa, float a, const uint16_t* x, float* y, size_t n);

// y += a * x for x a row of Q8_0 blocks (n a multiple of 32).
void axpy_q8_0(KernelIsa isa, float a, const void* x, float* y, size_t n);

// x[i] *= scale; returns the largest new value (-inf for n = 0).
float scale_max(KernelIsa isa, float* x, size_t n, float scale);

// x[i] = x[i] * a rounded to F16 (to nearest even, as f32_to_f16) and back: the same bits
// on every variant.
void scale_round_f16(KernelIsa isa, float* x, size_t n, float a);

// Scores of a tile against F16 keys: s[i * s_stride + r] = q_i . k_r for i < nq, r < rows,
// where q_i (f32) starts at q + i * q_stride and k_r (F16 raw bits) at k + r * k_stride bytes,
// n elements each, summed in the order of dot_rows' single-token F16 product. Each key
// vector read serves several queries, and the keys go from memory into the products without
// an f32 copy.
void dot_tile_f16(KernelIsa isa, const float* q, size_t q_stride, int nq, const void* k, size_t k_stride, int rows,
                  size_t n, float* s, size_t s_stride);

// The same against Q8_0 keys, for queries quantized to Q8_0 (quantize_activations): rows of
// n / 32 blocks at q + i * q_stride and k + r * k_stride bytes; each block's exact integer
// sum times the two scales, summed in f32 (the numerics of dot_rows for Q8_0 weights).
void dot_tile_q8_0(KernelIsa isa, const void* q, size_t q_stride, int nq, const void* k, size_t k_stride, int rows,
                   size_t n, float* s, size_t s_stride);

// Weighted sums of a tile: acc_i += sum over r < rows of w[i * w_stride + r] * v_r for
// i < nq, acc_i at acc + i * acc_stride, n elements each; rows in order (the AVX2 path with
// one fused multiply-add each, as axpy_f16). The rows v_r: f32 at v + r * v_stride floats;
// F16 at v + r * v_stride bytes; Q8_0 blocks at v + r * v_stride bytes (n a multiple of 32;
// each weight times a block's scale first, as axpy_q8_0).
void accumulate_tile(KernelIsa isa, const float* w, size_t w_stride, int nq, const float* v, size_t v_stride, int rows,
                     size_t n, float* acc, size_t acc_stride);
void accumulate_tile_f16(KernelIsa isa, const float* w, size_t w_stride, int nq, const void* v, size_t v_stride,
                         int rows, size_t n, float* acc, size_t acc_stride);
void accumulate_tile_q8_0(KernelIsa isa, const float* w, size_t w_stride, int nq, const void* v, size_t v_stride,
                          int rows, size_t n, float* acc, size_t acc_stride);

}  // namespace powerhouse::cpu
