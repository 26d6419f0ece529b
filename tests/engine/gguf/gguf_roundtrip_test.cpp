// read(write(x)) == x for the GGUF writer and reader: every value type, arrays of each
// element type, empty and non-ASCII strings, tensors of several types, alignments.
#include <gtest/gtest.h>

#include <numeric>

#include "gguf/gguf_model.h"
#include "gguf/gguf_writer.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

// Deterministic tensor contents: byte i of tensor k is (i * 31 + k * 7) mod 251.
GgufWriter::FillFn pattern_fill() {
    return [](size_t index, const GgufTensorSpec&, std::span<std::byte> out) -> Result<void> {
        for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>((i * 31 + index * 7) % 251);
        return {};
    };
}

void fill_all_value_types(GgufMetadata& m) {
    m.set("u8", GgufValue{uint8_t{200}});
    m.set("i8", GgufValue{int8_t{-100}});
    m.set("u16", GgufValue{uint16_t{60000}});
    m.set("i16", GgufValue{int16_t{-30000}});
    m.set("u32", GgufValue{uint32_t{4000000000u}});
    m.set("i32", GgufValue{int32_t{-2000000000}});
    m.set("f32", GgufValue{1.5e-7f});
    m.set("bool", GgufValue{true});
    m.set_string("string", "Grüße, 世界 🚀");
    m.set_string("empty", "");
    m.set("u64", GgufValue{uint64_t{1} << 63});
    m.set("i64", GgufValue{int64_t{-1} << 62});
    m.set("f64", GgufValue{-2.25});
    m.set_string_array("strings", {"a", "", "<|im_start|>", "\xe2\x96\x81the"});
    m.set_string_array("no_strings", {});
    const std::vector<int32_t> ints = {1, -2, 3, -4, 5};
    m.set_array<int32_t>("ints", GgufValueType::i32, ints);
    const std::vector<float> floats = {0.5f, -0.25f, 1e30f};
    m.set_array<float>("floats", GgufValueType::f32, floats);
    const std::vector<uint8_t> bools = {1, 0, 1};
    m.set_array<uint8_t>("bools", GgufValueType::boolean, bools);
    const std::vector<double> doubles = {};
    m.set_array<double>("no_doubles", GgufValueType::f64, doubles);
}

void expect_same_metadata(const GgufMetadata& a, const GgufMetadata& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a.entries()[i].first, b.entries()[i].first);
        EXPECT_TRUE(values_equal(a.entries()[i].second, b.entries()[i].second))
            << a.entries()[i].first << ": " << describe_value(a.entries()[i].second) << " vs "
            << describe_value(b.entries()[i].second);
    }
}

class GgufRoundTrip : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufRoundTrip, MetadataAndTensorsSurvive) {
    const uint32_t alignment = GetParam();
    GgufWriter writer(alignment);
    fill_all_value_types(writer.metadata());
    ASSERT_TRUE(writer.add_tensor({"f32", GgmlType::f32, {3, 5}}).ok());
    ASSERT_TRUE(writer.add_tensor({"q4k", GgmlType::q4_k, {512, 2}}).ok());
    ASSERT_TRUE(writer.add_tensor({"q8", GgmlType::q8_0, {64, 3, 2}}).ok());
    ASSERT_TRUE(writer.add_tensor({"bf16.4d", GgmlType::bf16, {2, 3, 4, 5}}).ok());

    test::TempDir dir;
    const auto path = dir / "model.gguf";
    Result<void> written = writer.write_file(path, pattern_fill());
    ASSERT_TRUE(written.ok()) << written.error().message;
    EXPECT_FALSE(std::filesystem::exists(dir / "model.gguf.part"));
    EXPECT_EQ(std::filesystem::file_size(path), writer.file_bytes());

    Result<GgufModel> model = GgufModel::open(path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    EXPECT_EQ(model->parts().front().version(), 3u);
    EXPECT_EQ(model->parts().front().alignment(), alignment);
    expect_same_metadata(writer.metadata(), model->metadata());

    ASSERT_EQ(model->tensors().size(), writer.tensors().size());
    Result<std::vector<std::byte>> buffer = writer.write_buffer(pattern_fill());
    ASSERT_TRUE(buffer.ok());
    EXPECT_EQ(test::read_file(path), std::string(reinterpret_cast<const char*>(buffer->data()), buffer->size()));
    for (size_t k = 0; k < writer.tensors().size(); ++k) {
        const GgufTensorSpec& spec = writer.tensors()[k];
        const GgufTensorInfo& t = model->tensors()[k];
        EXPECT_EQ(t.name, spec.name);
        EXPECT_EQ(t.type, spec.type);
        ASSERT_EQ(t.n_dims, spec.dims.size());
        for (size_t d = 0; d < spec.dims.size(); ++d) EXPECT_EQ(t.ne[d], spec.dims[d]);
        EXPECT_EQ(t.n_bytes, spec.n_bytes());
        EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % alignment, 0u) << "data not aligned";
        for (size_t i = 0; i < t.n_bytes; ++i) {
            ASSERT_EQ(t.data[i], static_cast<std::byte>((i * 31 + k * 7) % 251)) << spec.name << " byte " << i;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufRoundTrip, ::testing::Values(32u, 1u, 64u, 4096u));

TEST(GgufWriter, RefusesInvalidTensors) {
    GgufWriter writer;
    EXPECT_FALSE(writer.add_tensor({"", GgmlType::f32, {4}}).ok());
    EXPECT_FALSE(writer.add_tensor({"x", GgmlType::f32, {}}).ok());
    EXPECT_FALSE(writer.add_tensor({"x", GgmlType::f32, {1, 1, 1, 1, 1}}).ok());
    EXPECT_FALSE(writer.add_tensor({"x", GgmlType::f32, {0}}).ok());
    EXPECT_FALSE(writer.add_tensor({"x", GgmlType::q4_0, {48}}).ok());
    ASSERT_TRUE(writer.add_tensor({"x", GgmlType::f32, {4}}).ok());
    EXPECT_FALSE(writer.add_tensor({"x", GgmlType::f16, {4}}).ok());
}

TEST(GgufWriter, FailedFillLeavesNoFile) {
    GgufWriter writer;
    ASSERT_TRUE(writer.add_tensor({"x", GgmlType::f32, {4}}).ok());
    test::TempDir dir;
    Result<void> written = writer.write_file(dir / "m.gguf", [](size_t, const GgufTensorSpec&, std::span<std::byte>) {
        return Result<void>(make_error(ErrorCode::cancelled, "stopped"));
    });
    ASSERT_FALSE(written.ok());
    EXPECT_EQ(written.error().message, "stopped");
    EXPECT_FALSE(std::filesystem::exists(dir / "m.gguf"));
    EXPECT_FALSE(std::filesystem::exists(dir / "m.gguf.part"));
}

TEST(GgufWriter, UnwritableFolderIsAnError) {
    GgufWriter writer;
    Result<void> written = writer.write_file("/nonexistent-folder/m.gguf", pattern_fill());
    ASSERT_FALSE(written.ok());
    EXPECT_EQ(written.error().code, ErrorCode::io);
    EXPECT_NE(written.error().message.find("/nonexistent-folder/m.gguf.part"), std::string::npos);
}

TEST(GgufMetadata, TypedAccessors) {
    GgufWriter writer;
    fill_all_value_types(writer.metadata());
    const GgufMetadata& m = writer.metadata();
    EXPECT_EQ(m.get_uint("u32"), 4000000000u);
    EXPECT_EQ(m.get_uint("i8"), std::nullopt);  // negative
    EXPECT_EQ(m.get_int("i8"), -100);
    EXPECT_EQ(m.get_int("u64"), std::nullopt);  // does not fit int64
    EXPECT_EQ(m.get_float("f32"), static_cast<double>(1.5e-7f));
    EXPECT_EQ(m.get_float("u16"), 60000.0);
    EXPECT_EQ(m.get_string("u16"), std::nullopt);
    EXPECT_EQ(m.get_bool("bool"), true);
    EXPECT_EQ(m.get_array("ints")->to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3, -4, 5}));
    EXPECT_EQ(m.get_array("strings")->strings[2], "<|im_start|>");
    EXPECT_EQ(m.get_array("missing"), nullptr);
    EXPECT_EQ(describe_value(*m.find("strings")), "[\"a\", \"\", \"<|im_start|>\", \"\xe2\x96\x81the\"]");
}

TEST(GgufMetadata, SetReplacesInPlaceAndEraseKeepsOrder) {
    GgufMetadata m;
    m.set_string("a", "1");
    m.set_string("b", "2");
    m.set_string("c", "3");
    m.set_string("a", "one");
    EXPECT_EQ(m.entries()[0].first, "a");
    EXPECT_EQ(m.get_string("a"), "one");
    EXPECT_TRUE(m.erase("b"));
    EXPECT_FALSE(m.erase("b"));
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m.entries()[1].first, "c");
    EXPECT_EQ(m.get_string("c"), "3");
}

}  // namespace
}  // namespace powerhouse
