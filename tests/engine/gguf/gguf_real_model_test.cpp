// Powerhouse's GGUF reader against the reference reader (PyPI `gguf`) on a real model:
// tests/data/gguf/smollm2_index.json was written by
// scripts/fixtures/make_gguf_index_fixture.py from the SmolLM2-135M-Instruct Q4_1 file.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "gguf/gguf_model.h"
#include "powerhouse/model_info.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

std::string hex(const std::byte* p, size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i) out += fmt::format("{:02x}", static_cast<unsigned>(p[i]));
    return out;
}

class RealModel : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        const auto path = test::test_model_path();
        ASSERT_TRUE(std::filesystem::exists(path))
            << path << " is missing: run scripts/fetch-test-model (scripts/test does it)";
        Result<GgufModel> opened = GgufModel::open(path);
        ASSERT_TRUE(opened.ok()) << opened.error().message;
        model_ = new GgufModel(std::move(opened).value());
        fixture_ = new nlohmann::json(nlohmann::json::parse(test::read_file(test::data_dir() / "gguf/smollm2_index.json")));
    }
    static void TearDownTestSuite() {
        delete model_;
        delete fixture_;
    }
    void SetUp() override { ASSERT_NE(model_, nullptr); }

    static GgufModel* model_;
    static nlohmann::json* fixture_;
};
GgufModel* RealModel::model_ = nullptr;
nlohmann::json* RealModel::fixture_ = nullptr;

TEST_F(RealModel, HeaderMatchesReference) {
    const GgufFile& file = model_->parts().front();
    EXPECT_EQ(file.version(), (*fixture_)["version"].get<uint32_t>());
    EXPECT_EQ(file.alignment(), (*fixture_)["alignment"].get<uint32_t>());
    EXPECT_EQ(file.data_offset(), (*fixture_)["data_offset"].get<uint64_t>());
}

TEST_F(RealModel, EveryMetadataValueMatchesReference) {
    const GgufMetadata& meta = model_->metadata();
    const auto& expected = (*fixture_)["metadata"];
    ASSERT_EQ(meta.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
        const auto& e = expected[i];
        const std::string key = e["key"];
        SCOPED_TRACE(key);
        EXPECT_EQ(meta.entries()[i].first, key) << "key order differs";
        const GgufValue* value = meta.find(key);
        ASSERT_NE(value, nullptr);
        ASSERT_EQ(static_cast<int>(value_type(*value)), e["type"].get<int>());
        if (const auto* array = std::get_if<GgufArray>(value)) {
            ASSERT_EQ(static_cast<int>(array->element_type), e["element_type"].get<int>());
            ASSERT_EQ(array->count, e["count"].get<uint64_t>());
            uint64_t h = 0xCBF29CE484222325ull;
            if (array->element_type == GgufValueType::string) {
                for (std::string_view s : array->strings) {
                    const uint64_t n = s.size();
                    h = fnv1a(&n, 8, h);
                    h = fnv1a(s.data(), s.size(), h);
                }
                EXPECT_EQ(array->strings.front(), e["first"][0].get<std::string>());
                EXPECT_EQ(array->strings.back(), e["last"].back().get<std::string>());
            } else {
                h = fnv1a(array->raw, array->count * gguf_value_type_size(array->element_type), h);
            }
            EXPECT_EQ(fmt::format("{:016x}", h), e["fnv1a"].get<std::string>());
        } else if (const auto* s = std::get_if<std::string_view>(value)) {
            EXPECT_EQ(*s, e["value"].get<std::string>());
        } else if (const auto* f = std::get_if<float>(value)) {
            EXPECT_EQ(*f, e["value"].get<float>());
        } else if (const auto* b = std::get_if<bool>(value)) {
            EXPECT_EQ(*b, e["value"].get<bool>());
        } else {
            EXPECT_EQ(meta.get_int(key), e["value"].get<int64_t>());
        }
    }
}

TEST_F(RealModel, EveryTensorMatchesReference) {
    const auto& expected = (*fixture_)["tensors"];
    ASSERT_EQ(model_->tensors().size(), expected.size());
    const std::byte* base = model_->parts().front().tensors().front().data -
                            model_->parts().front().tensors().front().offset -
                            model_->parts().front().data_offset();
    for (size_t i = 0; i < expected.size(); ++i) {
        const auto& e = expected[i];
        const GgufTensorInfo& t = model_->tensors()[i];
        SCOPED_TRACE(e["name"].get<std::string>());
        EXPECT_EQ(t.name, e["name"].get<std::string>());
        EXPECT_EQ(static_cast<uint32_t>(t.type), e["type"].get<uint32_t>());
        // The reference lists the shape in GGUF order, row length first.
        const std::vector<int64_t> shape(t.ne.begin(), t.ne.begin() + t.n_dims);
        EXPECT_EQ(shape, e["shape"].get<std::vector<int64_t>>());
        EXPECT_EQ(static_cast<uint64_t>(t.data - base), e["offset"].get<uint64_t>());
        EXPECT_EQ(t.n_bytes, e["n_bytes"].get<uint64_t>());
        EXPECT_EQ(hex(t.data, 16), e["head"].get<std::string>());
        EXPECT_EQ(hex(t.data + t.n_bytes - 16, 16), e["tail"].get<std::string>());
        EXPECT_EQ(model_->find_tensor(t.name), &t);
    }
}

// The figures issue 2 asks `powerhouse-cli info --json` to report (tests/cli checks the
// JSON itself).
TEST_F(RealModel, ModelInfoReportsTheShape) {
    Result<ModelInfo> info = inspect_model(test::test_model_path());
    ASSERT_TRUE(info.ok()) << info.error().message;
    EXPECT_EQ(info->architecture, "llama");
    EXPECT_EQ(info->n_layer, 30u);
    EXPECT_EQ(info->n_head, 9u);
    EXPECT_EQ(info->n_head_kv, 3u);
    EXPECT_EQ(info->n_embd, 576u);
    EXPECT_EQ(info->n_ff, 1536u);
    EXPECT_EQ(info->n_vocab, 49152u);
    EXPECT_EQ(info->n_ctx_train, 8192u);
    EXPECT_EQ(info->file_type, "Q4_1");
    EXPECT_EQ(info->tokenizer_model, "gpt2");
    EXPECT_EQ(info->tokenizer_pre, "smollm");
    EXPECT_TRUE(info->has_chat_template);
    EXPECT_EQ(info->n_params, 134515008u);
    ASSERT_EQ(info->tensor_types.size(), 3u);
    EXPECT_EQ(info->tensor_types[0].type, "Q4_1");
    EXPECT_EQ(info->tensor_types[0].tensors, 210u);
    // KV cache at 8192: 30 layers * 8192 positions * 3 heads * (64 + 64) * 2 bytes.
    const MemoryEstimate memory = estimate_memory(*info, 8192);
    EXPECT_EQ(memory.kv_cache_bytes, 30ull * 8192 * 3 * 128 * 2);
    EXPECT_EQ(memory.weight_bytes, info->weight_bytes);
}

}  // namespace
}  // namespace powerhouse
