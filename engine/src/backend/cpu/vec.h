// Element-wise kernels of the CPU backend over f32 rows: RMS norm, SwiGLU, sums, the
// exponentials of a softmax, and the scaled accumulations of attention over the KV cache.
// Each has an AVX2 path, chosen at run time (quant_dot.h's best_isa), and a plain one;
// both compute the same formulas, the exponential to within a few ulp of std::exp.
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

}  // namespace powerhouse::cpu
