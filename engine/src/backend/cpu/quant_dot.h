// Dot products between a row of weights, as stored in the model file, and activations
// quantized to 8 bits, the way llama.cpp's CPU backend computes them: Q4_0, Q5_0 and Q8_0
// weights against Q8_0 activations, Q4_1 and Q5_1 against Q8_1 (which also carries the
// block sum for the weights' minimum). Products are exact integers per block, scaled once
// per block, so results agree with llama.cpp to float rounding. Other weight types
// (F32, F16, BF16, K-quants) are dequantized and dotted in f32.
//
// Activations are quantized with round-to-nearest-even and a scale of max|x| / 127, as
// llama.cpp's AVX2 path does.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace powerhouse::cpu {

// Q8_1: Q8_0 plus s = d * sum(qs), both f16.
struct BlockQ8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[32];
};

// The format activations take for a dot with weights of `weight_type`: q8_0, q8_1 or f32.
GgmlType activation_type(GgmlType weight_type);

// Bytes of `n` activations in activation_type(weight_type).
size_t activation_bytes(GgmlType weight_type, int64_t n);

// Converts n floats (n a multiple of 32 for the 8-bit formats) to activation_type(weight_type).
void quantize_activations(GgmlType weight_type, const float* x, void* out, int64_t n);

// The dot product of n weights of `weight_type` at `w` with n activations prepared by
// quantize_activations. `scratch` holds n floats, for the types that dequantize.
float dot_row(GgmlType weight_type, const void* w, const void* activations, int64_t n, float* scratch);

}  // namespace powerhouse::cpu
