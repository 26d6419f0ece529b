// One decoder step of a model, written down once as a short list of operations over named
// activation buffers and named weight tensors. The CPU backend (and later the CUDA backend)
// executes this list; adding an architecture means writing its list, not a new forward
// pass. Buffers hold one row per token of the batch being processed.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "arch/hparams.h"

namespace powerhouse::arch {

// Activation buffers of a step. Sizes per token: x, norm, tmp: n_embd; q, attn: n_head *
// head_dim; k, v: n_head_kv * head_dim; gate, up: n_ff; logits: n_vocab; router: the
// number of experts (the router's scores; mixture-of-experts models only).
enum class Buffer : uint8_t { x, norm, tmp, q, k, v, attn, gate, up, logits, router };
inline constexpr int kBufferCount = 11;

// How the router's scores become the chosen experts and their weights.
enum class ExpertGating {
    softmax,         // softmax over every expert, then the top k (Mixtral, Qwen3-MoE)
    softmax_chosen,  // the top k scores, then a softmax over those k (gpt-oss)
    sigmoid,         // a sigmoid of each score, then the top k (GLM-4.5, DeepSeek V3)
};

// The experts' gated activation: SwiGLU, or gpt-oss's clamped variant
// (x * sigmoid(alpha * x) * (y + 1), x clamped above at `limit`, y to [-limit, limit]).
enum class ExpertActivation { silu, swiglu_oai };

// A routed feed-forward (mixture of experts), the same in every layer of a model. Each
// token goes to the n_used experts with the highest scores; their outputs, weighted, are
// summed in the order of the chosen slots (highest score first).
struct MoeSpec {
    uint32_t n_expert = 0;
    uint32_t n_used = 0;
    uint32_t n_ff = 0;  // each expert's feed-forward width
    ExpertGating gating = ExpertGating::softmax;
    bool normalize = false;  // the chosen weights divided by their sum (at least 2^-14)
    ExpertActivation activation = ExpertActivation::silu;
    float alpha = 1.702f, limit = 7.0f;  // swiglu_oai
    // 3-D tensors [n_expert][rows][cols], "{}" the layer: gate and up n_ff x n_embd, down
    // n_embd x n_ff per expert. Biases [n_expert][rows] (F32); empty: none.
    std::string gate = "blk.{}.ffn_gate_exps.weight";
    std::string up = "blk.{}.ffn_up_exps.weight";
    std::string down = "blk.{}.ffn_down_exps.weight";
    std::string gate_bias, up_bias, down_bias;
    // The experts are chosen by their probability plus this bias ([n_expert] F32, "{}" the
    // layer; DeepSeek V3's and GLM-4.5's exp_probs_b), weighted by the probability alone.
    // Empty: none.
    std::string selection_bias;
    // The chosen weights multiplied by this after normalize; 0 or 1: not (GLM-4.5: 1 or 2.5).
    float weights_scale = 0.0f;
    // A shared expert that every token runs, unweighted, added to the routed experts' sum:
    // SwiGLU of n_ff_shared columns, 2-D tensors (gate and up n_ff_shared x n_embd, down
    // n_embd x n_ff_shared). n_ff_shared 0: none. Under expert parallelism the stage that
    // holds expert 0 runs it.
    uint32_t n_ff_shared = 0;
    std::string shared_gate = "blk.{}.ffn_gate_shexp.weight";
    std::string shared_up = "blk.{}.ffn_up_shexp.weight";
    std::string shared_down = "blk.{}.ffn_down_shexp.weight";
};

enum class OpKind : uint8_t {
    rms_norm,       // dst = rms_norm(a) * weight
    head_rms_norm,  // a = rms_norm(a) * weight, separately for each head (weight: head_dim)
    matmul,         // dst = a @ weight^T (weight rows are output features)
    add_bias,       // a += weight
    rope,           // a = rope(a) at each token's position, with the layer's base and scale;
                    // a nonzero `value` then multiplies each token's row by Llama 4's
                    // temperature (Hparams::attn_temperature: `value`, over its length)
    attention,      // dst = attention(q, k, v) with scores scaled by `value`, over the layer's
                    // window; k and v are appended to the layer's KV cache. A weight: the
                    // attention sinks, one logit per query head (gpt-oss)
    swiglu,         // dst = silu(a) * b
    geglu,          // dst = gelu(a) * b (tanh approximation)
    add,            // dst = a + b
    scale,          // dst = a * value
    moe,            // dst = the routed feed-forward (Op::moe) of a, given the router's
                    // scores in b
    // Encoders (BERT):
    layer_norm,  // dst = (a - mean(a)) / sqrt(var(a) + Hparams::norm_eps) * weight, per row; the
                 // bias is the add_bias after it, as ggml adds it
    gelu,        // dst = gelu(a) (tanh approximation, ggml's f16 table), not gated
    add_row,     // a += a row of weight (a table of full-width rows in any type the stage
                 // multiplies by): row `weight_row` for every token when set (BERT's token type
                 // 0), else row `position` of each token (BERT's position embeddings)
};

struct Op {
    OpKind kind;
    Buffer dst;
    Buffer a;
    Buffer b = Buffer::x;
    // Tensor name; "{}" stands for the layer index ("blk.{}.attn_q.weight"). Empty: none.
    std::string weight;
    float value = 0.0f;                            // the constant of scale, attention and rope
    std::shared_ptr<const MoeSpec> moe = nullptr;  // moe: the experts (their tensors name the weights)
    // matmul: the weight's first row, when the op uses a run of the tensor's rows rather than
    // the whole tensor (add_bias: its first value; add_row: the row every token adds). Phi-3 and GLM-4 store Q, K and V
    // in one tensor (attn_qkv, and its bias) and the gate and up projections in another (ffn_up); each op takes its
    // rows.
    std::optional<uint32_t> weight_row = std::nullopt;
};

struct StepProgram {
    std::string embedding;       // token embedding rows, looked up into Buffer::x
    std::vector<Op> input;       // after the embedding lookup, before the first layer
    std::vector<Op> layer;       // run once per layer
    // Layers [0, n_lead_layers) run these instead of `layer` (GLM-4.5's leading dense layers
    // before its mixture-of-experts ones).
    std::vector<Op> lead_layer;
    uint32_t n_lead_layers = 0;
    std::vector<Op> head;  // after the last layer: final norm and output projection
                           // (empty for an encoder: the last layer's x is the output)
    // Decoders attend causally: a row sees the positions of its sequence up to its own. An
    // encoder (BERT) does not: each row sees every position of its sequence in the batch and
    // before it, later rows of the batch included, so a sequence must come in one batch.
    bool causal = true;
    // Per layer (one entry each): the attention window and the RoPE base and scale that the
    // layer's rope and attention ops use.
    std::vector<LayerAttention> layers;

    // The ops layer `l` runs.
    const std::vector<Op>& layer_ops(uint32_t l) const { return l < n_lead_layers ? lead_layer : layer; }
};

// The step program of hp.architecture (which read_hparams has accepted), built by that
// architecture's own file (architecture.h).
StepProgram build_step_program(const Hparams& hp);

// The weight name of an op in a layer ("blk.3.attn_q.weight").
std::string weight_name(const Op& op, uint32_t layer);

}  // namespace powerhouse::arch
