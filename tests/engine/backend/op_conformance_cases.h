// The cases of the op conformance tests (op_conformance_test.cpp): for every OpKind of the
// step program, the shapes it runs at as a one-op model, with the weights it reads (f32
// values, written in the case's type) and the steps (token counts and positions) it is fed.
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "engine/backend/op_conformance_support.h"

namespace powerhouse::test {

// Every weight type the engine multiplies by, on the CPU and the GPU.
inline const std::vector<GgmlType> kMatmulTypes = {
    GgmlType::f32,  GgmlType::f16,  GgmlType::bf16, GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0, GgmlType::q5_1,
    GgmlType::q8_0, GgmlType::q2_k, GgmlType::q3_k, GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k, GgmlType::mxfp4};

std::vector<OpCase> rms_norm_cases();
std::vector<OpCase> head_rms_norm_cases();
std::vector<OpCase> matmul_cases();
std::vector<OpCase> add_bias_cases();
std::vector<OpCase> rope_cases();
std::vector<OpCase> attention_cases();
std::vector<OpCase> glu_cases(arch::OpKind kind);  // swiglu or geglu
std::vector<OpCase> add_cases();
std::vector<OpCase> scale_cases();
// Encoders' ops (BERT), which the CPU runs and the CUDA stage refuses (cuda_stage_supports).
std::vector<OpCase> layer_norm_cases();
std::vector<OpCase> gelu_cases();
std::vector<OpCase> add_row_cases();
std::vector<OpCase> full_attention_cases();  // attention that is not causal

}  // namespace powerhouse::test
