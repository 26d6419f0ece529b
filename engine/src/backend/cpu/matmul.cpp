#include "backend/cpu/matmul.h"

#include <algorithm>
#include <cstdint>

#include "backend/cpu/interleave.h"

namespace powerhouse::cpu {

namespace {

// From this many tokens the tiled product beats dot_rows even with the rest of its last
// tile empty: with AVX-512 (sixteen tokens per vector) from 8; with AVX2 (eight, through
// 16-bit sums) from 16 (cpu_kernel_bench's dot/.../avx2/t16 against t16/tiled, best of
// four: 16 tokens 4 to 20% faster tiled for every type but Q4_1, level there; at 8 and 12
// tokens dot_rows was 15 to 40% faster).
int min_tiled_tokens(KernelIsa isa) {
    return isa == KernelIsa::avx2 ? 16 : 8;
}

// Rows per chunk: product_chunk_rows, and at least four chunks per thread when the matrix
// is small, so that threads finish together.
int64_t chunk_rows(int64_t rows, int n, int threads, bool interleaved) {
    const int64_t fair = std::max<int64_t>(1, rows / (4 * std::max(1, threads)));
    return std::max<int64_t>(1, std::min(product_chunk_rows(n, interleaved), fair));
}

}  // namespace

int64_t product_chunk_rows(int tokens, bool interleaved) {
    // Each chunk restarts the prefetchers' streams: for one token on two cores, 128 rows
    // against 32 measured 20 to 100% more bytes per second (matmul/.../all-cores in
    // cpu_kernel_bench). With several tokens the chunk's rows stay in L1/L2 across the passes;
    // 18 is a multiple of the two or three float rows dot_rows takes per pass (with AVX2,
    // matmul/F16/t64/one-core is about 4% faster than with 16: four triples and two pairs).
    if (tokens == 1) return 128;
    return interleaved ? 32 : 18;
}

void matmul(ThreadPool& pool, KernelIsa isa, const MatmulWeights& w, const float* src, float* dst, int n,
            std::vector<std::byte>& act_buffer) {
    const size_t act_row = activation_bytes(w.type, w.in);
    if (act_buffer.size() < act_row * static_cast<size_t>(n)) act_buffer.resize(act_row * static_cast<size_t>(n));
    std::byte* act = act_buffer.data();
    if (n == 1) {
        quantize_activations(isa, w.type, src, act, w.in);
    } else {
        pool.parallel_for(n, [&](int64_t begin, int64_t end, int) {
            for (int64_t t = begin; t < end; ++t) {
                quantize_activations(isa, w.type, src + t * w.in, act + static_cast<size_t>(t) * act_row, w.in);
            }
        });
    }
    const size_t w_row = w.row_stride != 0 ? w.row_stride : row_bytes(type_traits(w.type), static_cast<uint64_t>(w.in));
    if (w.interleaved) {
        // Chunks of whole groups of rows; the layout's product takes batches of any size.
        const int64_t groups = w.rows / kInterleaveRows;
        const int64_t chunk = std::max<int64_t>(1, chunk_rows(w.rows, n, pool.size(), true) / kInterleaveRows);
        pool.parallel_chunks((groups + chunk - 1) / chunk, [&](int64_t c, int) {
            const int64_t g0 = c * chunk;
            const int count = static_cast<int>(std::min(chunk, groups - g0));
            dot_rows_interleaved(isa, w.type, w.in, w.data + static_cast<size_t>(g0 * kInterleaveRows) * w_row, count,
                                 act, act_row, n, dst + g0 * kInterleaveRows, static_cast<size_t>(w.rows));
        });
        return;
    }
    const int64_t chunk = chunk_rows(w.rows, n, pool.size(), false);
    const int64_t n_chunks = (w.rows + chunk - 1) / chunk;
    if (n >= min_tiled_tokens(isa) && has_tiled_dot(isa, w.type, w.in)) {
        // The tiles follow the rows in the same buffer; each chunk of rows then reads every
        // token of the batch per decoded weight block.
        const size_t rows_bytes = act_row * static_cast<size_t>(n);
        const size_t tile_bytes = tiled_activation_bytes(w.type, w.in, n);
        if (act_buffer.size() < rows_bytes + tile_bytes + 64) act_buffer.resize(rows_bytes + tile_bytes + 64);
        act = act_buffer.data();
        std::byte* tiles = act + rows_bytes + (64 - reinterpret_cast<uintptr_t>(act + rows_bytes) % 64) % 64;
        tile_activations(w.type, w.in, act, act_row, n, tiles);
        pool.parallel_chunks(n_chunks, [&](int64_t c, int) {
            const int64_t r0 = c * chunk;
            const int rows = static_cast<int>(std::min(chunk, w.rows - r0));
            dot_rows_tiled(isa, w.type, w.in, w.data + static_cast<size_t>(r0) * w_row, w_row, rows, tiles, n, dst + r0,
                           static_cast<size_t>(w.rows));
        });
        return;
    }
    pool.parallel_chunks(n_chunks, [&](int64_t c, int) {
        const int64_t r0 = c * chunk;
        const int rows = static_cast<int>(std::min(chunk, w.rows - r0));
        dot_rows(isa, w.type, w.in, w.data + static_cast<size_t>(r0) * w_row, w_row, rows, act, act_row, n, dst + r0,
                 static_cast<size_t>(w.rows));
    });
}

}  // namespace powerhouse::cpu
