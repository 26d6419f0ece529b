#include "backend/cpu/moe.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/vec.h"

namespace powerhouse::cpu {

namespace {

// exp(x[i] - max) / sum, the sum accumulated in double as ggml's soft_max does.
void softmax(std::span<const float> x, std::span<float> out) {
    const float max = *std::max_element(x.begin(), x.end());
    double sum = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        out[i] = std::exp(x[i] - max);
        sum += out[i];
    }
    const auto inv = static_cast<float>(1.0 / sum);
    for (float& v : out) v *= inv;
}

// The gated activation of the experts over n values, in place in gate.
void activate(KernelIsa isa, const arch::MoeSpec& spec, float* gate, const float* up, size_t n) {
    if (spec.activation == arch::ExpertActivation::silu) {
        swiglu(isa, gate, up, gate, n);
        return;
    }
    for (size_t i = 0; i < n; ++i) {
        const float x = std::min(gate[i], spec.limit);
        const float y = std::clamp(up[i], -spec.limit, spec.limit);
        gate[i] = x / (1.0f + std::exp(spec.alpha * -x)) * (y + 1.0f);
    }
}

}  // namespace

void route_experts(const arch::MoeSpec& spec, std::span<const float> scores, std::span<uint32_t> experts,
                   std::span<float> weights) {
    std::array<float, arch::kMaxExperts> probs_storage;
    std::array<uint32_t, arch::kMaxExperts> order_storage;
    const std::span<float> probs(probs_storage.data(), scores.size());
    const std::span<uint32_t> order(order_storage.data(), scores.size());
    if (spec.gating == arch::ExpertGating::softmax) {
        softmax(scores, probs);
    } else {
        std::copy(scores.begin(), scores.end(), probs.begin());
    }
    std::iota(order.begin(), order.end(), 0u);
    const auto k = static_cast<std::ptrdiff_t>(experts.size());
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](uint32_t a, uint32_t b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); });
    for (size_t s = 0; s < experts.size(); ++s) {
        experts[s] = order[s];
        weights[s] = probs[order[s]];
    }
    if (spec.gating == arch::ExpertGating::softmax_chosen) {
        std::array<float, arch::kMaxExperts> chosen;
        std::copy(weights.begin(), weights.end(), chosen.begin());
        softmax(std::span<const float>(chosen.data(), weights.size()), weights);
    }
    if (spec.normalize) {
        double sum = 0.0;
        for (float w : weights) sum += w;
        const float total = std::max(static_cast<float>(sum), 6.103515625e-5f);
        for (float& w : weights) w /= total;
    }
}

uint64_t MoeScratch::bytes() const {
    return (weights.capacity() + in.capacity() + gate.capacity() + up.capacity() +
            out.capacity() + slots.capacity()) *
               sizeof(float) +
           (experts.capacity() + rows.capacity()) * sizeof(uint32_t) + act.capacity();
}

void run_moe(ThreadPool& pool, KernelIsa isa, const BoundWeight& w, const float* src, const float* scores,
             float* dst, int n, int64_t n_embd, MoeScratch& s) {
    const arch::MoeSpec& spec = *w.op->moe;
    const size_t k = spec.n_used;
    const size_t tokens = static_cast<size_t>(n);
    const auto embd = static_cast<size_t>(n_embd);
    const size_t ff = spec.n_ff;
    s.experts.resize(tokens * k);
    s.weights.resize(tokens * k);
    for (size_t t = 0; t < tokens; ++t) {
        route_experts(spec, std::span<const float>(scores + t * spec.n_expert, spec.n_expert),
                      std::span<uint32_t>(s.experts.data() + t * k, k), std::span<float>(s.weights.data() + t * k, k));
    }
    // Slots of experts held elsewhere stay zero.
    s.slots.assign(tokens * k * embd, 0.0f);
    s.rows.reserve(tokens * k);
    for (uint32_t e = w.expert_begin; e < w.expert_end; ++e) {
        s.rows.clear();
        for (size_t i = 0; i < tokens * k; ++i) {
            if (s.experts[i] == e) s.rows.push_back(static_cast<int32_t>(i));
        }
        if (s.rows.empty()) continue;
        const int m = static_cast<int>(s.rows.size());
        const auto rows = static_cast<size_t>(m);
        s.in.resize(rows * embd);
        s.gate.resize(rows * ff);
        s.up.resize(rows * ff);
        s.out.resize(rows * embd);
        for (size_t r = 0; r < rows; ++r) {
            std::copy_n(src + static_cast<size_t>(s.rows[r]) / k * embd, embd, s.in.data() + r * embd);
        }
        const uint32_t local = e - w.expert_begin;
        const auto product = [&](const BoundExperts& x, const float* in, float* out) {
            const MatmulWeights matrix{x.type, x.data + x.expert_stride * local, x.in, x.rows, x.row_stride};
            matmul(pool, isa, matrix, in, out, m, s.act);
            if (x.bias != nullptr) add_bias(out, x.bias + static_cast<size_t>(x.rows) * local, x.rows, m);
        };
        product(w.experts[0], s.in.data(), s.gate.data());
        product(w.experts[1], s.in.data(), s.up.data());
        activate(isa, spec, s.gate.data(), s.up.data(), rows * ff);
        product(w.experts[2], s.gate.data(), s.out.data());
        for (size_t r = 0; r < rows; ++r) {
            const auto pair = static_cast<size_t>(s.rows[r]);
            scale(s.out.data() + r * embd, s.slots.data() + pair * embd, s.weights[pair], embd);
        }
    }
    for (size_t t = 0; t < tokens; ++t) {
        const float* slot = s.slots.data() + t * k * embd;
        float* out = dst + t * embd;
        std::copy_n(slot, embd, out);
        for (size_t j = 1; j < k; ++j) add(isa, out, slot + j * embd, out, embd);
    }
}

}  // namespace powerhouse::cpu
