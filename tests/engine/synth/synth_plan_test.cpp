// Synthetic models: presets, types, tensor lists, mixtures, options and metadata, checked
// without writing files (the layout is a pure function of the options).
#include <gtest/gtest.h>

#include "engine/synth/synth_test_support.h"

namespace powerhouse {
namespace {

using namespace synth_test;



TEST(SynthPresets, HaveTheRealShapes) {
    const SynthPreset& l3 = preset_named("llama3-8b");
    EXPECT_EQ(l3.architecture, "llama");
    EXPECT_EQ(l3.n_layer, 32u);
    EXPECT_EQ(l3.n_embd, 4096u);
    EXPECT_EQ(l3.n_ff, 14336u);
    EXPECT_EQ(l3.n_head, 32u);
    EXPECT_EQ(l3.n_head_kv, 8u);
    EXPECT_EQ(l3.n_vocab, 128256u);
    EXPECT_EQ(l3.n_ctx_train, 131072u);
    EXPECT_EQ(l3.rope_freq_base, 500000.0f);
    EXPECT_TRUE(l3.is_default);

    const SynthPreset& smol = preset_named("smollm2-135m");
    EXPECT_EQ(smol.n_layer, 30u);
    EXPECT_EQ(smol.n_embd, 576u);
    EXPECT_EQ(smol.n_ff, 1536u);
    EXPECT_EQ(smol.n_head, 9u);
    EXPECT_EQ(smol.n_head_kv, 3u);
    EXPECT_EQ(smol.n_vocab, 49152u);
    EXPECT_EQ(smol.n_ctx_train, 8192u);
    EXPECT_EQ(smol.rope_freq_base, 100000.0f);
    EXPECT_EQ(smol.tokenizer_pre, "smollm");
    EXPECT_TRUE(smol.tied_embeddings);

    EXPECT_EQ(preset_named("qwen3-0.6b").head_dim, 128u);  // not n_embd / n_head = 64
    EXPECT_EQ(preset_named("gemma3-1b").head_dim, 256u);
    EXPECT_EQ(preset_named("llama2-7b").tokenizer_model, "llama");

    // Every architecture has exactly one default preset.
    std::map<std::string, int> defaults;
    for (const SynthPreset& p : synth_presets()) defaults[p.architecture] += p.is_default ? 1 : 0;
    for (const auto& [arch, n] : defaults) EXPECT_EQ(n, 1) << arch;
    // llama, qwen2, qwen3, qwen3moe, gemma3, gpt-oss, phi3, smollm3, seed_oss, glm4, glm4moe,
    // mistral3, granite, granitemoe, bert, nomic-bert
    EXPECT_EQ(defaults.size(), 16u);
}


TEST(SynthTypes, UseLlamaCppFileTypeNumbers) {
    std::map<std::string, uint32_t> ftype;
    for (const SynthType& t : synth_types()) ftype[t.name] = t.file_type;
    EXPECT_EQ(ftype.size(), 16u);
    EXPECT_EQ(ftype["mxfp4_moe"], 38u);
    EXPECT_EQ(ftype["f32"], 0u);
    EXPECT_EQ(ftype["f16"], 1u);
    EXPECT_EQ(ftype["q8_0"], 7u);
    EXPECT_EQ(ftype["q2_k"], 10u);
    EXPECT_EQ(ftype["q3_k_m"], 12u);
    EXPECT_EQ(ftype["q4_k_m"], 15u);
    EXPECT_EQ(ftype["q6_k"], 18u);
    EXPECT_EQ(ftype["bf16"], 32u);
}



TEST(SynthTensors, Llama3_8bHasTheRealTensors) {
    const Tensors t = tensors_of("llama3-8b", "q4_k_m");
    EXPECT_EQ(t.count, 2u + 32 * 9 + 2);  // rope_freqs, token_embd, 9 per layer, output_norm, output
    EXPECT_EQ(t.dims.at("token_embd.weight"), (std::vector<int64_t>{4096, 128256}));
    EXPECT_EQ(t.dims.at("output.weight"), (std::vector<int64_t>{4096, 128256}));
    EXPECT_EQ(t.dims.at("rope_freqs.weight"), (std::vector<int64_t>{64}));
    EXPECT_EQ(t.dims.at("blk.31.attn_q.weight"), (std::vector<int64_t>{4096, 4096}));
    EXPECT_EQ(t.dims.at("blk.31.attn_k.weight"), (std::vector<int64_t>{4096, 1024}));
    EXPECT_EQ(t.dims.at("blk.31.attn_v.weight"), (std::vector<int64_t>{4096, 1024}));
    EXPECT_EQ(t.dims.at("blk.31.attn_output.weight"), (std::vector<int64_t>{4096, 4096}));
    EXPECT_EQ(t.dims.at("blk.0.ffn_gate.weight"), (std::vector<int64_t>{4096, 14336}));
    EXPECT_EQ(t.dims.at("blk.0.ffn_up.weight"), (std::vector<int64_t>{4096, 14336}));
    EXPECT_EQ(t.dims.at("blk.0.ffn_down.weight"), (std::vector<int64_t>{14336, 4096}));
    EXPECT_EQ(t.dims.at("blk.0.attn_norm.weight"), (std::vector<int64_t>{4096}));
    EXPECT_EQ(t.dims.at("blk.0.ffn_norm.weight"), (std::vector<int64_t>{4096}));
    EXPECT_EQ(t.dims.at("output_norm.weight"), (std::vector<int64_t>{4096}));
}


TEST(SynthTensors, ArchitecturesHaveTheirOwnTensors) {
    const Tensors qwen2 = tensors_of("qwen2.5-0.5b", "q8_0", 1);
    EXPECT_EQ(qwen2.dims.at("blk.0.attn_q.bias"), (std::vector<int64_t>{896}));
    EXPECT_EQ(qwen2.dims.at("blk.0.attn_k.bias"), (std::vector<int64_t>{128}));
    EXPECT_EQ(qwen2.type_of("blk.0.attn_v.bias"), "F32");
    EXPECT_FALSE(qwen2.has("blk.0.attn_q_norm.weight"));
    EXPECT_FALSE(qwen2.has("output.weight"));  // tied
    EXPECT_FALSE(qwen2.has("rope_freqs.weight"));

    const Tensors qwen3 = tensors_of("qwen3-8b", "q8_0", 1);
    EXPECT_EQ(qwen3.dims.at("blk.0.attn_q.weight"), (std::vector<int64_t>{4096, 4096}));
    EXPECT_EQ(qwen3.dims.at("blk.0.attn_q_norm.weight"), (std::vector<int64_t>{128}));
    EXPECT_EQ(qwen3.dims.at("blk.0.attn_k_norm.weight"), (std::vector<int64_t>{128}));
    EXPECT_FALSE(qwen3.has("blk.0.attn_q.bias"));
    EXPECT_EQ(qwen3.dims.at("output.weight"), (std::vector<int64_t>{4096, 151936}));

    const Tensors q06 = tensors_of("qwen3-0.6b", "q8_0", 1);
    EXPECT_EQ(q06.dims.at("blk.0.attn_q.weight"), (std::vector<int64_t>{1024, 2048}));  // 16 heads x 128
    EXPECT_EQ(q06.dims.at("blk.0.attn_output.weight"), (std::vector<int64_t>{2048, 1024}));

    const Tensors gemma = tensors_of("gemma3-1b", "q8_0", 1);
    EXPECT_EQ(gemma.dims.at("blk.0.attn_q.weight"), (std::vector<int64_t>{1152, 1024}));  // 4 heads x 256
    EXPECT_EQ(gemma.dims.at("blk.0.attn_k.weight"), (std::vector<int64_t>{1152, 256}));
    EXPECT_EQ(gemma.dims.at("blk.0.attn_q_norm.weight"), (std::vector<int64_t>{256}));
    EXPECT_EQ(gemma.dims.at("blk.0.post_attention_norm.weight"), (std::vector<int64_t>{1152}));
    EXPECT_EQ(gemma.dims.at("blk.0.ffn_norm.weight"), (std::vector<int64_t>{1152}));
    EXPECT_EQ(gemma.dims.at("blk.0.post_ffw_norm.weight"), (std::vector<int64_t>{1152}));
    EXPECT_EQ(gemma.dims.at("token_embd.weight"), (std::vector<int64_t>{1152, 262144}));
    EXPECT_FALSE(gemma.has("output.weight"));
    EXPECT_EQ(gemma.count, 1u + 13 + 1);

    EXPECT_EQ(tensors_of("llama2-7b", "q8_0", 1).dims.at("blk.0.attn_k.weight"),
              (std::vector<int64_t>{4096, 4096}));  // no grouped-query attention
}


TEST(SynthMixture, Q4KMFollowsLlamaCpp) {
    const Tensors t = tensors_of("llama3-8b", "q4_k_m");
    EXPECT_EQ(t.type_of("token_embd.weight"), "Q4_K");
    EXPECT_EQ(t.type_of("output.weight"), "Q6_K");
    EXPECT_EQ(t.type_of("rope_freqs.weight"), "F32");
    EXPECT_EQ(t.type_of("output_norm.weight"), "F32");
    int q6 = 0;
    for (int i = 0; i < 32; ++i) {
        const std::string b = "blk." + std::to_string(i) + ".";
        const std::string more = more_bits(i, 32) ? "Q6_K" : "Q4_K";
        EXPECT_EQ(t.type_of(b + "attn_v.weight"), more) << i;
        EXPECT_EQ(t.type_of(b + "ffn_down.weight"), more) << i;
        for (const char* name : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"}) {
            EXPECT_EQ(t.type_of(b + name + ".weight"), "Q4_K") << b << name;
        }
        EXPECT_EQ(t.type_of(b + "attn_norm.weight"), "F32");
        EXPECT_EQ(t.type_of(b + "ffn_norm.weight"), "F32");
        q6 += more_bits(i, 32) ? 1 : 0;
    }
    EXPECT_EQ(q6, 16);  // "about half the layers": layers 0-3, 6, 9, ..., 27, 28-31
}


TEST(SynthMixture, OtherTypesFollowLlamaCpp) {
    const Tensors q2 = tensors_of("llama3-8b", "q2_k");
    EXPECT_EQ(q2.type_of("blk.5.attn_q.weight"), "Q2_K");
    EXPECT_EQ(q2.type_of("blk.5.attn_v.weight"), "Q4_K");  // 4 query heads per KV head
    EXPECT_EQ(q2.type_of("blk.5.ffn_down.weight"), "Q3_K");
    EXPECT_EQ(q2.type_of("blk.5.attn_output.weight"), "Q3_K");
    EXPECT_EQ(q2.type_of("output.weight"), "Q6_K");
    EXPECT_EQ(q2.type_of("token_embd.weight"), "Q2_K");
    EXPECT_EQ(tensors_of("llama2-7b", "q2_k", 1).type_of("blk.0.attn_v.weight"), "Q3_K");  // no grouping

    const Tensors q3 = tensors_of("llama3-8b", "q3_k_m");
    EXPECT_EQ(q3.type_of("blk.1.attn_v.weight"), "Q5_K");
    EXPECT_EQ(q3.type_of("blk.2.attn_v.weight"), "Q4_K");
    EXPECT_EQ(q3.type_of("blk.1.ffn_down.weight"), "Q5_K");  // layer < 32 / 16
    EXPECT_EQ(q3.type_of("blk.2.ffn_down.weight"), "Q4_K");
    EXPECT_EQ(q3.type_of("blk.2.attn_output.weight"), "Q4_K");
    EXPECT_EQ(q3.type_of("blk.2.ffn_up.weight"), "Q3_K");

    const Tensors q4s = tensors_of("llama3-8b", "q4_k_s");
    EXPECT_EQ(q4s.type_of("blk.3.attn_v.weight"), "Q5_K");
    EXPECT_EQ(q4s.type_of("blk.4.attn_v.weight"), "Q4_K");
    EXPECT_EQ(q4s.type_of("blk.3.ffn_down.weight"), "Q5_K");  // layer < 32 / 8
    EXPECT_EQ(q4s.type_of("blk.4.ffn_down.weight"), "Q4_K");

    const Tensors q5m = tensors_of("llama3-8b", "q5_k_m");
    EXPECT_EQ(q5m.type_of("blk.0.attn_v.weight"), "Q6_K");
    EXPECT_EQ(q5m.type_of("blk.4.attn_v.weight"), "Q5_K");
    EXPECT_EQ(q5m.type_of("blk.4.attn_q.weight"), "Q5_K");
    EXPECT_EQ(tensors_of("llama3-8b", "q5_k_s").type_of("blk.0.attn_v.weight"), "Q5_K");
    EXPECT_EQ(tensors_of("llama3-8b", "q6_k").type_of("blk.0.attn_v.weight"), "Q6_K");

    const Tensors q8 = tensors_of("llama3-8b", "q8_0");
    EXPECT_EQ(q8.type_of("output.weight"), "Q8_0");
    EXPECT_EQ(q8.type_of("blk.0.ffn_down.weight"), "Q8_0");

    const Tensors q40 = tensors_of("llama3-8b", "q4_0");
    EXPECT_EQ(q40.type_of("output.weight"), "Q6_K");
    EXPECT_EQ(q40.type_of("token_embd.weight"), "Q4_0");
    EXPECT_EQ(tensors_of("llama3-8b", "q5_1").type_of("blk.0.attn_q.weight"), "Q5_1");

    const Tensors f16 = tensors_of("llama3-8b", "f16");
    EXPECT_EQ(f16.type_of("output.weight"), "F16");
    EXPECT_EQ(f16.type_of("blk.0.attn_norm.weight"), "F32");
    EXPECT_EQ(tensors_of("llama3-8b", "bf16").type_of("token_embd.weight"), "BF16");
    EXPECT_EQ(tensors_of("llama3-8b", "f32").type_of("token_embd.weight"), "F32");

    // At 70B attn_v (8x smaller than attn_q there) gets more bits.
    EXPECT_EQ(tensors_of("llama3-70b", "q4_k_m").type_of("blk.10.attn_v.weight"), "Q5_K");
}


TEST(SynthMixture, RowsNotAMultipleOf256FallBackAsLlamaCppDoes) {
    // SmolLM2: n_embd 576 = 2.25 * 256; ffn_down rows (1536) are fine.
    const Tensors smol = tensors_of("smollm2-135m", "q4_k_m", 2);
    EXPECT_EQ(smol.type_of("blk.0.attn_q.weight"), "Q5_0");  // Q4_K
    EXPECT_EQ(smol.type_of("blk.0.attn_v.weight"), "Q5_0");  // Q4_K (layer 0 of 2: no extra bits)
    EXPECT_EQ(smol.type_of("blk.1.attn_v.weight"), "Q8_0");  // Q6_K
    EXPECT_EQ(smol.type_of("blk.0.ffn_down.weight"), "Q4_K");
    EXPECT_EQ(smol.type_of("blk.1.ffn_down.weight"), "Q6_K");
    EXPECT_EQ(smol.type_of("token_embd.weight"), "Q8_0");  // tied: the output's rule
    EXPECT_EQ(smol.type_of("output.weight"), "(absent)");

    EXPECT_EQ(tensors_of("smollm2-135m", "q5_k_s", 1).type_of("blk.0.attn_q.weight"), "Q5_1");
    const Tensors q2 = tensors_of("smollm2-135m", "q2_k", 1);
    EXPECT_EQ(q2.type_of("blk.0.attn_q.weight"), "Q4_0");  // older llama.cpp: IQ4_NL, same size
    EXPECT_EQ(q2.type_of("blk.0.ffn_down.weight"), "Q3_K");

    // Qwen2.5 0.5B: n_embd 896 = 3.5 * 256.
    const Tensors qwen = tensors_of("qwen2.5-0.5b", "q4_k_m", 1);
    EXPECT_EQ(qwen.type_of("blk.0.attn_q.weight"), "Q5_0");
    EXPECT_EQ(qwen.type_of("token_embd.weight"), "Q8_0");
    EXPECT_EQ(qwen.type_of("blk.0.ffn_down.weight"), "Q6_K");  // 4864 = 19 * 256
    // Gemma 3 1B: n_embd 1152 = 4.5 * 256; the tied embedding gets Q6_K's fallback.
    EXPECT_EQ(tensors_of("gemma3-1b", "q4_k_m", 1).type_of("token_embd.weight"), "Q8_0");
}


TEST(SynthOptionsTest, AreCheckedWithClearMessages) {
    auto error_of = [](SynthOptions o) {
        Result<SynthPlan> plan = plan_synth_model(o);
        EXPECT_FALSE(plan.ok());
        return plan.ok() ? Error{} : plan.error();
    };
    SynthOptions o;
    o.preset = "llama9-1t";
    Error e = error_of(o);
    EXPECT_EQ(e.code, ErrorCode::invalid_argument);
    EXPECT_NE(e.message.find("llama9-1t"), std::string::npos);
    EXPECT_NE(e.message.find("smollm2-135m"), std::string::npos);  // lists the known ones

    o = SynthOptions{};
    o.type = "q4_k_xl";
    EXPECT_NE(error_of(o).message.find("q4_k_m"), std::string::npos);

    o = SynthOptions{};
    o.architecture = "qwen3";
    o.preset = "llama3-8b";
    e = error_of(o);
    EXPECT_EQ(e.code, ErrorCode::invalid_argument);
    EXPECT_NE(e.message.find("llama3-8b"), std::string::npos);
    EXPECT_NE(e.message.find("qwen3"), std::string::npos);

    o = SynthOptions{};
    o.architecture = "mamba";
    EXPECT_NE(error_of(o).message.find("gemma3"), std::string::npos);

    o = SynthOptions{};
    o.n_layer = 100000;
    EXPECT_EQ(error_of(o).code, ErrorCode::invalid_argument);

    // The architecture alone picks its default preset; nothing at all picks llama3-8b.
    auto preset_for = [](const std::string& arch, const std::string& preset) {
        SynthOptions so;
        so.architecture = arch;
        so.preset = preset;
        Result<synth::ResolvedOptions> r = synth::resolve_options(so);
        return r.ok() ? r->preset.info.name : "error: " + r.error().message;
    };
    EXPECT_EQ(preset_for("qwen3", ""), "qwen3-8b");
    EXPECT_EQ(preset_for("gemma3", ""), "gemma3-4b");
    EXPECT_EQ(preset_for("qwen2", ""), "qwen2.5-7b");
    EXPECT_EQ(preset_for("llama", "smollm2-135m"), "smollm2-135m");
    EXPECT_EQ(preset_for("", ""), "llama3-8b");
}



TEST(SynthMetadata, HyperParametersUseTheKeysOfRealFiles) {
    for (const SynthPreset& p : synth_presets()) {
        SCOPED_TRACE(p.name);
        const SynthOptions options = small_options(p.name, "q4_k_m", 0);
        Result<synth::ResolvedOptions> r = synth::resolve_options(options);
        ASSERT_TRUE(r.ok());
        GgufMetadata m;
        synth::write_model_metadata(m, *r, options);
        const std::string a = p.architecture;
        EXPECT_EQ(m.get_string("general.architecture"), a);
        EXPECT_EQ(m.get_uint("general.file_type"), 15u);
        EXPECT_EQ(m.get_uint("general.quantization_version"), 2u);
        // glm4moe's block_count also counts its multi-token prediction block.
        EXPECT_EQ(m.get_uint(a + ".block_count"), p.n_layer + (a == "glm4moe" ? 1 : 0));
        EXPECT_EQ(m.get_uint(a + ".context_length"), p.n_ctx_train);
        EXPECT_EQ(m.get_uint(a + ".embedding_length"), p.n_embd);
        EXPECT_EQ(m.get_uint(a + ".feed_forward_length"), p.n_ff);
        EXPECT_EQ(m.get_uint(a + ".attention.head_count"), p.n_head);
        if (a == "bert" || a == "nomic-bert") {
            // An encoder: LayerNorm's epsilon, not causal, a pooling; RoPE's base for nomic-bert
            // alone (bert has a position table instead).
            EXPECT_FLOAT_EQ(static_cast<float>(*m.get_float(a + ".attention.layer_norm_epsilon")), p.rms_norm_eps);
            EXPECT_EQ(m.get_bool(a + ".attention.causal"), false);
            EXPECT_EQ(m.get_uint(a + ".pooling_type"), p.name == "bge-small" ? 2u : 1u);
            if (a == "nomic-bert") {
                EXPECT_EQ(m.get_float(a + ".rope.freq_base"), std::optional<double>(1000.0));
            } else {
                EXPECT_FALSE(m.get_float(a + ".rope.freq_base").has_value());
            }
            continue;
        }
        EXPECT_EQ(m.get_uint(a + ".attention.head_count_kv"), p.n_head_kv);
        EXPECT_EQ(m.get_uint(a + ".vocab_size"), p.n_vocab);
        EXPECT_FLOAT_EQ(static_cast<float>(*m.get_float(a + ".rope.freq_base")), p.rope_freq_base);
        EXPECT_FLOAT_EQ(static_cast<float>(*m.get_float(a + ".attention.layer_norm_rms_epsilon")), p.rms_norm_eps);
        // Written by the Llama-derived converters and Phi-3's; GLM's rotate half of each head.
        const bool rope_dims =
            a == "llama" || a == "phi3" || a == "smollm3" || a == "mistral3" || a == "granite" || a == "granitemoe";
        const bool glm = a == "glm4" || a == "glm4moe";
        EXPECT_EQ(m.get_uint(a + ".rope.dimension_count"), rope_dims ? std::optional<uint64_t>(p.head_dim)
                                                           : glm     ? std::optional<uint64_t>(p.head_dim / 2)
                                                                     : std::nullopt);
        // Where config.json has head_dim.
        const bool head_lengths = a == "qwen3" || a == "qwen3moe" || a == "gemma3" || a == "gpt-oss" ||
                                  a == "seed_oss" || a == "mistral3" || glm;
        EXPECT_EQ(m.get_uint(a + ".attention.key_length"),
                  head_lengths ? std::optional<uint64_t>(p.head_dim) : std::nullopt);
        EXPECT_EQ(m.get_uint(a + ".attention.value_length"),
                  head_lengths ? std::optional<uint64_t>(p.head_dim) : std::nullopt);
        if (a == "gemma3") {
            EXPECT_EQ(m.get_uint("gemma3.attention.sliding_window"), p.name == "gemma3-1b" ? 512u : 1024u);
        }
        // Experts as llama.cpp reads them (hparams: expert_count, expert_used_count; qwen3moe,
        // gpt-oss and glm4moe also expert_feed_forward_length); dense models have none of the keys.
        const auto experts = [&](uint32_t v) { return p.n_expert > 0 ? std::optional<uint64_t>(v) : std::nullopt; };
        EXPECT_EQ(m.get_uint(a + ".expert_count"), experts(p.n_expert));
        EXPECT_EQ(m.get_uint(a + ".expert_used_count"), experts(p.n_expert_used));
        EXPECT_EQ(m.get_uint(a + ".expert_feed_forward_length"), a == "qwen3moe" || a == "gpt-oss" || a == "glm4moe"
                                                                     ? std::optional<uint64_t>(p.n_ff_expert)
                                                                     : std::nullopt);
        if (a == "gpt-oss") {
            EXPECT_EQ(m.get_uint(a + ".attention.sliding_window"), 128u);
            EXPECT_EQ(m.get_string(a + ".rope.scaling.type"), "yarn");
            EXPECT_EQ(m.get_float(a + ".rope.scaling.factor"), 32.0);
            EXPECT_EQ(m.get_uint(a + ".rope.scaling.original_context_length"), 4096u);
        }
    }
    const SynthOptions overridden = small_options("gemma3-4b", "q6_k", 3);
    Result<synth::ResolvedOptions> r = synth::resolve_options(overridden);
    ASSERT_TRUE(r.ok());
    GgufMetadata m;
    synth::write_model_metadata(m, *r, overridden);
    EXPECT_EQ(m.get_uint("gemma3.block_count"), 3u);
    EXPECT_EQ(m.get_uint("general.file_type"), 18u);
    EXPECT_EQ(m.get_string("gemma3.rope.scaling.type"), "linear");
    EXPECT_EQ(m.get_float("gemma3.rope.scaling.factor"), 8.0);
    EXPECT_EQ(m.get_string("general.name"), "Gemma 3 4B IT (synthetic, 3 of 34 layers)");
}


TEST(SynthMetadata, RopeFactorsAreLlama31s) {
    const std::vector<float> f = synth::llama3_rope_factors(128, 500000.0f);
    ASSERT_EQ(f.size(), 64u);
    EXPECT_EQ(f.front(), 1.0f);  // high frequencies unchanged
    EXPECT_EQ(f.back(), 8.0f);   // low frequencies slowed by the scaling factor
    for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]);
}

}  // namespace
}  // namespace powerhouse
