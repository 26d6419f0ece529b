// Synthetic gpt-oss models, checked without writing files: the presets' shapes (OpenAI's
// published config.json for gpt-oss-20b and gpt-oss-120b), their tensors as llama.cpp's
// converter and the engine's gpt-oss reader (arch/gpt_oss.cpp) name them, their metadata
// and o200k_harmony vocabulary, the mxfp4_moe mixture, and the planned sizes of the
// full-size files against the published ggml-org GGUFs. (The types of every tensor under
// every file type are checked against llama.cpp itself in synth_quant_types_test.cpp.)
//
// No file is written here: the smallest one-layer gpt-oss-20b is about 1.4 GB (q2_k or
// q4_0: its 201088 x 2880 output matrix alone is 615 MB in Q8_0, since 2880 is not a
// multiple of 256), above what the test suite writes to disk.
#include <gtest/gtest.h>

#include "engine/synth/synth_test_support.h"
#include "powerhouse/tokenizer.h"

namespace powerhouse {

// From tokenizer/tokenizer_impl.h, whose Vocab would clash with the synth tests' one.
Result<Tokenizer> tokenizer_from_metadata(const GgufMetadata& metadata);

namespace {

using namespace synth_test;

std::string blk(int layer, const char* name) {
    return "blk." + std::to_string(layer) + "." + name;
}

TEST(SynthGptOssPresets, HaveTheRealShapes) {
    for (const char* name : {"gpt-oss-20b", "gpt-oss-120b"}) {
        SCOPED_TRACE(name);
        const SynthPreset& p = preset_named(name);
        const bool big = std::string(name) == "gpt-oss-120b";
        EXPECT_EQ(p.architecture, "gpt-oss");
        EXPECT_EQ(p.is_default, !big);  // --arch gpt-oss picks the 20b
        EXPECT_EQ(p.n_layer, big ? 36u : 24u);
        EXPECT_EQ(p.n_embd, 2880u);
        EXPECT_EQ(p.n_ff, 2880u);
        EXPECT_EQ(p.n_head, 64u);
        EXPECT_EQ(p.n_head_kv, 8u);
        EXPECT_EQ(p.head_dim, 64u);  // query width 4096, wider than the model
        EXPECT_EQ(p.n_expert, big ? 128u : 32u);
        EXPECT_EQ(p.n_expert_used, 4u);
        EXPECT_EQ(p.n_ff_expert, 2880u);
        EXPECT_EQ(p.n_vocab, 201088u);
        EXPECT_EQ(p.n_ctx_train, 131072u);
        EXPECT_EQ(p.rope_freq_base, 150000.0f);
        EXPECT_EQ(p.rms_norm_eps, 1e-5f);
        EXPECT_FALSE(p.tied_embeddings);
        EXPECT_EQ(p.tokenizer_model, "gpt2");
        EXPECT_EQ(p.tokenizer_pre, "gpt-4o");
    }
}

TEST(SynthGptOssTensors, AreTheConvertersTensors) {
    // 459 tensors, as the published gpt-oss-20b GGUF: token_embd, 19 per layer,
    // output_norm and output.
    const Tensors t = tensors_of("gpt-oss-20b", "mxfp4_moe");
    EXPECT_EQ(t.count, 1u + 24 * 19 + 2);
    EXPECT_EQ(t.dims.at("token_embd.weight"), (std::vector<int64_t>{2880, 201088}));
    EXPECT_EQ(t.dims.at("output.weight"), (std::vector<int64_t>{2880, 201088}));
    const int l = 23;
    const std::map<std::string, std::vector<int64_t>> block = {
        {"attn_norm.weight", {2880}},
        {"attn_q.weight", {2880, 4096}},
        {"attn_q.bias", {4096}},
        {"attn_k.weight", {2880, 512}},
        {"attn_k.bias", {512}},
        {"attn_v.weight", {2880, 512}},
        {"attn_v.bias", {512}},
        {"attn_output.weight", {4096, 2880}},
        {"attn_output.bias", {2880}},
        {"attn_sinks.weight", {64}},
        {"post_attention_norm.weight", {2880}},
        {"ffn_gate_inp.weight", {2880, 32}},
        {"ffn_gate_inp.bias", {32}},
        {"ffn_gate_exps.weight", {2880, 2880, 32}},
        {"ffn_gate_exps.bias", {2880, 32}},
        {"ffn_up_exps.weight", {2880, 2880, 32}},
        {"ffn_up_exps.bias", {2880, 32}},
        {"ffn_down_exps.weight", {2880, 2880, 32}},
        {"ffn_down_exps.bias", {2880, 32}},
    };
    ASSERT_EQ(block.size(), 19u);
    for (const auto& [name, dims] : block) {
        const std::string full = blk(l, name.c_str());
        ASSERT_TRUE(t.has(full)) << full;
        EXPECT_EQ(t.dims.at(full), dims) << full;
    }
    for (const char* absent : {"ffn_norm.weight", "ffn_gate.weight", "attn_q_norm.weight", "post_ffw_norm.weight"}) {
        EXPECT_FALSE(t.has(blk(0, absent))) << absent;
    }

    // 687 tensors for gpt-oss-120b: 128 experts.
    const Tensors big = tensors_of("gpt-oss-120b", "mxfp4_moe");
    EXPECT_EQ(big.count, 1u + 36 * 19 + 2);
    EXPECT_EQ(big.dims.at(blk(35, "ffn_down_exps.weight")), (std::vector<int64_t>{2880, 2880, 128}));
    EXPECT_EQ(big.dims.at(blk(35, "ffn_up_exps.bias")), (std::vector<int64_t>{2880, 128}));
    EXPECT_EQ(big.dims.at(blk(35, "ffn_gate_inp.weight")), (std::vector<int64_t>{2880, 128}));
}

// MXFP4_MOE, written from llama-quant.cpp (llama-cpp-python 0.3.36): the 3-D expert
// tensors MXFP4, every other quantizable matrix Q8_0 (token_embd and output included);
// vectors, biases, sinks and the router F32.
TEST(SynthGptOssMixture, Mxfp4MoeIsMxfp4ExpertsAndQ8Elsewhere) {
    const Tensors t = tensors_of("gpt-oss-120b", "mxfp4_moe");
    size_t checked = 0;
    for (const auto& [name, type] : t.type) {
        SCOPED_TRACE(name);
        const bool expert = name.find("_exps.weight") != std::string::npos;
        const bool vector = name.ends_with(".bias") || name.find("norm") != std::string::npos ||
                            name.find("attn_sinks") != std::string::npos ||
                            name.find("ffn_gate_inp") != std::string::npos;
        EXPECT_EQ(type, expert ? "MXFP4" : vector ? "F32" : "Q8_0");
        ++checked;
    }
    EXPECT_EQ(checked, 687u);
    // A dense model under mxfp4_moe: Q8_0 matrices (llama.cpp's rule has no other case).
    EXPECT_EQ(tensors_of("llama3-8b", "mxfp4_moe").type_of("blk.0.ffn_down.weight"), "Q8_0");

    // K-quants fall back for 2880-wide rows (not a multiple of 256), as llama.cpp does:
    // Q4_K -> Q5_0, Q6_K -> Q8_0.
    const Tensors q4 = tensors_of("gpt-oss-20b", "q4_k_m");
    EXPECT_EQ(q4.type_of(blk(1, "attn_q.weight")), "Q5_0");
    EXPECT_EQ(q4.type_of(blk(0, "ffn_down_exps.weight")), "Q8_0");
    EXPECT_EQ(q4.type_of(blk(1, "attn_output.weight")), "Q4_K");  // 4096-wide rows
    EXPECT_EQ(q4.type_of("output.weight"), "Q8_0");
}

TEST(SynthGptOssLayout, MetadataTheEngineReads) {
    synth::Layout& layout = layout_of("gpt-oss-20b");
    const GgufMetadata& m = layout.writer.metadata();
    EXPECT_EQ(m.get_string("general.architecture"), "gpt-oss");
    EXPECT_EQ(m.get_uint("general.file_type"), 15u);  // layout_of's q4_k_m
    EXPECT_EQ(m.get_uint("gpt-oss.block_count"), 24u);
    EXPECT_EQ(m.get_uint("gpt-oss.expert_count"), 32u);
    EXPECT_EQ(m.get_uint("gpt-oss.expert_used_count"), 4u);
    EXPECT_EQ(m.get_uint("gpt-oss.expert_feed_forward_length"), 2880u);
    EXPECT_EQ(m.get_uint("gpt-oss.attention.sliding_window"), 128u);
    EXPECT_EQ(m.get_uint("gpt-oss.attention.key_length"), 64u);
    EXPECT_EQ(m.get_uint("gpt-oss.attention.value_length"), 64u);
    EXPECT_EQ(m.get_uint("gpt-oss.context_length"), 131072u);
    EXPECT_EQ(m.get_float("gpt-oss.rope.freq_base"), 150000.0);
    EXPECT_EQ(m.get_string("gpt-oss.rope.scaling.type"), "yarn");
    EXPECT_EQ(m.get_float("gpt-oss.rope.scaling.factor"), 32.0);
    EXPECT_EQ(m.get_uint("gpt-oss.rope.scaling.original_context_length"), 4096u);
    EXPECT_NEAR(m.get_float("gpt-oss.attention.layer_norm_rms_epsilon").value_or(0), 1e-5, 1e-9);

    // o200k_harmony: the real size, and the specials at their published ids.
    EXPECT_EQ(m.get_string("tokenizer.ggml.pre"), "gpt-4o");
    const Vocab v = vocab_of(m);
    ASSERT_EQ(v.tokens.size(), 201088u);
    const std::pair<size_t, const char*> specials[] = {
        {199998, "<|startoftext|>"}, {199999, "<|endoftext|>"}, {200002, "<|return|>"}, {200003, "<|constrain|>"},
        {200005, "<|channel|>"},     {200006, "<|start|>"},     {200007, "<|end|>"},    {200008, "<|message|>"},
        {200012, "<|call|>"},        {200018, "<|endofprompt|>"}};
    for (const auto& [id, text] : specials) {
        EXPECT_EQ(v.tokens[id], text) << id;
        EXPECT_EQ(v.types[id], 3) << text;  // control
    }
    EXPECT_EQ(v.tokens[200000], "<|reserved_200000|>");
    EXPECT_EQ(v.tokens[201087], "<|reserved_201087|>");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.bos_token_id"), "<|startoftext|>");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.eos_token_id"), "<|return|>");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.padding_token_id"), "<|endoftext|>");
    check_bpe_vocab(m, v, 201088, /*stride=*/997);
    // The chat template is synth's placeholder, and says so.
    EXPECT_NE(m.get_string("tokenizer.chat_template").value_or("").find("not the real harmony chat template"), std::string::npos);
}

// The engine's tokenizer takes the vocabulary: "gpt-4o" is a pre-tokenizer it implements.
TEST(SynthGptOssLayout, TokenizerLoadsTheVocabulary) {
    const GgufMetadata& m = layout_of("gpt-oss-20b").writer.metadata();
    Result<Tokenizer> tokenizer = tokenizer_from_metadata(m);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
    EXPECT_EQ(tokenizer->n_vocab(), 201088);
    const std::string prompt = "<|start|>user<|message|>HelloWORLD, DON'T 1234567<|end|>";
    const std::vector<TokenId> ids = tokenizer->tokenize(prompt, false, true);
    ASSERT_GE(ids.size(), 3u);
    EXPECT_EQ(ids.front(), 200006);  // <|start|>
    EXPECT_EQ(ids.back(), 200007);   // <|end|>
    EXPECT_EQ(tokenizer->detokenize(ids, true), prompt);
}

// The planned sizes of the full-size files (nothing written), against the published
// MXFP4_MOE GGUFs of ggml-org (gpt-oss-20b: about 12.1 GB; gpt-oss-120b: about 63.4 GB in
// three parts). Synth plans 12.105 GB and 63.383 GB: the same 459 / 687 tensors in the
// same types (MXFP4 experts, Q8_0 elsewhere, F32 vectors, biases and routers), so the
// tensor data are the same bytes (12.097 GB and 63.374 GB); the rest, about 8 MB, is the
// header, mostly the vocabulary. The published headers differ from synth's by their real
// BPE merges (synth learns its own on a synthetic corpus, of the same count) and OpenAI's
// harmony chat template (synth writes a short placeholder): a few megabytes at most, below
// the published figures' rounding. Parameters: 20.91 B and 116.83 B (the model card's
// "21B" and "117B").
TEST(SynthGptOssSize, FullSizeFilesMatchPublishedOnes) {
    Result<SynthPlan> small = plan_synth_model(small_options("gpt-oss-20b", "mxfp4_moe", 0));
    ASSERT_TRUE(small.ok()) << small.error().message;
    EXPECT_EQ(small->tensors.size(), 459u);
    EXPECT_EQ(small->n_params, 20914757184u);
    EXPECT_NEAR(static_cast<double>(small->file_bytes) / 1e9, 12.105, 0.001);
    EXPECT_NEAR(static_cast<double>(small->file_bytes) / 1e9, 12.1, 0.05);  // published

    Result<SynthPlan> big = plan_synth_model(small_options("gpt-oss-120b", "mxfp4_moe", 0));
    ASSERT_TRUE(big.ok()) << big.error().message;
    EXPECT_EQ(big->tensors.size(), 687u);
    EXPECT_EQ(big->n_params, 116829156672u);
    EXPECT_NEAR(static_cast<double>(big->file_bytes) / 1e9, 63.383, 0.001);
    EXPECT_NEAR(static_cast<double>(big->file_bytes) / 1e9, 63.4, 0.05);  // published
}

}  // namespace
}  // namespace powerhouse
