// Synthetic models written to disk and read back: shapes, weight statistics, determinism,
// overwrite and cancel.
#include <gtest/gtest.h>

#include <tuple>

#include "engine/synth/synth_test_support.h"
#include "powerhouse/plan.h"

namespace powerhouse {
namespace {

using namespace synth_test;



// The files are written once for the whole suite: a vocabulary takes a moment in Debug.
class SynthFile : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir();
        SynthOptions o = small_options("smollm2-135m", "q4_k_m", 2, *dir_ / "smol2.gguf");
        o.threads = 1;
        Result<SynthResult> r = synthesize_model(o, [](const SynthProgress& p) {
            progress_->push_back(p);
            return true;
        });
        ASSERT_TRUE(r.ok()) << r.error().message;
        smol2_ = new SynthResult(std::move(r).value());
        o.threads = 3;  // the same file, written with more threads
        o.output = *dir_ / "smol2-threads.gguf";
        ASSERT_TRUE(synthesize_model(o).ok());
        o.seed = 8;
        o.output = *dir_ / "smol2-seed8.gguf";
        ASSERT_TRUE(synthesize_model(o).ok());
        o.seed = 7;
        o.n_layer = 1;
        o.output = *dir_ / "smol1.gguf";
        ASSERT_TRUE(synthesize_model(o).ok());
    }
    static void TearDownTestSuite() {
        delete smol2_;
        delete dir_;
        progress_->clear();
    }
    static fs::path path(const std::string& name) { return *dir_ / name; }

    static inline test::TempDir* dir_ = nullptr;
    static inline SynthResult* smol2_ = nullptr;
    static inline std::vector<SynthProgress>* progress_ = new std::vector<SynthProgress>();
};


TEST_F(SynthFile, ReadsBackWithThePresetsShapes) {
    ASSERT_NE(smol2_, nullptr);
    const fs::path file = path("smol2.gguf");
    EXPECT_EQ(fs::file_size(file), smol2_->plan.file_bytes);
    EXPECT_FALSE(fs::exists(path("smol2.gguf.part")));
    ASSERT_FALSE(progress_->empty());
    EXPECT_EQ(progress_->back().bytes_done, progress_->back().bytes_total);
    EXPECT_EQ(progress_->back().bytes_total, smol2_->plan.file_bytes);
    for (size_t i = 1; i < progress_->size(); ++i)
        EXPECT_GE((*progress_)[i].bytes_done, (*progress_)[i - 1].bytes_done);

    Result<ModelInfo> info = inspect_model(file);
    ASSERT_TRUE(info.ok()) << info.error().message;
    EXPECT_EQ(info->architecture, "llama");
    EXPECT_EQ(info->name, "SmolLM2 135M Instruct (synthetic, 2 of 30 layers)");
    EXPECT_EQ(info->file_type, "Q4_K_M");
    EXPECT_EQ(info->n_layer, 2u);
    EXPECT_EQ(info->n_embd, 576u);
    EXPECT_EQ(info->n_ff, 1536u);
    EXPECT_EQ(info->n_head, 9u);
    EXPECT_EQ(info->n_head_kv, 3u);
    EXPECT_EQ(info->head_dim_k, 64u);
    EXPECT_EQ(info->n_ctx_train, 8192u);
    EXPECT_EQ(info->n_vocab, 49152u);
    EXPECT_EQ(info->tokenizer_model, "gpt2");
    EXPECT_EQ(info->tokenizer_pre, "smollm");
    EXPECT_TRUE(info->has_chat_template);
    EXPECT_EQ(info->n_tensors, 1u + 2 * 9 + 1);
    EXPECT_EQ(info->n_params, smol2_->plan.n_params);

    Result<GgufModel> model = GgufModel::open(file);
    ASSERT_TRUE(model.ok()) << model.error().message;
    const SynthPlan& plan = smol2_->plan;
    ASSERT_EQ(model->tensors().size(), plan.tensors.size());
    const Tensors expected = tensors_of("smollm2-135m", "q4_k_m", 2);
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
        const GgufTensorInfo& t = model->tensors()[i];
        const SynthTensor& planned = plan.tensors[i];
        SCOPED_TRACE(planned.name);
        EXPECT_EQ(t.name, planned.name);
        EXPECT_EQ(type_traits(t.type).name, planned.type);
        EXPECT_EQ(planned.type, expected.type_of(planned.name));
        ASSERT_EQ(t.n_dims, planned.dims.size());
        for (size_t d = 0; d < planned.dims.size(); ++d) EXPECT_EQ(t.ne[d], planned.dims[d]);
    }
}


// The welcome view plans models that are not downloaded from their synth plan: that shape
// must be the one read_model_shape() finds in the written file, byte for byte.
void expect_same_shape(const ModelShape& planned, const ModelShape& read) {
    EXPECT_EQ(planned.architecture, read.architecture);
    EXPECT_EQ(planned.n_layer, read.n_layer);
    EXPECT_EQ(planned.n_head, read.n_head);
    EXPECT_EQ(planned.n_head_kv, read.n_head_kv);
    EXPECT_EQ(planned.head_dim, read.head_dim);
    EXPECT_EQ(planned.n_embd, read.n_embd);
    EXPECT_EQ(planned.n_ff, read.n_ff);
    EXPECT_EQ(planned.n_vocab, read.n_vocab);
    EXPECT_EQ(planned.n_expert, read.n_expert);
    EXPECT_EQ(planned.n_expert_used, read.n_expert_used);
    EXPECT_EQ(planned.n_ff_expert, read.n_ff_expert);
    EXPECT_EQ(planned.tied_output, read.tied_output);
    EXPECT_EQ(planned.embedding_bytes, read.embedding_bytes);
    EXPECT_EQ(planned.output_bytes, read.output_bytes);
    ASSERT_EQ(planned.layers.size(), read.layers.size());
    for (size_t i = 0; i < read.layers.size(); ++i) {
        const LayerWeights& a = planned.layers[i];
        const LayerWeights& b = read.layers[i];
        EXPECT_EQ(std::tie(a.q, a.k, a.v, a.o, a.gate, a.up, a.down, a.experts, a.replicated, a.ff_block, a.o_block),
                  std::tie(b.q, b.k, b.v, b.o, b.gate, b.up, b.down, b.experts, b.replicated, b.ff_block, b.o_block))
            << "layer " << i;
    }
    EXPECT_EQ(planned.weight_bytes(), read.weight_bytes());
}

TEST_F(SynthFile, ShapeFromThePlanIsTheShapeOfTheFile) {
    ASSERT_NE(smol2_, nullptr);
    Result<ModelShape> planned = synth_model_shape(smol2_->plan);
    ASSERT_TRUE(planned.ok()) << planned.error().message;
    Result<ModelShape> read = read_model_shape(path("smol2.gguf"));
    ASSERT_TRUE(read.ok()) << read.error().message;
    expect_same_shape(*planned, *read);
    EXPECT_GT(read->weight_bytes(), 0u);
}

TEST_F(SynthFile, WeightsAreFiniteAndSizedLikeAnInitialisation) {
    Result<GgufModel> model = GgufModel::open(path("smol2.gguf"));
    ASSERT_TRUE(model.ok());
    for (const GgufTensorInfo& t : model->tensors()) {
        SCOPED_TRACE(std::string(t.name));
        const Stats s = tensor_stats(t, 64);
        EXPECT_TRUE(s.finite);
        if (t.name.find("norm") != std::string_view::npos) {
            EXPECT_NEAR(s.mean, 1.0, 0.05);
            EXPECT_GT(s.std, 0.05);
            EXPECT_LT(s.std, 0.15);
        } else {
            EXPECT_NEAR(s.mean, 0.0, 0.003);
            EXPECT_GT(s.std, 0.016);
            EXPECT_LT(s.std, 0.024);
        }
    }
}


TEST_F(SynthFile, VocabularyIsAWorkingTokenizer) {
    Result<GgufModel> model = GgufModel::open(path("smol2.gguf"));
    ASSERT_TRUE(model.ok());
    const GgufMetadata& m = model->metadata();
    const Vocab v = vocab_of(m);
    check_bpe_vocab(m, v, 49152);
    EXPECT_EQ(v.merges.size(), 49152u - 17 - 256);
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.bos_token_id"), "<|im_start|>");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.eos_token_id"), "<|im_end|>");
    EXPECT_EQ(m.get_uint("tokenizer.ggml.eos_token_id"), 2u);
    EXPECT_EQ(v.types[1], 3);  // <|im_start|>: CONTROL
    EXPECT_EQ(m.get_bool("tokenizer.ggml.add_bos_token"), false);
    EXPECT_NE(m.get_string("tokenizer.chat_template")->find("SmolLM"), std::string_view::npos);
}


TEST_F(SynthFile, SameSeedSameBytesDifferentSeedDifferentWeights) {
    const std::string a = test::read_file(path("smol2.gguf"));
    EXPECT_EQ(a, test::read_file(path("smol2-threads.gguf")));  // the thread count does not matter
    Result<GgufModel> ma = GgufModel::open(path("smol2.gguf"));
    Result<GgufModel> mc = GgufModel::open(path("smol2-seed8.gguf"));
    ASSERT_TRUE(ma.ok() && mc.ok());
    ASSERT_EQ(ma->tensors().size(), mc->tensors().size());
    for (size_t i = 0; i < ma->tensors().size(); ++i) {
        const GgufTensorInfo& ta = ma->tensors()[i];
        const GgufTensorInfo& tc = mc->tensors()[i];
        EXPECT_EQ(ta.name, tc.name);
        ASSERT_EQ(ta.n_bytes, tc.n_bytes);
        EXPECT_NE(std::memcmp(ta.data, tc.data, ta.n_bytes), 0) << ta.name;
    }
    // The tokenizer does not depend on the seed.
    EXPECT_EQ(string_array(ma->metadata(), "tokenizer.ggml.merges"),
              string_array(mc->metadata(), "tokenizer.ggml.merges"));
}


TEST_F(SynthFile, LayerCountDoesNotChangeTheSharedTensors) {
    Result<GgufModel> one = GgufModel::open(path("smol1.gguf"));
    Result<GgufModel> two = GgufModel::open(path("smol2.gguf"));
    ASSERT_TRUE(one.ok() && two.ok());
    for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_norm.weight"}) {
        const GgufTensorInfo* a = one->find_tensor(name);
        const GgufTensorInfo* b = two->find_tensor(name);
        ASSERT_TRUE(a && b) << name;
        ASSERT_EQ(a->n_bytes, b->n_bytes);
        EXPECT_EQ(std::memcmp(a->data, b->data, a->n_bytes), 0) << name;
    }
}


TEST_F(SynthFile, RefusesToOverwriteAndCancelsCleanly) {
    const fs::path file = path("precious.gguf");
    test::write_file(file, "precious");
    Result<SynthResult> refused = synthesize_model(small_options("smollm2-135m", "q8_0", 1, file));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::invalid_argument);
    EXPECT_EQ(test::read_file(file), "precious");

    SynthOptions o = small_options("smollm2-135m", "q8_0", 1, file);
    o.overwrite = true;
    int calls = 0;
    Result<SynthResult> cancelled = synthesize_model(o, [&calls](const SynthProgress&) { return ++calls < 3; });
    ASSERT_FALSE(cancelled.ok());
    EXPECT_EQ(cancelled.error().code, ErrorCode::cancelled);
    EXPECT_EQ(test::read_file(file), "precious");
    EXPECT_FALSE(fs::exists(path("precious.gguf.part")));

    o.output.clear();
    EXPECT_EQ(synthesize_model(o).error().code, ErrorCode::invalid_argument);
}


TEST_F(SynthFile, PooledTensorsHaveDistinctRows) {
    Result<GgufModel> model = GgufModel::open(path("smol2.gguf"));
    ASSERT_TRUE(model.ok());
    // Pooled (more than 4096 weights): Q8_0 rows of 18 blocks from a pool of 128, Q4_K rows
    // of 6 super-blocks from a pool of 16.
    for (const char* name : {"token_embd.weight", "blk.0.ffn_down.weight", "blk.0.ffn_gate.weight"}) {
        SCOPED_TRACE(name);
        const GgufTensorInfo* t = model->find_tensor(name);
        ASSERT_NE(t, nullptr);
        const uint64_t stride = t->n_bytes / static_cast<uint64_t>(t->n_rows());
        std::set<std::string> rows;
        for (int64_t r = 0; r < 64; ++r) rows.emplace(reinterpret_cast<const char*>(t->data + r * stride), stride);
        EXPECT_EQ(rows.size(), 64u);
    }
    EXPECT_EQ(model->find_tensor("blk.0.ffn_down.weight")->type, GgmlType::q4_k);
}

}  // namespace
}  // namespace powerhouse
