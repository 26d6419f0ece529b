#include "tensor/half.h"

#include <bit>

namespace powerhouse {
namespace {

constexpr uint32_t kF32SignMask = 0x8000'0000u;
constexpr uint32_t kF32AbsMask = 0x7fff'ffffu;
constexpr uint32_t kF32Inf = 0x7f80'0000u;
constexpr uint16_t kF16Inf = 0x7c00u;

// f32 bit patterns of the f16 boundaries (by magnitude).
constexpr uint32_t kF16OverflowF32 = 0x477f'f000u;    // 65520: halfway to 65536, rounds to inf
constexpr uint32_t kF16MinNormalF32 = 0x3880'0000u;   // 2^-14
constexpr uint32_t kF16HalfMinSubF32 = 0x3300'0000u;  // 2^-25: tie between 0 and 2^-24 -> 0

// f32 and f16 exponent biases differ by 127 - 15.
constexpr uint32_t kRebias = 112u << 23;

}  // namespace

uint16_t f32_to_f16(float value) {
    const uint32_t bits = std::bit_cast<uint32_t>(value);
    const auto sign = static_cast<uint16_t>((bits & kF32SignMask) >> 16);
    const uint32_t abs = bits & kF32AbsMask;

    if (abs > kF32Inf) {
        uint32_t payload = (abs >> 13) & 0x3ffu;
        if (payload == 0) payload = 1;  // the top bits were all zero: keep it a NaN
        return static_cast<uint16_t>(sign | kF16Inf | payload);
    }
    if (abs >= kF16OverflowF32) return static_cast<uint16_t>(sign | kF16Inf);
    if (abs >= kF16MinNormalF32) {
        // Same layout once rebiased; round the 13 dropped mantissa bits to nearest even.
        // A carry out of the mantissa correctly bumps the exponent.
        uint32_t r = abs - kRebias;
        r += 0x0fffu + ((r >> 13) & 1u);
        return static_cast<uint16_t>(sign | (r >> 13));
    }
    if (abs <= kF16HalfMinSubF32) return sign;

    // Subnormal result: the value in units of 2^-24 is mant * 2^(exp - 126), with
    // exp in [102, 112], so a right shift by 14..24 with round-to-nearest-even. A result
    // of 0x400 is the smallest normal, which is also its correct encoding.
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x007f'ffffu) | 0x0080'0000u;
    const uint32_t shift = 126u - exp;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    uint32_t q = mant >> shift;
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
}

float f16_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return std::bit_cast<float>(sign | kF32Inf | (mant << 13));
    if (exp == 0) {
        // Zero or subnormal: mant * 2^-24 is exact in f32.
        const float v = static_cast<float>(mant) * 0x1p-24f;
        return sign ? -v : v;
    }
    return std::bit_cast<float>(sign | ((exp << 23) + kRebias) | (mant << 13));
}

uint16_t f32_to_bf16(float value) {
    uint32_t bits = std::bit_cast<uint32_t>(value);
    if ((bits & kF32AbsMask) > kF32Inf) bits = (bits & 0xffff'0000u) | 0x0040'0000u;
    // Cannot overflow 32 bits: the largest input left here is 0xffff0000 | 0x400000.
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<uint16_t>(bits >> 16);
}

float bf16_to_f32(uint16_t bits) {
    return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

}  // namespace powerhouse
