#include "tensor/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace powerhouse {
namespace {

uint32_t bits_of(float f) {
    return std::bit_cast<uint32_t>(f);
}
float float_of(uint32_t b) {
    return std::bit_cast<float>(b);
}

bool is_f16_nan(uint16_t h) {
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}

// The value of a finite f16 computed from its definition, independently of half.cpp.
double f16_value(uint16_t h) {
    const int exp = (h >> 10) & 0x1f;
    const int mant = h & 0x3ff;
    const double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
    return (h & 0x8000) ? -mag : mag;
}

TEST(Half, F16ToF32MatchesDefinitionForEveryValue) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const auto bits = static_cast<uint16_t>(h);
        const float f = f16_to_f32(bits);
        if (is_f16_nan(bits)) {
            ASSERT_TRUE(std::isnan(f)) << std::hex << h;
            // Sign and payload kept, nothing quieted (numpy's conversion).
            EXPECT_EQ(bits_of(f), ((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13)) << std::hex << h;
        } else if ((bits & 0x7c00) == 0x7c00) {
            EXPECT_EQ(f, (h & 0x8000) ? -INFINITY : INFINITY) << std::hex << h;
        } else {
            ASSERT_EQ(static_cast<double>(f), f16_value(bits)) << std::hex << h;
            EXPECT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
        }
    }
}

TEST(Half, F16RoundTripsThroughF32ForEveryValue) {
    // Exact for all 65536 patterns: NaN payloads survive because neither direction quiets
    // a NaN (numpy's rule, which the fixtures follow).
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const auto bits = static_cast<uint16_t>(h);
        ASSERT_EQ(f32_to_f16(f16_to_f32(bits)), bits) << std::hex << h;
    }
}

TEST(Half, F32ToF16RoundsToNearestEven) {
    EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
    EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
    EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
    EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
    // Ties between 1 and its neighbours (ulp 2^-10 there) go to the even mantissa.
    EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // just above the tie
    EXPECT_EQ(f32_to_f16(2049.0f), 0x6800);                     // 2048, ulp 2
    EXPECT_EQ(f32_to_f16(2051.0f), 0x6802);                     // 2052
    // Mantissa carry into the exponent: just under 2, rounds to 2.
    EXPECT_EQ(f32_to_f16(1.99975586f), 0x4000);
    // Subnormals: units of 2^-24.
    EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);
    EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);             // tie -> even (0)
    EXPECT_EQ(f32_to_f16(0x1.000002p-25f), 0x0001);      // above the tie
    EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);         // 1.5 -> 2
    EXPECT_EQ(f32_to_f16(5 * 0x1p-25f), 0x0002);         // 2.5 -> 2
    EXPECT_EQ(f32_to_f16(-7 * 0x1p-25f), 0x8004);        // -3.5 -> -4
    EXPECT_EQ(f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400);  // tie at the top -> min normal
    EXPECT_EQ(f32_to_f16(0x1p-14f - 0x1p-24f), 0x03ff);
    EXPECT_EQ(f32_to_f16(1e-30f), 0x0000);
    EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::denorm_min()), 0x8000);
}

TEST(Half, F32ToF16OverflowsToInfinity) {
    EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
    EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);
    EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // tie with 65536 -> even, which is inf
    EXPECT_EQ(f32_to_f16(-65520.0f), 0xfc00);
    EXPECT_EQ(f32_to_f16(1e9f), 0x7c00);
    EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::max()), 0x7c00);
    EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00);
    EXPECT_EQ(f32_to_f16(-INFINITY), 0xfc00);
}

TEST(Half, F32ToF16NaN) {
    EXPECT_EQ(f32_to_f16(float_of(0x7fc00000)), 0x7e00);
    EXPECT_EQ(f32_to_f16(float_of(0xffc00000)), 0xfe00);
    // Payload bits below f16's 10 are dropped; an empty payload becomes 1, staying NaN.
    EXPECT_EQ(f32_to_f16(float_of(0x7f800001)), 0x7c01);
    EXPECT_EQ(f32_to_f16(float_of(0x7f801fff)), 0x7c01);
    EXPECT_EQ(f32_to_f16(float_of(0x7f802000)), 0x7c01);
    EXPECT_EQ(f32_to_f16(float_of(0x7fbfffff)), 0x7dff);  // signalling stays signalling
}

// For a sweep of f32 patterns, the result is a nearest f16 and, on a tie, the even one.
TEST(Half, F32ToF16IsCorrectlyRoundedOnASweep) {
    for (uint64_t b = 0; b < 0x1'0000'0000ull; b += 9973) {
        const float x = float_of(static_cast<uint32_t>(b));
        if (std::isnan(x) || std::fabs(x) >= 65520.0f) continue;
        const uint16_t h = f32_to_f16(x);
        ASSERT_FALSE((h & 0x7c00) == 0x7c00) << std::hex << b;
        const double err = std::fabs(f16_value(h) - x);
        // Neighbours of h by magnitude (same sign, or zero).
        const uint16_t mag = h & 0x7fff;
        for (int step : {-1, 1}) {
            const int n = mag + step;
            if (n < 0 || n > 0x7bff) continue;
            const auto other = static_cast<uint16_t>((h & 0x8000) | n);
            const double other_err = std::fabs(f16_value(other) - x);
            ASSERT_LE(err, other_err) << std::hex << b;
            if (err == other_err) {
                ASSERT_EQ(h & 1, 0) << "tie not to even: " << std::hex << b;
            }
        }
    }
}

TEST(BFloat16, ExactlyTheTopHalfOfF32) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        ASSERT_EQ(bits_of(bf16_to_f32(static_cast<uint16_t>(h))), h << 16);
    }
}

TEST(BFloat16, RoundTripsExceptSignallingNaNs) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const auto bits = static_cast<uint16_t>(h);
        const bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
        const bool signalling = nan && (h & 0x40) == 0;
        // A signalling NaN comes back quiet (bit 6 set), sign and payload otherwise kept.
        const uint16_t expected = signalling ? static_cast<uint16_t>(bits | 0x40) : bits;
        ASSERT_EQ(f32_to_bf16(bf16_to_f32(bits)), expected) << std::hex << h;
    }
}

TEST(BFloat16, RoundsToNearestEven) {
    EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(f32_to_bf16(float_of(0x3f808000)), 0x3f80);  // tie -> even
    EXPECT_EQ(f32_to_bf16(float_of(0x3f818000)), 0x3f82);  // tie -> even (up)
    EXPECT_EQ(f32_to_bf16(float_of(0x3f808001)), 0x3f81);
    EXPECT_EQ(f32_to_bf16(float_of(0x3f807fff)), 0x3f80);
    EXPECT_EQ(f32_to_bf16(float_of(0x00018000)), 0x0002);  // subnormals round the same way
    EXPECT_EQ(f32_to_bf16(float_of(0x00008000)), 0x0000);
    EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
}

TEST(BFloat16, OverflowAndNaN) {
    EXPECT_EQ(f32_to_bf16(float_of(0x7f7f7fff)), 0x7f7f);
    EXPECT_EQ(f32_to_bf16(float_of(0x7f7f8000)), 0x7f80);  // tie, odd -> up to inf
    EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
    EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::max()), 0xff80);
    EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
    EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
    // NaN: quiet bit forced, top payload bits and sign kept, low bits dropped.
    EXPECT_EQ(f32_to_bf16(float_of(0x7f800001)), 0x7fc0);
    EXPECT_EQ(f32_to_bf16(float_of(0x7f810000)), 0x7fc1);
    EXPECT_EQ(f32_to_bf16(float_of(0x7fffffff)), 0x7fff);
    EXPECT_EQ(f32_to_bf16(float_of(0xff800001)), 0xffc0);
}

TEST(BFloat16, IsCorrectlyRoundedOnASweep) {
    for (uint64_t b = 0; b < 0x1'0000'0000ull; b += 9973) {
        const uint32_t u = static_cast<uint32_t>(b);
        const float x = float_of(u);
        if (std::isnan(x) || std::isinf(x)) continue;
        const uint16_t h = f32_to_bf16(x);
        const uint32_t lo = u & 0xffff0000u;  // truncated, toward zero
        const uint32_t rem = u & 0xffffu;
        const uint32_t expected = (rem > 0x8000 || (rem == 0x8000 && ((lo >> 16) & 1))) ? (lo >> 16) + 1 : lo >> 16;
        ASSERT_EQ(h, expected) << std::hex << u;
    }
}

}  // namespace
}  // namespace powerhouse
