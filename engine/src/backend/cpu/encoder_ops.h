// The CPU backend's operations that encoders (BERT) add to the step program
// (arch/step_program.h): LayerNorm, GELU without a gate, and the addition of a row of a table
// (position embeddings, the token type). Free functions over plain arrays, as ops.h: the CPU
// stage runs them and the op conformance tests (tests/engine/backend) check the stage's wiring
// against them.
//
// Numerics follow llama.cpp's CPU backend (tests/engine/model/bert_reference_test.cpp):
// ggml_norm's mean and variance summed in double, the weight multiplied in a step of its own;
// GELU from the same f16 table as GeGLU (ops.h GeluTable).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/cpu/ops.h"
#include "tensor/dtype.h"

namespace powerhouse::cpu {

// src, dst: [rows][width] f32 (dst may be src). Each row: x - mean, divided by
// sqrt(variance + eps) (both over the row, as ggml_norm), then multiplied by weight ([width]
// f32). The bias is added by add_bias after it, as llama.cpp adds it.
void layer_norm_rows(const float* src, float* dst, const float* weight, int64_t width, int64_t rows, float eps);

// dst = gelu(src) over n elements (dst may be src).
void gelu(const GeluTable& table, const float* src, float* dst, size_t n);

// A table of rows in a GGUF type (F32, F16, BF16 or a quantized type): `rows` rows of `width`
// values, `row_stride` bytes apart from `data`.
struct RowTable {
    GgmlType type = GgmlType::f32;
    const std::byte* data = nullptr;
    int64_t width = 0;
    int64_t rows = 0;
    uint64_t row_stride = 0;
};

// data: [row_of.size()][table.width] f32; row t += table row row_of[t], decoded to f32.
// `scratch` holds table.width floats. Every row_of[t] must be within the table.
void add_rows(const RowTable& table, std::span<const int32_t> row_of, float* data, float* scratch);

}  // namespace powerhouse::cpu
