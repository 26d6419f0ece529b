// Dequantize kernels: every type with a CPU reference, to f32 or f16, for the prompt-
// processing path (dequantize a weight matrix, then a cuBLAS tensor-core GEMM).
//
// Shape of the work. The kernel is bound by memory bandwidth and dominated by its
// writes (4 bytes of f32 or 2 of f16 per element against 0.4 to 1.1 bytes read for the
// quantized types), so the layout is chosen for the stores: a thread block of 256
// threads decodes a tile of 2048 elements (64 blocks of 32 or 8 super-blocks of 256),
// and thread t writes elements [8t, 8t + 8) of the tile as two float4 (f32) or one
// 16-byte vector (f16) stores, so a warp writes one contiguous 1 KiB (512 B) run. The
// tile's source bytes (8 or 64 type sizes, always a multiple of 16) are first copied into
// shared memory with 16-byte coalesced loads, because blocks of 17, 18, 22 or 110 bytes
// cannot be loaded with wide vector loads in place; each thread then decodes its 8
// elements from shared memory. Sources of any byte alignment work (2-byte or 1-byte
// loads instead), and destinations that are not 16-byte aligned use scalar stores.
//
// Bit-exactness with the CPU reference: see dequantize.cuh. This file is also compiled
// with -fmad=false (kernels/CMakeLists.txt) so that no multiply-add here is ever fused
// behind our back, even one added later without the __f*_rn intrinsics.
//
// Thread-safety: see powerhouse_kernels.h.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "dequantize.cuh"
#include "powerhouse_kernels.h"

namespace powerhouse::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 8;
constexpr int kTileElements = kThreads * kPerThread;
constexpr int64_t kMaxGrid = INT_MAX;  // gridDim.x limit; the kernels loop beyond it

bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// --- stores of 8 consecutive outputs ----------------------------------------------------

template <bool kVector>
__device__ __forceinline__ void store8(float* dst, const float v[8]) {
    if constexpr (kVector) {
        auto* d4 = reinterpret_cast<float4*>(dst);
        d4[0] = make_float4(v[0], v[1], v[2], v[3]);
        d4[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) dst[e] = v[e];
    }
}

template <bool kVector>
__device__ __forceinline__ void store8(uint16_t* dst, const float v[8]) {
    uint16_t h[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) h[e] = f32_to_f16_bits(v[e]);
    if constexpr (kVector) {
        uint4 u;
        u.x = h[0] | (static_cast<uint32_t>(h[1]) << 16);
        u.y = h[2] | (static_cast<uint32_t>(h[3]) << 16);
        u.z = h[4] | (static_cast<uint32_t>(h[5]) << 16);
        u.w = h[6] | (static_cast<uint32_t>(h[7]) << 16);
        *reinterpret_cast<uint4*>(dst) = u;
    } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) dst[e] = h[e];
    }
}

__device__ __forceinline__ void store1(float* dst, float v) {
    *dst = v;
}
__device__ __forceinline__ void store1(uint16_t* dst, float v) {
    *dst = f32_to_f16_bits(v);
}

// --- quantized blocks ----------------------------------------------------------------

// Copies `bytes` from global memory into the 16-byte aligned shared tile, with the widest
// loads the source alignment allows. All threads of the block take part. `bytes` is even
// for every type but MXFP4 (17-byte blocks), whose partial last tile can leave one byte.
__device__ __forceinline__ void load_tile(uint8_t* tile, const uint8_t* __restrict__ src, int bytes) {
    const auto addr = reinterpret_cast<uintptr_t>(src);
    int done = 0;
    if ((addr & 15u) == 0) {
        const int n16 = bytes / 16;
        const auto* s16 = reinterpret_cast<const uint4*>(src);
        auto* t16 = reinterpret_cast<uint4*>(tile);
        for (int k = threadIdx.x; k < n16; k += blockDim.x) t16[k] = __ldg(s16 + k);
        done = n16 * 16;
    }
    if ((addr & 1u) == 0) {
        // 16-bit words, then the odd last byte if there is one.
        const int n2 = (bytes - done) / 2;
        const auto* s2 = reinterpret_cast<const unsigned short*>(src + done);
        auto* t2 = reinterpret_cast<unsigned short*>(tile + done);
        for (int k = threadIdx.x; k < n2; k += blockDim.x) t2[k] = __ldg(s2 + k);
        if ((bytes - done) % 2 != 0 && threadIdx.x == 0) tile[bytes - 1] = __ldg(src + bytes - 1);
    } else {
        for (int k = threadIdx.x; k < bytes; k += blockDim.x) tile[k] = __ldg(src + k);
    }
}

template <class Traits, class Out, bool kVectorStore>
__global__ void __launch_bounds__(kThreads)
    dequantize_blocks_kernel(const uint8_t* __restrict__ src, Out* __restrict__ dst, int64_t n_blocks) {
    using Block = typename Traits::Block;
    constexpr int kTileBlocks = kTileElements / Traits::kBlockSize;
    static_assert(kTileBlocks * sizeof(Block) % 16 == 0, "full tiles are loaded 16 bytes at a time");
    __shared__ __align__(16) uint8_t tile[kTileBlocks * sizeof(Block)];

    const int64_t n_tiles = (n_blocks + kTileBlocks - 1) / kTileBlocks;
    // The trip count depends on blockIdx only, so every thread reaches the barriers.
    for (int64_t t = blockIdx.x; t < n_tiles; t += gridDim.x) {
        const int64_t first_block = t * kTileBlocks;
        const int nb = static_cast<int>(min(static_cast<int64_t>(kTileBlocks), n_blocks - first_block));
        load_tile(tile, src + first_block * static_cast<int64_t>(sizeof(Block)), nb * static_cast<int>(sizeof(Block)));
        __syncthreads();
        const int e0 = threadIdx.x * kPerThread;
        if (e0 < nb * Traits::kBlockSize) {
            const Block& block = reinterpret_cast<const Block*>(tile)[e0 / Traits::kBlockSize];
            float v[kPerThread];
            Traits::decode8(block, e0 % Traits::kBlockSize, v);
            store8<kVectorStore>(dst + first_block * Traits::kBlockSize + e0, v);
        }
        __syncthreads();  // the next tile overwrites `tile`
    }
}

template <class Traits, class Out>
cudaError_t launch_blocks(const void* src, Out* dst, int64_t n, cudaStream_t stream) {
    constexpr int kTileBlocks = kTileElements / Traits::kBlockSize;
    const int64_t n_blocks = n / Traits::kBlockSize;
    const int64_t n_tiles = (n_blocks + kTileBlocks - 1) / kTileBlocks;
    const auto grid = static_cast<unsigned>(std::min(n_tiles, kMaxGrid));
    const auto* s = static_cast<const uint8_t*>(src);
    if (aligned16(dst)) {
        dequantize_blocks_kernel<Traits, Out, true><<<grid, kThreads, 0, stream>>>(s, dst, n_blocks);
    } else {
        dequantize_blocks_kernel<Traits, Out, false><<<grid, kThreads, 0, stream>>>(s, dst, n_blocks);
    }
    return cudaGetLastError();
}

// --- F32 / F16 / BF16 ----------------------------------------------------------------

// One element of a float type read byte by byte: the path for unaligned sources and tails.
template <TypeId kType>
__device__ __forceinline__ float load_float_elem(const uint8_t* __restrict__ src, int64_t i) {
    if constexpr (kType == TypeId::f32) {
        return __uint_as_float(load_u32_le(src + 4 * i));
    } else {
        const uint8_t* p = src + 2 * i;
        const auto h = static_cast<uint16_t>(p[0] | (p[1] << 8));
        return kType == TypeId::f16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
    }
}

// Eight elements from a 16-byte aligned source: two 16-byte loads for f32, one for 16-bit.
template <TypeId kType>
__device__ __forceinline__ void load_float8(const uint8_t* __restrict__ src, int64_t group, float v[8]) {
    if constexpr (kType == TypeId::f32) {
        const auto* s4 = reinterpret_cast<const float4*>(src) + 2 * group;
        const float4 a = __ldg(s4);
        const float4 b = __ldg(s4 + 1);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
        v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
        const uint4 u = __ldg(reinterpret_cast<const uint4*>(src) + group);
        const uint32_t words[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const auto lo = static_cast<uint16_t>(words[k] & 0xffffu);
            const auto hi = static_cast<uint16_t>(words[k] >> 16);
            v[2 * k] = kType == TypeId::f16 ? f16_bits_to_f32(lo) : bf16_bits_to_f32(lo);
            v[2 * k + 1] = kType == TypeId::f16 ? f16_bits_to_f32(hi) : bf16_bits_to_f32(hi);
        }
    }
}

template <TypeId kType, class Out, bool kVector>
__global__ void __launch_bounds__(kThreads)
    convert_kernel(const uint8_t* __restrict__ src, Out* __restrict__ dst, int64_t n) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t n_groups = kVector ? n / kPerThread : 0;
    for (int64_t g = id; g < n_groups; g += stride) {
        float v[kPerThread];
        load_float8<kType>(src, g, v);
        store8<true>(dst + g * kPerThread, v);
    }
    for (int64_t i = n_groups * kPerThread + id; i < n; i += stride) {
        store1(dst + i, load_float_elem<kType>(src, i));
    }
}

template <TypeId kType, class Out>
cudaError_t launch_convert(const void* src, Out* dst, int64_t n, cudaStream_t stream) {
    const bool vector = aligned16(src) && aligned16(dst);
    const int64_t per_thread = vector ? kPerThread : 1;
    const int64_t threads = (n + per_thread - 1) / per_thread;
    const auto grid = static_cast<unsigned>(std::min((threads + kThreads - 1) / kThreads, kMaxGrid));
    const auto* s = static_cast<const uint8_t*>(src);
    if (vector) {
        convert_kernel<kType, Out, true><<<grid, kThreads, 0, stream>>>(s, dst, n);
    } else {
        convert_kernel<kType, Out, false><<<grid, kThreads, 0, stream>>>(s, dst, n);
    }
    return cudaGetLastError();
}

// --- dispatch ------------------------------------------------------------------------

int block_size_of(uint32_t type_id) {
    switch (static_cast<TypeId>(type_id)) {
        case TypeId::f32:
        case TypeId::f16:
        case TypeId::bf16:
            return 1;
        case TypeId::q4_0:
        case TypeId::q4_1:
        case TypeId::q5_0:
        case TypeId::q5_1:
        case TypeId::q8_0:
        case TypeId::mxfp4:
            return kQK;
        case TypeId::q2_k:
        case TypeId::q3_k:
        case TypeId::q4_k:
        case TypeId::q5_k:
        case TypeId::q6_k:
            return QK_K;
    }
    return 0;
}

template <class Out>
int dequantize(uint32_t type_id, const void* src, Out* dst, int64_t n, cudaStream_t stream) {
    const int block_size = block_size_of(type_id);
    if (block_size == 0) return cudaErrorNotSupported;
    if (n < 0 || n % block_size != 0) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    if (src == nullptr || dst == nullptr) return cudaErrorInvalidValue;
    if (reinterpret_cast<uintptr_t>(dst) % sizeof(Out) != 0) return cudaErrorInvalidValue;

    switch (static_cast<TypeId>(type_id)) {
        case TypeId::f32:
            if constexpr (std::is_same_v<Out, float>) {
                // A copy: bit-exact, NaN payloads included, at copy-engine speed.
                return cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice,
                                       stream);
            } else {
                return launch_convert<TypeId::f32>(src, dst, n, stream);
            }
        case TypeId::f16:
            return launch_convert<TypeId::f16>(src, dst, n, stream);
        case TypeId::bf16:
            return launch_convert<TypeId::bf16>(src, dst, n, stream);
        case TypeId::q4_0:
            return launch_blocks<Q4_0Traits>(src, dst, n, stream);
        case TypeId::q4_1:
            return launch_blocks<Q4_1Traits>(src, dst, n, stream);
        case TypeId::q5_0:
            return launch_blocks<Q5_0Traits>(src, dst, n, stream);
        case TypeId::q5_1:
            return launch_blocks<Q5_1Traits>(src, dst, n, stream);
        case TypeId::q8_0:
            return launch_blocks<Q8_0Traits>(src, dst, n, stream);
        case TypeId::mxfp4:
            return launch_blocks<MXFP4Traits>(src, dst, n, stream);
        case TypeId::q2_k:
            return launch_blocks<Q2_KTraits>(src, dst, n, stream);
        case TypeId::q3_k:
            return launch_blocks<Q3_KTraits>(src, dst, n, stream);
        case TypeId::q4_k:
            return launch_blocks<Q4_KTraits>(src, dst, n, stream);
        case TypeId::q5_k:
            return launch_blocks<Q5_KTraits>(src, dst, n, stream);
        case TypeId::q6_k:
            return launch_blocks<Q6_KTraits>(src, dst, n, stream);
    }
    return cudaErrorNotSupported;
}

}  // namespace
}  // namespace powerhouse::kernels

extern "C" {

int ph_dequantize_supported(uint32_t ggml_type_id) {
    return powerhouse::kernels::block_size_of(ggml_type_id) != 0 ? 1 : 0;
}

int ph_dequantize_block_size(uint32_t ggml_type_id) {
    return powerhouse::kernels::block_size_of(ggml_type_id);
}

int ph_dequantize_f32(uint32_t ggml_type_id, const void* src, float* dst, int64_t n_elements, cudaStream_t stream) {
    return powerhouse::kernels::dequantize(ggml_type_id, src, dst, n_elements, stream);
}

int ph_dequantize_f16(uint32_t ggml_type_id, const void* src, uint16_t* dst, int64_t n_elements, cudaStream_t stream) {
    return powerhouse::kernels::dequantize(ggml_type_id, src, dst, n_elements, stream);
}

}  // extern "C"
