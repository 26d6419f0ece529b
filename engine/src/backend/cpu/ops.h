// The CPU backend's own operations of the step program (arch/step_program.h) that vec.h,
// matmul.h and attention.h do not hold: RoPE with ggml's angles, GeGLU from ggml's f16 GELU
// table, scale, bias, and the RMS norm of many rows (whole rows, or each head of Q and K).
// Free functions over plain arrays: the CPU stage (cpu_backend.cpp) runs them, and the GPU
// kernel tests (tests/kernels) and the op conformance tests (tests/engine/backend) use them
// as the reference, so that the GPU is checked against the engine's own CPU code rather than
// against a copy of it that could drift.
//
// Numerics follow llama.cpp's CPU backend where it matters for agreeing with it token for
// token (tests/engine/model/arch_reference_test.cpp): see rope() and GeluTable.
//
// Thread-safety: pure functions; a GeluTable is immutable after construction and may be
// shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/quant_dot.h"

namespace powerhouse::cpu {

// ggml's GELU on the CPU: the tanh approximation evaluated once for every f16 input, the
// result stored in f16, looked up at the input rounded to f16.
class GeluTable {
public:
    GeluTable();

    // gelu(x) as ggml computes it: from the table inside (-10, 10); exactly 0 at or below
    // -10 and exactly x at or above 10.
    float operator()(float x) const;

private:
    std::vector<float> values_;  // [65536] f32: f16 bits of x -> gelu(x) rounded to f16
};

// dst = gelu(gate) * up over n elements (dst may be gate or up).
void geglu(const GeluTable& gelu, const float* gate, const float* up, float* dst, size_t n);

// dst = a * value over n elements (dst may be a).
void scale(const float* a, float* dst, float value, size_t n);

// Llama 4's attention temperature (Mistral 3 writes it): the factor a query at position
// `pos` is multiplied by, 1 + temperature * ln(floor(pos / length) + 1): 1 for the first
// `length` positions, growing with the log of the position past them. As llama.cpp: the
// division and floor in f32, the logarithm in double.
float position_temperature(int32_t pos, float temperature, uint32_t length);
// data: [positions.size()][width] f32; each row times position_temperature of its position.
void scale_by_position(float* data, size_t width, std::span<const int32_t> positions, float temperature,
                       uint32_t length);

// data: [rows][width] f32; every row += bias ([width] f32).
void add_bias(float* data, const float* bias, size_t width, int64_t rows);

// src, dst: [rows][width] f32 (dst may be src); each row RMS-normed and multiplied by
// weight ([width] f32). Whole rows of a buffer, or the heads of Q and K (rows = tokens *
// heads, width = head_dim) sharing one weight.
void rms_norm_rows(KernelIsa isa, const float* src, float* dst, const float* weight, int64_t width, int64_t rows,
                   float eps);

struct RopeShape {
    uint32_t head_dim = 0;
    uint32_t rope_dims = 0;  // the first rope_dims values of each head rotate; the rest stay
    bool neox = false;       // pairs (i, i + rope_dims / 2) rather than (2i, 2i + 1)
    float base = 10000.0f;
    float freq_scale = 1.0f;              // positions multiplied by this (linear scaling)
    const float* freq_factors = nullptr;  // [rope_dims / 2] f32 dividing each frequency
                                          // (rope_freqs.weight); null: none
    // YaRN (arch::Yarn): 0 ext_factor is plain (linear) RoPE. corr_low/corr_high: the pairs
    // between which the ramp goes from the original angle to the interpolated one.
    float ext_factor = 0.0f;
    float attn_factor = 1.0f;
    float corr_low = 0.0f, corr_high = 0.0f;
};

// YaRN's correction range for a layer's base (ggml's rope_yarn_corr_dims): the pairs whose
// wavelength fits beta_fast and beta_slow times into the original context.
void yarn_corr_dims(uint32_t rope_dims, uint32_t orig_ctx, float base, float beta_fast, float beta_slow,
                    float& low, float& high);

// data: [n_tokens][n_heads][head_dim] f32, token t at position pos0 + t, rotated in place.
// ggml's angles: pair i of position p turns by p * base^(-2i / rope_dims), the power built
// by repeated multiplication in f32 as ggml builds it, divided by the pair's frequency
// factor, times freq_scale.
void rope(const RopeShape& shape, float* data, int64_t n_heads, int n_tokens, uint32_t pos0);
// The same with token t at position positions[t] (a batch of several sequences).
void rope(const RopeShape& shape, float* data, int64_t n_heads, std::span<const int32_t> positions);

}  // namespace powerhouse::cpu
