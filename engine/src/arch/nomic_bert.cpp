// nomic-embed-text-v1 and v1.5 ("nomic-bert"), as llama.cpp's converter writes them and its
// bert graph runs them: a BERT encoder (bert.h) without a position table, whose Q and K are
// rotated instead (NeoX RoPE, {arch}.rope.freq_base: 1000 in v1.5), with Q, K and V in one
// tensor (attn_qkv), no biases anywhere, and a SwiGLU feed-forward, silu(ffn_gate(x)) *
// ffn_up(x), where BERT has GELU. Post-norm LayerNorm layers and the embeddings' LayerNorm as
// BERT; the file says mean pooling ({arch}.pooling_type 1).
#include <fmt/format.h>

#include "arch/architecture.h"
#include "arch/bert.h"
#include "arch/blocks.h"

namespace powerhouse::arch {

namespace {

Result<void> read_nomic_bert(const GgufModel& model, Hparams& hp) {
    PH_TRY(read_encoder(model, hp));
    hp.rope_layout = RopeLayout::neox;  // llama.cpp's rope type for LLM_ARCH_NOMIC_BERT
    if (model.find_tensor("blk.0.attn_qkv.weight") == nullptr) {
        return make_error(ErrorCode::format, "the model has no tensor 'blk.0.attn_qkv.weight' (Q, K and V in one)");
    }
    hp.fused_qkv = true;
    PH_TRY(check_fused_tensors(model, hp, /*fused_ffn=*/false));
    for (const char* name :
         {"blk.0.attn_qkv.bias", "blk.0.attn_output.bias", "blk.0.ffn_up.bias", "blk.0.ffn_down.bias"}) {
        if (model.find_tensor(name) != nullptr) {
            return make_error(ErrorCode::unsupported,
                              fmt::format("nomic-bert with biases ('{}') is not supported yet", name));
        }
    }
    if (model.find_tensor("blk.0.ffn_gate.weight") == nullptr) {
        return make_error(ErrorCode::format, "the model has no tensor 'blk.0.ffn_gate.weight' (SwiGLU's gate)");
    }
    return {};
}

StepProgram build_nomic_bert(const Hparams& hp) {
    return build_encoder(hp,
                         EncoderLayout{.position_table = false, .fused_qkv = true, .biases = false, .swiglu = true});
}

}  // namespace

const Architecture kNomicBert{"nomic-bert", read_nomic_bert, build_nomic_bert, /*embedding_only=*/true};

}  // namespace powerhouse::arch
