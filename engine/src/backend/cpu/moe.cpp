#include "backend/cpu/moe.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "backend/cpu/interleave.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/quant_dot.h"
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

void route_experts(const arch::MoeSpec& spec, std::span<const float> scores, std::span<const float> selection_bias,
                   std::span<uint32_t> experts, std::span<float> weights) {
    std::array<float, arch::kMaxExperts> probs_storage;
    std::array<float, arch::kMaxExperts> select_storage;
    std::array<uint32_t, arch::kMaxExperts> order_storage;
    const std::span<float> probs(probs_storage.data(), scores.size());
    const std::span<uint32_t> order(order_storage.data(), scores.size());
    if (spec.gating == arch::ExpertGating::softmax) {
        softmax(scores, probs);
    } else if (spec.gating == arch::ExpertGating::sigmoid) {
        for (size_t e = 0; e < scores.size(); ++e) probs[e] = 1.0f / (1.0f + std::exp(-scores[e]));
    } else {
        std::copy(scores.begin(), scores.end(), probs.begin());
    }
    // What the experts are chosen by: the probabilities, or those plus the bias.
    std::span<const float> select = probs;
    if (!selection_bias.empty()) {
        for (size_t e = 0; e < scores.size(); ++e) select_storage[e] = probs[e] + selection_bias[e];
        select = std::span<const float>(select_storage.data(), scores.size());
    }
    std::iota(order.begin(), order.end(), 0u);
    const auto k = static_cast<std::ptrdiff_t>(experts.size());
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](uint32_t a, uint32_t b) {
        return select[a] > select[b] || (select[a] == select[b] && a < b);
    });
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
    if (spec.weights_scale != 0.0f && spec.weights_scale != 1.0f) {
        for (float& w : weights) w *= spec.weights_scale;
    }
}

uint64_t MoeScratch::bytes() const {
    return (weights.capacity() + in.capacity() + gate.capacity() + up.capacity() + out.capacity() +
            slots.capacity()) *
               sizeof(float) +
           (experts.capacity() + rows.capacity() + offsets.capacity() + next.capacity()) * sizeof(uint32_t) +
           act.capacity() + act2.capacity();
}

namespace {

// The products of all the experts a batch chose, handed to the pool as one set of row
// chunks (one hand-out for every expert instead of one per expert and matrix): for a single
// token, eight experts' gate and up products are one parallel step rather than sixteen.
void grouped_products(ThreadPool& pool, KernelIsa isa, const std::vector<ExpertProduct>& jobs,
                      std::vector<std::pair<uint32_t, int64_t>>& chunks) {
    // Rows per chunk, as matmul takes them.
    const auto chunk_of = [&](size_t j) -> int64_t {
        return product_chunk_rows(jobs[j].m, jobs[j].matrix->interleaved);
    };
    chunks.clear();
    for (size_t j = 0; j < jobs.size(); ++j) {
        for (int64_t r0 = 0; r0 < jobs[j].matrix->rows; r0 += chunk_of(j)) {
            chunks.emplace_back(static_cast<uint32_t>(j), r0);
        }
    }
    pool.parallel_chunks(static_cast<int64_t>(chunks.size()), [&](int64_t c, int) {
        const auto [j, r0] = chunks[static_cast<size_t>(c)];
        const ExpertProduct& job = jobs[j];
        const BoundExperts& x = *job.matrix;
        const int rows = static_cast<int>(std::min<int64_t>(chunk_of(j), x.rows - r0));
        // Chunks start on a multiple of 16 rows: an interleaved group's first byte.
        const std::byte* w = x.data + x.expert_stride * job.local + x.row_stride * static_cast<uint64_t>(r0);
        if (x.interleaved) {
            dot_rows_interleaved(isa, x.type, x.in, w, rows / kInterleaveRows, job.act, job.act_row, job.m,
                                 job.dst + r0, static_cast<size_t>(x.rows));
        } else {
            dot_rows(isa, x.type, x.in, w, x.row_stride, rows, job.act, job.act_row, job.m, job.dst + r0,
                     static_cast<size_t>(x.rows));
        }
    });
}

// Converts `rows` rows of `width` floats to the activation format of `type`, on the pool.
const std::byte* convert_rows(ThreadPool& pool, KernelIsa isa, GgmlType type, const float* src, int64_t width,
                              size_t rows, std::vector<std::byte>& out, size_t& row_bytes_out) {
    row_bytes_out = activation_bytes(type, width);
    if (out.size() < row_bytes_out * rows) out.resize(row_bytes_out * rows);
    std::byte* act = out.data();
    const size_t row = row_bytes_out;
    pool.parallel_for(static_cast<int64_t>(rows), [&](int64_t begin, int64_t end, int) {
        for (int64_t r = begin; r < end; ++r) {
            quantize_activations(isa, type, src + r * width, act + static_cast<size_t>(r) * row, width);
        }
    });
    return act;
}

// dst += the shared expert's output for every token (llama.cpp adds it to the routed sum):
// its gate, up and down are one "expert" each, run by the same grouped products.
void run_shared_expert(ThreadPool& pool, KernelIsa isa, const BoundWeight& w, const float* src, float* dst, int n,
                       int64_t n_embd, MoeScratch& s) {
    const arch::MoeSpec& spec = *w.op->moe;
    const auto tokens = static_cast<size_t>(n);
    const auto embd = static_cast<size_t>(n_embd);
    const size_t ff = spec.n_ff_shared;
    const BoundExperts& gate = w.shared[0];
    const BoundExperts& up = w.shared[1];
    const BoundExperts& down = w.shared[2];
    s.gate.resize(tokens * ff);
    s.up.resize(tokens * ff);
    s.out.resize(tokens * embd);
    size_t gate_row = 0, up_row = 0, down_row = 0;
    const std::byte* gate_act = convert_rows(pool, isa, gate.type, src, n_embd, tokens, s.act, gate_row);
    const std::byte* up_act = gate_act;
    up_row = gate_row;
    if (activation_type(up.type) != activation_type(gate.type)) {
        up_act = convert_rows(pool, isa, up.type, src, n_embd, tokens, s.act2, up_row);
    }
    s.jobs.clear();
    s.jobs.push_back({&gate, 0, gate_act, gate_row, n, s.gate.data()});
    s.jobs.push_back({&up, 0, up_act, up_row, n, s.up.data()});
    grouped_products(pool, isa, s.jobs, s.chunks);
    swiglu(isa, s.gate.data(), s.up.data(), s.gate.data(), tokens * ff);
    const std::byte* down_act =
        convert_rows(pool, isa, down.type, s.gate.data(), static_cast<int64_t>(ff), tokens, s.act2, down_row);
    s.jobs.clear();
    s.jobs.push_back({&down, 0, down_act, down_row, n, s.out.data()});
    grouped_products(pool, isa, s.jobs, s.chunks);
    add(isa, dst, s.out.data(), dst, tokens * embd);
}

}  // namespace

void interleave_experts(ThreadPool& pool, KernelIsa isa, BoundWeight& w, InterleavedCopies& copies,
                        const GgufModel* release_from) {
    const uint32_t count = w.expert_end - w.expert_begin;
    for (BoundExperts& x : w.experts) {
        if (x.data == nullptr || x.interleaved) continue;
        if (const std::byte* copy = copies.copy(pool, isa, x.type, x.in, x.rows, x.row_stride, x.data, count,
                                                x.expert_stride, release_from)) {
            x.data = copy;
            x.interleaved = true;
        }
    }
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
    const std::span<const float> selection_bias = w.selection_bias != nullptr
                                                      ? std::span<const float>(w.selection_bias, spec.n_expert)
                                                      : std::span<const float>();
    for (size_t t = 0; t < tokens; ++t) {
        route_experts(spec, std::span<const float>(scores + t * spec.n_expert, spec.n_expert), selection_bias,
                      std::span<uint32_t>(s.experts.data() + t * k, k), std::span<float>(s.weights.data() + t * k, k));
    }
    // The (token, slot) pairs of the stage's experts, grouped by expert in pair order.
    const uint32_t count = w.expert_end - w.expert_begin;
    s.offsets.assign(count + 1, 0);
    for (const uint32_t e : s.experts) {
        if (e >= w.expert_begin && e < w.expert_end) ++s.offsets[e - w.expert_begin + 1];
    }
    for (uint32_t e = 0; e < count; ++e) s.offsets[e + 1] += s.offsets[e];
    const auto held = static_cast<size_t>(s.offsets[count]);
    s.rows.resize(held);
    {
        std::vector<int32_t>& next = s.next;
        next.assign(s.offsets.begin(), s.offsets.end() - 1);
        for (size_t i = 0; i < tokens * k; ++i) {
            const uint32_t e = s.experts[i];
            if (e >= w.expert_begin && e < w.expert_end) {
                s.rows[static_cast<size_t>(next[e - w.expert_begin]++)] = static_cast<int32_t>(i);
            }
        }
    }
    // Slots of experts held elsewhere stay zero.
    s.slots.assign(tokens * k * embd, 0.0f);
    if (held > 0) {
        s.in.resize(held * embd);
        s.gate.resize(held * ff);
        s.up.resize(held * ff);
        s.out.resize(held * embd);
        for (size_t r = 0; r < held; ++r) {
            std::copy_n(src + static_cast<size_t>(s.rows[r]) / k * embd, embd, s.in.data() + r * embd);
        }
        const BoundExperts& gate = w.experts[0];
        const BoundExperts& up = w.experts[1];
        const BoundExperts& down = w.experts[2];
        size_t gate_row = 0, up_row = 0, down_row = 0;
        const std::byte* gate_act = convert_rows(pool, isa, gate.type, s.in.data(), n_embd, held, s.act, gate_row);
        const std::byte* up_act = gate_act;
        up_row = gate_row;
        if (activation_type(up.type) != activation_type(gate.type)) {
            up_act = convert_rows(pool, isa, up.type, s.in.data(), n_embd, held, s.act2, up_row);
        }
        s.jobs.clear();
        for (uint32_t local = 0; local < count; ++local) {
            const auto first = static_cast<size_t>(s.offsets[local]);
            const int m = s.offsets[local + 1] - s.offsets[local];
            if (m == 0) continue;
            s.jobs.push_back({&gate, local, gate_act + first * gate_row, gate_row, m, s.gate.data() + first * ff});
            s.jobs.push_back({&up, local, up_act + first * up_row, up_row, m, s.up.data() + first * ff});
        }
        grouped_products(pool, isa, s.jobs, s.chunks);
        for (uint32_t local = 0; local < count; ++local) {
            const auto first = static_cast<size_t>(s.offsets[local]);
            const int m = s.offsets[local + 1] - s.offsets[local];
            if (m == 0) continue;
            if (gate.bias != nullptr) add_bias(s.gate.data() + first * ff, gate.bias + ff * local, ff, m);
            if (up.bias != nullptr) add_bias(s.up.data() + first * ff, up.bias + ff * local, ff, m);
        }
        activate(isa, spec, s.gate.data(), s.up.data(), held * ff);
        const std::byte* down_act =
            convert_rows(pool, isa, down.type, s.gate.data(), static_cast<int64_t>(ff), held, s.act2, down_row);
        s.jobs.clear();
        for (uint32_t local = 0; local < count; ++local) {
            const auto first = static_cast<size_t>(s.offsets[local]);
            const int m = s.offsets[local + 1] - s.offsets[local];
            if (m == 0) continue;
            s.jobs.push_back({&down, local, down_act + first * down_row, down_row, m, s.out.data() + first * embd});
        }
        grouped_products(pool, isa, s.jobs, s.chunks);
        for (size_t r = 0; r < held; ++r) {
            const auto pair = static_cast<size_t>(s.rows[r]);
            float* out = s.out.data() + r * embd;
            if (down.bias != nullptr) {
                const float* b = down.bias + embd * (s.experts[pair] - w.expert_begin);
                for (size_t i = 0; i < embd; ++i) out[i] += b[i];
            }
            scale(out, s.slots.data() + pair * embd, s.weights[pair], embd);
        }
    }
    for (size_t t = 0; t < tokens; ++t) {
        const float* slot = s.slots.data() + t * k * embd;
        float* out = dst + t * embd;
        std::copy_n(slot, embd, out);
        for (size_t j = 1; j < k; ++j) add(isa, out, slot + j * embd, out, embd);
    }
    if (w.shared[0].tensor != nullptr) run_shared_expert(pool, isa, w, src, dst, n, n_embd, s);
}

}  // namespace powerhouse::cpu
