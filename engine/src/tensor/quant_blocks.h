// The block layouts of ggml's quantized tensor types, byte for byte as they are stored in
// GGUF files (little-endian). A row of a quantized tensor is an array of these blocks;
// dtype.cpp's type_size is sizeof(block) and block_size the element count below.
//
// f16 fields are kept as raw uint16_t bits (see half.h). Blocks in a mapped file are only
// 2-byte aligned at best (type sizes are even, tensor data is 32-aligned, but callers may
// pass any pointer), so code reads blocks with memcpy into these structs rather than by
// casting pointers.
//
// Notation in the comments: x[i] is the i-th decoded element of the block; q is the small
// integer stored for it; nibble = 4 bits. "d" is the block (or super-block) scale.
//
// Thread-safety: types and pure inline functions only.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace powerhouse {

static_assert(std::endian::native == std::endian::little, "GGUF blocks are little-endian and read in place");

inline constexpr int kQK = 32;          // elements per block of the original quant types
inline constexpr int QK_K = 256;        // elements per super-block of the K-quants
inline constexpr int kScaleSizeK = 12;  // bytes of packed 6-bit scales in Q4_K/Q5_K

// --- 32-element blocks --------------------------------------------------------------

// x[i] = d * (q[i] - 8), q in 0..15.
// qs[j] holds q[j] in its low nibble and q[j + 16] in its high nibble.
struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[kQK / 2];
};

// x[i] = d * q[i] + m, q in 0..15. qs as in Q4_0.
struct BlockQ4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[kQK / 2];
};

// x[i] = d * (q[i] - 16), q in 0..31. Low 4 bits of q as Q4_0's qs; bit 4 of q[i] is bit i
// of qh read as a little-endian uint32.
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};

// x[i] = d * q[i] + m, q in 0..31; qh and qs as in Q5_0.
struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};

// x[i] = d * qs[i], qs signed.
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[kQK];
};

// x[i] = 2^(e - 128) * kMxfp4Values[q[i]], q in 0..15 (OCP MX FP4: E2M1 codes with a
// shared E8M0 exponent; gpt-oss's MoE weights). The E2M1 values are stored doubled as
// integers, so the block scale is half of the format's 2^(e - 127): mxfp4_half_scale.
// qs as in Q4_0. 17 bytes: unlike the other blocks, odd-sized and byte aligned.
struct BlockMXFP4 {
    uint8_t e;
    uint8_t qs[kQK / 2];
};

// The 16 E2M1 codes, doubled: bit 3 is the sign, so code 8 is a second zero (ggml's
// kvalues_mxfp4; decoding it gives +0, never -0).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128) exactly, for every e (ggml's GGML_E8M0_TO_FP32_HALF): e = 0 and 1 give the
// f32 subnormals 2^-128 and 2^-127, e = 255 gives 2^127. Never inf or NaN (the OCP
// format's NaN encoding, e = 255, is not treated specially by ggml or gguf).
inline float mxfp4_half_scale(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
    return std::bit_cast<float>(bits);
}

// --- 256-element super-blocks (K-quants) -------------------------------------------------
//
// Several K-quants spread the bits of one q over fields using the same pattern: the
// super-block is cut into chunks of 128 (or 256) elements, and byte j of a chunk's field
// holds, at bit offset b*k, the bits of element chunk_start + k*32 + j. The comments give
// the exact mapping for each field.

// 16 sub-blocks of 16 elements. For sub-block s = i / 16:
//   x[i] = (d * (scales[s] & 0xF)) * q[i] - (dmin * (scales[s] >> 4)), q in 0..3.
// q[i] with i = 128*h + 32*k + j (h 0..1, k 0..3, j 0..31) is bits 2k..2k+1 of qs[32*h + j].
struct BlockQ2_K {
    uint8_t scales[QK_K / 16];  // low nibble: scale, high nibble: min, per sub-block
    uint8_t qs[QK_K / 4];
    uint16_t d;     // super-block scale of the scales
    uint16_t dmin;  // super-block scale of the mins
};

// 16 sub-blocks of 16 elements, symmetric:
//   x[i] = (d * sc[s]) * q[i], s = i / 16, sc in -32..31 (6 bits, stored + 32), q in -4..3.
// q[i] = lo - (hi ? 0 : 4) where, for i = 128*h + 32*k + j, lo is bits 2k..2k+1 of
// qs[32*h + j], and for i = 32*b + j, hi is bit b of hmask[j]. The 6-bit scales are
// packed in 12 bytes, see unpack_q3_k_scales.
struct BlockQ3_K {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
};

// 8 sub-blocks of 32 elements, s = i / 32:
//   x[i] = (d * sc[s]) * q[i] - (dmin * m[s]), sc and m in 0..63, q in 0..15.
// q[i] with i = 64*h + 32*k + j (k 0..1) is nibble k of qs[32*h + j].
// sc and m are packed in `scales`, see unpack_k4_scales.
struct BlockQ4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[kScaleSizeK];
    uint8_t qs[QK_K / 2];
};

// As Q4_K with q in 0..31: the low 4 bits of q as Q4_K's qs, and bit 4 of q[i] for
// i = 32*b + j is bit b of qh[j].
struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[kScaleSizeK];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};

// 16 sub-blocks of 16 elements, symmetric:
//   x[i] = (d * scales[s]) * (q[i] - 32), s = i / 16, q in 0..63.
// For i = 128*h + r (h 0..1, r 0..127): the low 4 bits of q are nibble r / 64 of
// ql[64*h + r % 64], the high 2 bits are bits 2*(r / 32)..+1 of qh[32*h + r % 32].
struct BlockQ6_K {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockMXFP4) == 17 && offsetof(BlockMXFP4, qs) == 1);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(offsetof(BlockQ3_K, d) == 108 && offsetof(BlockQ6_K, d) == 208);
static_assert(offsetof(BlockQ2_K, d) == 80);

// --- packed sub-block scales -----------------------------------------------------------

// Q3_K: 16 six-bit values u (= sc + 32). Bytes 0..7 hold the low nibbles: byte k has
// u[k] in its low nibble and u[k + 8] in its high nibble. Bytes 8..11 hold the top two
// bits: byte 8 + k has u[k], u[k + 4], u[k + 8], u[k + 12] at bits 0, 2, 4, 6.
inline void unpack_q3_k_scales(const uint8_t packed[12], int sc[16]) {
    for (int i = 0; i < 16; ++i) {
        const int lo = (i < 8 ? packed[i] : packed[i - 8] >> 4) & 0x0F;
        const int hi = (packed[8 + i % 4] >> (2 * (i / 4))) & 0x03;
        sc[i] = (lo | (hi << 4)) - 32;
    }
}

// sc values must be in -32..31.
inline void pack_q3_k_scales(const int sc[16], uint8_t packed[12]) {
    for (int k = 0; k < 12; ++k) packed[k] = 0;
    for (int i = 0; i < 16; ++i) {
        const auto u = static_cast<unsigned>(sc[i] + 32);
        packed[i % 8] = static_cast<uint8_t>(packed[i % 8] | ((u & 0x0Fu) << (i < 8 ? 0 : 4)));
        packed[8 + i % 4] = static_cast<uint8_t>(packed[8 + i % 4] | ((u >> 4) << (2 * (i / 4))));
    }
}

// Q4_K/Q5_K: eight 6-bit scales sc and eight 6-bit mins m in 12 bytes. For j < 4, byte j
// holds sc[j] in its low 6 bits and byte j + 4 holds m[j]; the top two bits of bytes 0..3
// (4..7) are the top two bits of sc[j + 4] (m[j + 4]), whose low nibbles sit in byte j + 8
// (sc in the low nibble, m in the high one).
inline void unpack_k4_scales(const uint8_t packed[kScaleSizeK], int sc[8], int m[8]) {
    for (int j = 0; j < 4; ++j) {
        sc[j] = packed[j] & 0x3F;
        m[j] = packed[j + 4] & 0x3F;
        sc[j + 4] = (packed[j + 8] & 0x0F) | ((packed[j] >> 6) << 4);
        m[j + 4] = (packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4);
    }
}

// sc and m values must be in 0..63.
inline void pack_k4_scales(const int sc[8], const int m[8], uint8_t packed[kScaleSizeK]) {
    for (int j = 0; j < 4; ++j) {
        packed[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
        packed[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
        packed[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0F) | ((m[j + 4] & 0x0F) << 4));
    }
}

}  // namespace powerhouse
