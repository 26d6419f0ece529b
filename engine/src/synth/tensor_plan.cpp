#include "synth/tensor_plan.h"

#include <fmt/format.h>

#include <algorithm>

namespace powerhouse::synth {
namespace {

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third one
// in between get the larger type (about half of them).
bool use_more_bits(int layer, int n_layer) {
    return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// A type whose block fits the row, as llama.cpp substitutes it for rows that are not a
// multiple of 256 (tensor_type_fallback). Older llama.cpp gave Q2_K and Q3_K rows IQ4_NL;
// current llama.cpp gives Q4_0, as here (the same size, 4.5 bits per weight).
GgmlType compatible_type(GgmlType chosen, int64_t row_length) {
    const auto fits = [row_length](GgmlType t) { return row_length % type_traits(t).block_size == 0; };
    if (fits(chosen)) return chosen;
    GgmlType fallback = GgmlType::f16;
    switch (chosen) {
        case GgmlType::q2_k:
        case GgmlType::q3_k:
            fallback = GgmlType::q4_0;
            break;
        case GgmlType::q4_k:
            fallback = GgmlType::q5_0;
            break;
        case GgmlType::q5_k:
            fallback = GgmlType::q5_1;
            break;
        case GgmlType::q6_k:
            fallback = GgmlType::q8_0;
            break;
        default:
            break;
    }
    return fits(fallback) ? fallback : GgmlType::f16;
}

std::string tensor_name(TensorRole role, int layer) {
    switch (role) {
        case TensorRole::rope_freqs:
            return "rope_freqs.weight";
        case TensorRole::rope_factors_long:
            return "rope_factors_long.weight";
        case TensorRole::rope_factors_short:
            return "rope_factors_short.weight";
        case TensorRole::token_embd:
            return "token_embd.weight";
        case TensorRole::output_norm:
            return "output_norm.weight";
        case TensorRole::output:
            return "output.weight";
        case TensorRole::token_types:
            return "token_types.weight";
        case TensorRole::position_embd:
            return "position_embd.weight";
        case TensorRole::token_embd_norm:
            return "token_embd_norm.weight";
        case TensorRole::token_embd_norm_bias:
            return "token_embd_norm.bias";
        default:
            break;
    }
    const char* suffix = "";
    switch (role) {
        case TensorRole::attn_norm:
            suffix = "attn_norm.weight";
            break;
        case TensorRole::attn_q:
            suffix = "attn_q.weight";
            break;
        case TensorRole::attn_q_bias:
            suffix = "attn_q.bias";
            break;
        case TensorRole::attn_k:
            suffix = "attn_k.weight";
            break;
        case TensorRole::attn_k_bias:
            suffix = "attn_k.bias";
            break;
        case TensorRole::attn_v:
            suffix = "attn_v.weight";
            break;
        case TensorRole::attn_v_bias:
            suffix = "attn_v.bias";
            break;
        case TensorRole::attn_q_norm:
            suffix = "attn_q_norm.weight";
            break;
        case TensorRole::attn_k_norm:
            suffix = "attn_k_norm.weight";
            break;
        case TensorRole::attn_output:
            suffix = "attn_output.weight";
            break;
        case TensorRole::post_attention_norm:
            suffix = "post_attention_norm.weight";
            break;
        case TensorRole::ffn_norm:
            suffix = "ffn_norm.weight";
            break;
        case TensorRole::ffn_gate:
            suffix = "ffn_gate.weight";
            break;
        case TensorRole::ffn_up:
            suffix = "ffn_up.weight";
            break;
        case TensorRole::ffn_down:
            suffix = "ffn_down.weight";
            break;
        case TensorRole::ffn_gate_inp:
            suffix = "ffn_gate_inp.weight";
            break;
        case TensorRole::ffn_gate_exps:
            suffix = "ffn_gate_exps.weight";
            break;
        case TensorRole::ffn_up_exps:
            suffix = "ffn_up_exps.weight";
            break;
        case TensorRole::ffn_down_exps:
            suffix = "ffn_down_exps.weight";
            break;
        case TensorRole::attn_output_bias:
            suffix = "attn_output.bias";
            break;
        case TensorRole::attn_sinks:
            suffix = "attn_sinks.weight";
            break;
        case TensorRole::ffn_gate_inp_bias:
            suffix = "ffn_gate_inp.bias";
            break;
        case TensorRole::ffn_gate_exps_bias:
            suffix = "ffn_gate_exps.bias";
            break;
        case TensorRole::ffn_up_exps_bias:
            suffix = "ffn_up_exps.bias";
            break;
        case TensorRole::ffn_down_exps_bias:
            suffix = "ffn_down_exps.bias";
            break;
        case TensorRole::post_ffw_norm:
            suffix = "post_ffw_norm.weight";
            break;
        case TensorRole::attn_qkv:
            suffix = "attn_qkv.weight";
            break;
        case TensorRole::exp_probs_b:
            suffix = "exp_probs_b.bias";
            break;
        case TensorRole::ffn_gate_shexp:
            suffix = "ffn_gate_shexp.weight";
            break;
        case TensorRole::ffn_up_shexp:
            suffix = "ffn_up_shexp.weight";
            break;
        case TensorRole::ffn_down_shexp:
            suffix = "ffn_down_shexp.weight";
            break;
        case TensorRole::nextn_eh_proj:
            suffix = "nextn.eh_proj.weight";
            break;
        case TensorRole::nextn_enorm:
            suffix = "nextn.enorm.weight";
            break;
        case TensorRole::nextn_hnorm:
            suffix = "nextn.hnorm.weight";
            break;
        case TensorRole::nextn_shared_head_norm:
            suffix = "nextn.shared_head_norm.weight";
            break;
        case TensorRole::attn_output_norm:
            suffix = "attn_output_norm.weight";
            break;
        case TensorRole::attn_output_norm_bias:
            suffix = "attn_output_norm.bias";
            break;
        case TensorRole::ffn_up_bias:
            suffix = "ffn_up.bias";
            break;
        case TensorRole::ffn_down_bias:
            suffix = "ffn_down.bias";
            break;
        case TensorRole::layer_output_norm:
            suffix = "layer_output_norm.weight";
            break;
        case TensorRole::layer_output_norm_bias:
            suffix = "layer_output_norm.bias";
            break;
        default:
            break;
    }
    return fmt::format("blk.{}.{}", layer, suffix);
}

// A BERT encoder's tensors after token_embd, in the converter's order: the input's tables and
// LayerNorm, then per layer Q, K, V and the output with their biases, attn_output_norm, up and
// down with their biases, layer_output_norm. No output norm, no output.
// nomic-bert's (NomicBertModel's order): token_types, token_embd_norm; per layer attn_qkv,
// attn_output, attn_output_norm, ffn_up (fc11), ffn_gate (fc12), ffn_down, layer_output_norm;
// no position table and no biases.
template <class Add>
void plan_nomic_bert(const PresetSpec& preset, Add& add) {
    const SynthPreset& p = preset.info;
    const int64_t n_embd = p.n_embd;
    const int64_t n_ff = p.n_ff;
    add(TensorRole::token_types, -1, {n_embd, 2});
    add(TensorRole::token_embd_norm, -1, {n_embd});
    add(TensorRole::token_embd_norm_bias, -1, {n_embd});
    for (int il = 0; il < static_cast<int>(p.n_layer); ++il) {
        add(TensorRole::attn_qkv, il, {n_embd, 3 * n_embd});
        add(TensorRole::attn_output, il, {n_embd, n_embd});
        add(TensorRole::attn_output_norm, il, {n_embd});
        add(TensorRole::attn_output_norm_bias, il, {n_embd});
        add(TensorRole::ffn_up, il, {n_embd, n_ff});
        add(TensorRole::ffn_gate, il, {n_embd, n_ff});
        add(TensorRole::ffn_down, il, {n_ff, n_embd});
        add(TensorRole::layer_output_norm, il, {n_embd});
        add(TensorRole::layer_output_norm_bias, il, {n_embd});
    }
}

template <class Add>
void plan_bert(const PresetSpec& preset, Add& add) {
    if (preset.nomic_bert) {
        plan_nomic_bert(preset, add);
        return;
    }
    const SynthPreset& p = preset.info;
    const int64_t n_embd = p.n_embd;
    const int64_t n_ff = p.n_ff;
    add(TensorRole::token_types, -1, {n_embd, 2});
    add(TensorRole::position_embd, -1, {n_embd, static_cast<int64_t>(p.n_ctx_train)});
    add(TensorRole::token_embd_norm, -1, {n_embd});
    add(TensorRole::token_embd_norm_bias, -1, {n_embd});
    for (int il = 0; il < static_cast<int>(p.n_layer); ++il) {
        add(TensorRole::attn_q, il, {n_embd, n_embd});
        add(TensorRole::attn_q_bias, il, {n_embd});
        add(TensorRole::attn_k, il, {n_embd, n_embd});
        add(TensorRole::attn_k_bias, il, {n_embd});
        add(TensorRole::attn_v, il, {n_embd, n_embd});
        add(TensorRole::attn_v_bias, il, {n_embd});
        add(TensorRole::attn_output, il, {n_embd, n_embd});
        add(TensorRole::attn_output_bias, il, {n_embd});
        add(TensorRole::attn_output_norm, il, {n_embd});
        add(TensorRole::attn_output_norm_bias, il, {n_embd});
        add(TensorRole::ffn_up, il, {n_embd, n_ff});
        add(TensorRole::ffn_up_bias, il, {n_ff});
        add(TensorRole::ffn_down, il, {n_ff, n_embd});
        add(TensorRole::ffn_down_bias, il, {n_embd});
        add(TensorRole::layer_output_norm, il, {n_embd});
        add(TensorRole::layer_output_norm_bias, il, {n_embd});
    }
}

}  // namespace

const std::vector<FileTypeSpec>& file_type_specs() {
    static const std::vector<FileTypeSpec> types = {
        {FileType::f32, "f32", 0, GgmlType::f32, "F32 everywhere"},
        {FileType::f16, "f16", 1, GgmlType::f16, "F16 matrices; norms and biases F32"},
        {FileType::bf16, "bf16", 32, GgmlType::bf16, "BF16 matrices; norms and biases F32"},
        {FileType::q4_0, "q4_0", 2, GgmlType::q4_0, "Q4_0; Q6_K output"},
        {FileType::q4_1, "q4_1", 3, GgmlType::q4_1, "Q4_1; Q6_K output"},
        {FileType::q5_0, "q5_0", 8, GgmlType::q5_0, "Q5_0; Q6_K output"},
        {FileType::q5_1, "q5_1", 9, GgmlType::q5_1, "Q5_1; Q6_K output"},
        {FileType::q8_0, "q8_0", 7, GgmlType::q8_0, "Q8_0 everywhere, output included"},
        {FileType::q2_k, "q2_k", 10, GgmlType::q2_k,
         "Q2_K; Q3_K attn_output and ffn_down; attn_v Q4_K (Q3_K below 4 query heads per KV head); Q6_K output"},
        {FileType::q3_k_m, "q3_k_m", 12, GgmlType::q3_k,
         "Q3_K; Q4_K attn_output, ffn_down (Q5_K in the first 1/16 of layers) and attn_v (Q5_K in layers 0-1); "
         "Q6_K output"},
        {FileType::q4_k_s, "q4_k_s", 14, GgmlType::q4_k,
         "Q4_K; Q5_K attn_v in layers 0-3 and ffn_down in the first 1/8 of layers; Q6_K output"},
        {FileType::q4_k_m, "q4_k_m", 15, GgmlType::q4_k,
         "Q4_K; Q6_K output and attn_v/ffn_down in about half the layers"},
        {FileType::q5_k_s, "q5_k_s", 16, GgmlType::q5_k, "Q5_K; Q6_K output"},
        {FileType::q5_k_m, "q5_k_m", 17, GgmlType::q5_k,
         "Q5_K; Q6_K output and attn_v/ffn_down in about half the layers"},
        {FileType::q6_k, "q6_k", 18, GgmlType::q6_k, "Q6_K everywhere"},
        {FileType::mxfp4_moe, "mxfp4_moe", 38, GgmlType::mxfp4,
         "MXFP4 expert tensors; Q8_0 every other matrix, output included (gpt-oss's published type)"},
    };
    return types;
}

const FileTypeSpec* find_file_type(std::string_view name) {
    for (const FileTypeSpec& t : file_type_specs()) {
        if (t.name == name) return &t;
    }
    return nullptr;
}

WeightInit weight_init(TensorRole role) {
    switch (role) {
        case TensorRole::rope_freqs:
            return WeightInit::rope_freqs;
        case TensorRole::rope_factors_long:
        case TensorRole::rope_factors_short:
            return WeightInit::fixed;
        case TensorRole::attn_norm:
        case TensorRole::attn_q_norm:
        case TensorRole::attn_k_norm:
        case TensorRole::post_attention_norm:
        case TensorRole::ffn_norm:
        case TensorRole::post_ffw_norm:
        case TensorRole::nextn_enorm:
        case TensorRole::nextn_hnorm:
        case TensorRole::nextn_shared_head_norm:
        case TensorRole::output_norm:
        case TensorRole::token_embd_norm:
        case TensorRole::attn_output_norm:
        case TensorRole::layer_output_norm:
            return WeightInit::norm;
        case TensorRole::attn_q_bias:
        case TensorRole::attn_k_bias:
        case TensorRole::attn_v_bias:
        case TensorRole::attn_output_bias:
        case TensorRole::attn_sinks:
        case TensorRole::ffn_gate_inp_bias:
        case TensorRole::ffn_gate_exps_bias:
        case TensorRole::ffn_up_exps_bias:
        case TensorRole::ffn_down_exps_bias:
        case TensorRole::exp_probs_b:
        case TensorRole::token_embd_norm_bias:
        case TensorRole::attn_output_norm_bias:
        case TensorRole::ffn_up_bias:
        case TensorRole::ffn_down_bias:
        case TensorRole::layer_output_norm_bias:
            return WeightInit::bias;
        default:
            return WeightInit::matrix;
    }
}

// The rules of llama-quant.cpp's llama_tensor_get_type for the file types synth offers
// (the IQ types and Q2_K_S / Q3_K_S / Q3_K_L / IQ4 rules are left out). Its layer counters
// are per-layer indices here: i_attention_wv counts attn_v tensors, one per layer, and
// ffn_down's layer is the block number (parsed from the name when the model has experts)
// out of the file's block count, so both follow --layers. Expert tensors fall in the
// categories of their dense counterparts (llama.cpp matches "ffn_down" in
// "ffn_down_exps"); the router ffn_gate_inp is never quantized. Models with exactly 8
// experts (Mixtral) get Q8_0 attn_v and attn_k and a Q5_K attn_output in the low-bit
// mixtures; no rule of these file types depends on other expert counts. Phi-3's fused
// attn_qkv follows attn_v's rules (llama.cpp's category_is_attn_v); GLM-4.5's shared
// experts fall in their dense counterparts' categories as the routed ones do (ffn_down_shexp
// is an ffn_down of its block), and the prediction block's eh_proj gets the base type.
GgmlType choose_tensor_type(const MixtureContext& context, TensorRole role, int layer, int64_t row_length) {
    const FileTypeSpec& ft = *context.file_type;
    // Vectors are never quantized, nor is the router (llama.cpp skips "ffn_gate_inp", and
    // conversions store it as F32 whatever their output type).
    // BERT's token-type table stays F32 too: llama.cpp adds its row 0 with ggml_add, which takes
    // no F16 addend on the CPU.
    if (weight_init(role) != WeightInit::matrix || role == TensorRole::ffn_gate_inp ||
        role == TensorRole::token_types || ft.type == FileType::f32) {
        return GgmlType::f32;
    }
    // Unquantized conversions (and llama-quantize to F16/BF16) use one type for every matrix.
    if (ft.type == FileType::f16 || ft.type == FileType::bf16) return ft.base;
    // BERT's position table: llama.cpp's quantizer leaves it as the F16 conversion it starts
    // from has it.
    if (role == TensorRole::position_embd) return GgmlType::f16;
    // MXFP4_MOE: llama.cpp gives the 3-D expert tensors MXFP4 and every other matrix Q8_0,
    // with no other rule (the published gpt-oss GGUFs are this type).
    if (ft.type == FileType::mxfp4_moe) {
        const bool expert =
            role == TensorRole::ffn_gate_exps || role == TensorRole::ffn_up_exps || role == TensorRole::ffn_down_exps;
        return compatible_type(expert ? GgmlType::mxfp4 : GgmlType::q8_0, row_length);
    }

    const FileType f = ft.type;
    const int n = context.n_layer;
    const bool eight_experts = context.n_expert == 8;
    GgmlType t = ft.base;
    if (role == TensorRole::output || (role == TensorRole::token_embd && !context.has_output)) {
        if (row_length % type_traits(t).block_size != 0) {
            t = GgmlType::q8_0;
        } else if (t != GgmlType::q8_0) {
            t = GgmlType::q6_k;
        }
    } else if (role == TensorRole::attn_v || role == TensorRole::attn_qkv) {
        if (f == FileType::q2_k) {
            t = context.n_gqa >= 4 ? GgmlType::q4_k : GgmlType::q3_k;
        } else if (f == FileType::q3_k_m) {
            t = layer < 2 ? GgmlType::q5_k : GgmlType::q4_k;
        } else if ((f == FileType::q4_k_m || f == FileType::q5_k_m) && use_more_bits(layer, n)) {
            t = GgmlType::q6_k;
        } else if (f == FileType::q4_k_s && layer < 4) {
            t = GgmlType::q5_k;
        }
        // With 8 query heads per KV head attn_v is 8x smaller than attn_q: more bits are cheap.
        if (context.is_70b && (t == GgmlType::q3_k || t == GgmlType::q4_k)) t = GgmlType::q5_k;
        // Mixtral: attn_v is a small share of a model whose weight is in its experts.
        if (eight_experts) t = GgmlType::q8_0;
    } else if (role == TensorRole::attn_k) {
        if (eight_experts) t = GgmlType::q8_0;
    } else if (role == TensorRole::ffn_down || role == TensorRole::ffn_down_exps ||
               role == TensorRole::ffn_down_shexp) {
        if (f == FileType::q2_k) {
            t = GgmlType::q3_k;
        } else if (f == FileType::q3_k_m) {
            t = layer < n / 16 ? GgmlType::q5_k : GgmlType::q4_k;
        } else if ((f == FileType::q4_k_m || f == FileType::q5_k_m) && use_more_bits(layer, n)) {
            t = GgmlType::q6_k;
        } else if (f == FileType::q4_k_s && layer < n / 8) {
            t = GgmlType::q5_k;
        }
    } else if (role == TensorRole::attn_output) {
        if (eight_experts) {
            if (f == FileType::q2_k || f == FileType::q3_k_m || f == FileType::q4_k_s || f == FileType::q4_k_m) {
                t = GgmlType::q5_k;
            }
        } else if (f == FileType::q2_k) {
            t = GgmlType::q3_k;
        } else if (f == FileType::q3_k_m) {
            t = GgmlType::q4_k;
        }
    }
    return compatible_type(t, row_length);
}

std::vector<PlannedTensor> plan_tensors(const PresetSpec& preset, const FileTypeSpec& file_type) {
    const SynthPreset& p = preset.info;
    const int64_t n_embd = p.n_embd;
    const int64_t n_q = static_cast<int64_t>(p.n_head) * p.head_dim;      // query width
    const int64_t n_kv = static_cast<int64_t>(p.n_head_kv) * p.head_dim;  // key / value width
    const int64_t n_ff = p.n_ff;
    const int64_t n_vocab = p.n_vocab;
    // glm4moe: the decoder's layers, then the multi-token prediction blocks (block_count
    // counts both); the leading dense layers are at most the layers written.
    const int n_decoder = static_cast<int>(p.n_layer);
    const int n_blocks = n_decoder + static_cast<int>(preset.glm4moe.nextn_layers);
    const int n_lead_dense = std::min(static_cast<int>(preset.glm4moe.lead_dense), n_decoder);

    MixtureContext context;
    context.file_type = &file_type;
    context.n_layer = n_blocks;
    context.n_gqa = static_cast<int>(p.n_head / p.n_head_kv);
    context.has_output = !p.tied_embeddings;
    context.is_70b = preset.is_70b;
    context.n_expert = static_cast<int>(p.n_expert);
    const int64_t n_expert = p.n_expert;
    const int64_t n_ff_exp = p.n_ff_expert;
    const int64_t n_ff_shared = n_ff_exp * preset.glm4moe.shared_experts;

    std::vector<PlannedTensor> out;
    auto add = [&](TensorRole role, int layer, std::vector<int64_t> dims) {
        PlannedTensor t;
        t.role = role;
        t.layer = layer;
        t.spec.name = tensor_name(role, layer);
        t.spec.type = choose_tensor_type(context, role, layer, dims[0]);
        t.spec.dims = std::move(dims);
        out.push_back(std::move(t));
    };

    if (preset.llama3_rope_freqs) add(TensorRole::rope_freqs, -1, {p.head_dim / 2});
    if (!preset.longrope_long.empty()) {  // as Phi3MiniModel.generate_extra_tensors: long, then short
        add(TensorRole::rope_factors_long, -1, {static_cast<int64_t>(preset.longrope_long.size())});
        out.back().fixed = preset.longrope_long;
        add(TensorRole::rope_factors_short, -1, {static_cast<int64_t>(preset.longrope_short.size())});
        out.back().fixed = preset.longrope_short;
    }
    add(TensorRole::token_embd, -1, {n_embd, n_vocab});
    if (preset.bert) {
        plan_bert(preset, add);
        return out;
    }
    for (int il = 0; il < n_blocks; ++il) {
        add(TensorRole::attn_norm, il, {n_embd});
        const bool qkv_bias = preset.qkv_bias || preset.gpt_oss_blocks;
        if (preset.fused_qkv) {
            add(TensorRole::attn_qkv, il, {n_embd, n_q + 2 * n_kv});
        } else {
            add(TensorRole::attn_q, il, {n_embd, n_q});
            if (qkv_bias) add(TensorRole::attn_q_bias, il, {n_q});
            add(TensorRole::attn_k, il, {n_embd, n_kv});
            if (qkv_bias) add(TensorRole::attn_k_bias, il, {n_kv});
            add(TensorRole::attn_v, il, {n_embd, n_kv});
            if (qkv_bias) add(TensorRole::attn_v_bias, il, {n_kv});
        }
        if (preset.qk_norm) {
            add(TensorRole::attn_q_norm, il, {p.head_dim});
            add(TensorRole::attn_k_norm, il, {p.head_dim});
        }
        add(TensorRole::attn_output, il, {n_q, n_embd});
        if (preset.gpt_oss_blocks) {
            // gpt-oss: the feed-forward's input norm is named post_attention_norm.
            add(TensorRole::attn_output_bias, il, {n_embd});
            add(TensorRole::attn_sinks, il, {static_cast<int64_t>(p.n_head)});
            add(TensorRole::post_attention_norm, il, {n_embd});
        } else if (preset.ffn_norm_is_post_attention) {
            add(TensorRole::post_attention_norm, il, {n_embd});
        } else {
            if (preset.sandwich_norms) add(TensorRole::post_attention_norm, il, {n_embd});
            add(TensorRole::ffn_norm, il, {n_embd});
        }
        if (n_expert > 0 && il >= n_lead_dense) {
            const bool biases = preset.gpt_oss_blocks;
            add(TensorRole::ffn_gate_inp, il, {n_embd, n_expert});
            if (biases) add(TensorRole::ffn_gate_inp_bias, il, {n_expert});
            if (p.architecture == "glm4moe") add(TensorRole::exp_probs_b, il, {n_expert});
            add(TensorRole::ffn_gate_exps, il, {n_embd, n_ff_exp, n_expert});
            if (biases) add(TensorRole::ffn_gate_exps_bias, il, {n_ff_exp, n_expert});
            add(TensorRole::ffn_up_exps, il, {n_embd, n_ff_exp, n_expert});
            if (biases) add(TensorRole::ffn_up_exps_bias, il, {n_ff_exp, n_expert});
            add(TensorRole::ffn_down_exps, il, {n_ff_exp, n_embd, n_expert});
            if (biases) add(TensorRole::ffn_down_exps_bias, il, {n_embd, n_expert});
            if (n_ff_shared > 0) {
                add(TensorRole::ffn_gate_shexp, il, {n_embd, n_ff_shared});
                add(TensorRole::ffn_up_shexp, il, {n_embd, n_ff_shared});
                add(TensorRole::ffn_down_shexp, il, {n_ff_shared, n_embd});
            }
        } else if (preset.fused_gate_up) {
            add(TensorRole::ffn_up, il, {n_embd, 2 * n_ff});
            add(TensorRole::ffn_down, il, {n_ff, n_embd});
        } else {
            add(TensorRole::ffn_gate, il, {n_embd, n_ff});
            add(TensorRole::ffn_up, il, {n_embd, n_ff});
            add(TensorRole::ffn_down, il, {n_ff, n_embd});
        }
        if (preset.sandwich_norms) add(TensorRole::post_ffw_norm, il, {n_embd});
        if (il >= n_decoder) {  // a prediction block's own tensors (llama.cpp loads, never runs them)
            add(TensorRole::nextn_eh_proj, il, {2 * n_embd, n_embd});
            add(TensorRole::nextn_enorm, il, {n_embd});
            add(TensorRole::nextn_hnorm, il, {n_embd});
            add(TensorRole::nextn_shared_head_norm, il, {n_embd});
        }
    }
    add(TensorRole::output_norm, -1, {n_embd});
    if (!p.tied_embeddings) add(TensorRole::output, -1, {n_embd, n_vocab});
    return out;
}

}  // namespace powerhouse::synth
