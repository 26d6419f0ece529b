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

// GLM-4-0414 and GLM-4.5's tokenizer (pre "glm4"): 151329 byte-level BPE tokens, then the
// specials at their published ids (151329 <|endoftext|> ... 151342 <|end_of_video|>;
// GLM-4.5 adds 151343 <|begin_of_audio|> ... 151364 <|video|>, its thinking and tool-call
// tokens among them), and "[PAD<id>]" up to vocab_size 151552, as convert_hf_to_gguf.py
// fills the ids the tokenizer lacks. Token ids as the converter names them: GLM-4 (Glm4Model)
// BOS = EOS = UNK <|endoftext|>, EOT <|user|>; GLM-4.5 (_set_vocab_glm) BOS [gMASK], EOS
// <|endoftext|> (config.json's first eos_token_id), EOT <|user|>, EOM <|observation|>.
VocabSpec glm4_vocab(bool glm45) {
    VocabSpec v;
    v.kind = VocabKind::bpe;
    v.model = "gpt2";
    v.pre = "glm4";
    v.n_vocab = 151552;
    v.n_regular = 151329;
    for (const char* t :
         {"<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>", "<|assistant|>",
          "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>"}) {
        v.trailing.push_back({t, TokenType::control});
    }
    if (glm45) {
        for (const char* t : {"<|begin_of_audio|>",
                              "<|end_of_audio|>",
                              "<|begin_of_transcription|>",
                              "<|end_of_transcription|>",
                              "<|code_prefix|>",
                              "<|code_middle|>",
                              "<|code_suffix|>",
                              "<think>",
                              "</think>",
                              "<tool_call>",
                              "</tool_call>",
                              "<tool_response>",
                              "</tool_response>",
                              "<arg_key>",
                              "</arg_key>",
                              "<arg_value>",
                              "</arg_value>",
                              "/nothink",
                              "<|begin_of_box|>",
                              "<|end_of_box|>",
                              "<|image|>",
                              "<|video|>"}) {
            v.trailing.push_back({t, TokenType::control});
        }
    }
    v.pad_pattern = "[PAD{}]";
    v.pad_from_id = true;
    v.pad_type = TokenType::unused;
    v.bos = glm45 ? "[gMASK]" : "<|endoftext|>";
    v.eos = "<|endoftext|>";
    v.eot = "<|user|>";
    v.unk = "<|endoftext|>";
    if (glm45) {
        v.eom = "<|observation|>";
        v.pad = "<|endoftext|>";
    }
    return v;
}

// Phi-3-mini's tokenizer: Llama 2's SentencePiece model (32000 pieces) and 11 added tokens
// at 32000-32010 (<|endoftext|>, <|assistant|>, <|placeholder1-4|>, <|system|>, <|end|>,
// <|placeholder5-6|>, <|user|>), all marked special, then "[PAD<id>]" up to vocab_size 32064
// as Phi3MiniModel fills them; BOS <s>, EOS <|endoftext|>, EOT <|end|>.
VocabSpec phi3_vocab() {
    VocabSpec v = llama2_vocab();
    v.n_vocab = 32064;
    v.trailing = {{"<|endoftext|>"},    {"<|assistant|>"},    {"<|placeholder1|>"}, {"<|placeholder2|>"},
                  {"<|placeholder3|>"}, {"<|placeholder4|>"}, {"<|system|>"},       {"<|end|>"},
                  {"<|placeholder5|>"}, {"<|placeholder6|>"}, {"<|user|>"}};
    v.pad_pattern = "[PAD{}]";
    v.pad_from_id = true;
    v.pad_type = TokenType::unused;
    v.eos = "<|endoftext|>";
    v.eot = "<|end|>";
    v.pad = "<|endoftext|>";
    v.add_bos = false;
    return v;
}

// SmolLM3's tokenizer: Llama 3.2's byte-level BPE (pre "llama-bpe", 128000 tokens) with
// some of the reserved specials renamed for its chat format: <think> 128002, </think>
// 128003, <|im_start|> 128011, <|im_end|> 128012 (its EOS) and the tool-call tokens after
// them; padding <|finetune_right_pad_id|> 128004. Its tokenizer adds no BOS (bos_token
// null); <|begin_of_text|> is named BOS here, as llama.cpp wants one, with add_bos false.
VocabSpec smollm3_vocab() {
    VocabSpec v = llama3_vocab();
    v.trailing = {{"<|begin_of_text|>"},
                  {"<|end_of_text|>"},
                  {"<think>"},
                  {"</think>"},
                  {"<|finetune_right_pad_id|>"},
                  {"<|reserved_special_token_2|>"},
                  {"<|start_header_id|>"},
                  {"<|end_header_id|>"},
                  {"<|eom_id|>"},
                  {"<|eot_id|>"},
                  {"<|python_tag|>"},
                  {"<|im_start|>"},
                  {"<|im_end|>"},
                  {"<tool_response>"},
                  {"</tool_response>"},
                  {"<tool_call>"},
                  {"</tool_call>"}};
    v.pad_pattern = "<|reserved_special_token_{}|>";
    v.pad_first = 9;
    v.eos = "<|im_end|>";
    v.eot = "<|im_end|>";
    v.eom = "";
    v.pad = "<|finetune_right_pad_id|>";
    v.add_bos = false;
    return v;
}

// Seed-OSS's tokenizer (pre "seed-coder", vocab_size 155136): <seed:bos> 0, <seed:pad> 1,
// <seed:eos> 2 as published, then the byte-level BPE tokens, then the thinking, budget and
// tool-call specials its chat template uses, padded with "[PAD<id>]".
VocabSpec seed_oss_vocab() {
    VocabSpec v;
    v.kind = VocabKind::bpe;
    v.model = "gpt2";
    v.pre = "seed-coder";
    v.n_vocab = 155136;
    v.leading = {{"<seed:bos>"}, {"<seed:pad>"}, {"<seed:eos>"}};
    v.n_regular = 155000;
    for (const char* t : {"<seed:think>", "</seed:think>", "<seed:cot_budget_reflect>", "</seed:cot_budget_reflect>",
                          "<seed:tool_call>", "</seed:tool_call>", "<seed:tool_response>", "</seed:tool_response>"}) {
        v.trailing.push_back({t, TokenType::control});
    }
    v.pad_pattern = "[PAD{}]";
    v.pad_from_id = true;
    v.pad_type = TokenType::unused;
    v.bos = "<seed:bos>";
    v.eos = "<seed:eos>";
    v.pad = "<seed:pad>";
    v.add_bos = true;
    return v;
}

// Tekken (Mistral's tiktoken-style tokenizer, pre "tekken"): 1000 control tokens first
// (<unk> 0, <s> 1, </s> 2, [INST] 3, [/INST] 4, ... [SYSTEM_PROMPT] 17, [/SYSTEM_PROMPT] 18,
// ... [THINK] 34, [/THINK] 35, the others <SPECIAL_id>), then 130072 byte-level BPE tokens.
VocabSpec tekken_vocab() {
    VocabSpec v;
    v.kind = VocabKind::bpe;
    v.model = "gpt2";
    v.pre = "tekken";
    v.n_vocab = 131072;
    const std::pair<uint32_t, const char*> named[] = {{0, "<unk>"},
                                                      {1, "<s>"},
                                                      {2, "</s>"},
                                                      {3, "[INST]"},
                                                      {4, "[/INST]"},
                                                      {5, "[AVAILABLE_TOOLS]"},
                                                      {6, "[/AVAILABLE_TOOLS]"},
                                                      {7, "[TOOL_RESULTS]"},
                                                      {8, "[/TOOL_RESULTS]"},
                                                      {9, "[TOOL_CALLS]"},
                                                      {10, "[IMG]"},
                                                      {11, "<pad>"},
                                                      {12, "[IMG_BREAK]"},
                                                      {13, "[IMG_END]"},
                                                      {14, "[PREFIX]"},
                                                      {15, "[MIDDLE]"},
                                                      {16, "[SUFFIX]"},
                                                      {17, "[SYSTEM_PROMPT]"},
                                                      {18, "[/SYSTEM_PROMPT]"},
                                                      {19, "[TOOL_CONTENT]"},
                                                      {32, "[ARGS]"},
                                                      {33, "[CALL_ID]"},
                                                      {34, "[THINK]"},
                                                      {35, "[/THINK]"}};
    uint32_t id = 0;
    for (const auto& [named_id, text] : named) {
        for (; id < named_id; ++id) v.leading.push_back({fmt::format("<SPECIAL_{}>", id), TokenType::control});
        v.leading.push_back({text, named_id == 0 ? TokenType::unknown : TokenType::control});
        ++id;
    }
    for (; id < 1000; ++id) v.leading.push_back({fmt::format("<SPECIAL_{}>", id), TokenType::control});
    v.n_regular = v.n_vocab - 1000;
    v.bos = "<s>";
    v.eos = "</s>";
    v.unk = "<unk>";
    v.pad = "<pad>";
    v.add_bos = true;
    return v;
}

// Granite 3's tokenizer (pre "refact", StarCoder's byte-level BPE): <|end_of_text|> 0 (BOS,
// EOS and padding), the code specials 1-18, the BPE tokens up to 49152, then
// <|start_of_role|>, <|end_of_role|>, <|tool_call|> (vocab_size 49155; Granite 3.3 adds
// four more: 49159).
VocabSpec granite_vocab(uint32_t n_vocab) {
    VocabSpec v;
    v.kind = VocabKind::bpe;
    v.model = "gpt2";
    v.pre = "refact";
    v.n_vocab = n_vocab;
    for (const char* t :
         {"<|end_of_text|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<filename>", "<gh_stars>",
          "<issue_start>", "<issue_comment>", "<issue_closed>", "<jupyter_start>", "<jupyter_text>", "<jupyter_code>",
          "<jupyter_output>", "<empty_output>", "<commit_before>", "<commit_msg>", "<commit_after>", "<reponame>"}) {
        v.leading.push_back({t, TokenType::control});
    }
    v.n_regular = 49152 - static_cast<uint32_t>(v.leading.size());
    v.trailing = {{"<|start_of_role|>"}, {"<|end_of_role|>"}, {"<|tool_call|>"}};
    if (n_vocab > 49155) {
        for (const char* t : {"<think>", "</think>", "<response>", "</response>"}) {
            v.trailing.push_back({t, TokenType::control});
        }
    }
    v.bos = "<|end_of_text|>";
    v.eos = "<|end_of_text|>";
    v.pad = "<|end_of_text|>";
    v.add_bos = false;
    return v;
}

// bert-base-uncased's WordPiece vocabulary (30522 tokens), which bge-small/base-en-v1.5 and
// all-MiniLM-L6-v2 share, as llama.cpp's converter writes it: [PAD] at 0, [UNK] [CLS] [SEP]
// [MASK] at 100..103, [CLS] first and [SEP] last in every input. nomic-embed-text pads it to
// n_vocab 30528 with the same tokens first.
VocabSpec bert_vocab(std::string_view pre, uint32_t n_vocab = 30522) {
    VocabSpec v;
    v.kind = VocabKind::wpm;
    v.model = "bert";
    v.pre = pre;
    v.n_vocab = n_vocab;
    v.n_regular = 30522 - 999;
    v.leading = {{"[PAD]", TokenType::control},
                 {"[UNK]", TokenType::control},
                 {"[CLS]", TokenType::control},
                 {"[SEP]", TokenType::control},
                 {"[MASK]", TokenType::control}};
    v.pad_pattern = "[PAD{}]";
    v.pad_from_id = true;
    v.pad_type = TokenType::unused;
    v.bos = "[CLS]";
    v.eos = "[SEP]";
    v.unk = "[UNK]";
    v.pad = "[PAD]";
    v.add_bos = true;
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
    // As convert_hf_to_gguf.py writes them: rope.dimension_count for the Llama-derived
    // converters (and Phi-3's, GLM's), key/value lengths where config.json has head_dim.
    p.write_rope_dims = a == "llama" || a == "phi3" || a == "smollm3" || a == "mistral3" || a == "granite" ||
                        a == "granitemoe" || a == "glm4" || a == "glm4moe";
    p.qkv_bias = a == "qwen2" || a == "seed_oss" || a == "glm4" || a == "glm4moe";
    p.qk_norm = a == "qwen3" || a == "qwen3moe" || a == "gemma3";
    p.write_head_lengths = a == "qwen3" || a == "qwen3moe" || a == "gemma3" || a == "gpt-oss" || a == "seed_oss" ||
                           a == "glm4" || a == "glm4moe" || a == "mistral3";
    p.write_expert_ff = a == "qwen3moe" || a == "gpt-oss" || a == "glm4moe";
    p.gpt_oss_blocks = a == "gpt-oss";
    p.sandwich_norms = a == "gemma3" || a == "glm4";
    p.fused_qkv = a == "phi3";
    p.fused_gate_up = a == "phi3" || a == "glm4";
    p.ffn_norm_is_post_attention = a == "seed_oss" || a == "glm4moe";
    p.granite = a == "granite" || a == "granitemoe";
    p.bert = a == "bert" || a == "nomic-bert";
    p.nomic_bert = a == "nomic-bert";
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

    // Phi-3.5-mini-instruct's config.json: hidden_size 3072, intermediate_size 8192, 32
    // layers of 32 heads (head size 96, no grouped KV), rope_theta 10000, rms_norm_eps 1e-5,
    // untied, max_position_embeddings 131072 over original_max_position_embeddings 4096 with
    // LongRoPE (rope_scaling type "longrope": long_factor and short_factor, 48 values each,
    // written as rope_factors_long / rope_factors_short; attn_factor
    // sqrt(1 + ln(131072 / 4096) / ln 4096) = 1.1902), sliding_window 262144. The converter
    // fuses Q, K, V (attn_qkv) and gate, up (ffn_up).
    p.push_back(make("phi3.5-mini", "phi3", "Phi-3.5 mini Instruct", true,
                     {32, 3072, 8192, 32, 32, 96, 131072, 10000.0f, 1e-5f, false}, phi3_vocab(), ChatTemplateId::phi3));
    p.back().rope_scaling_original_context = 4096;
    p.back().sliding_window = 262144;
    p.back().longrope_long = {
        1.0800000429153442f, 1.1100000143051147f, 1.1399999856948853f, 1.340000033378601f,  1.5899999141693115f,
        1.600000023841858f,  1.6200000047683716f, 2.620000123977661f,  3.2300000190734863f, 3.2300000190734863f,
        4.789999961853027f,  7.400000095367432f,  7.700000286102295f,  9.09000015258789f,   12.199999809265137f,
        17.670000076293945f, 24.46000099182129f,  28.57000160217285f,  30.420001983642578f, 30.840002059936523f,
        32.590003967285156f, 32.93000411987305f,  42.320003509521484f, 44.96000289916992f,  50.340003967285156f,
        50.45000457763672f,  57.55000305175781f,  57.93000411987305f,  58.21000289916992f,  60.1400032043457f,
        62.61000442504883f,  62.62000274658203f,  62.71000289916992f,  63.1400032043457f,   63.1400032043457f,
        63.77000427246094f,  63.93000411987305f,  63.96000289916992f,  63.970001220703125f, 64.02999877929688f,
        64.06999969482422f,  64.08000183105469f,  64.12000274658203f,  64.41000366210938f,  64.4800033569336f,
        64.51000213623047f,  64.52999877929688f,  64.83999633789062f};
    p.back().longrope_short = {1.0f,
                               1.0199999809265137f,
                               1.0299999713897705f,
                               1.0299999713897705f,
                               1.0499999523162842f,
                               1.0499999523162842f,
                               1.0499999523162842f,
                               1.0499999523162842f,
                               1.0499999523162842f,
                               1.0699999332427979f,
                               1.0999999046325684f,
                               1.1099998950958252f,
                               1.1599998474121094f,
                               1.1599998474121094f,
                               1.1699998378753662f,
                               1.2899998426437378f,
                               1.339999794960022f,
                               1.679999828338623f,
                               1.7899998426437378f,
                               1.8199998140335083f,
                               1.8499997854232788f,
                               1.8799997568130493f,
                               1.9099997282028198f,
                               1.9399996995925903f,
                               1.9899996519088745f,
                               2.0199997425079346f,
                               2.0199997425079346f,
                               2.0199997425079346f,
                               2.0199997425079346f,
                               2.0199997425079346f,
                               2.0199997425079346f,
                               2.0299997329711914f,
                               2.0299997329711914f,
                               2.0299997329711914f,
                               2.0299997329711914f,
                               2.0299997329711914f,
                               2.0299997329711914f,
                               2.0299997329711914f,
                               2.0299997329711914f,
                               2.0299997329711914f,
                               2.0799996852874756f,
                               2.0899996757507324f,
                               2.189999580383301f,
                               2.2199995517730713f,
                               2.5899994373321533f,
                               2.729999542236328f,
                               2.749999523162842f,
                               2.8399994373321533f};
    p.back().rope_attn_factor = 1.1902380714238083f;
    // Phi-3-mini-4k-instruct: the same layer and vocabulary without LongRoPE:
    // max_position_embeddings 4096 (= original_max_position_embeddings), sliding_window 2047.
    p.push_back(make("phi3-mini", "phi3", "Phi-3 mini 4k Instruct", false,
                     {32, 3072, 8192, 32, 32, 96, 4096, 10000.0f, 1e-5f, false}, phi3_vocab(), ChatTemplateId::phi3));
    p.back().rope_scaling_original_context = 4096;
    p.back().sliding_window = 2047;
    // SmolLM3-3B's config.json: hidden_size 2048, intermediate_size 11008, 36 layers, 16
    // heads, 4 KV heads (head size 128), max_position_embeddings 65536, rope_theta 5e6,
    // rms_norm_eps 1e-6, tied; every 4th layer without RoPE (no_rope_layer_interval 4, which
    // llama.cpp fixes for the architecture), vocab_size 128256.
    p.push_back(make("smollm3-3b", "smollm3", "SmolLM3 3B", true,
                     {36, 2048, 11008, 16, 4, 128, 65536, 5000000.0f, 1e-6f, true}, smollm3_vocab(),
                     ChatTemplateId::smollm3));
    // Seed-OSS-36B-Instruct's config.json: hidden_size 5120, intermediate_size 27648, 64
    // layers, 80 heads of head_dim 128 (query width 10240, twice the model's), 8 KV heads,
    // max_position_embeddings 524288, rope_theta 1e7, rms_norm_eps 1e-6, Q/K/V biases
    // (attention_bias; no output bias), untied, vocab_size 155136.
    p.push_back(make("seed-oss-36b", "seed_oss", "Seed-OSS 36B Instruct", true,
                     {64, 5120, 27648, 80, 8, 128, 524288, 10000000.0f, 1e-6f, false}, seed_oss_vocab(),
                     ChatTemplateId::seed_oss));
    // GLM-4-9B-0414's config.json: hidden_size 4096, intermediate_size 13696, 40 layers, 32
    // heads, 2 KV heads, head_dim 128, partial_rotary_factor 0.5 (RoPE over 64 of each
    // head's 128), max_position_embeddings 32768, rope_theta 10000, rms_norm_eps 1e-5,
    // attention_bias (Q/K/V), untied, vocab_size 151552; sandwich norms.
    p.push_back(make("glm4-9b", "glm4", "GLM-4 9B 0414", true,
                     {40, 4096, 13696, 32, 2, 128, 32768, 10000.0f, 1e-5f, false}, glm4_vocab(false),
                     ChatTemplateId::glm4));
    p.back().rope_dims = 64;
    // GLM-4.5-Air's config.json: hidden_size 4096, 46 layers (num_hidden_layers) and 1
    // multi-token prediction block (num_nextn_predict_layers; the converter counts it in
    // block_count, 47), 96 heads of head_dim 128, 8 KV heads, partial_rotary_factor 0.5,
    // intermediate_size 10944 (the first_k_dense_replace 1 dense layer), n_routed_experts 128
    // of moe_intermediate_size 1408, num_experts_per_tok 8, n_shared_experts 1, sigmoid
    // routing with a selection bias (e_score_correction_bias -> exp_probs_b), norm_topk_prob
    // true, routed_scaling_factor 1.0, n_group 1, attention_bias, no Q/K norms (use_qk_norm
    // false), max_position_embeddings 131072, rope_theta 1e6, rms_norm_eps 1e-5, untied.
    p.push_back(make("glm4.5-air", "glm4moe", "GLM-4.5-Air", true,
                     {46, 4096, 10944, 96, 8, 128, 131072, 1000000.0f, 1e-5f, false}, glm4_vocab(true),
                     ChatTemplateId::glm45));
    set_experts(p.back(), 128, 8, 1408);
    p.back().rope_dims = 64;
    p.back().glm4moe = {
        .lead_dense = 1, .shared_experts = 1, .nextn_layers = 1, .weights_scale = 1.0f, .weights_norm = true};
    // GLM-4.5 (355B-A32B): hidden_size 5120, 92 layers + 1 prediction block, 96 heads of 128,
    // 8 KV heads, intermediate_size 12288 in the first_k_dense_replace 3 dense layers, 160
    // experts of 1536, 8 used, 1 shared, routed_scaling_factor 2.5, Q/K norms (use_qk_norm
    // true); the rest as GLM-4.5-Air.
    p.push_back(make("glm4.5", "glm4moe", "GLM-4.5", false,
                     {92, 5120, 12288, 96, 8, 128, 131072, 1000000.0f, 1e-5f, false}, glm4_vocab(true),
                     ChatTemplateId::glm45));
    set_experts(p.back(), 160, 8, 1536);
    p.back().rope_dims = 64;
    p.back().qk_norm = true;
    p.back().glm4moe = {
        .lead_dense = 3, .shared_experts = 1, .nextn_layers = 1, .weights_scale = 2.5f, .weights_norm = true};
    // Ministral-3-8B-Instruct-2512's text_config: hidden_size 4096, intermediate_size 14336,
    // 34 layers, 32 heads of head_dim 128, 8 KV heads, max_position_embeddings 262144,
    // rope_theta 1e6 with YaRN factor 16 over original_max_position_embeddings 16384
    // (mscale_all_dim 1 -> yarn_log_multiplier) and llama_4_scaling_beta 0.1 (the attention
    // temperature), rms_norm_eps 1e-5, untied, the Tekken vocabulary (131072).
    p.push_back(make("ministral3-8b", "mistral3", "Ministral 3 8B Instruct 2512", true,
                     {34, 4096, 14336, 32, 8, 128, 262144, 1000000.0f, 1e-5f, false}, tekken_vocab(),
                     ChatTemplateId::ministral3));
    p.back().rope_scaling_yarn = 16.0f;
    p.back().rope_scaling_original_context = 16384;
    p.back().yarn_log_multiplier = 1.0f;
    p.back().attn_temperature_scale = 0.1f;
    // granite-3.3-8b-instruct's config.json: hidden_size 4096, intermediate_size 12800, 40
    // layers, 32 heads, 8 KV heads, max_position_embeddings 131072, rope_theta 1e7,
    // rms_norm_eps 1e-5, tied, vocab_size 49159; embedding_multiplier 12, residual_multiplier
    // 0.22, attention_multiplier 0.0078125, logits_scaling 16.
    p.push_back(make("granite3.3-8b", "granite", "Granite 3.3 8B Instruct", true,
                     {40, 4096, 12800, 32, 8, 128, 131072, 10000000.0f, 1e-5f, true}, granite_vocab(49159),
                     ChatTemplateId::granite3));
    p.back().granite_scales = {12.0f, 0.22f, 0.0078125f, 16.0f};
    // granite-3.1-1b-a400m-instruct's config.json: hidden_size 1024, 24 layers, 16 heads, 8
    // KV heads, num_local_experts 32 of intermediate_size 512, num_experts_per_tok 8,
    // max_position_embeddings 131072, rope_theta 1.5e6, rms_norm_eps 1e-6, tied, vocab_size
    // 49155; embedding_multiplier 12, residual_multiplier 0.22, attention_multiplier
    // 0.015625, logits_scaling 6. The converter writes no expert_feed_forward_length: each
    // expert is feed_forward_length wide.
    p.push_back(make("granite3.1-1b-a400m", "granitemoe", "Granite 3.1 1B A400M Instruct", true,
                     {24, 1024, 512, 16, 8, 64, 131072, 1500000.0f, 1e-6f, true}, granite_vocab(49155),
                     ChatTemplateId::granite3));
    set_experts(p.back(), 32, 8, 512);
    p.back().granite_scales = {12.0f, 0.22f, 0.015625f, 6.0f};
    // BERT encoders, embedding models. bge-small-en-v1.5's config.json: hidden_size 384, 12
    // layers, 12 heads, intermediate_size 1536, max_position_embeddings 512, layer_norm_eps
    // 1e-12, vocab_size 30522, type_vocab_size 2; sentence-transformers pools the CLS row.
    // all-MiniLM-L6-v2: the same but 6 layers, and mean pooling. (Shape's rope base is unused.)
    p.push_back(make("bge-small", "bert", "bge-small-en-v1.5", true,
                     {12, 384, 1536, 12, 12, 32, 512, 0.0f, 1e-12f, true}, bert_vocab("bert-bge"),
                     ChatTemplateId::none));
    p.back().pooling_type = 2;
    p.push_back(make("minilm-l6", "bert", "all-MiniLM-L6-v2", false,
                     {6, 384, 1536, 12, 12, 32, 512, 0.0f, 1e-12f, true}, bert_vocab("default"), ChatTemplateId::none));
    p.back().pooling_type = 1;
    // nomic-embed-text-v1.5's config.json: n_embd 768, n_layer 12, n_head 12, n_inner 3072,
    // rotary_emb_base 1000, layer_norm_epsilon 1e-12, vocab_size 30528 (bert-base-uncased's
    // 30522 padded to a multiple of 64), type_vocab_size 2, activation swiglu, no biases; the
    // converter writes a context of 2048 (max_trained_positions) and mean pooling.
    p.push_back(make("nomic-embed", "nomic-bert", "nomic-embed-text-v1.5", true,
                     {12, 768, 3072, 12, 12, 64, 2048, 1000.0f, 1e-12f, true}, bert_vocab("bert-bge", 30528),
                     ChatTemplateId::none));
    p.back().pooling_type = 1;
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
