// Reference dequantization: decodes one row of any type with has_reference (dtype.h) to
// f32. It is the yardstick for the CPU and CUDA kernels, and is bit-exact with the PyPI
// `gguf` package's gguf.quants.dequantize (checked by tests/data/quants fixtures). Every
// element is (scale products, all exact in f32) followed by at most one rounded add, so
// fast kernels that regroup the products or use FMAs can be bit-exact too.
//
// Thread-safety: pure function; concurrent calls on distinct outputs are fine.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace powerhouse {

// Decodes `n` elements stored as `type` at `src` (row_bytes(type, n) bytes, any
// alignment) into dst[0..n). Preconditions (asserted): type_traits(type).has_reference,
// n >= 0 and n a multiple of the type's block size.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

}  // namespace powerhouse
