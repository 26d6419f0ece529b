// Matrix products of a weight matrix, used in place from the model file, with a batch
// of activation rows: dst[t][r] = weight row r . src[t]. The activations are first
// converted to the weights' activation format (quant_dot.h), then the rows are cut into
// chunks that the pool's threads take in turn (so a thread slowed by other load takes
// fewer); within a chunk each weight block is decoded once for four or eight tokens, whose
// activations stay in the L1 cache while the chunk's rows stream past. One token is the
// same code with one token per pass: a matrix-vector product. Quantized weights with eight
// or more tokens on AVX-512 VNNI take the tiled product instead (quant_dot.h: each decoded
// weight block against sixteen tokens per instruction), with the same results bit for bit.
// Weights interleaved by sixteen rows (interleave.h) take that layout's product for every
// batch size, again with the same results.
//
// Thread-safety: one call at a time per `act_buffer`; the pool is used by the caller's
// thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cpu/quant_dot.h"
#include "backend/cpu/thread_pool.h"
#include "tensor/dtype.h"

namespace powerhouse::cpu {

struct MatmulWeights {
    GgmlType type = GgmlType::f32;
    const std::byte* data = nullptr;  // [rows][in] in `type`
    int64_t in = 0;                   // elements per row
    int64_t rows = 0;                 // output features
    size_t row_stride = 0;            // bytes from one row to the next; 0: rows are packed
    bool interleaved = false;         // data is interleave_rows' layout of packed rows
};

// Rows a pool thread takes at a time from a product with `tokens` tokens (before the cap
// that leaves each thread several chunks of a small matrix): one token makes one pass, so
// long runs, which stream from memory faster; several tokens reuse the chunk's rows from
// L1/L2 on every pass, so fewer. Interleaved rows (interleave.h) go by groups of sixteen.
int64_t product_chunk_rows(int tokens, bool interleaved);

// src: [n][in] f32; dst: [n][rows] f32. `act_buffer` grows to hold the converted
// activations.
void matmul(ThreadPool& pool, KernelIsa isa, const MatmulWeights& w, const float* src, float* dst, int n,
            std::vector<std::byte>& act_buffer);

}  // namespace powerhouse::cpu
