// The tensors of a synthetic model: names and shapes as llama.cpp's GGUF conversions lay
// them out per architecture (a mixture of experts' feed-forward as one 3-D tensor per
// projection and layer, plus the router), and the type of each under a file type, chosen
// as llama.cpp's quantizer (llama_tensor_get_type in llama-quant.cpp) chooses it.
//
// Thread-safety: pure functions over value types.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "gguf/gguf_writer.h"
#include "synth/presets.h"
#include "tensor/dtype.h"

namespace powerhouse::synth {

enum class FileType {
    f32,
    f16,
    bf16,
    q4_0,
    q4_1,
    q5_0,
    q5_1,
    q8_0,
    q2_k,
    q3_k_m,
    q4_k_s,
    q4_k_m,
    q5_k_s,
    q5_k_m,
    q6_k,
    mxfp4_moe
};

struct FileTypeSpec {
    FileType type;
    std::string_view name;  // the --type value
    uint32_t llama_ftype;   // general.file_type
    GgmlType base;          // the type of most matrices
    std::string_view description;
};

const std::vector<FileTypeSpec>& file_type_specs();
const FileTypeSpec* find_file_type(std::string_view name);

enum class TensorRole {
    rope_freqs,
    rope_factors_long,  // phi3 LongRoPE: [head_dim / 2], the preset's values, F32
    rope_factors_short,
    token_embd,
    attn_norm,
    attn_q,
    attn_q_bias,
    attn_k,
    attn_k_bias,
    attn_v,
    attn_v_bias,
    attn_q_norm,
    attn_k_norm,
    attn_output,
    attn_output_bias,  // gpt-oss
    attn_sinks,        // gpt-oss: [n_head], one attention-sink logit per head, F32
    post_attention_norm,
    ffn_norm,
    ffn_gate,
    ffn_up,
    ffn_down,
    ffn_gate_inp,        // mixture of experts: the router, [n_expert][n_embd], always F32
    ffn_gate_inp_bias,   // gpt-oss: [n_expert]
    ffn_gate_exps,       // [n_expert][n_ff_expert][n_embd]
    ffn_up_exps,         // [n_expert][n_ff_expert][n_embd]
    ffn_down_exps,       // [n_expert][n_embd][n_ff_expert]
    ffn_gate_exps_bias,  // gpt-oss: [n_expert][n_ff_expert], F32
    ffn_up_exps_bias,    // gpt-oss: [n_expert][n_ff_expert], F32
    ffn_down_exps_bias,  // gpt-oss: [n_expert][n_embd], F32
    post_ffw_norm,
    attn_qkv,        // phi3: [n_embd][n_q + 2 n_kv], Q's rows, then K's, then V's
    exp_probs_b,     // glm4moe: [n_expert], the experts' selection bias, F32
    ffn_gate_shexp,  // glm4moe: the shared experts, [n_shared x n_ff_expert][n_embd]
    ffn_up_shexp,
    ffn_down_shexp,  // [n_embd][n_shared x n_ff_expert]
    nextn_eh_proj,   // glm4moe's prediction block: [2 n_embd] -> [n_embd]
    nextn_enorm,
    nextn_hnorm,
    nextn_shared_head_norm,
    output_norm,
    output,
    // bert: the input's tables and LayerNorm, and the post-norm layers' LayerNorms and biases
    token_types,    // [2][n_embd]
    position_embd,  // [n_ctx_train][n_embd]
    token_embd_norm,
    token_embd_norm_bias,
    attn_output_norm,
    attn_output_norm_bias,
    ffn_up_bias,
    ffn_down_bias,
    layer_output_norm,
    layer_output_norm_bias,
};

// How a tensor's values are drawn (weights.h).
enum class WeightInit { matrix, norm, bias, rope_freqs, fixed };
WeightInit weight_init(TensorRole role);

struct PlannedTensor {
    GgufTensorSpec spec;
    TensorRole role;
    int layer = -1;  // -1 outside the blocks
    std::vector<float> fixed;  // WeightInit::fixed: the values themselves
};

// What the type choice depends on besides the tensor itself.
struct MixtureContext {
    const FileTypeSpec* file_type = nullptr;
    int n_layer = 0;  // the file's block count (glm4moe's prediction blocks included)
    int n_gqa = 1;  // n_head / n_head_kv
    bool has_output = true;
    bool is_70b = false;
    int n_expert = 0;  // {arch}.expert_count; 0 for a dense model
};

GgmlType choose_tensor_type(const MixtureContext& context, TensorRole role, int layer, int64_t row_length);

// `preset.info.n_layer` may be an override of the real count.
std::vector<PlannedTensor> plan_tensors(const PresetSpec& preset, const FileTypeSpec& file_type);

}  // namespace powerhouse::synth
