// The plain C++ variant of the dot products (quant_dot.h): the reference the vector
// variants are tested against, and the fallback on processors without them.
#include <cstring>

#include "backend/cpu/quant_dot.h"
#include "backend/cpu/quant_dot_impl.h"
#include "tensor/half.h"

namespace powerhouse::cpu::detail {

namespace {

template <class T>
T load(const std::byte* base, int64_t index) {
    T block;
    std::memcpy(&block, base + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
    return block;
}

// Q4/Q5 values of a 32-element block, before their offset: low 4 bits from the nibbles
// (low nibbles are elements 0..15), bit 4 from qh when the type has it.
void unpack_q4(const uint8_t* qs, int* q) {
    for (int j = 0; j < 16; ++j) {
        q[j] = qs[j] & 0x0F;
        q[j + 16] = qs[j] >> 4;
    }
}

void add_q5_high_bits(const uint8_t* qh_bytes, int* q) {
    uint32_t qh;
    std::memcpy(&qh, qh_bytes, 4);
    for (int j = 0; j < 32; ++j) q[j] |= static_cast<int>(((qh >> j) & 1u) << 4);
}

int dot32(const int* q, int offset, const int8_t* y) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += (q[j] - offset) * y[j];
    return sum;
}

float dot_legacy(GgmlType type, const std::byte* w, const std::byte* a, int64_t nb) {
    float sum = 0.0f;
    int q[32];
    for (int64_t b = 0; b < nb; ++b) {
        switch (type) {
            case GgmlType::q4_0: {
                const auto x = load<BlockQ4_0>(w, b);
                const auto y = load<BlockQ8_0>(a, b);
                unpack_q4(x.qs, q);
                sum += f16_to_f32(x.d) * f16_to_f32(y.d) * static_cast<float>(dot32(q, 8, y.qs));
                break;
            }
            case GgmlType::q4_1: {
                const auto x = load<BlockQ4_1>(w, b);
                const auto y = load<BlockQ8_1>(a, b);
                unpack_q4(x.qs, q);
                sum += f16_to_f32(x.d) * f16_to_f32(y.d) * static_cast<float>(dot32(q, 0, y.qs)) +
                       f16_to_f32(x.m) * f16_to_f32(y.s);
                break;
            }
            case GgmlType::q5_0: {
                const auto x = load<BlockQ5_0>(w, b);
                const auto y = load<BlockQ8_0>(a, b);
                unpack_q4(x.qs, q);
                add_q5_high_bits(x.qh, q);
                sum += f16_to_f32(x.d) * f16_to_f32(y.d) * static_cast<float>(dot32(q, 16, y.qs));
                break;
            }
            case GgmlType::q5_1: {
                const auto x = load<BlockQ5_1>(w, b);
                const auto y = load<BlockQ8_1>(a, b);
                unpack_q4(x.qs, q);
                add_q5_high_bits(x.qh, q);
                sum += f16_to_f32(x.d) * f16_to_f32(y.d) * static_cast<float>(dot32(q, 0, y.qs)) +
                       f16_to_f32(x.m) * f16_to_f32(y.s);
                break;
            }
            case GgmlType::mxfp4: {
                // ggml_vec_dot_mxfp4_q8_0: the doubled E2M1 values times the Q8_0 values,
                // scaled by 2^(e - 128) * d.
                const auto x = load<BlockMXFP4>(w, b);
                const auto y = load<BlockQ8_0>(a, b);
                int isum = 0;
                for (int j = 0; j < 16; ++j) {
                    isum += kMxfp4Values[x.qs[j] & 0x0F] * y.qs[j] + kMxfp4Values[x.qs[j] >> 4] * y.qs[j + 16];
                }
                sum += mxfp4_half_scale(x.e) * f16_to_f32(y.d) * static_cast<float>(isum);
                break;
            }
            case GgmlType::q8_0: {
                const auto x = load<BlockQ8_0>(w, b);
                const auto y = load<BlockQ8_0>(a, b);
                int isum = 0;
                for (int j = 0; j < 32; ++j) isum += x.qs[j] * y.qs[j];
                sum += f16_to_f32(x.d) * f16_to_f32(y.d) * static_cast<float>(isum);
                break;
            }
            default:
                return 0.0f;
        }
    }
    return sum;
}

float dot_k(GgmlType type, const std::byte* w, size_t block_bytes, const std::byte* a, int64_t nb) {
    float sum = 0.0f;
    KDecoded k;
    for (int64_t b = 0; b < nb; ++b) {
        decode_k_scalar(type, w + b * static_cast<int64_t>(block_bytes), k);
        const auto y = load<BlockQ8_K>(a, b);
        int sumi = 0, corr_sc = 0, corr_m = 0;
        for (int s = 0; s < 16; ++s) {
            int part = 0;
            for (int j = 0; j < 16; ++j) part += k.u[16 * s + j] * y.qs[16 * s + j];
            sumi += k.sc[s] * part;
            corr_sc += k.sc[s] * y.bsums[s];
            corr_m += k.m[s] * y.bsums[s];
        }
        sumi -= k.offset * corr_sc;
        sum += y.d * (k.d * static_cast<float>(sumi) - k.dmin * static_cast<float>(corr_m));
    }
    return sum;
}

float dot_float(GgmlType type, const std::byte* w, const std::byte* a, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        float x = 0.0f, y = 0.0f;
        if (type == GgmlType::f32) {
            std::memcpy(&x, w + i * 4, 4);
            std::memcpy(&y, a + i * 4, 4);
        } else {
            uint16_t xb, yb;
            std::memcpy(&xb, w + i * 2, 2);
            std::memcpy(&yb, a + i * 2, 2);
            x = type == GgmlType::f16 ? f16_to_f32(xb) : bf16_to_f32(xb);
            y = type == GgmlType::f16 ? f16_to_f32(yb) : bf16_to_f32(yb);
        }
        sum += x * y;
    }
    return sum;
}

void decode_k_scales(GgmlType type, const std::byte* block, KDecoded& out) {
    out.offset = 0;
    out.dmin = 0.0f;
    switch (type) {
        case GgmlType::q2_k: {
            BlockQ2_K x;
            std::memcpy(&x, block, sizeof x);
            for (int s = 0; s < 16; ++s) {
                out.sc[s] = static_cast<int16_t>(x.scales[s] & 0x0F);
                out.m[s] = static_cast<int16_t>(x.scales[s] >> 4);
            }
            out.d = f16_to_f32(x.d);
            out.dmin = f16_to_f32(x.dmin);
            return;
        }
        case GgmlType::q3_k: {
            BlockQ3_K x;
            std::memcpy(&x, block, sizeof x);
            int sc[16];
            unpack_q3_k_scales(x.scales, sc);
            for (int s = 0; s < 16; ++s) {
                out.sc[s] = static_cast<int16_t>(sc[s]);
                out.m[s] = 0;
            }
            out.d = f16_to_f32(x.d);
            out.offset = 4;
            return;
        }
        case GgmlType::q4_k:
        case GgmlType::q5_k: {
            // d, dmin and the packed scales sit at the same offsets in both types.
            BlockQ4_K x;
            std::memcpy(&x, block, offsetof(BlockQ4_K, qs));
            int sc[8], m[8];
            unpack_k4_scales(x.scales, sc, m);
            for (int s = 0; s < 16; ++s) {
                out.sc[s] = static_cast<int16_t>(sc[s / 2]);
                out.m[s] = static_cast<int16_t>(m[s / 2]);
            }
            out.d = f16_to_f32(x.d);
            out.dmin = f16_to_f32(x.dmin);
            return;
        }
        case GgmlType::q6_k: {
            BlockQ6_K x;
            std::memcpy(&x, block, sizeof x);
            for (int s = 0; s < 16; ++s) {
                out.sc[s] = x.scales[s];
                out.m[s] = 0;
            }
            out.d = f16_to_f32(x.d);
            out.offset = 32;
            return;
        }
        default:
            return;
    }
}

}  // namespace

void decode_k_scalar(GgmlType type, const std::byte* block, KDecoded& out) {
    decode_k_scales(type, block, out);
    switch (type) {
        case GgmlType::q2_k: {
            BlockQ2_K x;
            std::memcpy(&x, block, sizeof x);
            for (int i = 0; i < QK_K; ++i) {
                const int h = i / 128, k = (i / 32) % 4, j = i % 32;
                out.u[i] = static_cast<uint8_t>((x.qs[32 * h + j] >> (2 * k)) & 3);
            }
            return;
        }
        case GgmlType::q3_k: {
            BlockQ3_K x;
            std::memcpy(&x, block, sizeof x);
            for (int i = 0; i < QK_K; ++i) {
                const int h = i / 128, k = (i / 32) % 4, j = i % 32;
                const int lo = (x.qs[32 * h + j] >> (2 * k)) & 3;
                const int hi = (x.hmask[j] >> (i / 32)) & 1;
                out.u[i] = static_cast<uint8_t>(lo | (hi << 2));
            }
            return;
        }
        case GgmlType::q4_k: {
            BlockQ4_K x;
            std::memcpy(&x, block, sizeof x);
            for (int i = 0; i < QK_K; ++i) {
                const int h = i / 64, k = (i / 32) % 2, j = i % 32;
                out.u[i] = static_cast<uint8_t>((x.qs[32 * h + j] >> (4 * k)) & 0x0F);
            }
            return;
        }
        case GgmlType::q5_k: {
            BlockQ5_K x;
            std::memcpy(&x, block, sizeof x);
            for (int i = 0; i < QK_K; ++i) {
                const int h = i / 64, k = (i / 32) % 2, j = i % 32;
                const int lo = (x.qs[32 * h + j] >> (4 * k)) & 0x0F;
                const int hi = (x.qh[j] >> (i / 32)) & 1;
                out.u[i] = static_cast<uint8_t>(lo | (hi << 4));
            }
            return;
        }
        case GgmlType::q6_k: {
            BlockQ6_K x;
            std::memcpy(&x, block, sizeof x);
            for (int i = 0; i < QK_K; ++i) {
                const int h = i / 128, r = i % 128;
                const int lo = (x.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
                const int hi = (x.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
                out.u[i] = static_cast<uint8_t>(lo | (hi << 4));
            }
            return;
        }
        default:
            return;
    }
}

void dot_rows_scalar(GgmlType type, int64_t n, const std::byte* w, size_t w_stride, int rows, const std::byte* act,
                     size_t act_stride, int tokens, float* dst, size_t dst_stride) {
    const TypeTraits& traits = type_traits(type);
    for (int t = 0; t < tokens; ++t) {
        const std::byte* a = act + static_cast<size_t>(t) * act_stride;
        for (int r = 0; r < rows; ++r) {
            const std::byte* row = w + static_cast<size_t>(r) * w_stride;
            float v = 0.0f;
            switch (type) {
                case GgmlType::f32:
                case GgmlType::f16:
                case GgmlType::bf16:
                    v = dot_float(type, row, a, n);
                    break;
                case GgmlType::q2_k:
                case GgmlType::q3_k:
                case GgmlType::q4_k:
                case GgmlType::q5_k:
                case GgmlType::q6_k:
                    v = dot_k(type, row, traits.type_size, a, n / QK_K);
                    break;
                default:
                    v = dot_legacy(type, row, a, n / kQK);
                    break;
            }
            dst[static_cast<size_t>(t) * dst_stride + static_cast<size_t>(r)] = v;
        }
    }
}

}  // namespace powerhouse::cpu::detail
