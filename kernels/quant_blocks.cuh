// The block layouts of ggml's quantized tensor types, for the CUDA kernels. They repeat
// engine/src/tensor/quant_blocks.h byte for byte (the engine's copy is the reference and
// documents every field): kernels may not include engine headers (DESIGN.md section 2),
// so the layouts are written down again here and pinned by the static_asserts below. The
// kernel tests compare every type against the engine's CPU reference, which catches any
// drift between the two copies.
//
// f16 fields stay raw uint16_t bits, as in the engine. Every struct but BlockMXFP4 has
// alignment 2 and an even size; BlockMXFP4 (17 bytes, alignment 1) holds only bytes. So a
// block inside a 16-byte aligned shared-memory tile can be read in place.
//
// Lives in powerhouse::kernels so that these structs never share a name with the
// engine's (one definition rule) when both end up in one program.
//
// Thread-safety: types and constants only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace powerhouse::kernels {

// ggml/GGUF type ids (engine/src/tensor/dtype.h, GgmlType) of the types with kernels.
enum class TypeId : uint32_t {
    f32 = 0,
    f16 = 1,
    q4_0 = 2,
    q4_1 = 3,
    q5_0 = 6,
    q5_1 = 7,
    q8_0 = 8,
    q2_k = 10,
    q3_k = 11,
    q4_k = 12,
    q5_k = 13,
    q6_k = 14,
    bf16 = 30,
    mxfp4 = 39,
};

inline constexpr int kQK = 32;    // elements per block of the original quant types
inline constexpr int QK_K = 256;  // elements per super-block of the K-quants

struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[kQK / 2];
};

struct BlockQ4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[kQK / 2];
};

struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};

struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};

struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[kQK];
};

// One E8M0 exponent and 32 E2M1 codes: x[i] = 2^(e - 128) * (doubled E2M1 value of q[i]).
struct BlockMXFP4 {
    uint8_t e;
    uint8_t qs[kQK / 2];
};

struct BlockQ2_K {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    uint16_t d;
    uint16_t dmin;
};

struct BlockQ3_K {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
};

struct BlockQ4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qs[QK_K / 2];
};

struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};

struct BlockQ6_K {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
};

// Sizes: GGUF's type_size for each type. Offsets: the fields the engine's comments pin.
static_assert(sizeof(BlockQ4_0) == 18 && offsetof(BlockQ4_0, qs) == 2);
static_assert(sizeof(BlockQ4_1) == 20 && offsetof(BlockQ4_1, qs) == 4);
static_assert(sizeof(BlockQ5_0) == 22 && offsetof(BlockQ5_0, qh) == 2 && offsetof(BlockQ5_0, qs) == 6);
static_assert(sizeof(BlockQ5_1) == 24 && offsetof(BlockQ5_1, qh) == 4 && offsetof(BlockQ5_1, qs) == 8);
static_assert(sizeof(BlockQ8_0) == 34 && offsetof(BlockQ8_0, qs) == 2);
static_assert(sizeof(BlockMXFP4) == 17 && offsetof(BlockMXFP4, qs) == 1 && alignof(BlockMXFP4) == 1);
static_assert(sizeof(BlockQ2_K) == 84 && offsetof(BlockQ2_K, qs) == 16 && offsetof(BlockQ2_K, d) == 80 &&
              offsetof(BlockQ2_K, dmin) == 82);
static_assert(sizeof(BlockQ3_K) == 110 && offsetof(BlockQ3_K, qs) == 32 && offsetof(BlockQ3_K, scales) == 96 &&
              offsetof(BlockQ3_K, d) == 108);
static_assert(sizeof(BlockQ4_K) == 144 && offsetof(BlockQ4_K, scales) == 4 && offsetof(BlockQ4_K, qs) == 16);
static_assert(sizeof(BlockQ5_K) == 176 && offsetof(BlockQ5_K, scales) == 4 && offsetof(BlockQ5_K, qh) == 16 &&
              offsetof(BlockQ5_K, qs) == 48);
static_assert(sizeof(BlockQ6_K) == 210 && offsetof(BlockQ6_K, qh) == 128 && offsetof(BlockQ6_K, scales) == 192 &&
              offsetof(BlockQ6_K, d) == 208);
static_assert(alignof(BlockQ4_0) == 2 && alignof(BlockQ3_K) == 2 && alignof(BlockQ6_K) == 2,
              "blocks are read in place from 2-byte aligned shared memory");

}  // namespace powerhouse::kernels
