// Conversions between f32 and the two 16-bit float formats of GGUF tensors: IEEE binary16
// (F16, and the scales inside quantized blocks) and bfloat16 (BF16). Both are handled as
// raw uint16_t bits, as they are stored in files.
//
// The results are bit-exact with the PyPI `gguf` package (numpy for F16, its BF16 class for
// BF16), whose outputs are the engine's test fixtures:
//  - f32 -> f16 rounds to nearest, ties to even, including into the subnormal range;
//    magnitudes >= 65520 become inf. A NaN keeps its sign and the top 10 bits of its
//    payload (a payload that would become 0 becomes 1, so the result stays a NaN); a
//    signalling NaN is not quieted (numpy's rule, not the F16C instruction's).
//  - f16 -> f32 is exact for every value, NaN payloads included, so
//    f16 -> f32 -> f16 gives back all 65536 bit patterns.
//  - f32 -> bf16 rounds to nearest, ties to even (overflow rounds to inf). A NaN becomes a
//    quiet NaN with its sign and top payload bits (ggml_compute_fp32_to_bf16's rule).
//  - bf16 -> f32 is exact (the bits shifted up by 16).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace powerhouse {

uint16_t f32_to_f16(float value);
float f16_to_f32(uint16_t bits);

uint16_t f32_to_bf16(float value);
float bf16_to_f32(uint16_t bits);

}  // namespace powerhouse
