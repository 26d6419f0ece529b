// Internal to the tensor module: the K-quant encoders behind quantize_row (quantize.h),
// one super-block of QK_K floats to one block (quant_blocks.h) each.
//
// Thread-safety: pure functions.
#pragma once

#include "tensor/quant_blocks.h"

namespace powerhouse::detail {

BlockQ2_K quantize_block_q2_k(const float* x);
BlockQ3_K quantize_block_q3_k(const float* x);
BlockQ4_K quantize_block_q4_k(const float* x);
BlockQ5_K quantize_block_q5_k(const float* x);
BlockQ6_K quantize_block_q6_k(const float* x);

}  // namespace powerhouse::detail
