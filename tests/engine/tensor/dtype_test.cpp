#include "tensor/dtype.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "support/test_support.h"
#include "tensor/quant_blocks.h"

namespace powerhouse {
namespace {

struct GgufSize {
    uint32_t id;
    std::string name;
    uint32_t block_size;
    uint32_t type_size;
};

// tests/data/quants/quant_sizes.txt: gguf's GGML_QUANT_SIZES, written by
// scripts/fixtures/make_quant_fixture.py.
std::vector<GgufSize> load_gguf_sizes() {
    std::ifstream in(test::data_dir() / "quants" / "quant_sizes.txt");
    std::vector<GgufSize> sizes;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream fields(line);
        GgufSize s{};
        if (fields >> s.id >> s.name >> s.block_size >> s.type_size)
            sizes.push_back(s);
        else
            ADD_FAILURE() << "bad line in quant_sizes.txt: " << line;
    }
    return sizes;
}

TEST(DType, MatchesGgufQuantSizes) {
    const std::vector<GgufSize> sizes = load_gguf_sizes();
    ASSERT_GE(sizes.size(), 30u) << "quant_sizes.txt missing or short";
    for (const GgufSize& s : sizes) {
        SCOPED_TRACE(s.name);
        const auto traits = type_traits(s.id);
        ASSERT_TRUE(traits.has_value()) << "type id " << s.id << " unknown to dtype.cpp";
        EXPECT_EQ(traits->name, s.name);
        EXPECT_EQ(traits->block_size, s.block_size);
        if (traits->type == GgmlType::q8_1) {
            // Known difference: gguf's table says 40 bytes (two f32 fields, an old layout),
            // ggml's block_q8_1 has two f16 fields, d and d*sum: 2 + 2 + 32 = 36. Q8_1 is
            // only ever an intermediate format, so no file holds it; we follow ggml.
            EXPECT_EQ(s.type_size, 40u) << "gguf changed Q8_1's size: revisit this exception";
            EXPECT_EQ(traits->type_size, 36u);
        } else {
            EXPECT_EQ(traits->type_size, s.type_size);
        }
    }
}

TEST(DType, EveryTypeOfOurTableIsKnownToGguf) {
    std::set<uint32_t> gguf_ids;
    for (const GgufSize& s : load_gguf_sizes()) gguf_ids.insert(s.id);
    for (uint32_t id = 0; id < 256; ++id) {
        if (type_traits(id)) {
            EXPECT_TRUE(gguf_ids.count(id)) << "id " << id << " unknown to gguf";
        }
    }
}

TEST(DType, UnknownIdsHaveNoTraits) {
    for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 42u, 1000u, 0xffffffffu}) {
        EXPECT_FALSE(type_traits(id).has_value()) << id;
    }
}

TEST(DType, ReferenceTypesAreExactlyTheFourteen) {
    const std::set<GgmlType> expected = {GgmlType::f32,  GgmlType::f16,  GgmlType::bf16, GgmlType::q4_0, GgmlType::q4_1,
                                         GgmlType::q5_0, GgmlType::q5_1, GgmlType::q8_0, GgmlType::q2_k, GgmlType::q3_k,
                                         GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k, GgmlType::mxfp4};
    std::set<GgmlType> actual;
    for (uint32_t id = 0; id < 256; ++id) {
        if (auto t = type_traits(id); t && t->has_reference) actual.insert(t->type);
    }
    EXPECT_EQ(actual, expected);
}

TEST(DType, BlockStructsMatchTypeSizes) {
    EXPECT_EQ(sizeof(BlockQ4_0), type_traits(GgmlType::q4_0).type_size);
    EXPECT_EQ(sizeof(BlockQ4_1), type_traits(GgmlType::q4_1).type_size);
    EXPECT_EQ(sizeof(BlockQ5_0), type_traits(GgmlType::q5_0).type_size);
    EXPECT_EQ(sizeof(BlockQ5_1), type_traits(GgmlType::q5_1).type_size);
    EXPECT_EQ(sizeof(BlockQ8_0), type_traits(GgmlType::q8_0).type_size);
    EXPECT_EQ(sizeof(BlockMXFP4), type_traits(GgmlType::mxfp4).type_size);
    EXPECT_EQ(sizeof(BlockQ2_K), type_traits(GgmlType::q2_k).type_size);
    EXPECT_EQ(sizeof(BlockQ3_K), type_traits(GgmlType::q3_k).type_size);
    EXPECT_EQ(sizeof(BlockQ4_K), type_traits(GgmlType::q4_k).type_size);
    EXPECT_EQ(sizeof(BlockQ5_K), type_traits(GgmlType::q5_k).type_size);
    EXPECT_EQ(sizeof(BlockQ6_K), type_traits(GgmlType::q6_k).type_size);
    for (GgmlType t :
         {GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0, GgmlType::q5_1, GgmlType::q8_0, GgmlType::mxfp4}) {
        EXPECT_EQ(type_traits(t).block_size, static_cast<uint32_t>(kQK));
    }
    for (GgmlType t : {GgmlType::q2_k, GgmlType::q3_k, GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k}) {
        EXPECT_EQ(type_traits(t).block_size, static_cast<uint32_t>(QK_K));
    }
}

TEST(DType, LookupByEnumAndName) {
    EXPECT_EQ(type_traits(GgmlType::q4_k).name, "Q4_K");
    EXPECT_EQ(type_traits(GgmlType::bf16).type, GgmlType::bf16);
    EXPECT_EQ(type_from_name("q4_k"), GgmlType::q4_k);
    EXPECT_EQ(type_from_name("Q6_K"), GgmlType::q6_k);
    EXPECT_EQ(type_from_name("bf16"), GgmlType::bf16);
    EXPECT_EQ(type_from_name("IQ4_nl"), GgmlType::iq4_nl);
    EXPECT_FALSE(type_from_name("q4").has_value());
    EXPECT_FALSE(type_from_name("").has_value());
    EXPECT_FALSE(type_from_name("q4_k ").has_value());
}

TEST(DType, RowBytes) {
    EXPECT_EQ(row_bytes(type_traits(GgmlType::f32), 10), 40u);
    EXPECT_EQ(row_bytes(type_traits(GgmlType::q4_0), 4096), 4096u / 32 * 18);
    EXPECT_EQ(row_bytes(type_traits(GgmlType::q6_k), 4096), 16u * 210);
    // No 32-bit overflow on large tensors.
    EXPECT_EQ(row_bytes(type_traits(GgmlType::f16), 3'000'000'000ull), 6'000'000'000ull);
}

}  // namespace
}  // namespace powerhouse
