// Phi-3, Phi-3.5 and Phi-4 (general.architecture "phi3"): Llama's layer with NeoX RoPE, Q, K
// and V stored in one tensor (attn_qkv) and the gate and up projections in another (ffn_up, the
// gate's rows first). The long-context models (Phi-3-mini-128k, Phi-3.5) carry LongRoPE: two
// sets of frequency factors, rope_factors_short and rope_factors_long, the long ones used when
// the context is longer than rope.scaling.original_context_length, and a rope.scaling.attn_factor
// on cos and sin. The sliding window some files name is not applied, as llama.cpp does not.
#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

Result<void> read_phi3(const GgufModel& model, Hparams& hp) {
    hp.rope_layout = RopeLayout::neox;
    if (hp.is_moe()) return make_error(ErrorCode::unsupported, "Phi-3.5-MoE (phi3 with experts) is not supported yet");
    // Converted files fuse Q, K and V; a file with the three separate tensors also loads.
    hp.fused_qkv = model.find_tensor("blk.0.attn_qkv.weight") != nullptr;
    PH_TRY(check_fused_tensors(model, hp));

    const GgufTensorInfo* long_factors = model.find_tensor("rope_factors_long.weight");
    const GgufTensorInfo* short_factors = model.find_tensor("rope_factors_short.weight");
    if ((long_factors == nullptr) != (short_factors == nullptr)) {
        return make_error(ErrorCode::format, "the model has only one of rope_factors_long and rope_factors_short");
    }
    if (long_factors != nullptr && !hp.has_rope_freqs) {  // rope_freqs, where a file has both, comes first
        hp.has_rope_freqs = true;
        hp.rope_freqs = "rope_factors_short.weight";
        hp.rope_freqs_long = "rope_factors_long.weight";
        hp.rope_freqs_long_above = static_cast<uint32_t>(
            model.metadata().get_uint("phi3.rope.scaling.original_context_length").value_or(hp.n_ctx_train));
    }
    return {};
}

StepProgram build_phi3(const Hparams& hp) {
    StepProgram p = start_program(hp);
    add_attention(p, hp, AttentionBlock{.fused_qkv = hp.fused_qkv});
    add_fused_gated_ffn(p, hp);
    add_output_head(p, hp);
    return p;
}

}  // namespace

const Architecture kPhi3{"phi3", read_phi3, build_phi3};

}  // namespace powerhouse::arch
