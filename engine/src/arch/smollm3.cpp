// SmolLM3: Llama's layer, except that every fourth layer (the 4th, 8th, ...) rotates neither Q
// nor K (NoPE). No GGUF key says so: llama.cpp fixes the step at 4 for this architecture, and
// so does this file. Q, K and V biases are used when the file has them.
#include "arch/architecture.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

constexpr uint32_t kNoRopeStep = 4;

Result<void> read_smollm3(const GgufModel& model, Hparams& hp) {
    if (hp.is_moe()) return make_error(ErrorCode::unsupported, "smollm3 with experts is not supported");
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        if ((il + 1) % kNoRopeStep == 0) hp.layers[il].rope = false;
    }
    return read_attention_layout(model, hp);
}

StepProgram build_smollm3(const Hparams& hp) {
    StepProgram p = start_program(hp);
    add_attention(p, hp,
                  AttentionBlock{.qkv_bias = hp.qkv_bias, .output_bias = hp.output_bias, .fused_qkv = hp.fused_qkv});
    add_gated_ffn(p, GateActivation::silu);
    add_output_head(p, hp);
    return p;
}

}  // namespace

const Architecture kSmolLm3{"smollm3", read_smollm3, build_smollm3};

}  // namespace powerhouse::arch
