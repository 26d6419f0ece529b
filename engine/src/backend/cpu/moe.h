// The routed feed-forward of mixture-of-experts models on the CPU (arch::MoeSpec): each
// token's router scores choose its experts and their weights (route_experts), then the
// tokens are grouped by expert, so that an expert's three matrices are read once for all
// the tokens of a batch that chose it, and each token's weighted expert outputs are summed
// in the order of its chosen slots, as llama.cpp sums them.
//
// Thread-safety: route_experts is a pure function; a MoeScratch is used by one call at a
// time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "arch/step_program.h"
#include "backend/cpu/interleave.h"
#include "backend/cpu/quant_dot.h"
#include "backend/cpu/thread_pool.h"
#include "backend/stage_layout.h"

namespace powerhouse::cpu {

// One token's routing: `scores` (spec.n_expert router outputs) to the spec.n_used chosen
// experts, highest first (equal scores: the lower index first), and their weights:
//   softmax         softmax over every expert, the chosen experts' probabilities;
//   softmax_chosen  the chosen experts' scores, softmaxed among themselves;
//   sigmoid         each score's sigmoid, the chosen experts' values;
// chosen by the probability plus `selection_bias` where one is given (MoeSpec::
// selection_bias; empty: none), weighted by the probability alone; then with
// spec.normalize divided by their sum (at least 2^-14, as llama.cpp clamps it), and
// multiplied by spec.weights_scale unless it is 0 or 1. `scores` holds at most
// arch::kMaxExperts values; `experts` and `weights` spec.n_used.
void route_experts(const arch::MoeSpec& spec, std::span<const float> scores, std::span<const float> selection_bias,
                   std::span<uint32_t> experts, std::span<float> weights);

// One expert's product with its own rows within run_moe: dst[t][r] = row r of the expert's
// matrix . converted activations of row t.
struct ExpertProduct {
    const BoundExperts* matrix = nullptr;
    uint32_t local = 0;              // the expert, counted from the stage's first
    const std::byte* act = nullptr;  // m rows of converted activations, act_row bytes apart
    size_t act_row = 0;
    int m = 0;
    float* dst = nullptr;  // [m][matrix->rows]
};

// Buffers of run_moe, grown on first use to what a batch needs.
struct MoeScratch {
    std::vector<uint32_t> experts;  // [n][n_used]
    std::vector<float> weights;     // [n][n_used]
    // The (token, slot) pairs (token * n_used + slot) of the stage's experts, grouped by
    // expert: expert e's from offsets[e] to offsets[e + 1].
    std::vector<int32_t> rows, offsets, next;
    std::vector<float> in, gate, up, out;  // per pair: [n_embd], [n_ff] x2, [n_embd]
    std::vector<float> slots;              // [n][n_used][n_embd] weighted expert outputs
    std::vector<std::byte> act, act2;      // converted activations of the products
    std::vector<ExpertProduct> jobs;        // the products of one step, and their row chunks
    std::vector<std::pair<uint32_t, int64_t>> chunks;
    uint64_t bytes() const;
};

// dst[t] = sum over slots s of weight(t, s) * expert(t, s)(src[t]) for the n tokens, with
// src and dst [n][n_embd] and scores [n][n_expert], plus the shared expert's output when the
// stage runs it (w.shared). Only the experts the stage holds (w.expert_begin ..
// w.expert_end) contribute; the caller all-reduces when others hold the rest. `w` is the
// bound moe op (stage_layout.h).
// Replaces w's expert matrices that have an interleaved layout for `isa` (interleave.h)
// with interleaved copies kept in `copies`; the file's pages go back when `release_from`.
void interleave_experts(ThreadPool& pool, KernelIsa isa, BoundWeight& w, InterleavedCopies& copies,
                        const GgufModel* release_from);

void run_moe(ThreadPool& pool, KernelIsa isa, const BoundWeight& w, const float* src, const float* scores,
             float* dst, int n, int64_t n_embd, MoeScratch& scratch);

}  // namespace powerhouse::cpu
