// Reference quantization: encodes one f32 row as any type with has_reference (dtype.h).
// Used to write test and synthetic models and as the yardstick for faster quantizers.
//
// F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and MXFP4 reproduce the PyPI `gguf` package's
// gguf.quants.quantize (itself ggml's reference quantizers) byte for byte for finite
// inputs, checked by tests/data/quants fixtures. F32 is a copy.
//
// Q2_K, Q3_K, Q4_K, Q5_K and Q6_K have no quantizer in `gguf`; ours (quantize_k.cpp)
// picks each sub-block's scale (and min) by a small least-squares search, quantizes
// those to the format's 4/6/8-bit fields under f16 super-block scales, then refines the
// super-block scales. It is deterministic, unweighted (no importance matrix) and, for any
// finite input, writes only finite f16 scales (saturating at 65504 for huge inputs); its
// bytes differ from llama.cpp's quantizer while decoding to a similar error.
//
// Thread-safety: pure function; concurrent calls on distinct outputs are fine.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace powerhouse {

// Encodes src[0..n) as `type` into dst (row_bytes(type, n) bytes, any alignment).
// Preconditions (asserted): type_traits(type).has_reference, n >= 0 and n a multiple
// of the type's block size.
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace powerhouse
