// Every weight type as a "traits" struct with decode8() (dequantize.cuh), the plain float
// types included, and one switch from a ggml type id to a call with the matching traits:
// the kernels that read weights (matrix products, embedding lookup) are written once as
// templates over the traits and instantiated here for every type.
//
// Thread-safety: pure device functions and a host-side switch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "dequantize.cuh"

namespace powerhouse::kernels {

// Plain float types as blocks of 8 values, so that they take the same code paths.
struct F32Traits {
    struct Block {
        float v[8];
    };
    static constexpr int kBlockSize = 8;
    __device__ static void decode8(const Block& b, int, float v[8]) {
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = b.v[e];
    }
};

struct F16Traits {
    struct Block {
        uint16_t v[8];
    };
    static constexpr int kBlockSize = 8;
    __device__ static void decode8(const Block& b, int, float v[8]) {
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = f16_bits_to_f32(b.v[e]);
    }
};

struct BF16Traits {
    struct Block {
        uint16_t v[8];
    };
    static constexpr int kBlockSize = 8;
    __device__ static void decode8(const Block& b, int, float v[8]) {
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = bf16_bits_to_f32(b.v[e]);
    }
};

// Calls fn(Traits{}) for the type id and returns its result; cudaErrorNotSupported for a
// type without traits.
template <class Fn>
int with_traits(uint32_t type_id, Fn&& fn) {
    switch (static_cast<TypeId>(type_id)) {
        case TypeId::f32: return fn(F32Traits{});
        case TypeId::f16: return fn(F16Traits{});
        case TypeId::bf16: return fn(BF16Traits{});
        case TypeId::q4_0: return fn(Q4_0Traits{});
        case TypeId::q4_1: return fn(Q4_1Traits{});
        case TypeId::q5_0: return fn(Q5_0Traits{});
        case TypeId::q5_1: return fn(Q5_1Traits{});
        case TypeId::q8_0: return fn(Q8_0Traits{});
        case TypeId::mxfp4: return fn(MXFP4Traits{});
        case TypeId::q2_k: return fn(Q2_KTraits{});
        case TypeId::q3_k: return fn(Q3_KTraits{});
        case TypeId::q4_k: return fn(Q4_KTraits{});
        case TypeId::q5_k: return fn(Q5_KTraits{});
        case TypeId::q6_k: return fn(Q6_KTraits{});
    }
    return cudaErrorNotSupported;
}

// Whether with_traits knows the type.
inline bool has_traits(uint32_t type_id) {
    return with_traits(type_id, [](auto) { return 0; }) == 0;
}

}  // namespace powerhouse::kernels
