// Files written by the reference writer (PyPI `gguf`, scripts/fixtures/make_gguf_seeds.py)
// read by Powerhouse's reader: every value type, custom alignment, a vocabulary-only file
// and a split model as gguf-split lays it out.
#include <gtest/gtest.h>

#include <cmath>

#include "gguf/gguf_model.h"
#include "support/test_support.h"
#include "tensor/dequantize.h"

namespace powerhouse {
namespace {

std::vector<float> decode(const GgufTensorInfo& t) {
    std::vector<float> out(static_cast<size_t>(t.n_elements));
    for (int64_t r = 0; r < t.n_rows(); ++r) {
        const uint64_t row = t.n_bytes / static_cast<uint64_t>(t.n_rows());
        dequantize_row(t.type, t.data + r * row, out.data() + r * t.ne[0], t.ne[0]);
    }
    return out;
}

class PythonWritten : public ::testing::TestWithParam<const char*> {};

TEST_P(PythonWritten, AllValueTypesAndTensors) {
    Result<GgufModel> model = GgufModel::open(test::data_dir() / "gguf" / GetParam());
    ASSERT_TRUE(model.ok()) << model.error().message;
    const GgufMetadata& m = model->metadata();
    EXPECT_EQ(m.get_string("general.architecture"), "llama");
    EXPECT_EQ(std::get<uint8_t>(*m.find("t.u8")), 200);
    EXPECT_EQ(std::get<int8_t>(*m.find("t.i8")), -100);
    EXPECT_EQ(std::get<uint16_t>(*m.find("t.u16")), 60000);
    EXPECT_EQ(std::get<int16_t>(*m.find("t.i16")), -30000);
    EXPECT_EQ(std::get<uint32_t>(*m.find("t.u32")), 4000000000u);
    EXPECT_EQ(std::get<int32_t>(*m.find("t.i32")), -2000000000);
    EXPECT_EQ(std::get<float>(*m.find("t.f32")), 0.125f);
    EXPECT_EQ(std::get<uint64_t>(*m.find("t.u64")), uint64_t{1} << 63);
    EXPECT_EQ(std::get<int64_t>(*m.find("t.i64")), -(int64_t{1} << 62));
    EXPECT_EQ(std::get<double>(*m.find("t.f64")), -2.25);
    EXPECT_EQ(std::get<bool>(*m.find("t.bool")), true);
    EXPECT_EQ(m.get_string("t.string"), "Grüße, 世界");
    EXPECT_EQ(m.get_array("t.strings")->strings, (std::vector<std::string_view>{"a", "", "<|im_start|>"}));
    EXPECT_EQ(m.get_array("t.ints")->to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3}));
    EXPECT_EQ(m.get_array("t.floats")->to_vector<float>(), (std::vector<float>{0.5f, -0.25f}));
    EXPECT_EQ(m.get_uint("llama.block_count"), 2u);

    ASSERT_EQ(model->tensors().size(), 4u);
    const GgufTensorInfo* f32 = model->find_tensor("f32");
    ASSERT_NE(f32, nullptr);
    EXPECT_EQ(f32->ne[0], 32);
    EXPECT_EQ(f32->ne[1], 2);
    const std::vector<float> f32_values = decode(*f32);
    for (size_t i = 0; i < f32_values.size(); ++i) EXPECT_EQ(f32_values[i], 0.5f * static_cast<float>(i));
    const std::vector<float> f16_values = decode(*model->find_tensor("f16"));
    for (size_t i = 0; i < f16_values.size(); ++i) EXPECT_EQ(f16_values[i], static_cast<float>(i) - 16.0f);
    // Quantized by the reference: decode to within the format's step of the inputs.
    const std::vector<float> q8 = decode(*model->find_tensor("q8_0"));
    for (size_t i = 0; i < q8.size(); ++i) {
        EXPECT_NEAR(q8[i], -1.0f + 2.0f * static_cast<float>(i) / 63.0f, 1.0f / 127.0f);
    }
    const std::vector<float> q4 = decode(*model->find_tensor("q4_0"));
    for (size_t i = 0; i < q4.size(); ++i) {
        EXPECT_NEAR(q4[i], -2.0f + 4.0f * static_cast<float>(i) / 31.0f, 2.0f / 8.0f);
    }
}

INSTANTIATE_TEST_SUITE_P(Files, PythonWritten, ::testing::Values("all_types.gguf", "all_types_align64.gguf"));

TEST(PythonWrittenFiles, CustomAlignmentIsHonoured) {
    Result<GgufModel> model = GgufModel::open(test::data_dir() / "gguf/all_types_align64.gguf");
    ASSERT_TRUE(model.ok()) << model.error().message;
    EXPECT_EQ(model->parts().front().alignment(), 64u);
    for (const GgufTensorInfo& t : model->tensors()) EXPECT_EQ(t.offset % 64, 0u) << t.name;
}

TEST(PythonWrittenFiles, VocabularyOnly) {
    Result<GgufModel> model = GgufModel::open(test::data_dir() / "gguf/vocab_only.gguf");
    ASSERT_TRUE(model.ok()) << model.error().message;
    EXPECT_TRUE(model->tensors().empty());
    EXPECT_EQ(model->metadata().get_array("tokenizer.ggml.tokens")->strings.back(), "Ġthe");
    EXPECT_EQ(model->metadata().get_array("tokenizer.ggml.merges")->strings.front(), "a b");
}

TEST(PythonWrittenFiles, SplitModelFromEveryPart) {
    for (int part = 1; part <= 3; ++part) {
        Result<GgufModel> model = GgufModel::open(split_path(test::data_dir() / "gguf/split/tiny", part, 3));
        ASSERT_TRUE(model.ok()) << model.error().message;
        ASSERT_EQ(model->tensors().size(), 5u);
        EXPECT_EQ(model->metadata().get_uint("llama.block_count"), 5u);
        for (int i = 0; i < 5; ++i) {
            const GgufTensorInfo* t = model->find_tensor("t" + std::to_string(i));
            ASSERT_NE(t, nullptr);
            EXPECT_EQ(t->file_index, static_cast<uint32_t>(i / 2));
            EXPECT_EQ(decode(*t), std::vector<float>(4, static_cast<float>(i)));
        }
    }
}

}  // namespace
}  // namespace powerhouse
