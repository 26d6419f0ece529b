#include "tensor/dequantize.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <iomanip>
#include <set>
#include <sstream>

#include "engine/tensor/quant_fixture.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace powerhouse {
namespace {

// Compares bit patterns (so NaN payloads and the sign of zero count), naming the first
// element that differs.
::testing::AssertionResult same_bits(const std::vector<float>& expected, const std::vector<float>& actual) {
    if (expected.size() != actual.size()) {
        return ::testing::AssertionFailure() << "sizes differ: " << expected.size() << " vs " << actual.size();
    }
    if (std::memcmp(expected.data(), actual.data(), expected.size() * sizeof(float)) == 0) {
        return ::testing::AssertionSuccess();
    }
    for (size_t i = 0; i < expected.size(); ++i) {
        const auto e = std::bit_cast<uint32_t>(expected[i]);
        const auto a = std::bit_cast<uint32_t>(actual[i]);
        if (e != a) {
            std::ostringstream msg;
            msg << "first mismatch at element " << i << ": expected " << expected[i] << " (0x" << std::hex
                << std::setw(8) << std::setfill('0') << e << "), got " << std::dec << actual[i] << " (0x" << std::hex
                << std::setw(8) << a << ")";
            return ::testing::AssertionFailure() << msg.str();
        }
    }
    return ::testing::AssertionSuccess();
}

TEST(Dequantize, MatchesGgufFixtureBitForBit) {
    const auto records = test::load_quant_fixture("dequantize.bin");
    ASSERT_FALSE(records.empty());
    std::set<GgmlType> covered;
    for (const test::QuantRecord& rec : records) {
        SCOPED_TRACE(rec.describe());
        const auto traits = type_traits(rec.type_id);
        ASSERT_TRUE(traits && traits->has_reference);
        const auto n = static_cast<int64_t>(rec.values.size());
        ASSERT_EQ(n % traits->block_size, 0);
        ASSERT_EQ(rec.data.size(), row_bytes(*traits, static_cast<uint64_t>(n)));
        std::vector<float> out(rec.values.size(), -12345.0f);
        dequantize_row(traits->type, rec.data.data(), out.data(), n);
        EXPECT_TRUE(same_bits(rec.values, out));
        covered.insert(traits->type);
    }
    EXPECT_EQ(covered.size(), 14u) << "the fixture should cover every type with a reference";
}

TEST(Dequantize, AnySourceAlignment) {
    // Blocks inside files or buffers need not be aligned to their f16 fields.
    const auto records = test::load_quant_fixture("dequantize.bin");
    for (const test::QuantRecord& rec : records) {
        SCOPED_TRACE(rec.describe());
        const auto traits = type_traits(rec.type_id);
        ASSERT_TRUE(traits);
        std::vector<uint8_t> shifted(rec.data.size() + 1);
        std::memcpy(shifted.data() + 1, rec.data.data(), rec.data.size());
        std::vector<float> out(rec.values.size());
        dequantize_row(traits->type, shifted.data() + 1, out.data(), static_cast<int64_t>(out.size()));
        EXPECT_TRUE(same_bits(rec.values, out));
    }
}

TEST(Dequantize, EmptyRowWritesNothing) {
    float sentinel = 7.0f;
    dequantize_row(GgmlType::q4_k, nullptr, &sentinel, 0);
    EXPECT_EQ(sentinel, 7.0f);
}

// Hand-built blocks that pin down the layouts as quant_blocks.h documents them, so a
// failure here points at the documented bit positions rather than at a fixture.

TEST(Dequantize, Q4_0Layout) {
    BlockQ4_0 b{};
    b.d = f32_to_f16(0.5f);
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    float out[32];
    dequantize_row(GgmlType::q4_0, &b, out, 32);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(out[j], 0.5f * (j - 8)) << j;
        EXPECT_EQ(out[j + 16], 0.5f * (7 - j)) << j;
    }
}

TEST(Dequantize, Mxfp4Layout) {
    BlockMXFP4 b{};
    b.e = 127;  // d = 2^-1: code values (doubled E2M1) times one half
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    float out[32];
    dequantize_row(GgmlType::mxfp4, &b, out, 32);
    const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(std::bit_cast<uint32_t>(out[j]), std::bit_cast<uint32_t>(e2m1[j])) << j;
        EXPECT_EQ(std::bit_cast<uint32_t>(out[j + 16]), std::bit_cast<uint32_t>(e2m1[15 - j])) << j;
    }
    EXPECT_EQ(mxfp4_half_scale(0), 0x1p-128f);
    EXPECT_EQ(mxfp4_half_scale(1), 0x1p-127f);
    EXPECT_EQ(mxfp4_half_scale(2), 0x1p-126f);
    EXPECT_EQ(mxfp4_half_scale(128), 1.0f);
    EXPECT_EQ(mxfp4_half_scale(255), 0x1p127f);
}

TEST(Dequantize, Q5_1Layout) {
    BlockQ5_1 b{};
    b.d = f32_to_f16(2.0f);
    b.m = f32_to_f16(-1.0f);
    const uint32_t qh = 0x8000'0001u;  // fifth bit of elements 0 and 31
    std::memcpy(b.qh, &qh, 4);
    b.qs[0] = 0x21;   // element 0: 1, element 16: 2
    b.qs[15] = 0xf0;  // element 15: 0, element 31: 15
    float out[32];
    dequantize_row(GgmlType::q5_1, &b, out, 32);
    EXPECT_EQ(out[0], 2.0f * 17 - 1.0f);
    EXPECT_EQ(out[16], 2.0f * 2 - 1.0f);
    EXPECT_EQ(out[15], -1.0f);
    EXPECT_EQ(out[31], 2.0f * 31 - 1.0f);
    EXPECT_EQ(out[1], -1.0f);
}

TEST(Dequantize, Q4_KLayout) {
    BlockQ4_K b{};
    b.d = f32_to_f16(1.0f);
    b.dmin = f32_to_f16(0.5f);
    int sc[8] = {1, 2, 3, 4, 63, 40, 17, 33};
    int m[8] = {0, 1, 2, 3, 62, 50, 16, 48};
    pack_k4_scales(sc, m, b.scales);
    int sc2[8];
    int m2[8];
    unpack_k4_scales(b.scales, sc2, m2);
    for (int s = 0; s < 8; ++s) {
        EXPECT_EQ(sc2[s], sc[s]);
        EXPECT_EQ(m2[s], m[s]);
    }
    // Element 32*s + j sits in nibble s % 2 of qs[32 * (s / 2) + j]; give element i the
    // level (i / 32 + i) % 16.
    for (int i = 0; i < QK_K; ++i) {
        const int s = i / 32;
        const int j = i % 32;
        b.qs[32 * (s / 2) + j] |= static_cast<uint8_t>(((s + i) % 16) << (4 * (s % 2)));
    }
    float out[QK_K];
    dequantize_row(GgmlType::q4_k, &b, out, QK_K);
    for (int i = 0; i < QK_K; ++i) {
        const int s = i / 32;
        EXPECT_EQ(out[i],
                  static_cast<float>(sc[s]) * static_cast<float>((s + i) % 16) - 0.5f * static_cast<float>(m[s]))
            << i;
    }
}

TEST(Dequantize, Q3_KScalesRoundTripThroughPacking) {
    int sc[16];
    for (int i = 0; i < 16; ++i) sc[i] = (i * 13) % 64 - 32;
    uint8_t packed[12];
    pack_q3_k_scales(sc, packed);
    int back[16];
    unpack_q3_k_scales(packed, back);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(back[i], sc[i]) << i;
}

TEST(Dequantize, Q6_KLayout) {
    BlockQ6_K b{};
    b.d = f32_to_f16(0.25f);
    for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s % 2 ? -s : s);
    // Level of element i: i % 64; low nibble in ql, high two bits in qh (see the header).
    for (int i = 0; i < QK_K; ++i) {
        const int h = i / 128;
        const int r = i % 128;
        const int u = i % 64;
        b.ql[64 * h + r % 64] |= static_cast<uint8_t>((u & 0xF) << (4 * (r / 64)));
        b.qh[32 * h + r % 32] |= static_cast<uint8_t>((u >> 4) << (2 * (r / 32)));
    }
    float out[QK_K];
    dequantize_row(GgmlType::q6_k, &b, out, QK_K);
    for (int i = 0; i < QK_K; ++i) {
        const float dl = 0.25f * static_cast<float>(b.scales[i / 16]);
        EXPECT_EQ(out[i], dl * static_cast<float>(i % 64 - 32)) << i;
    }
}

}  // namespace
}  // namespace powerhouse
