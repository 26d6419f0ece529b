// Synthetic models: the vocabularies are working tokenizers of exactly the real size.
#include <gtest/gtest.h>

#include "engine/synth/synth_test_support.h"

namespace powerhouse {
namespace {

using namespace synth_test;


TEST(SynthVocab, Llama3IsAWorkingBpeTokenizer) {
    synth::Layout& layout = layout_of("llama3-8b");
    const GgufMetadata& m = layout.writer.metadata();
    const Vocab v = vocab_of(m);
    check_bpe_vocab(m, v, 128256, 16);
    EXPECT_EQ(m.get_string("tokenizer.ggml.pre"), "llama-bpe");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.bos_token_id"), "<|begin_of_text|>");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.eos_token_id"), "<|eot_id|>");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.eot_token_id"), "<|eot_id|>");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.eom_token_id"), "<|eom_id|>");
    EXPECT_EQ(m.get_uint("tokenizer.ggml.bos_token_id"), 128000u);
    EXPECT_EQ(m.get_uint("tokenizer.ggml.eos_token_id"), 128009u);
    EXPECT_EQ(v.tokens[128006], "<|start_header_id|>");
    EXPECT_EQ(v.tokens[128255], "<|reserved_special_token_247|>");
    EXPECT_EQ(v.types[128009], 3);
    EXPECT_EQ(m.get_bool("tokenizer.ggml.add_bos_token"), true);
    // The Llama 3 family carries Llama 3.1's published template.
    EXPECT_EQ(std::string(*m.get_string("tokenizer.chat_template")),
              test::read_file(test::shared_testdata_dir() / "templates" / "meta-llama-Llama-3.1-8B-Instruct.jinja"));
    EXPECT_EQ(m.get_string("general.name"), "Llama 3.1 8B Instruct (synthetic)");

    // The plan of the full model: the real tensor count, parameters and size.
    const SynthPlan plan = synth::make_plan(layout);
    EXPECT_EQ(plan.tensors.size(), 292u);
    EXPECT_EQ(plan.n_params, 8030261312u);  // Llama 3.1 8B, rope_freqs included
    // The real Q4_K_M file is 4.92 GB; only the vocabulary's bytes differ.
    EXPECT_GT(plan.file_bytes, 4'900'000'000u);
    EXPECT_LT(plan.file_bytes, 4'940'000'000u);
}


TEST(SynthVocab, Llama2IsAWorkingSpmTokenizer) {
    const GgufMetadata& m = layout_of("llama2-7b").writer.metadata();
    const Vocab v = vocab_of(m);
    check_spm_vocab(m, v, 32000, 3, 1);
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.bos_token_id"), "<s>");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.eos_token_id"), "</s>");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.unknown_token_id"), "<unk>");
    EXPECT_EQ(v.types[0], 2);
    EXPECT_EQ(m.get_bool("tokenizer.ggml.add_bos_token"), true);
    EXPECT_FALSE(m.contains("tokenizer.ggml.add_space_prefix"));  // absent: true
    EXPECT_NE(m.get_string("tokenizer.chat_template")->find("<<SYS>>"), std::string_view::npos);
}


TEST(SynthVocab, Gemma3IsAWorkingSpmTokenizer) {
    const GgufMetadata& m = layout_of("gemma3-1b").writer.metadata();
    const Vocab v = vocab_of(m);
    check_spm_vocab(m, v, 262144, 107, 16);
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.bos_token_id"), "<bos>");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.eos_token_id"), "<eos>");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.eot_token_id"), "<end_of_turn>");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.padding_token_id"), "<pad>");
    EXPECT_EQ(m.get_uint("tokenizer.ggml.eot_token_id"), 106u);
    EXPECT_EQ(v.tokens[105], "<start_of_turn>");
    EXPECT_EQ(m.get_bool("tokenizer.ggml.add_space_prefix"), false);
    EXPECT_NE(m.get_string("tokenizer.chat_template")->find("<start_of_turn>"), std::string_view::npos);
}


TEST(SynthVocab, LayoutsFitEveryPresetsVocabulary) {
    // build_vocab checks the arithmetic; the larger padded layouts are checked here cheaply.
    for (const synth::PresetSpec& p : synth::preset_specs()) {
        SCOPED_TRACE(p.info.name);
        EXPECT_EQ(p.vocab.n_vocab, p.info.n_vocab);
        EXPECT_LE(p.vocab.leading.size() + p.vocab.n_regular + p.vocab.trailing.size(), p.vocab.n_vocab);
        EXPECT_FALSE(p.vocab.bos.empty());
        EXPECT_FALSE(p.vocab.eos.empty());
    }
}


TEST(SynthVocab, Qwen3IsAWorkingBpeTokenizer) {
    const GgufMetadata& m = layout_of("qwen3-0.6b").writer.metadata();
    const Vocab v = vocab_of(m);
    check_bpe_vocab(m, v, 151936, 16);
    EXPECT_EQ(m.get_string("tokenizer.ggml.pre"), "qwen2");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.bos_token_id"), "<|endoftext|>");
    EXPECT_EQ(token_named_by(m, v, "tokenizer.ggml.eos_token_id"), "<|im_end|>");
    EXPECT_EQ(m.get_uint("tokenizer.ggml.eos_token_id"), 151645u);
    EXPECT_EQ(v.tokens[151657], "<tool_call>");
    EXPECT_EQ(v.types[151657], 4);  // USER_DEFINED, as convert_hf_to_gguf.py marks it
    EXPECT_EQ(v.tokens[151667], "<think>");
    EXPECT_EQ(v.tokens.back(), "[PAD151935]");
    EXPECT_EQ(v.types.back(), 5);
    EXPECT_EQ(m.get_bool("tokenizer.ggml.add_bos_token"), false);
    EXPECT_NE(m.get_string("tokenizer.chat_template")->find("<|im_start|>"), std::string_view::npos);
}

}  // namespace
}  // namespace powerhouse
