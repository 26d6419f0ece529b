// Llama (and the models that share its GGUF name: Llama 2 and 3, Mistral, TinyLlama,
// SmolLM, Mixtral): pre-norm decoder layers with RMSNorm, rotary attention over grouped KV
// heads in the "normal" pair layout (the converter permuted Q and K), and a SwiGLU
// feed-forward. Mixtral's feed-forward is routed: a softmax over its 8 experts, the top 2
// renormalised.
#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

Result<void> read_llama(const GgufModel&, Hparams&) { return {}; }

StepProgram build_llama(const Hparams& hp) {
    StepProgram p = start_program(hp);
    add_attention(p, hp, AttentionBlock{});
    if (hp.is_moe()) {
        add_moe_ffn(p, routed_experts(hp, ExpertGating::softmax, /*normalize=*/true));
    } else {
        add_gated_ffn(p, GateActivation::silu);
    }
    add_output_head(p, hp);
    return p;
}

}  // namespace

const Architecture kLlama{"llama", read_llama, build_llama};

}  // namespace powerhouse::arch
