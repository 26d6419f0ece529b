// One decoder step of a model, written down once as a short list of operations over named
// activation buffers and named weight tensors. The CPU backend (and later the CUDA backend)
// executes this list; adding an architecture means writing its list, not a new forward
// pass. Buffers hold one row per token of the batch being processed.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <string>
#include <vector>

#include "arch/hparams.h"

namespace powerhouse::arch {

// Activation buffers of a step. Sizes per token: x, norm, tmp: n_embd; q, attn: n_head *
// head_dim; k, v: n_head_kv * head_dim; gate, up: n_ff; logits: n_vocab.
enum class Buffer : uint8_t { x, norm, tmp, q, k, v, attn, gate, up, logits };
inline constexpr int kBufferCount = 10;

enum class OpKind : uint8_t {
    rms_norm,       // dst = rms_norm(a) * weight
    head_rms_norm,  // a = rms_norm(a) * weight, separately for each head (weight: head_dim)
    matmul,         // dst = a @ weight^T (weight rows are output features)
    add_bias,       // a += weight
    rope,           // a = rope(a) at each token's position, with the layer's base and scale
    attention,      // dst = attention(q, k, v) with scores scaled by `value`, over the layer's
                    // window; k and v are appended to the layer's KV cache
    swiglu,         // dst = silu(a) * b
    geglu,          // dst = gelu(a) * b (tanh approximation)
    add,            // dst = a + b
    scale,          // dst = a * value
};

struct Op {
    OpKind kind;
    Buffer dst;
    Buffer a;
    Buffer b = Buffer::x;
    // Tensor name; "{}" stands for the layer index ("blk.{}.attn_q.weight"). Empty: none.
    std::string weight;
    float value = 0.0f;  // the constant of scale and attention
};

struct StepProgram {
    std::string embedding;       // token embedding rows, looked up into Buffer::x
    std::vector<Op> input;       // after the embedding lookup, before the first layer
    std::vector<Op> layer;       // run once per layer
    std::vector<Op> head;        // after the last layer: final norm and output projection
    // Per layer (one entry each): the attention window and the RoPE base and scale that the
    // layer's rope and attention ops use.
    std::vector<LayerAttention> layers;
};

StepProgram build_step_program(const Hparams& hp);

// The weight name of an op in a layer ("blk.3.attn_q.weight").
std::string weight_name(const Op& op, uint32_t layer);

}  // namespace powerhouse::arch
