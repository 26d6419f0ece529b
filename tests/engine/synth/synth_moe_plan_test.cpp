// Synthetic mixture-of-experts models, checked without writing files: the presets' shapes
// (the models' published config.json), their tensors as llama.cpp's converter lays them out,
// the type of every tensor as llama.cpp's quantizer (llama-quant.cpp) chooses it, and the
// planned sizes of the real-size files against published GGUF files.
#include <gtest/gtest.h>

#include "engine/synth/synth_test_support.h"

namespace powerhouse {
namespace {

using namespace synth_test;

std::string blk_weight(int layer, const char* name) {
    return "blk." + std::to_string(layer) + "." + name + ".weight";
}

TEST(SynthMoePresets, HaveTheRealShapes) {
    const SynthPreset& a3b = preset_named("qwen3-30b-a3b");
    EXPECT_EQ(a3b.architecture, "qwen3moe");
    EXPECT_TRUE(a3b.is_default);  // --arch qwen3moe
    EXPECT_EQ(a3b.n_layer, 48u);
    EXPECT_EQ(a3b.n_embd, 2048u);
    EXPECT_EQ(a3b.n_ff, 6144u);
    EXPECT_EQ(a3b.n_head, 32u);
    EXPECT_EQ(a3b.n_head_kv, 4u);
    EXPECT_EQ(a3b.head_dim, 128u);  // not n_embd / n_head = 64
    EXPECT_EQ(a3b.n_expert, 128u);
    EXPECT_EQ(a3b.n_expert_used, 8u);
    EXPECT_EQ(a3b.n_ff_expert, 768u);
    EXPECT_EQ(a3b.n_vocab, 151936u);
    EXPECT_EQ(a3b.n_ctx_train, 40960u);
    EXPECT_EQ(a3b.rope_freq_base, 1000000.0f);
    EXPECT_EQ(a3b.rms_norm_eps, 1e-6f);
    EXPECT_FALSE(a3b.tied_embeddings);
    EXPECT_EQ(a3b.tokenizer_pre, "qwen2");

    const SynthPreset& a22b = preset_named("qwen3-235b-a22b");
    EXPECT_EQ(a22b.architecture, "qwen3moe");
    EXPECT_EQ(a22b.n_layer, 94u);
    EXPECT_EQ(a22b.n_embd, 4096u);
    EXPECT_EQ(a22b.n_ff, 12288u);
    EXPECT_EQ(a22b.n_head, 64u);
    EXPECT_EQ(a22b.n_head_kv, 4u);
    EXPECT_EQ(a22b.head_dim, 128u);
    EXPECT_EQ(a22b.n_expert, 128u);
    EXPECT_EQ(a22b.n_expert_used, 8u);
    EXPECT_EQ(a22b.n_ff_expert, 1536u);
    EXPECT_EQ(a22b.n_vocab, 151936u);

    const SynthPreset& mixtral = preset_named("mixtral-8x7b");
    EXPECT_EQ(mixtral.architecture, "llama");
    EXPECT_FALSE(mixtral.is_default);
    EXPECT_EQ(mixtral.n_layer, 32u);
    EXPECT_EQ(mixtral.n_embd, 4096u);
    EXPECT_EQ(mixtral.n_ff, 14336u);
    EXPECT_EQ(mixtral.n_head, 32u);
    EXPECT_EQ(mixtral.n_head_kv, 8u);
    EXPECT_EQ(mixtral.n_expert, 8u);
    EXPECT_EQ(mixtral.n_expert_used, 2u);
    EXPECT_EQ(mixtral.n_ff_expert, 14336u);
    EXPECT_EQ(mixtral.n_vocab, 32000u);
    EXPECT_EQ(mixtral.n_ctx_train, 32768u);
    EXPECT_EQ(mixtral.rope_freq_base, 1000000.0f);
    EXPECT_EQ(mixtral.tokenizer_model, "llama");

    EXPECT_EQ(preset_named("llama3-8b").n_expert, 0u);  // dense
}

TEST(SynthMoeTensors, AreTheConvertersExpertTensors) {
    // 579 tensors, as llama.cpp's conversion of Qwen3-30B-A3B: token_embd, 12 per layer,
    // output_norm and output.
    const Tensors q = tensors_of("qwen3-30b-a3b", "q8_0");
    EXPECT_EQ(q.count, 1u + 48 * 12 + 2);
    EXPECT_EQ(q.dims.at("blk.47.ffn_gate_inp.weight"), (std::vector<int64_t>{2048, 128}));
    EXPECT_EQ(q.dims.at("blk.47.ffn_gate_exps.weight"), (std::vector<int64_t>{2048, 768, 128}));
    EXPECT_EQ(q.dims.at("blk.47.ffn_up_exps.weight"), (std::vector<int64_t>{2048, 768, 128}));
    EXPECT_EQ(q.dims.at("blk.47.ffn_down_exps.weight"), (std::vector<int64_t>{768, 2048, 128}));
    EXPECT_EQ(q.dims.at("blk.0.attn_q.weight"), (std::vector<int64_t>{2048, 4096}));  // 32 heads x 128
    EXPECT_EQ(q.dims.at("blk.0.attn_k.weight"), (std::vector<int64_t>{2048, 512}));   // 4 KV heads x 128
    EXPECT_EQ(q.dims.at("blk.0.attn_output.weight"), (std::vector<int64_t>{4096, 2048}));
    EXPECT_EQ(q.dims.at("blk.0.attn_q_norm.weight"), (std::vector<int64_t>{128}));
    EXPECT_EQ(q.dims.at("output.weight"), (std::vector<int64_t>{2048, 151936}));
    for (const char* dense : {"ffn_gate", "ffn_up", "ffn_down"}) EXPECT_FALSE(q.has(blk_weight(0, dense))) << dense;

    // 1131 tensors for Qwen3-235B-A22B.
    const Tensors big = tensors_of("qwen3-235b-a22b", "q8_0");
    EXPECT_EQ(big.count, 1u + 94 * 12 + 2);
    EXPECT_EQ(big.dims.at("blk.93.ffn_down_exps.weight"), (std::vector<int64_t>{1536, 4096, 128}));
    EXPECT_EQ(big.dims.at("blk.93.attn_q.weight"), (std::vector<int64_t>{4096, 8192}));  // 64 heads x 128

    // 323 tensors for Mixtral (merged experts): 10 per layer, no Q/K norms, no rope_freqs.
    const Tensors m = tensors_of("mixtral-8x7b", "q8_0");
    EXPECT_EQ(m.count, 1u + 32 * 10 + 2);
    EXPECT_EQ(m.dims.at("blk.31.ffn_gate_inp.weight"), (std::vector<int64_t>{4096, 8}));
    EXPECT_EQ(m.dims.at("blk.31.ffn_gate_exps.weight"), (std::vector<int64_t>{4096, 14336, 8}));
    EXPECT_EQ(m.dims.at("blk.31.ffn_down_exps.weight"), (std::vector<int64_t>{14336, 4096, 8}));
    EXPECT_EQ(m.dims.at("blk.31.attn_k.weight"), (std::vector<int64_t>{4096, 1024}));
    EXPECT_FALSE(m.has("rope_freqs.weight"));
    EXPECT_FALSE(m.has("blk.0.attn_q_norm.weight"));
}

// The expected types below are written from a reading of llama.cpp's llama-quant.cpp
// (llama_tensor_get_type_impl, as vendored in llama-cpp-python 0.3.36), not from the code
// under test:
//  - only 2-D and 3-D tensors whose name ends in "weight" are quantized, never "_norm" ones
//    nor the router "ffn_gate_inp" (conversions store it F32);
//  - output.weight: Q6_K (2048 is a multiple of Q4_K's 256);
//  - token_embd (untied): the file type's base type, Q4_K;
//  - attn_v: Q6_K where use_more_bits(i_attention_wv, n_attention_wv), the counter being
//    the attn_v tensors seen so far (one per layer) out of the file's 48;
//  - ffn_down_exps is in the ffn_down category (a substring match); with experts the layer
//    is parsed from "blk.N." and n_layer is the block count: Q6_K where use_more_bits;
//  - attn_k, attn_output: no Q4_K_M rule unless the model has exactly 8 experts (128 here);
//  - ffn_gate_exps / ffn_up_exps: rules only for IQ3_XS: Q4_K.
// use_more_bits(i, 48): i < 6, i >= 42, or (i - 6) % 3 == 2.
TEST(SynthMoeMixture, Qwen3_30bA3bQ4KMFollowsLlamaQuant) {
    const Tensors t = tensors_of("qwen3-30b-a3b", "q4_k_m");
    const std::set<int> q6_layers = {0,  1,  2,  3,  4,  5,  8,  11, 14, 17, 20, 23,
                                     26, 29, 32, 35, 38, 41, 42, 43, 44, 45, 46, 47};
    EXPECT_EQ(t.type_of("token_embd.weight"), "Q4_K");
    EXPECT_EQ(t.type_of("output.weight"), "Q6_K");
    EXPECT_EQ(t.type_of("output_norm.weight"), "F32");
    size_t checked = 3;
    for (int i = 0; i < 48; ++i) {
        SCOPED_TRACE(i);
        const std::string more = q6_layers.count(i) ? "Q6_K" : "Q4_K";
        EXPECT_EQ(t.type_of(blk_weight(i, "attn_v")), more);
        EXPECT_EQ(t.type_of(blk_weight(i, "ffn_down_exps")), more);
        for (const char* name : {"attn_q", "attn_k", "attn_output", "ffn_gate_exps", "ffn_up_exps"}) {
            EXPECT_EQ(t.type_of(blk_weight(i, name)), "Q4_K") << name;
        }
        for (const char* name : {"attn_norm", "attn_q_norm", "attn_k_norm", "ffn_norm", "ffn_gate_inp"}) {
            EXPECT_EQ(t.type_of(blk_weight(i, name)), "F32") << name;
        }
        checked += 12;
    }
    EXPECT_EQ(checked, t.count);  // every tensor of the file has its expected type
}

// Mixtral has exactly 8 experts, which llama-quant.cpp treats specially: attn_v and attn_k
// Q8_0 in every mixture of this branch (after the file type's own attn_v rule), and
// attn_output Q5_K for Q2_K, Q3_K_M, Q4_K_S and Q4_K_M (instead of the dense rules).
TEST(SynthMoeMixture, MixtralsEightExpertsGetLlamaQuantsExtraBits) {
    const Tensors t = tensors_of("mixtral-8x7b", "q4_k_m");
    EXPECT_EQ(t.type_of("token_embd.weight"), "Q4_K");
    EXPECT_EQ(t.type_of("output.weight"), "Q6_K");
    for (int i = 0; i < 32; ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(t.type_of(blk_weight(i, "attn_v")), "Q8_0");
        EXPECT_EQ(t.type_of(blk_weight(i, "attn_k")), "Q8_0");
        EXPECT_EQ(t.type_of(blk_weight(i, "attn_output")), "Q5_K");
        EXPECT_EQ(t.type_of(blk_weight(i, "attn_q")), "Q4_K");
        EXPECT_EQ(t.type_of(blk_weight(i, "ffn_gate_inp")), "F32");
        EXPECT_EQ(t.type_of(blk_weight(i, "ffn_gate_exps")), "Q4_K");
        EXPECT_EQ(t.type_of(blk_weight(i, "ffn_up_exps")), "Q4_K");
        EXPECT_EQ(t.type_of(blk_weight(i, "ffn_down_exps")), more_bits(i, 32) ? "Q6_K" : "Q4_K");
    }
    const Tensors q2 = tensors_of("mixtral-8x7b", "q2_k");
    EXPECT_EQ(q2.type_of(blk_weight(3, "attn_output")), "Q5_K");  // dense models: Q3_K
    EXPECT_EQ(q2.type_of(blk_weight(3, "attn_v")), "Q8_0");
    EXPECT_EQ(q2.type_of(blk_weight(3, "attn_q")), "Q2_K");
    EXPECT_EQ(q2.type_of(blk_weight(3, "ffn_down_exps")), "Q3_K");
    const Tensors q3 = tensors_of("mixtral-8x7b", "q3_k_m");
    EXPECT_EQ(q3.type_of(blk_weight(3, "attn_output")), "Q5_K");    // dense models: Q4_K
    EXPECT_EQ(q3.type_of(blk_weight(0, "attn_v")), "Q8_0");         // dense models: Q5_K in layers 0-1
    EXPECT_EQ(q3.type_of(blk_weight(1, "ffn_down_exps")), "Q5_K");  // layer < 32 / 16
    EXPECT_EQ(q3.type_of(blk_weight(2, "ffn_down_exps")), "Q4_K");
    EXPECT_EQ(tensors_of("mixtral-8x7b", "q4_k_s").type_of(blk_weight(3, "attn_output")), "Q5_K");
    // The other mixtures keep attn_output at their base type, but attn_v/attn_k go to Q8_0.
    const Tensors q5m = tensors_of("mixtral-8x7b", "q5_k_m");
    EXPECT_EQ(q5m.type_of(blk_weight(3, "attn_output")), "Q5_K");
    EXPECT_EQ(q5m.type_of(blk_weight(3, "attn_v")), "Q8_0");
    EXPECT_EQ(q5m.type_of(blk_weight(0, "ffn_down_exps")), "Q6_K");
    const Tensors q40 = tensors_of("mixtral-8x7b", "q4_0");
    EXPECT_EQ(q40.type_of(blk_weight(3, "attn_output")), "Q4_0");
    EXPECT_EQ(q40.type_of(blk_weight(3, "attn_k")), "Q8_0");
    EXPECT_EQ(q40.type_of(blk_weight(3, "ffn_down_exps")), "Q4_0");
    EXPECT_EQ(tensors_of("mixtral-8x7b", "q6_k").type_of(blk_weight(3, "attn_v")), "Q8_0");
}

TEST(SynthMoeMixture, OtherTypesAndUnquantizedFiles) {
    // 128 experts: the dense rules. Q2_K: attn_v Q4_K (8 query heads per KV head),
    // attn_output and ffn_down_exps Q3_K.
    const Tensors q2 = tensors_of("qwen3-30b-a3b", "q2_k");
    EXPECT_EQ(q2.type_of(blk_weight(7, "attn_v")), "Q4_K");
    EXPECT_EQ(q2.type_of(blk_weight(7, "attn_k")), "Q2_K");
    EXPECT_EQ(q2.type_of(blk_weight(7, "attn_output")), "Q3_K");
    EXPECT_EQ(q2.type_of(blk_weight(7, "ffn_down_exps")), "Q3_K");
    EXPECT_EQ(q2.type_of(blk_weight(7, "ffn_gate_exps")), "Q2_K");
    EXPECT_EQ(q2.type_of(blk_weight(7, "ffn_gate_inp")), "F32");
    const Tensors q4s = tensors_of("qwen3-30b-a3b", "q4_k_s");
    EXPECT_EQ(q4s.type_of(blk_weight(5, "ffn_down_exps")), "Q5_K");  // layer < 48 / 8
    EXPECT_EQ(q4s.type_of(blk_weight(6, "ffn_down_exps")), "Q4_K");
    EXPECT_EQ(q4s.type_of(blk_weight(3, "attn_v")), "Q5_K");
    EXPECT_EQ(q4s.type_of(blk_weight(4, "attn_v")), "Q4_K");

    // F16 / BF16 conversions: every matrix in the one type, the router and vectors F32.
    for (const char* type : {"f16", "bf16"}) {
        const Tensors t = tensors_of("qwen3-30b-a3b", type, 1);
        const std::string base = std::string(type) == "f16" ? "F16" : "BF16";
        EXPECT_EQ(t.type_of(blk_weight(0, "ffn_gate_exps")), base);
        EXPECT_EQ(t.type_of(blk_weight(0, "ffn_down_exps")), base);
        EXPECT_EQ(t.type_of(blk_weight(0, "ffn_gate_inp")), "F32");
        EXPECT_EQ(t.type_of(blk_weight(0, "attn_norm")), "F32");
    }
    EXPECT_EQ(tensors_of("mixtral-8x7b", "f32", 1).type_of(blk_weight(0, "ffn_up_exps")), "F32");
}

// --layers N: llama-quant's counters run over the file it quantizes, so the layers that get
// more bits are those of an N-layer model. use_more_bits(i, 8): layers 0, 3, 6 and 7.
TEST(SynthMoeMixture, FewerLayersMoveTheExtraBits) {
    const Tensors t = tensors_of("qwen3-30b-a3b", "q4_k_m", 8);
    EXPECT_EQ(t.count, 1u + 8 * 12 + 2);
    EXPECT_FALSE(t.has(blk_weight(8, "attn_q")));
    for (int i = 0; i < 8; ++i) {
        const std::string more = (i == 0 || i == 3 || i == 6 || i == 7) ? "Q6_K" : "Q4_K";
        EXPECT_EQ(t.type_of(blk_weight(i, "attn_v")), more) << i;
        EXPECT_EQ(t.type_of(blk_weight(i, "ffn_down_exps")), more) << i;
    }
    // One layer: 0 >= 7 * 1 / 8, so the only layer gets Q6_K.
    EXPECT_EQ(tensors_of("qwen3-30b-a3b", "q4_k_m", 1).type_of(blk_weight(0, "ffn_down_exps")), "Q6_K");
    // Mixtral keeps its 8-expert rules at any layer count (they depend on the expert count).
    EXPECT_EQ(tensors_of("mixtral-8x7b", "q4_k_m", 2).type_of(blk_weight(1, "attn_v")), "Q8_0");

    Result<SynthPlan> plan = plan_synth_model(small_options("qwen3-235b-a22b", "q4_k_m", 3));
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    EXPECT_EQ(plan->preset.n_layer, 3u);
    EXPECT_EQ(plan->preset.n_expert, 128u);
    EXPECT_EQ(plan->tensors.size(), 1u + 3 * 12 + 2);
}

// The planned size of the full-size files (nothing written), against published GGUF files:
//  - Qwen3-30B-A3B Q4_K_M (Qwen/Qwen3-30B-A3B-GGUF, unsloth): about 18.6 GB. The same
//    tensors and mixture, so within 1% (the metadata differ by kilobytes).
//  - Mixtral-8x7B Q4_K_M (TheBloke, December 2023): 26.44 GB, nearly the size of his Q4_0.
//    His experts were 2-D tensors per expert ("blk.N.ffn_down.E.weight") and the quantizer
//    of the time (llama.cpp PR 4406) gave none of them Q6_K, and had no Q5_K attn_output
//    rule for 8 experts (added in January 2024); it did have the Q8_0 attn_v/attn_k bump
//    ("trades just ~128MB"). ikawrakow's table of that time shows the same perplexity for
//    Q4_K_S and Q4_K_M. Today's rules give ffn_down_exps Q6_K in 16 of the 32 layers:
//    28.45 GB. Putting those tensors and attn_output back to Q4_K gives his 26.44 GB.
TEST(SynthMoeSize, FullSizeFilesMatchPublishedOnes) {
    Result<SynthPlan> a3b = plan_synth_model(small_options("qwen3-30b-a3b", "q4_k_m", 0));
    ASSERT_TRUE(a3b.ok()) << a3b.error().message;
    EXPECT_EQ(a3b->n_params, 30532122624u);  // "30.5B" on the model card
    EXPECT_NEAR(static_cast<double>(a3b->file_bytes) / 1e9, 18.6, 0.1);

    Result<SynthPlan> mixtral = plan_synth_model(small_options("mixtral-8x7b", "q4_k_m", 0));
    ASSERT_TRUE(mixtral.ok()) << mixtral.error().message;
    EXPECT_EQ(mixtral->n_params, 46702792704u);  // "46.7B"
    EXPECT_NEAR(static_cast<double>(mixtral->file_bytes) / 1e9, 28.45, 0.02);
    uint64_t december_2023 = mixtral->file_bytes;
    for (const SynthTensor& t : mixtral->tensors) {
        const bool down = t.name.find("ffn_down_exps") != std::string::npos && t.type == "Q6_K";
        const bool out = t.name.find("attn_output") != std::string::npos && t.type == "Q5_K";
        if (!down && !out) continue;
        uint64_t n = 1;
        for (int64_t d : t.dims) n *= static_cast<uint64_t>(d);
        december_2023 -= t.bytes - n / 256 * 144;  // Q4_K: 144 bytes per 256 weights
    }
    EXPECT_NEAR(static_cast<double>(december_2023) / 1e9, 26.44, 0.01);
}

}  // namespace
}  // namespace powerhouse
