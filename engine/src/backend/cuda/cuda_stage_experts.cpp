// The CUDA stage's mixture-of-experts ops: the experts uploaded to the GPU and run there,
// or kept in RAM and run by the CPU between the GPU's layers.
#include "backend/cuda/cuda_stage_impl.h"

namespace powerhouse::cuda::detail {

Result<const void*> CudaStage::upload_weight(const void* data, uint64_t bytes) {
    Result<DeviceBuffer> buffer = DeviceBuffer::allocate(bytes);
    if (!buffer) return buffer.error();
    PH_TRY(buffer->upload(data, bytes));
    const void* on_device = buffer->data();
    weight_bytes_ += buffer->size();
    weights_.push_back(std::move(buffer).value());
    return on_device;
}

Result<DeviceOp> CudaStage::place_experts(const BoundWeight& w, DeviceOp d) {
    d.device_experts = true;
    d.expert_begin = w.expert_begin;
    d.expert_end = w.expert_end;
    // `count` experts of each matrix, from its first.
    const auto place = [&](const BoundExperts& e, uint64_t count, DeviceOp::Matrix& m) -> Result<void> {
        Result<const void*> matrix = upload_weight(e.data, e.expert_stride * count);
        if (!matrix) return matrix.error();
        m.type = e.type;
        m.data = static_cast<const std::byte*>(*matrix);
        m.expert_stride = e.expert_stride;
        m.row_bytes = e.row_stride;
        m.in = e.in;
        m.rows = e.rows;
        if (e.bias != nullptr) {
            Result<const void*> bias = upload_weight(e.bias, static_cast<uint64_t>(e.rows) * sizeof(float) * count);
            if (!bias) return bias.error();
            m.bias = static_cast<const float*>(*bias);
        }
        return {};
    };
    for (size_t i = 0; i < 3; ++i) PH_TRY(place(w.experts[i], w.expert_end - w.expert_begin, d.experts[i]));
    if (w.selection_bias != nullptr) {
        Result<const void*> bias = upload_weight(w.selection_bias, uint64_t{w.op->moe->n_expert} * sizeof(float));
        if (!bias) return bias.error();
        d.selection_bias = static_cast<const float*>(*bias);
    }
    if (w.shared[0].tensor != nullptr) {
        for (size_t i = 0; i < 3; ++i) PH_TRY(place(w.shared[i], 1, d.shared[i]));
        d.has_shared = true;
    }
    has_device_experts_ = true;
    return d;
}

Result<void> CudaStage::run_device_experts(const DeviceOp& d, int n) {
    const Op& op = *d.op;
    const arch::MoeSpec& spec = *op.moe;
    const int k = static_cast<int>(spec.n_used);
    const int pairs = n * k;
    const int64_t embd = hp_.n_embd;
    const int64_t ff = spec.n_ff;
    auto* ids = static_cast<int32_t*>(moe_ids_.data());
    auto* weights = static_cast<float*>(moe_weights_.data());
    const int gating = spec.gating == arch::ExpertGating::softmax          ? 0
                       : spec.gating == arch::ExpertGating::softmax_chosen ? 1
                                                                           : 2;
    PH_TRY(check(ph_moe_route(buffer(op.b), n, static_cast<int>(spec.n_expert), k, gating, spec.normalize ? 1 : 0,
                              d.selection_bias, spec.weights_scale, ids, weights, stream_),
                 "routing the tokens to their experts"));
    PH_TRY(check(cudaMemcpyAsync(host_moe_ids_.data(), ids, static_cast<size_t>(pairs) * sizeof(int32_t),
                                 cudaMemcpyDeviceToHost, stream_),
                 "copying the chosen experts to the host"));
    // Also the wait for the previous layer's pairs upload, which read host_moe_pairs_.
    PH_TRY(wait_stream("routing the tokens to their experts"));
    // The pairs of each of the stage's experts, in pair order (as the CPU takes them).
    const uint32_t count = d.expert_end - d.expert_begin;
    const auto mine = [&](int32_t e) {
        return e >= static_cast<int32_t>(d.expert_begin) && e < static_cast<int32_t>(d.expert_end);
    };
    moe_offsets_.assign(count + 1, 0);
    for (int i = 0; i < pairs; ++i) {
        const int32_t e = host_moe_ids_.data()[i];
        if (mine(e)) ++moe_offsets_[static_cast<size_t>(e) - d.expert_begin + 1];
    }
    for (uint32_t e = 0; e < count; ++e) moe_offsets_[e + 1] += moe_offsets_[e];
    std::vector<int32_t> next(moe_offsets_.begin(), moe_offsets_.end() - 1);
    for (int i = 0; i < pairs; ++i) {
        const int32_t e = host_moe_ids_.data()[i];
        if (mine(e)) host_moe_pairs_.data()[next[static_cast<size_t>(e) - d.expert_begin]++] = i;
    }
    const int held = moe_offsets_[count];
    auto* device_pairs = static_cast<int32_t*>(moe_pairs_.data());
    if (held > 0) {
        PH_TRY(check(cudaMemcpyAsync(device_pairs, host_moe_pairs_.data(), static_cast<size_t>(held) * sizeof(int32_t),
                                     cudaMemcpyHostToDevice, stream_),
                     "copying the experts' tokens to the GPU"));
    }
    auto* slots = static_cast<float*>(moe_slots_.data());
    PH_TRY(check(cudaMemsetAsync(slots, 0, static_cast<size_t>(pairs) * static_cast<size_t>(embd) * sizeof(float),
                                 stream_),
                 "clearing the experts' slots"));
    auto* in = static_cast<float*>(moe_in_.data());
    auto* gate = static_cast<float*>(moe_gate_.data());
    auto* up = static_cast<float*>(moe_up_.data());
    auto* out = static_cast<float*>(moe_out_.data());
    const auto expert_product = [&](const DeviceOp::Matrix& m, uint32_t local, const float* x, float* y,
                                    int rows) -> Result<void> {
        PH_TRY(product(m.type, m.data + m.expert_stride * local, m.row_bytes, m.rows, m.in, x, rows, y, "an expert"));
        if (m.bias == nullptr) return {};
        return check(ph_add_bias(y, m.bias + static_cast<size_t>(m.rows) * local, m.rows, rows, stream_),
                     "an expert's bias");
    };
    for (uint32_t local = 0; local < count; ++local) {
        const int first = moe_offsets_[local];
        const int m = moe_offsets_[local + 1] - first;
        if (m == 0) continue;
        const int32_t* expert_pairs = device_pairs + first;
        activations_changed();  // `in` and `gate` hold the previous expert's rows
        PH_TRY(check(ph_moe_gather(buffer(op.a), embd, expert_pairs, k, m, in, stream_), "gathering an expert's rows"));
        PH_TRY(expert_product(d.experts[0], local, in, gate, m));
        PH_TRY(expert_product(d.experts[1], local, in, up, m));
        const int64_t values = ff * m;
        PH_TRY(check(spec.activation == arch::ExpertActivation::silu
                         ? ph_swiglu(gate, up, gate, values, stream_)
                         : ph_swiglu_oai(gate, up, gate, values, spec.alpha, spec.limit, stream_),
                     "an expert's activation"));
        activations_changed();
        PH_TRY(expert_product(d.experts[2], local, gate, out, m));
        PH_TRY(check(ph_moe_scatter(out, embd, expert_pairs, weights, m, slots, stream_),
                     "weighting an expert's rows"));
    }
    PH_TRY(check(ph_moe_sum_slots(slots, n, k, embd, buffer(op.dst), stream_), "summing the experts"));
    if (d.has_shared) {
        // Every token through the shared expert, added to the routed sum (as the CPU does).
        const int64_t shared_ff = spec.n_ff_shared;
        const auto shared_product = [&](const DeviceOp::Matrix& m, const float* x, float* y) {
            return product(m.type, m.data, m.row_bytes, m.rows, m.in, x, n, y, "the shared expert");
        };
        activations_changed();
        PH_TRY(shared_product(d.shared[0], buffer(op.a), gate));
        PH_TRY(shared_product(d.shared[1], buffer(op.a), up));
        PH_TRY(check(ph_swiglu(gate, up, gate, shared_ff * n, stream_), "the shared expert's activation"));
        activations_changed();
        PH_TRY(shared_product(d.shared[2], gate, out));
        PH_TRY(check(ph_add(buffer(op.dst), out, buffer(op.dst), embd * n, stream_), "adding the shared expert"));
        activations_changed();
    }
    if (!d.all_reduce) return {};
    PH_TRY(wait_stream("the stage's experts"));
    return shard_.comm->all_reduce_sum(shard_.rank, buffer(op.dst), static_cast<size_t>(embd) * static_cast<size_t>(n));
}

Result<void> CudaStage::run_ram_experts(const DeviceOp& d, int n) {
    const Op& op = *d.op;
    const size_t embd = hp_.n_embd;
    const size_t experts = hp_.experts.count;
    const size_t rows = static_cast<size_t>(n);
    PH_TRY(check(cudaMemcpyAsync(host_expert_in_.data(), buffer(op.a), rows * embd * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream_),
                 "copying the experts' input to the host"));
    PH_TRY(check(cudaMemcpyAsync(host_expert_scores_.data(), buffer(op.b), rows * experts * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream_),
                 "copying the router's scores to the host"));
    // Also the wait for the previous layer's output copy, which read host_expert_out_.
    PH_TRY(wait_stream("waiting for the experts' input"));
    shard_.host_experts->run(d.ram_experts, host_expert_in_.data(), host_expert_scores_.data(),
                             host_expert_out_.data(), n, static_cast<int64_t>(embd));
    PH_TRY(check(cudaMemcpyAsync(buffer(op.dst), host_expert_out_.data(), rows * embd * sizeof(float),
                                 cudaMemcpyHostToDevice, stream_),
                 "copying the experts' output to the GPU"));
    if (!d.all_reduce) return {};
    PH_TRY(wait_stream("copying the experts' output to the GPU"));
    return shard_.comm->all_reduce_sum(shard_.rank, buffer(op.dst), embd * rows);
}

}  // namespace powerhouse::cuda::detail
