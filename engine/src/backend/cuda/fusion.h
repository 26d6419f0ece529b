// Which ops of a step program the CUDA stage may run as one launch with a neighbour, from
// the program alone (what reads and writes which buffer). The stage then fuses only where
// the product takes the 8-bit path for the batch at hand (CudaStage::enqueue_layers):
//  - an RMS norm or a gate (SwiGLU, GeGLU) whose result is read next by a matrix product
//    also quantizes it for that product (ph_rms_norm_quantize, ph_gate_quantize);
//  - consecutive matrix products that read the same input (Q, K and V; gate and up) run as
//    one launch when their weights are of one type (ph_matmul_q8_set);
//  - a RoPE followed by the RoPE of another buffer (Q, then K) is one launch;
//  - a matrix product followed by the residual add of its result into another buffer adds
//    it in the product's launch (ph_matmul_q8_residual), when nothing reads the product's
//    own buffer afterwards (the ops after the add, the next layer's, the head's).
// Both give the unfused launches' bits, so fusing is invisible in the logits.
//
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <vector>

#include "arch/step_program.h"

namespace powerhouse::cuda {

struct FusionPlan {
    // For each op of the layer: the index of the matrix product that next reads what this
    // norm or gate writes, -1 when there is none (or the op is of another kind).
    std::vector<int> quantize_for;
    // For each op of the layer: true for a product whose next op is the residual add of its
    // result, which its launch can do.
    std::vector<bool> residual_next;
    // For each op of the layer: true for a product whose next op is a product of the same
    // input (neither writing it), which one launch can run with it.
    std::vector<bool> same_input_next;
    // For each op of the layer: true for a RoPE whose next op is the RoPE of another buffer
    // (Q, then K), which one launch rotates with it.
    std::vector<bool> rope_pair_next;
};

// `layer`: one layer's ops in order (every layer has the same); `head`: the ops after the
// last layer. A layer's ops are taken as followed by the same ops again (the next layer)
// and, after the last layer, by the head.
FusionPlan plan_fusions(std::span<const arch::Op* const> layer, std::span<const arch::Op* const> head);

}  // namespace powerhouse::cuda
