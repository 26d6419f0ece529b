// Fused dequantize + matrix-vector products: the decode path, where every weight is read
// once per token and memory bandwidth is the limit (DESIGN.md section 5).
//
// Shape of the work: one warp per output row, four rows per thread block of 128 threads.
// Lane l of a warp decodes elements [8c, 8c + 8) of the row for c = l, l + 32, ..., so a
// warp walks the row front to back and its lanes read neighbouring bytes of the same
// blocks (one super-block of a K-quant per step), which the memory system merges into
// whole sectors. Each decoded group of 8 weights is multiplied with up to kTokens
// activation rows (they stay in L1/L2, the weights stream past once), summed per lane in
// f32 with FMAs and reduced across the warp with shuffles.
//
// Two variants of that kernel. The staged one (used whenever the rows and activations are
// 16-byte aligned, as the CUDA stage's always are) first copies each tile of 2048 weights
// of the row into the warp's shared memory with 16-byte loads, as the dequantize kernels
// do: blocks of 18, 34, 144 or 210 bytes cannot be read with wide loads in place, and one
// byte load per quant from global memory costs more instructions than the bandwidth allows.
// It reads the activations as float4. The plain one reads the weights in place, for any
// alignment (the column slices of a row-parallel split in the tests, for example).
//
// Thread-safety: see powerhouse_kernels.h.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "powerhouse_kernels.h"
#include "type_dispatch.cuh"

namespace powerhouse::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

template <class Traits, int kTokens>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    matmul_kernel(const uint8_t* __restrict__ w, size_t row_stride, int64_t rows, int64_t in,
                  const float* __restrict__ x, int64_t x_stride, float* __restrict__ y, int64_t y_stride) {
    using Block = typename Traits::Block;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= rows) return;
    const int lane = static_cast<int>(threadIdx.x % 32);
    const auto* blocks = reinterpret_cast<const Block*>(w + static_cast<size_t>(row) * row_stride);
    float acc[kTokens];
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
    const int64_t groups = in / 8;
    for (int64_t g = lane; g < groups; g += 32) {
        const int64_t e = g * 8;
        float v[8];
        Traits::decode8(blocks[e / Traits::kBlockSize], static_cast<int>(e % Traits::kBlockSize), v);
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
            const float* xt = x + t * x_stride + e;
            float s = acc[t];
#pragma unroll
            for (int k = 0; k < 8; ++k) s = fmaf(v[k], xt[k], s);
            acc[t] = s;
        }
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
        float s = acc[t];
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
        if (lane == 0) y[t * y_stride + row] = s;
    }
}

constexpr int kTileElements = 2048;

// Bytes of a tile of 2048 weights: a multiple of 16, as the tile is 8 super-blocks of 256,
// 64 blocks of 32 or 256 groups of 8 floats, and every block is an even number of bytes
// but MXFP4's 17 (64 of those are 1088 bytes, 68 vectors).
template <class Traits>
__host__ __device__ constexpr int tile_bytes() {
    return kTileElements / Traits::kBlockSize * static_cast<int>(sizeof(typename Traits::Block));
}

template <class Traits, int kTokens>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    matmul_staged_kernel(const uint8_t* __restrict__ w, size_t row_stride, int64_t rows, int64_t in,
                         const float* __restrict__ x, int64_t x_stride, float* __restrict__ y, int64_t y_stride) {
    using Block = typename Traits::Block;
    constexpr int kTileBytes = tile_bytes<Traits>();
    static_assert(kTileBytes % 16 == 0, "a tile must be whole 16-byte vectors");
    __shared__ uint4 tiles[kWarpsPerBlock][kTileBytes / 16];
    const int warp = static_cast<int>(threadIdx.x / 32);
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
    if (row >= rows) return;  // the whole warp: it syncs only with itself below
    const uint8_t* src = w + static_cast<size_t>(row) * row_stride;
    uint4* tile = tiles[warp];
    const auto* blocks = reinterpret_cast<const Block*>(tile);
    float acc[kTokens];
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
    for (int64_t e0 = 0; e0 < in; e0 += kTileElements) {
        const int n_elements = static_cast<int>(in - e0 < kTileElements ? in - e0 : kTileElements);
        // A last, shorter tile is still whole 16-byte vectors: the launcher checked that the
        // row's bytes are.
        const int n_vectors = n_elements / Traits::kBlockSize * static_cast<int>(sizeof(Block)) / 16;
        const auto* from = reinterpret_cast<const uint4*>(src + e0 / Traits::kBlockSize * sizeof(Block));
        for (int i = lane; i < n_vectors; i += 32) tile[i] = from[i];
        __syncwarp();
        for (int e = lane * 8; e < n_elements; e += 32 * 8) {
            float v[8];
            Traits::decode8(blocks[e / Traits::kBlockSize], e % Traits::kBlockSize, v);
#pragma unroll
            for (int t = 0; t < kTokens; ++t) {
                const auto* xt = reinterpret_cast<const float4*>(x + t * x_stride + e0 + e);
                const float4 a = xt[0];
                const float4 b = xt[1];
                float sum = acc[t];
                sum = fmaf(v[0], a.x, sum);
                sum = fmaf(v[1], a.y, sum);
                sum = fmaf(v[2], a.z, sum);
                sum = fmaf(v[3], a.w, sum);
                sum = fmaf(v[4], b.x, sum);
                sum = fmaf(v[5], b.y, sum);
                sum = fmaf(v[6], b.z, sum);
                sum = fmaf(v[7], b.w, sum);
                acc[t] = sum;
            }
        }
        __syncwarp();  // the tile is read by every lane before the next one overwrites it
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
        float sum = acc[t];
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
        if (lane == 0) y[t * y_stride + row] = sum;
    }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <class Traits, int kTokens>
int launch(const void* w, size_t row_stride, int64_t rows, int64_t in, const float* x, int64_t x_stride, float* y,
           int64_t y_stride, cudaStream_t stream) {
    const int64_t grid = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    const auto* weights = static_cast<const uint8_t*>(w);
    const size_t row_bytes = static_cast<size_t>(in / Traits::kBlockSize) * sizeof(typename Traits::Block);
    const bool staged = aligned16(w) && row_stride % 16 == 0 && row_bytes % 16 == 0 && aligned16(x) &&
                        x_stride % 4 == 0;
    if (staged) {
        matmul_staged_kernel<Traits, kTokens><<<static_cast<unsigned>(grid), kWarpsPerBlock * 32, 0, stream>>>(
            weights, row_stride, rows, in, x, x_stride, y, y_stride);
    } else {
        matmul_kernel<Traits, kTokens><<<static_cast<unsigned>(grid), kWarpsPerBlock * 32, 0, stream>>>(
            weights, row_stride, rows, in, x, x_stride, y, y_stride);
    }
    return static_cast<int>(cudaGetLastError());
}

__global__ void f32_to_f16_kernel(const float* __restrict__ x, uint16_t* __restrict__ y, int64_t n) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = f32_to_f16_bits(x[i]);
    }
}

}  // namespace
}  // namespace powerhouse::kernels

using namespace powerhouse::kernels;

extern "C" int ph_matmul_supported(uint32_t ggml_type_id) {
    return has_traits(ggml_type_id) ? 1 : 0;
}

extern "C" int ph_matmul(uint32_t ggml_type_id, const void* w, size_t row_stride, int64_t rows, int64_t in,
                         const float* x, int64_t x_stride, float* y, int64_t y_stride, int n_tokens,
                         cudaStream_t stream) {
    if (w == nullptr || x == nullptr || y == nullptr || rows < 0 || in <= 0 || n_tokens < 0 ||
        rows > int64_t{INT_MAX} * kWarpsPerBlock || x_stride < in || y_stride < rows) {
        return cudaErrorInvalidValue;
    }
    if (rows == 0 || n_tokens == 0) return cudaSuccess;
    return with_traits(ggml_type_id, [&](auto traits) -> int {
        using Traits = decltype(traits);
        if (in % Traits::kBlockSize != 0 || row_stride < sizeof(typename Traits::Block) * (in / Traits::kBlockSize)) {
            return cudaErrorInvalidValue;
        }
        // Groups of 8 tokens, then 4, 2 and 1 for the rest: each weight is read
        // ceil(n / 8) times, never more.
        int t = 0;
        while (t < n_tokens) {
            const int left = n_tokens - t;
            const float* xt = x + t * x_stride;
            float* yt = y + t * y_stride;
            int status = 0;
            int step = 0;
            if (left >= 8) {
                status = launch<Traits, 8>(w, row_stride, rows, in, xt, x_stride, yt, y_stride, stream), step = 8;
            } else if (left >= 4) {
                status = launch<Traits, 4>(w, row_stride, rows, in, xt, x_stride, yt, y_stride, stream), step = 4;
            } else if (left >= 2) {
                status = launch<Traits, 2>(w, row_stride, rows, in, xt, x_stride, yt, y_stride, stream), step = 2;
            } else {
                status = launch<Traits, 1>(w, row_stride, rows, in, xt, x_stride, yt, y_stride, stream), step = 1;
            }
            if (status != 0) return status;
            t += step;
        }
        return cudaSuccess;
    });
}

extern "C" int ph_f32_to_f16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
    if (x == nullptr || y == nullptr || n < 0) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    const int64_t blocks = (n + 255) / 256;
    f32_to_f16_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(x, y, n);
    return static_cast<int>(cudaGetLastError());
}
