#include "tensor/dequantize.h"

#include <cassert>
#include <cstring>

#include "tensor/half.h"
#include "tensor/quant_blocks.h"

// Why bit-exactness with gguf is robust here: every product below is exact in f32. An
// f16 scale has at most 11 significant bits, and it is multiplied by integers of at most
// 8 bits (sub-block scale) and 6 bits (level): Q6_K's 11 + 7 + 5 = 23 bits is the most,
// within f32's 24, without overflow or underflow. So only the final add or subtract
// rounds, once, whatever the grouping of the products and even if fused into an FMA. We
// still write gguf's order ((d * sc) * q - dmin * m) so that the two read alike.

namespace powerhouse {
namespace {

template <class Block>
Block load_block(const unsigned char* src, int64_t index) {
    Block b;
    std::memcpy(&b, src + index * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
    return b;
}

void dequantize_f32(const unsigned char* src, float* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_f16(const unsigned char* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = f16_to_f32(h);
    }
}

void dequantize_bf16(const unsigned char* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
    }
}

void dequantize_q4_0(const unsigned char* src, float* dst, int64_t n_blocks) {
    for (int64_t ib = 0; ib < n_blocks; ++ib, dst += kQK) {
        const auto b = load_block<BlockQ4_0>(src, ib);
        const float d = f16_to_f32(b.d);
        for (int j = 0; j < kQK / 2; ++j) {
            dst[j] = d * static_cast<float>((b.qs[j] & 0x0F) - 8);
            dst[j + kQK / 2] = d * static_cast<float>((b.qs[j] >> 4) - 8);
        }
    }
}

void dequantize_q4_1(const unsigned char* src, float* dst, int64_t n_blocks) {
    for (int64_t ib = 0; ib < n_blocks; ++ib, dst += kQK) {
        const auto b = load_block<BlockQ4_1>(src, ib);
        const float d = f16_to_f32(b.d);
        const float m = f16_to_f32(b.m);
        for (int j = 0; j < kQK / 2; ++j) {
            dst[j] = d * static_cast<float>(b.qs[j] & 0x0F) + m;
            dst[j + kQK / 2] = d * static_cast<float>(b.qs[j] >> 4) + m;
        }
    }
}

// The 5-bit values of Q5_0/Q5_1: low nibbles from qs, bit 4 from the qh word.
void unpack_q5(const uint8_t qh_bytes[4], const uint8_t qs[kQK / 2], int q[kQK]) {
    uint32_t qh;
    std::memcpy(&qh, qh_bytes, 4);
    for (int j = 0; j < kQK / 2; ++j) {
        q[j] = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
        q[j + kQK / 2] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + kQK / 2)) & 1u) << 4);
    }
}

void dequantize_q5_0(const unsigned char* src, float* dst, int64_t n_blocks) {
    for (int64_t ib = 0; ib < n_blocks; ++ib, dst += kQK) {
        const auto b = load_block<BlockQ5_0>(src, ib);
        const float d = f16_to_f32(b.d);
        int q[kQK];
        unpack_q5(b.qh, b.qs, q);
        for (int j = 0; j < kQK; ++j) dst[j] = d * static_cast<float>(q[j] - 16);
    }
}

void dequantize_q5_1(const unsigned char* src, float* dst, int64_t n_blocks) {
    for (int64_t ib = 0; ib < n_blocks; ++ib, dst += kQK) {
        const auto b = load_block<BlockQ5_1>(src, ib);
        const float d = f16_to_f32(b.d);
        const float m = f16_to_f32(b.m);
        int q[kQK];
        unpack_q5(b.qh, b.qs, q);
        for (int j = 0; j < kQK; ++j) dst[j] = d * static_cast<float>(q[j]) + m;
    }
}

void dequantize_q8_0(const unsigned char* src, float* dst, int64_t n_blocks) {
    for (int64_t ib = 0; ib < n_blocks; ++ib, dst += kQK) {
        const auto b = load_block<BlockQ8_0>(src, ib);
        const float d = f16_to_f32(b.d);
        for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(b.qs[j]) * d;
    }
}

// Every product is exact (a power of two times an integer of at most 4 bits; the
// smallest, 2^-128 * 1, is still an f32 subnormal) or overflows to inf: e >= 253 with
// large codes, as in gguf.
void dequantize_mxfp4(const unsigned char* src, float* dst, int64_t n_blocks) {
    for (int64_t ib = 0; ib < n_blocks; ++ib, dst += kQK) {
        const auto b = load_block<BlockMXFP4>(src, ib);
        const float d = mxfp4_half_scale(b.e);
        for (int j = 0; j < kQK / 2; ++j) {
            dst[j] = d * static_cast<float>(kMxfp4Values[b.qs[j] & 0x0F]);
            dst[j + kQK / 2] = d * static_cast<float>(kMxfp4Values[b.qs[j] >> 4]);
        }
    }
}

// K-quants. Sub-block factors are rounded to f32 first (d * scale, dmin * min), then
// applied per element, as gguf does.

void dequantize_q2_k(const unsigned char* src, float* dst, int64_t n_blocks) {
    for (int64_t ib = 0; ib < n_blocks; ++ib, dst += QK_K) {
        const auto b = load_block<BlockQ2_K>(src, ib);
        const float d = f16_to_f32(b.d);
        const float dmin = f16_to_f32(b.dmin);
        for (int h = 0; h < 2; ++h) {
            for (int k = 0; k < 4; ++k) {
                for (int j = 0; j < 32; ++j) {
                    const int i = 128 * h + 32 * k + j;
                    const uint8_t sm = b.scales[i / 16];
                    const float dl = d * static_cast<float>(sm & 0x0F);
                    const float ml = dmin * static_cast<float>(sm >> 4);
                    const int q = (b.qs[32 * h + j] >> (2 * k)) & 0x03;
                    dst[i] = dl * static_cast<float>(q) - ml;
                }
            }
        }
    }
}

void dequantize_q3_k(const unsigned char* src, float* dst, int64_t n_blocks) {
    for (int64_t ib = 0; ib < n_blocks; ++ib, dst += QK_K) {
        const auto b = load_block<BlockQ3_K>(src, ib);
        const float d = f16_to_f32(b.d);
        int sc[16];
        unpack_q3_k_scales(b.scales, sc);
        for (int h = 0; h < 2; ++h) {
            for (int k = 0; k < 4; ++k) {
                for (int j = 0; j < 32; ++j) {
                    const int i = 128 * h + 32 * k + j;
                    const float dl = d * static_cast<float>(sc[i / 16]);
                    const int lo = (b.qs[32 * h + j] >> (2 * k)) & 0x03;
                    const int hi = (b.hmask[j] >> (i / 32)) & 0x01;
                    dst[i] = dl * static_cast<float>(hi ? lo : lo - 4);
                }
            }
        }
    }
}

// Q4_K and Q5_K share everything but the fifth bit.
void dequantize_k4(uint16_t d_bits, uint16_t dmin_bits, const uint8_t scales[kScaleSizeK], const uint8_t qs[QK_K / 2],
                   const uint8_t* qh, float* dst) {
    const float d = f16_to_f32(d_bits);
    const float dmin = f16_to_f32(dmin_bits);
    int sc[8];
    int m[8];
    unpack_k4_scales(scales, sc, m);
    for (int s = 0; s < 8; ++s) {
        const float dl = d * static_cast<float>(sc[s]);
        const float ml = dmin * static_cast<float>(m[s]);
        for (int j = 0; j < 32; ++j) {
            const int i = 32 * s + j;
            int q = (qs[32 * (s / 2) + j] >> (4 * (s % 2))) & 0x0F;
            if (qh) q |= ((qh[j] >> s) & 0x01) << 4;
            dst[i] = dl * static_cast<float>(q) - ml;
        }
    }
}

void dequantize_q4_k(const unsigned char* src, float* dst, int64_t n_blocks) {
    for (int64_t ib = 0; ib < n_blocks; ++ib, dst += QK_K) {
        const auto b = load_block<BlockQ4_K>(src, ib);
        dequantize_k4(b.d, b.dmin, b.scales, b.qs, nullptr, dst);
    }
}

void dequantize_q5_k(const unsigned char* src, float* dst, int64_t n_blocks) {
    for (int64_t ib = 0; ib < n_blocks; ++ib, dst += QK_K) {
        const auto b = load_block<BlockQ5_K>(src, ib);
        dequantize_k4(b.d, b.dmin, b.scales, b.qs, b.qh, dst);
    }
}

void dequantize_q6_k(const unsigned char* src, float* dst, int64_t n_blocks) {
    for (int64_t ib = 0; ib < n_blocks; ++ib, dst += QK_K) {
        const auto b = load_block<BlockQ6_K>(src, ib);
        const float d = f16_to_f32(b.d);
        for (int h = 0; h < 2; ++h) {
            for (int r = 0; r < 128; ++r) {
                const int i = 128 * h + r;
                const float dl = d * static_cast<float>(b.scales[i / 16]);
                const int lo = (b.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
                const int hi = (b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 0x03;
                dst[i] = dl * static_cast<float>((lo | (hi << 4)) - 32);
            }
        }
    }
}

}  // namespace

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
    const TypeTraits& traits = type_traits(type);
    assert(traits.has_reference);
    assert(n >= 0 && n % traits.block_size == 0);
    const auto* bytes = static_cast<const unsigned char*>(src);
    const int64_t n_blocks = n / traits.block_size;
    switch (type) {
        case GgmlType::f32:
            return dequantize_f32(bytes, dst, n);
        case GgmlType::f16:
            return dequantize_f16(bytes, dst, n);
        case GgmlType::bf16:
            return dequantize_bf16(bytes, dst, n);
        case GgmlType::q4_0:
            return dequantize_q4_0(bytes, dst, n_blocks);
        case GgmlType::q4_1:
            return dequantize_q4_1(bytes, dst, n_blocks);
        case GgmlType::q5_0:
            return dequantize_q5_0(bytes, dst, n_blocks);
        case GgmlType::q5_1:
            return dequantize_q5_1(bytes, dst, n_blocks);
        case GgmlType::q8_0:
            return dequantize_q8_0(bytes, dst, n_blocks);
        case GgmlType::mxfp4:
            return dequantize_mxfp4(bytes, dst, n_blocks);
        case GgmlType::q2_k:
            return dequantize_q2_k(bytes, dst, n_blocks);
        case GgmlType::q3_k:
            return dequantize_q3_k(bytes, dst, n_blocks);
        case GgmlType::q4_k:
            return dequantize_q4_k(bytes, dst, n_blocks);
        case GgmlType::q5_k:
            return dequantize_q5_k(bytes, dst, n_blocks);
        case GgmlType::q6_k:
            return dequantize_q6_k(bytes, dst, n_blocks);
        default:
            assert(false && "dequantize_row: type without a reference");
            return;
    }
}

}  // namespace powerhouse
