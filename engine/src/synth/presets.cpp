#include "synth/presets.h"

#include <fmt/format.h>

namespace powerhouse::synth {
namespace {

// Hyper-parameters are those of the models' Hugging Face configs as llama.cpp's
// convert_hf_to_gguf.py writes them; special tokens and their ids are those of the
// published tokenizers.

VocabSpec llama3_vocab() {
    VocabSpec v;
    v.kind = VocabKind::bpe;
    v.model = "gpt2";
    v.pre = "llama-bpe";
    v.n_vocab = 128256;
    v.n_regular = 128000;
    v.trailing = {{"<|begin_of_text|>"},
                  {"<|end_of_text|>"},
                  {"<|reserved_special_token_0|>"},
                  {"<|reserved_special_token_1|>"},
                  {"<|finetune_right_pad_id|>"},
                  {"<|reserved_special_token_2|>"},
                  {"<|start_header_id|>"},
                  {"<|end_header_id|>"},
                  {"<|eom_id|>"},
                  {"<|eot_id|>"},
                  {"<|python_tag|>"}};
    v.pad_pattern = "<|reserved_special_token_{}|>";
    v.pad_first = 3;
    v.pad_type = TokenType::control;
    v.bos = "<|begin_of_text|>";
    v.eos = "<|eot_id|>";
    v.eot = "<|eot_id|>";
    v.eom = "<|eom_id|>";
    v.add_bos = true;
    return v;
}

VocabSpec smollm2_vocab() {
    VocabSpec v;
    v.kind = VocabKind::bpe;
    v.model = "gpt2";
    v.pre = "smollm";
    v.n_vocab = 49152;
    for (const char* t :
         {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<reponame>", "<file_sep>", "<filename>",
          "<gh_stars>", "<issue_start>", "<issue_comment>", "<issue_closed>", "<jupyter_start>", "<jupyter_text>",
          "<jupyter_code>", "<jupyter_output>", "<jupyter_script>", "<empty_output>"}) {
        v.leading.push_back({t, TokenType::control});
    }
    v.n_regular = v.n_vocab - static_cast<uint32_t>(v.leading.size());
    v.bos = "<|im_start|>";
    v.eos = "<|im_end|>";
    v.eot = "<|im_end|>";
    v.unk = "<|endoftext|>";
    v.pad = "<|im_end|>";
    return v;
}

VocabSpec qwen_vocab(uint32_t n_vocab, bool qwen3) {
    VocabSpec v;
    v.kind = VocabKind::bpe;
    v.model = "gpt2";
    v.pre = "qwen2";
    v.n_vocab = n_vocab;
    v.n_regular = 151643;
    for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                          "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                          "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"}) {
        v.trailing.push_back({t, TokenType::control});
    }
    v.trailing.push_back({"<tool_call>", TokenType::user_defined});
    v.trailing.push_back({"</tool_call>", TokenType::user_defined});
    for (const char* t :
         {"<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"}) {
        v.trailing.push_back({t, TokenType::control});
    }
    if (qwen3) {
        for (const char* t : {"<tool_response>", "</tool_response>", "<think>", "</think>"}) {
            v.trailing.push_back({t, TokenType::user_defined});
        }
    }
    // convert_hf_to_gguf.py names the ids the tokenizer lacks "[PAD<id>]".
    v.pad_pattern = "[PAD{}]";
    v.pad_from_id = true;
    v.pad_type = TokenType::unused;
    v.bos = "<|endoftext|>";
    v.eos = "<|im_end|>";
    v.eot = "<|im_end|>";
    v.pad = "<|endoftext|>";
    return v;
}

VocabSpec llama2_vocab() {
    VocabSpec v;
    v.kind = VocabKind::spm;
    v.model = "llama";
    v.pre = "default";
    v.n_vocab = 32000;
    v.leading = {{"<unk>", TokenType::unknown}, {"<s>", TokenType::control}, {"</s>", TokenType::control}};
    v.n_regular = v.n_vocab - 3;
    v.bos = "<s>";
    v.eos = "</s>";
    v.unk = "<unk>";
    v.add_bos = true;
    return v;
}

VocabSpec gemma3_vocab(uint32_t n_vocab) {
    VocabSpec v;
    v.kind = VocabKind::spm;
    v.model = "llama";
    v.pre = "default";
    v.n_vocab = n_vocab;
    v.leading = {{"<pad>", TokenType::control}, {"<eos>", TokenType::control},  {"<bos>", TokenType::control},
                 {"<unk>", TokenType::unknown}, {"<mask>", TokenType::control}, {"[multimodal]", TokenType::control}};
    for (int i = 0; i < 99; ++i) v.leading.push_back({fmt::format("<unused{}>", i), TokenType::unused});
    v.leading.push_back({"<start_of_turn>", TokenType::control});
    v.leading.push_back({"<end_of_turn>", TokenType::control});
    v.n_regular = 262144 - static_cast<uint32_t>(v.leading.size());
    v.pad_pattern = "<unused{}>";
    v.pad_first = 99;
    v.pad_type = TokenType::unused;
    v.bos = "<bos>";
    v.eos = "<eos>";
    v.eot = "<end_of_turn>";
    v.unk = "<unk>";
    v.pad = "<pad>";
    v.add_bos = true;
    v.add_space_prefix = false;
    return v;
}

// o200k_harmony, gpt-oss's tokenizer: o200k_base's 199998 byte-level BPE tokens, then
// the specials at their published ids (199998 <|startoftext|> ... 200018 <|endofprompt|>,
// ids without a role named <|reserved_ID|>), reserved tokens up to 201088 in all. The
// GGUF conversions mark them all control tokens; BOS <|startoftext|>, EOS <|return|>,
// padding <|endoftext|>.
VocabSpec o200k_harmony_vocab() {
    VocabSpec v;
    v.kind = VocabKind::bpe;
    v.model = "gpt2";
    v.pre = "gpt-4o";
    v.n_vocab = 201088;
    v.n_regular = 199998;
    const std::pair<uint32_t, const char*> named[] = {
        {199998, "<|startoftext|>"}, {199999, "<|endoftext|>"}, {200002, "<|return|>"}, {200003, "<|constrain|>"},
        {200005, "<|channel|>"},     {200006, "<|start|>"},     {200007, "<|end|>"},    {200008, "<|message|>"},
        {200012, "<|call|>"},        {200018, "<|endofprompt|>"}};
    uint32_t id = v.n_regular;
    for (const auto& [named_id, text] : named) {
        for (; id < named_id; ++id) v.trailing.push_back({fmt::format("<|reserved_{}|>", id), TokenType::control});
        v.trailing.push_back({text, TokenType::control});
        ++id;
    }
    v.pad_pattern = "<|reserved_{}|>";
    v.pad_from_id = true;
    v.pad_type = TokenType::control;
    v.bos = "<|startoftext|>";
    v.eos = "<|return|>";
    v.pad = "<|endoftext|>";
    return v;
}

struct Shape {
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_ctx;
    float rope_base, eps;
    bool tied;
};

PresetSpec make(const char* name, const char* arch, const char* model_name, bool is_default, const Shape& s,
                VocabSpec vocab, ChatTemplateId chat_template) {
    PresetSpec p;
    p.info.name = name;
    p.info.architecture = arch;
    p.info.model_name = model_name;
    p.info.is_default = is_default;
    p.info.n_layer = s.n_layer;
    p.info.n_embd = s.n_embd;
    p.info.n_ff = s.n_ff;
    p.info.n_head = s.n_head;
    p.info.n_head_kv = s.n_head_kv;
    p.info.head_dim = s.head_dim;
    p.info.n_vocab = vocab.n_vocab;
    p.info.n_ctx_train = s.n_ctx;
    p.info.rope_freq_base = s.rope_base;
    p.info.rms_norm_eps = s.eps;
    p.info.tied_embeddings = s.tied;
    p.info.tokenizer_model = std::string(vocab.model);
    p.info.tokenizer_pre = std::string(vocab.pre);
    p.vocab = std::move(vocab);
    p.chat_template = chat_template;
    const std::string_view a = arch;
    p.write_rope_dims = a == "llama";
    p.qkv_bias = a == "qwen2";
    p.qk_norm = a == "qwen3" || a == "qwen3moe" || a == "gemma3";
    p.write_head_lengths = a == "qwen3" || a == "qwen3moe" || a == "gemma3" || a == "gpt-oss";
    p.write_expert_ff = a == "qwen3moe" || a == "gpt-oss";
    p.gpt_oss_blocks = a == "gpt-oss";
    p.sandwich_norms = a == "gemma3";
    return p;
}

// A mixture-of-experts feed-forward: `count` experts of `n_ff_expert` columns, `used` per token.
void set_experts(PresetSpec& p, uint32_t count, uint32_t used, uint32_t n_ff_expert) {
    p.info.n_expert = count;
    p.info.n_expert_used = used;
    p.info.n_ff_expert = n_ff_expert;
}

std::vector<PresetSpec> build_presets() {
    std::vector<PresetSpec> p;
    // Shapes: layers, n_embd, n_ff, heads, KV heads, head size, context, rope base, RMS eps, tied.
    p.push_back(make("llama3-8b", "llama", "Llama 3.1 8B Instruct", true,
                     {32, 4096, 14336, 32, 8, 128, 131072, 500000.0f, 1e-5f, false}, llama3_vocab(),
                     ChatTemplateId::llama3));
    p.back().llama3_rope_freqs = true;
    p.push_back(make("llama3-70b", "llama", "Llama 3.1 70B Instruct", false,
                     {80, 8192, 28672, 64, 8, 128, 131072, 500000.0f, 1e-5f, false}, llama3_vocab(),
                     ChatTemplateId::llama3));
    p.back().llama3_rope_freqs = true;
    p.back().is_70b = true;
    p.push_back(make("llama2-7b", "llama", "Llama 2 7B Chat", false,
                     {32, 4096, 11008, 32, 32, 128, 4096, 10000.0f, 1e-5f, false}, llama2_vocab(),
                     ChatTemplateId::llama2));
    p.push_back(make("mistral-7b", "llama", "Mistral 7B Instruct v0.2", false,
                     {32, 4096, 14336, 32, 8, 128, 32768, 1000000.0f, 1e-5f, false}, llama2_vocab(),
                     ChatTemplateId::mistral));
    p.push_back(make("tinyllama-1.1b", "llama", "TinyLlama 1.1B Chat v1.0", false,
                     {22, 2048, 5632, 32, 4, 64, 2048, 10000.0f, 1e-5f, false}, llama2_vocab(),
                     ChatTemplateId::zephyr));
    p.push_back(make("smollm2-135m", "llama", "SmolLM2 135M Instruct", false,
                     {30, 576, 1536, 9, 3, 64, 8192, 100000.0f, 1e-5f, true}, smollm2_vocab(),
                     ChatTemplateId::smollm2));
    p.push_back(make("qwen2.5-0.5b", "qwen2", "Qwen2.5 0.5B Instruct", false,
                     {24, 896, 4864, 14, 2, 64, 32768, 1000000.0f, 1e-6f, true}, qwen_vocab(151936, false),
                     ChatTemplateId::qwen25));
    p.push_back(make("qwen2.5-7b", "qwen2", "Qwen2.5 7B Instruct", true,
                     {28, 3584, 18944, 28, 4, 128, 32768, 1000000.0f, 1e-6f, false}, qwen_vocab(152064, false),
                     ChatTemplateId::qwen25));
    p.push_back(make("qwen3-0.6b", "qwen3", "Qwen3 0.6B", false,
                     {28, 1024, 3072, 16, 8, 128, 40960, 1000000.0f, 1e-6f, true}, qwen_vocab(151936, true),
                     ChatTemplateId::qwen3));
    p.push_back(make("qwen3-8b", "qwen3", "Qwen3 8B", true,
                     {36, 4096, 12288, 32, 8, 128, 40960, 1000000.0f, 1e-6f, false}, qwen_vocab(151936, true),
                     ChatTemplateId::qwen3));
    // Mixtures of experts. Qwen3-30B-A3B and Qwen3-235B-A22B: their config.json
    // (hidden_size, intermediate_size -> feed_forward_length, moe_intermediate_size ->
    // expert_feed_forward_length, num_experts, num_experts_per_tok, head_dim 128,
    // max_position_embeddings 40960, rope_theta 1e6, rms_norm_eps 1e-6, untied embeddings);
    // no layer is dense (decoder_sparse_step 1, mlp_only_layers empty).
    p.push_back(make("qwen3-30b-a3b", "qwen3moe", "Qwen3 30B A3B", true,
                     {48, 2048, 6144, 32, 4, 128, 40960, 1000000.0f, 1e-6f, false}, qwen_vocab(151936, true),
                     ChatTemplateId::qwen3));
    set_experts(p.back(), 128, 8, 768);
    p.push_back(make("qwen3-235b-a22b", "qwen3moe", "Qwen3 235B A22B", false,
                     {94, 4096, 12288, 64, 4, 128, 40960, 1000000.0f, 1e-6f, false}, qwen_vocab(151936, true),
                     ChatTemplateId::qwen3));
    set_experts(p.back(), 128, 8, 1536);
    // Mixtral-8x7B-Instruct-v0.1's config.json: Mistral 7B's attention and vocabulary (SPM,
    // 32000) with 8 experts of intermediate_size 14336 (num_local_experts, 2 per token), a
    // 32768 context and rope_theta 1e6. llama.cpp converts it as "llama" with expert
    // tensors; its chat template is the [INST] one of the mistral preset.
    p.push_back(make("mixtral-8x7b", "llama", "Mixtral 8x7B Instruct v0.1", false,
                     {32, 4096, 14336, 32, 8, 128, 32768, 1000000.0f, 1e-5f, false}, llama2_vocab(),
                     ChatTemplateId::mistral));
    set_experts(p.back(), 8, 2, 14336);
    // gpt-oss-20b and gpt-oss-120b, from their published config.json: hidden_size 2880,
    // 64 attention heads of head_dim 64 (query width 4096, wider than the model), 8 KV
    // heads, intermediate_size 2880 for every expert (num_local_experts 32 / 128,
    // experts_per_token 4), vocab_size 201088, max_position_embeddings 131072,
    // rope_theta 150000 with YaRN factor 32 over initial_context_length 4096,
    // sliding_window 128 on every other layer (layer_types: sliding first), rms_norm_eps
    // 1e-5, tie_word_embeddings false. The published GGUFs are MXFP4_MOE (synth's
    // mxfp4_moe type); the chat template is a placeholder, not OpenAI's harmony template.
    p.push_back(make("gpt-oss-20b", "gpt-oss", "gpt-oss 20B", true,
                     {24, 2880, 2880, 64, 8, 64, 131072, 150000.0f, 1e-5f, false}, o200k_harmony_vocab(),
                     ChatTemplateId::gpt_oss_placeholder));
    set_experts(p.back(), 32, 4, 2880);
    p.back().sliding_window = 128;
    p.back().rope_scaling_yarn = 32.0f;
    p.back().rope_scaling_original_context = 4096;
    p.push_back(make("gpt-oss-120b", "gpt-oss", "gpt-oss 120B", false,
                     {36, 2880, 2880, 64, 8, 64, 131072, 150000.0f, 1e-5f, false}, o200k_harmony_vocab(),
                     ChatTemplateId::gpt_oss_placeholder));
    set_experts(p.back(), 128, 4, 2880);
    p.back().sliding_window = 128;
    p.back().rope_scaling_yarn = 32.0f;
    p.back().rope_scaling_original_context = 4096;
    p.push_back(make("gemma3-1b", "gemma3", "Gemma 3 1B IT", false,
                     {26, 1152, 6912, 4, 1, 256, 32768, 1000000.0f, 1e-6f, true}, gemma3_vocab(262144),
                     ChatTemplateId::gemma3));
    p.back().sliding_window = 512;
    p.push_back(make("gemma3-4b", "gemma3", "Gemma 3 4B IT", true,
                     {34, 2560, 10240, 8, 4, 256, 131072, 1000000.0f, 1e-6f, true}, gemma3_vocab(262208),
                     ChatTemplateId::gemma3));
    p.back().sliding_window = 1024;
    p.back().rope_scaling_linear = 8.0f;
    return p;
}

}  // namespace

const std::vector<PresetSpec>& preset_specs() {
    static const std::vector<PresetSpec> presets = build_presets();
    return presets;
}

const PresetSpec* find_preset(std::string_view name) {
    for (const PresetSpec& p : preset_specs()) {
        if (p.info.name == name) return &p;
    }
    return nullptr;
}

const PresetSpec* default_preset(std::string_view architecture) {
    for (const PresetSpec& p : preset_specs()) {
        if (p.info.architecture == architecture && p.info.is_default) return &p;
    }
    return nullptr;
}

}  // namespace powerhouse::synth
