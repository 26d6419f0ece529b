// A synthetic mixture-of-experts file written to disk: one layer of Qwen3-30B-A3B at its
// real shapes (128 experts of 768 columns, the full 151936-token vocabulary) in Q2_K, the
// smallest mixture (563 MiB; two layers would be 1 GiB). Checked against what the reference
// reader (PyPI `gguf`) read from the same file (tests/data/synth, made by
// scripts/fixtures/make_synth_moe_fixture.py), then loaded by the engine and decoded.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "engine/synth/synth_test_support.h"
#include "powerhouse/generation.h"
#include "powerhouse/model.h"
#include "powerhouse/plan.h"
#include "powerhouse/tokenizer.h"

namespace powerhouse {
namespace {

using namespace synth_test;
using nlohmann::json;

json fixture() {
    std::ifstream in(test::data_dir() / "synth" / "qwen3moe_1layer_q2k.json");
    return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

class SynthMoeFile : public ::testing::Test {
protected:
    // The file of `powerhouse-cli synth --like qwen3-30b-a3b --layers 1 --type q2_k --seed 0`
    // (the fixture's synth_args): the CLI's defaults, pool included, give the same bytes.
    static void SetUpTestSuite() {
        dir_ = new test::TempDir();
        SynthOptions o;
        o.preset = "qwen3-30b-a3b";
        o.type = "q2_k";
        o.n_layer = 1;
        o.seed = 0;
        o.threads = 2;
        o.output = *dir_ / "qwen3moe-1.gguf";
        Result<SynthResult> r = synthesize_model(o);
        ASSERT_TRUE(r.ok()) << r.error().message;
        result_ = new SynthResult(std::move(r).value());
    }
    static void TearDownTestSuite() {
        delete result_;
        delete dir_;  // removes the file
    }
    static inline test::TempDir* dir_ = nullptr;
    static inline SynthResult* result_ = nullptr;
};

// The welcome view plans MoE suggestions from their synth plan: the experts must land where
// read_model_shape() puts them in the written file.
TEST_F(SynthMoeFile, ShapeFromThePlanIsTheShapeOfTheFile) {
    ASSERT_NE(result_, nullptr);
    Result<ModelShape> planned = synth_model_shape(result_->plan);
    ASSERT_TRUE(planned.ok()) << planned.error().message;
    Result<ModelShape> read = read_model_shape(result_->path);
    ASSERT_TRUE(read.ok()) << read.error().message;
    ASSERT_EQ(planned->layers.size(), 1u);
    ASSERT_EQ(read->layers.size(), 1u);
    EXPECT_GT(read->layers[0].experts, 0u);
    EXPECT_EQ(planned->layers[0].experts, read->layers[0].experts);
    EXPECT_EQ(planned->layers[0].replicated, read->layers[0].replicated);
    EXPECT_EQ(planned->layers[0].total(), read->layers[0].total());
    EXPECT_EQ(planned->n_expert, read->n_expert);
    EXPECT_EQ(planned->n_expert_used, read->n_expert_used);
    EXPECT_EQ(planned->n_ff_expert, read->n_ff_expert);
    EXPECT_EQ(planned->weight_bytes(), read->weight_bytes());
}

TEST_F(SynthMoeFile, ReferenceReaderSeesTheSameTensorsAndMetadata) {
    ASSERT_NE(result_, nullptr);
    const json want = fixture();
    ASSERT_FALSE(want.is_discarded());
    EXPECT_EQ(want.at("synth_args"),
              json({"--like", "qwen3-30b-a3b", "--layers", "1", "--type", "q2_k", "--seed", "0"}));
    Result<GgufModel> model = GgufModel::open(result_->path);
    ASSERT_TRUE(model.ok()) << model.error().message;

    // Every tensor, in file order: name, type, shape and size, as gguf read them, and as
    // the plan (the --dry-run figures) says.
    const json& tensors = want.at("tensors");
    ASSERT_EQ(model->tensors().size(), tensors.size());
    ASSERT_EQ(result_->plan.tensors.size(), tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
        const GgufTensorInfo& t = model->tensors()[i];
        const json& w = tensors[i];
        SCOPED_TRACE(w.at("name").get<std::string>());
        EXPECT_EQ(t.name, w.at("name").get<std::string>());
        EXPECT_EQ(type_traits(t.type).name, w.at("type").get<std::string>());
        EXPECT_EQ(t.n_bytes, w.at("n_bytes").get<uint64_t>());
        const std::vector<int64_t> shape = w.at("shape").get<std::vector<int64_t>>();
        ASSERT_EQ(t.n_dims, shape.size());
        for (size_t d = 0; d < shape.size(); ++d) EXPECT_EQ(t.ne[d], shape[d]);
        EXPECT_EQ(result_->plan.tensors[i].name, t.name);
        EXPECT_EQ(result_->plan.tensors[i].bytes, t.n_bytes);
    }
    EXPECT_EQ(fs::file_size(result_->path), result_->plan.file_bytes);

    const GgufMetadata& m = model->metadata();
    for (const auto& [key, value] : want.at("metadata").items()) {
        SCOPED_TRACE(key);
        if (key == "tokenizer.ggml.tokens.count") {
            EXPECT_EQ(string_array(m, "tokenizer.ggml.tokens").size(), value.get<size_t>());
        } else if (value.is_string()) {
            EXPECT_EQ(m.get_string(key), value.get<std::string>());
        } else if (value.is_number_float()) {
            EXPECT_EQ(static_cast<float>(m.get_float(key).value_or(-1)), value.get<float>());
        } else {
            EXPECT_EQ(m.get_uint(key), value.get<uint64_t>());
        }
    }
}

// Rows picked by (expert, row) from the 3-D expert tensors and the router, dequantized by
// gguf: both readers agree on how the experts are laid out, and on the values.
TEST_F(SynthMoeFile, ExpertRowsDecodeAsTheReferenceDecodesThem) {
    ASSERT_NE(result_, nullptr);
    const json want = fixture();
    ASSERT_FALSE(want.is_discarded());
    Result<GgufModel> model = GgufModel::open(result_->path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    for (const json& s : want.at("samples")) {
        const std::string name = s.at("tensor").get<std::string>();
        const int64_t expert = s.at("expert").get<int64_t>();
        const int64_t row = s.at("row").get<int64_t>();
        SCOPED_TRACE(name + " expert " + std::to_string(expert) + " row " + std::to_string(row));
        const GgufTensorInfo* t = model->find_tensor(name);
        ASSERT_NE(t, nullptr);
        const int64_t rows_per_expert = t->n_dims == 3 ? t->ne[1] : t->n_rows();
        const int64_t index = expert * rows_per_expert + row;  // [n_expert][rows][ne[0]]
        ASSERT_LT(index, t->n_rows());
        const uint64_t stride = t->n_bytes / static_cast<uint64_t>(t->n_rows());
        std::vector<float> values(static_cast<size_t>(t->ne[0]));
        dequantize_row(t->type, t->data + static_cast<uint64_t>(index) * stride, values.data(), t->ne[0]);
        const std::vector<double> first = s.at("first").get<std::vector<double>>();
        for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(values[i], static_cast<float>(first[i])) << i;
        double sum = 0;
        double sum2 = 0;
        for (float v : values) {
            sum += v;
            sum2 += static_cast<double>(v) * v;
        }
        EXPECT_NEAR(sum, s.at("sum").get<double>(), 1e-6 * (1 + std::abs(s.at("sum").get<double>())));
        EXPECT_NEAR(sum2, s.at("sum_squares").get<double>(), 1e-6 * s.at("sum_squares").get<double>());
        EXPECT_GT(sum2, 0.0);
    }
}

// The engine loads it as a Qwen3-MoE model (router, softmax over 128 experts, top 8) and
// decodes: logits over the whole vocabulary, finite and spread out.
// The file on the CPU with a short context.
Result<Model> load_on_cpu(const std::filesystem::path& path) {
    ModelOptions options;
    options.devices = "cpu";
    options.n_ctx = 64;
    options.n_threads = 2;
    return Model::load(path, options);
}

TEST_F(SynthMoeFile, LoadsInTheEngineAndDecodesFiniteLogits) {
    ASSERT_NE(result_, nullptr);
    Result<Model> loaded = load_on_cpu(result_->path);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    Model& model = *loaded;
    EXPECT_EQ(model.architecture(), "qwen3moe");
    ASSERT_EQ(model.n_vocab(), 151936u);

    const std::vector<TokenId> prompt = {9707, 11, 1879, 0, 151644};  // arbitrary ids, a special one last
    std::vector<float> first;
    for (TokenId token : prompt) {
        Result<std::span<const float>> logits = model.decode(std::span<const TokenId>(&token, 1));
        ASSERT_TRUE(logits.ok()) << logits.error().message;
        ASSERT_EQ(logits->size(), 151936u);
        double sum = 0;
        double sum2 = 0;
        bool finite = true;
        for (float v : *logits) {
            finite = finite && std::isfinite(v);
            sum += v;
            sum2 += static_cast<double>(v) * v;
        }
        ASSERT_TRUE(finite) << "token " << token;
        const double mean = sum / static_cast<double>(logits->size());
        EXPECT_GT(sum2 / static_cast<double>(logits->size()) - mean * mean, 1e-6) << "constant logits";
        if (first.empty()) {
            first.assign(logits->begin(), logits->end());
        } else {
            EXPECT_NE(std::vector<float>(logits->begin(), logits->end()), first) << "the input makes no difference";
        }
    }
    // Greedy steps on top: every id in the vocabulary.
    TokenId next = prompt.back();
    for (int step = 0; step < 3; ++step) {
        Result<TokenId> id = model.decode_argmax(std::span<const TokenId>(&next, 1));
        ASSERT_TRUE(id.ok()) << id.error().message;
        ASSERT_LT(static_cast<uint32_t>(*id), 151936u);
        next = *id;
    }
}

// Qwen3's template (the synth file carries it) sees the caller's template variables: turning
// thinking off writes the empty think block, and the prompt no longer opens one.
TEST_F(SynthMoeFile, TemplateVariablesReachTheChatTemplate) {
    ASSERT_NE(result_, nullptr);
    Result<Model> model = load_on_cpu(result_->path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    EXPECT_TRUE(model->summary().has_thinking_switch);
    EXPECT_FALSE(model->summary().has_reasoning_effort);
    EXPECT_EQ(model->summary().tool_format, ToolCallFormat::generic);  // the synth template has no tools
    const std::vector<ChatMessage> hi = {{"user", "Hi"}};
    const auto text_of = [&](const nlohmann::ordered_json& variables) {
        Result<std::vector<TokenId>> ids = chat_prompt(*model, hi, {}, variables);
        EXPECT_TRUE(ids.ok()) << ids.error().message;
        return ids.ok() ? model->tokenizer().detokenize(*ids, true) : std::string();
    };
    EXPECT_TRUE(text_of({}).ends_with("<|im_start|>assistant\n"));
    EXPECT_TRUE(text_of({{"enable_thinking", false}}).ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    EXPECT_TRUE(text_of({{"enable_thinking", true}}).ends_with("<|im_start|>assistant\n"));
    // What the conversation sets cannot be given, and variables are an object.
    for (const nlohmann::ordered_json& bad :
         {nlohmann::ordered_json{{"messages", nlohmann::ordered_json::array()}},
          nlohmann::ordered_json{{"add_generation_prompt", false}}, nlohmann::ordered_json::array({1})}) {
        Result<std::vector<TokenId>> refused = chat_prompt(*model, hi, {}, bad);
        ASSERT_FALSE(refused.ok()) << bad.dump();
        EXPECT_NE(refused.error().message.find("variable"), std::string::npos) << refused.error().message;
    }
}

// The planner reads the file as a mixture of experts and splits it by whole experts.
TEST_F(SynthMoeFile, PlannerSplitsItsExperts) {
    ASSERT_NE(result_, nullptr);
    Result<ModelShape> shape = read_model_shape(result_->path);
    ASSERT_TRUE(shape.ok()) << shape.error().message;
    EXPECT_EQ(shape->architecture, "qwen3moe");
    EXPECT_EQ(shape->n_layer, 1u);
    EXPECT_EQ(shape->n_expert, 128u);
    EXPECT_EQ(shape->n_expert_used, 8u);
    EXPECT_EQ(shape->n_ff_expert, 768u);
    // The weights are the file less its header (metadata and vocabulary).
    EXPECT_LE(shape->weight_bytes(), result_->plan.file_bytes);
    EXPECT_GT(shape->weight_bytes(), result_->plan.file_bytes - (uint64_t{16} << 20));

    // Two CPU devices of 8 GiB (the CUDA backend runs no experts yet).
    std::vector<DeviceDesc> devices(2);
    for (DeviceDesc& d : devices) {
        d.name = "CPU";
        d.kind = DeviceKind::cpu;
        d.total_bytes = d.free_bytes = uint64_t{8} << 30;
    }
    PlanOptions options;
    options.mode = SplitMode::tensor;
    options.n_ctx = 1024;
    Result<DevicePlan> plan = plan_devices(*shape, devices, options);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    ASSERT_EQ(plan->devices.size(), 2u);
    EXPECT_EQ(plan->devices[0].expert_begin, 0u);
    EXPECT_EQ(plan->devices[0].expert_end, plan->devices[1].expert_begin);
    EXPECT_EQ(plan->devices[1].expert_end, 128u);
}

}  // namespace
}  // namespace powerhouse
