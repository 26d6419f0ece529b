// Mistral 3 (general.architecture "mistral3": Ministral 3 3B/8B/14B, Devstral Small 2, and
// Mistral Small 3.x as recent converters write it): Llama's layer, usually with YaRN (its
// yarn_log_multiplier included) and Llama 4's attention temperature: past the original
// context, the queries are scaled up with the log of the position
// (attention.temperature_scale; Hparams::attn_temperature). Q, K and V may come as one
// tensor, and the attention's biases and output bias may be there, as llama.cpp reads them.
#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

Result<void> read_mistral3(const GgufModel& model, Hparams& hp) {
    const GgufMetadata& meta = model.metadata();
    const std::string& a = hp.architecture;
    if (hp.is_moe()) return make_error(ErrorCode::unsupported, "mistral3 with experts is not supported yet");
    PH_TRY(read_attention_layout(model, hp));
    hp.attn_temperature = static_cast<float>(meta.get_float(a + ".attention.temperature_scale").value_or(0.0));
    if (hp.attn_temperature != 0.0f) {
        // As llama.cpp: the temperature's steps are the original (pre-YaRN) context.
        hp.attn_temperature_length =
            static_cast<uint32_t>(meta.get_uint(a + ".rope.scaling.original_context_length").value_or(hp.n_ctx_train));
        if (hp.attn_temperature_length == 0) {
            return make_error(ErrorCode::format,
                              "mistral3.attention.temperature_scale needs a nonzero original context length");
        }
    }
    return {};
}

StepProgram build_mistral3(const Hparams& hp) {
    StepProgram p = start_program(hp);
    add_attention(p, hp,
                  AttentionBlock{.qkv_bias = hp.qkv_bias, .output_bias = hp.output_bias, .fused_qkv = hp.fused_qkv});
    add_gated_ffn(p, GateActivation::silu);
    add_output_head(p, hp);
    return p;
}

}  // namespace

const Architecture kMistral3{"mistral3", read_mistral3, build_mistral3};

}  // namespace powerhouse::arch
