// Device side of PhRows (powerhouse_kernels.h): a token's position and the cache row of a
// position of its sequence.
#pragma once

#include <cstdint>

#include "powerhouse_kernels.h"

namespace powerhouse::kernels {

__device__ __forceinline__ int row_position(const PhRows& rows, int t) {
    return rows.pos_stride != 0 ? rows.pos[t] : *rows.pos + t;
}

__device__ __forceinline__ int64_t cache_row(const PhRows& rows, int t, int p) {
    if (rows.table == nullptr) return p;
    const int seq = rows.seq != nullptr ? rows.seq[t] : 0;
    const int32_t block = rows.table[static_cast<int64_t>(seq) * rows.table_stride + p / rows.block_size];
    return static_cast<int64_t>(block) * rows.block_size + p % rows.block_size;
}

// The rows of one sequence at positions *pos0, *pos0 + 1, ... held by position.
inline PhRows rows_from(const int32_t* pos0) { return PhRows{pos0, 0, nullptr, nullptr, 0, 1}; }

inline bool rows_valid(const PhRows& rows) {
    return rows.pos != nullptr && (rows.table == nullptr || (rows.block_size > 0 && rows.table_stride > 0));
}

}  // namespace powerhouse::kernels
