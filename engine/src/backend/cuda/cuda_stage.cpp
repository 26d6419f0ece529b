#include "backend/cuda/cuda_stage_impl.h"

namespace powerhouse::cuda {

namespace detail {

CudaStage::~CudaStage() {
    DeviceScope scope;
    if (!scope.select(shard_.device)) return;  // no usable runtime: nothing was created
    // Nothing may still run on the stream when its buffers go; cuBLAS lets go of it first.
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    cublas_ = CublasHandle{};
    cudaGetLastError();
    for (auto& [n, graph] : graphs_by_n_) cudaGraphExecDestroy(graph);
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

// Called after every launch: the message is only built for a failure.
Result<void> CudaStage::check(int status, std::string_view what) {
    if (status == 0) return {};
    return cuda_error(status, fmt::format("{}: {}", gpu_.empty() ? shard_.name : gpu_, what));
}


Result<DeviceOp> CudaStage::place(const BoundWeight& w) {
    DeviceOp d{w.op, w.type, nullptr, w.in, w.rows, w.row_bytes, w.all_reduce, {}, {}, false, 0, 0};
    if (w.op->kind == OpKind::moe) {
        d.all_reduce = w.expert_all_reduce;
        if (w.experts_in_ram) {
            if (!shard_.host_experts) return make_error(ErrorCode::internal, "experts in RAM without a host to run them");
            d.ram_experts = w;
            shard_.host_experts->interleave(d.ram_experts, model_);
            ram_weight_bytes_ += w.bytes();
            return d;
        }
        return place_experts(w, d);
    }
    if (w.tensor == nullptr) return d;
    const bool matrix = w.op->kind == OpKind::matmul;
    const std::byte* host = matrix ? w.data : reinterpret_cast<const std::byte*>(w.values);
    const int64_t rows = matrix ? w.rows : 1;
    const uint64_t row = matrix ? w.row_bytes : w.n_values * sizeof(float);
    const auto key = std::make_tuple(host, static_cast<int64_t>(row), rows);
    if (auto it = uploaded_.find(key); it != uploaded_.end()) {
        d.weight = it->second;
        return d;
    }
    Result<DeviceBuffer> buffer = DeviceBuffer::allocate(row * static_cast<uint64_t>(rows));
    if (!buffer) return buffer.error();
    const uint64_t stride = matrix ? w.row_stride : row;
    const int status =
        stride == row
            ? cudaMemcpy(buffer->data(), host, row * static_cast<uint64_t>(rows), cudaMemcpyHostToDevice)
            : cudaMemcpy2D(buffer->data(), row, host, stride, row, static_cast<size_t>(rows), cudaMemcpyHostToDevice);
    PH_TRY(check(status, fmt::format("uploading tensor '{}'", w.tensor->name)));
    d.weight = buffer->data();
    uploaded_[key] = d.weight;
    weight_bytes_ += buffer->size();
    weights_.push_back(std::move(buffer).value());
    return d;
}

uint64_t CudaStage::bytes_needed(const std::vector<BoundWeight>& weights) const {
    std::set<std::tuple<const void*, uint64_t>> seen;
    uint64_t total = 0;
    for (const BoundWeight& w : weights) {
        if (w.op->kind == OpKind::moe) {  // the experts the GPU holds
            if (!w.experts_in_ram) total += w.bytes();
            continue;
        }
        if (w.tensor == nullptr) continue;
        const void* host = w.op->kind == OpKind::matmul ? static_cast<const void*>(w.data) : w.values;
        if (seen.emplace(host, w.bytes()).second) total += w.bytes();
    }
    return total;
}

int kv_type_of(KvCacheType type) {
    return type == KvCacheType::q8_0 ? PH_KV_Q8_0 : PH_KV_F16;
}

Result<void> CudaStage::init(const GgufModel& model) {
    model_ = &model;
    PH_TRY(cuda_available());
    Result<CudaDeviceInfo> info = cuda_device_info(shard_.device, true);
    if (!info) return info.error();
    gpu_ = fmt::format("GPU {} ({})", shard_.device, info->name);
    multiprocessors_ = std::max(1, info->multiprocessors);
    PH_TRY(select());
    PH_TRY(check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream"));
    PH_TRY(check(cudaEventCreate(&start_), "creating an event"));
    PH_TRY(check(cudaEventCreate(&stop_), "creating an event"));
    bandwidth_gb_s_ = peak_memory_bandwidth(*info) / 1e9;

    Result<StageLayout> layout = make_stage_layout(hp_, program_, shard_.ranges);
    if (!layout) return layout.error();
    layout_ = *layout;
    PH_TRY(cuda_stage_supports(StageShape{hp_.head_dim, options_.kv_cache_type, options_.n_batch, hp_.n_embd, hp_.n_ff,
                                          hp_.n_head, hp_.embedding_only || !program_.causal}));

    // Bind every op first (no GPU memory yet), to know what the weights need.
    const auto can_run = [](GgmlType type) { return ph_matmul_supported(static_cast<uint32_t>(type)) != 0; };
    // The fused products take float types 8 values at a time.
    const auto column_block = [](GgmlType type) { return std::max<int64_t>(8, type_traits(type).block_size); };
    Result<BoundProgram> bound = bind_program(model, hp_, program_, layout_, shard_.embedding, shard_.output,
                                              shard_.comm != nullptr, "CUDA", can_run, column_block);
    if (!bound) return bound.error();
    const std::vector<BoundWeight>& input = bound->input;
    const std::vector<std::vector<BoundWeight>>& layers = bound->layers;
    const std::vector<BoundWeight>& head = bound->head;
    const GgufTensorInfo* embedding = bound->embedding;
    const GgufTensorInfo* rope_freqs = bound->rope_freqs;
    std::vector<BoundWeight> all = input;
    for (const auto& l : layers) all.insert(all.end(), l.begin(), l.end());
    all.insert(all.end(), head.begin(), head.end());

    // cuBLAS for prompts, when there are prompts to speak of and the library is there.
    uint64_t max_matrix = 0;
    for (const BoundWeight& w : all) {
        if (w.op->kind != OpKind::matmul) continue;
        if (w.op->dst != Buffer::logits) max_matrix = std::max(max_matrix, static_cast<uint64_t>(w.in * w.rows));
    }
    if (options_.use_cublas && options_.n_batch >= static_cast<uint32_t>(kCublasMinTokens) && max_matrix > 0) {
        Result<std::unique_ptr<CublasLibrary>> library = load_cublas();
        if (library) {
            cublas_library_ = std::move(library).value();
            Result<CublasHandle> handle = CublasHandle::create(*cublas_library_);
            if (handle) {
                cublas_ = std::move(handle).value();
                have_cublas_ = true;
            } else {
                cublas_note_ = handle.error().message;
            }
        } else {
            cublas_note_ = library.error().message;
        }
    }

    // Memory: check the total against what the GPU has free before allocating any of it.
    const uint64_t n_batch = std::max<uint32_t>(1, options_.n_batch);
    const uint64_t n_layers = layers.size();
    kv_type_ = kv_type_of(options_.kv_cache_type);
    kv_row_bytes_ = kv_type_ == PH_KV_Q8_0 ? layout_.kv_width / 32 * 34 : layout_.kv_width * 2;
    paged_ = options_.max_sequences > 1;
    head_rows_ = paged_ ? static_cast<int>(options_.max_sequences) : 1;
    options_.kv_block_size = std::max<uint32_t>(1, options_.kv_block_size);
    kv_rows_ = options_.n_ctx;
    if (paged_) {
        const uint32_t bs = options_.kv_block_size;
        kv_rows_ = ((options_.kv_rows != 0 ? options_.kv_rows : options_.n_ctx) + bs - 1) / bs * bs;
        rows_capacity_ = static_cast<int>(n_batch);
        table_rows_ = static_cast<int>(options_.max_sequences) + 1;  // and the single-sequence calls' own
        table_stride_ = static_cast<int>((options_.n_ctx + bs - 1) / bs);
    }
    const uint64_t rows_ints = 2 * static_cast<uint64_t>(rows_capacity_) +
                               static_cast<uint64_t>(table_rows_) * static_cast<uint64_t>(table_stride_);
    decode_splits_ = attention_splits(1, static_cast<int>(layout_.n_head), options_.n_ctx, multiprocessors_);
    size_t partial_floats = 0;
    for (int n = 1; n <= static_cast<int>(n_batch); ++n) {
        const int s = attention_splits(n, static_cast<int>(layout_.n_head), options_.n_ctx, multiprocessors_);
        partial_floats = std::max(partial_floats, ph_attention_partial_floats(n, static_cast<int>(layout_.n_head),
                                                                              static_cast<int>(hp_.head_dim), s));
    }
    uint64_t buffer_bytes = 0;
    for (size_t i = 0; i < buffers_.size(); ++i) {
        const uint64_t rows = static_cast<Buffer>(i) == Buffer::logits ? static_cast<uint64_t>(head_rows_) : n_batch;
        buffer_bytes += layout_.widths[i] * rows * sizeof(float);
    }
    const uint64_t cublas_bytes = have_cublas_ ? max_matrix * sizeof(float) : 0;
    // 8-bit activations: every row the fused products take (below cuBLAS's prompts; all of
    // them for the experts, which never take cuBLAS), as wide as the widest input.
    int64_t max_in = 0;
    bool moe = false;
    for (const BoundWeight& w : all) {
        if (w.op->kind == OpKind::matmul) max_in = std::max(max_in, w.in);
        moe = moe || w.op->kind == OpKind::moe;
    }
    if (moe) max_in = std::max<int64_t>({max_in, hp_.n_embd, hp_.experts.n_ff});
    act_rows_ = have_cublas_ && !moe ? std::min<int>(static_cast<int>(n_batch), kCublasMinTokens - 1)
                                     : static_cast<int>(n_batch);
    act_stride_ = ph_q8_activation_bytes(std::max<int64_t>(max_in, 32));
    const uint64_t act_bytes = act_stride_ * static_cast<uint64_t>(act_rows_);
    const uint64_t kv_bytes = 2 * n_layers * kv_rows_ * kv_row_bytes_;
    const bool tied = embedding != nullptr && std::any_of(all.begin(), all.end(), [&](const BoundWeight& w) {
                          return w.data == embedding->data && w.bytes() == embedding->n_bytes;
                      });
    const uint64_t weights = bytes_needed(all) + (embedding != nullptr && !tied ? embedding->n_bytes : 0);
    const uint64_t scratch =
        buffer_bytes + partial_floats * sizeof(float) + cublas_bytes + act_bytes + 2 * n_batch * 4 + 64 +
        rows_ints * 4 + static_cast<uint64_t>(head_rows_) * (layout_.widths[static_cast<size_t>(Buffer::x)] + 1) * 4;
    const uint64_t need = weights + kv_bytes + scratch;
    if (need > info->free_memory) {
        return make_error(
            ErrorCode::out_of_memory,
            fmt::format("{} has {} free but this part of the model needs {} (weights {}, KV cache {}, "
                        "work buffers {}); use a shorter context, a Q8_0 KV cache, a smaller file or "
                        "another GPU",
                        gpu_, gib(info->free_memory), gib(need), gib(weights), gib(kv_bytes), gib(scratch)));
    }

    // Upload, reporting progress per tensor.
    const uint64_t total = weights;
    uint64_t done = 0;
    const auto progress = [&](uint64_t more) -> Result<void> {
        done += more;
        if (options_.upload_progress && !options_.upload_progress(done, total)) {
            return make_error(ErrorCode::cancelled, "loading was cancelled");
        }
        return {};
    };
    const auto place_all = [&](const std::vector<BoundWeight>& from, std::vector<DeviceOp>& to) -> Result<void> {
        for (const BoundWeight& w : from) {
            const uint64_t before = weight_bytes_;
            Result<DeviceOp> d = place(w);
            if (!d) return d.error();
            to.push_back(*d);
            PH_TRY(progress(weight_bytes_ - before));
        }
        return {};
    };
    if (embedding != nullptr) {
        BoundWeight table;
        Op lookup{OpKind::matmul, Buffer::x, Buffer::x, Buffer::x, std::string(embedding->name), 0.0f};
        table.op = &lookup;
        table.tensor = embedding;
        table.type = embedding->type;
        table.data = embedding->data;
        table.in = embedding->ne[0];
        table.rows = embedding->n_rows();
        table.row_bytes = row_bytes(type_traits(embedding->type), static_cast<uint64_t>(embedding->ne[0]));
        table.row_stride = table.row_bytes;
        Result<DeviceOp> d = place(table);
        if (!d) return d.error();
        embedding_ = d->weight;
        embedding_type_ = embedding->type;
        embedding_row_bytes_ = table.row_bytes;
        PH_TRY(progress(embedding->n_bytes));
    }
    PH_TRY(place_all(input, input_));
    layers_.resize(layers.size());
    for (size_t l = 0; l < layers.size(); ++l) PH_TRY(place_all(layers[l], layers_[l]));
    PH_TRY(place_all(head, head_));
    if (options_.fuse_ops) plan_layer_fusions();
    if (rope_freqs != nullptr) {
        Result<DeviceBuffer> f = DeviceBuffer::allocate(rope_freqs->n_bytes);
        if (!f) return f.error();
        PH_TRY(f->upload(rope_freqs->data, rope_freqs->n_bytes));
        rope_freqs_ = static_cast<const float*>(f->data());
        weight_bytes_ += f->size();
        weights_.push_back(std::move(f).value());
    }

    // Activations, KV cache, scratch.
    const auto allocate = [&](DeviceBuffer& into, uint64_t bytes, uint64_t& counter) -> Result<void> {
        Result<DeviceBuffer> b = DeviceBuffer::allocate(bytes);
        if (!b) return b.error();
        into = std::move(b).value();
        counter += bytes;
        return {};
    };
    for (size_t i = 0; i < buffers_.size(); ++i) {
        const uint64_t rows = static_cast<Buffer>(i) == Buffer::logits ? static_cast<uint64_t>(head_rows_) : n_batch;
        PH_TRY(allocate(buffers_[i], layout_.widths[i] * rows * sizeof(float), scratch_bytes_));
    }
    PH_TRY(allocate(kv_k_, kv_bytes / 2, kv_bytes_));
    PH_TRY(allocate(kv_v_, kv_bytes / 2, kv_bytes_));
    PH_TRY(allocate(partial_, partial_floats * sizeof(float), scratch_bytes_));
    PH_TRY(allocate(pos_, sizeof(int32_t), scratch_bytes_));
    PH_TRY(allocate(ids_, n_batch * sizeof(int32_t), scratch_bytes_));
    PH_TRY(allocate(best_, static_cast<uint64_t>(head_rows_) * sizeof(int32_t), scratch_bytes_));
    PH_TRY(allocate(head_x_, static_cast<uint64_t>(head_rows_) * width(Buffer::x) * sizeof(float), scratch_bytes_));
    if (paged_) {
        PH_TRY(allocate(rows_, rows_ints * sizeof(int32_t), scratch_bytes_));
        PH_TRY(check(host_rows_.allocate(rows_ints), "allocating pinned memory"));
    }
    if (have_cublas_) PH_TRY(allocate(f32_weights_, max_matrix * sizeof(float), scratch_bytes_));
    PH_TRY(allocate(act_, act_bytes, scratch_bytes_));
    PH_TRY(check(host_ids_.allocate(n_batch), "allocating pinned memory"));
    PH_TRY(check(host_best_.allocate(static_cast<size_t>(head_rows_)), "allocating pinned memory"));
    PH_TRY(check(host_logits_.allocate(shard_.output ? size_t{hp_.n_vocab} * static_cast<size_t>(head_rows_) : 1),
                 "allocating pinned memory"));
    if (has_device_experts_) {
        const uint64_t pairs = n_batch * hp_.experts.used;
        // The shared expert's columns for every token use the same scratch.
        const uint64_t ff = std::max<uint64_t>(hp_.experts.n_ff, (hp_.experts.n_ff_shared + hp_.experts.used - 1) /
                                                                     std::max<uint32_t>(1, hp_.experts.used));
        PH_TRY(allocate(moe_ids_, pairs * sizeof(int32_t), scratch_bytes_));
        PH_TRY(allocate(moe_weights_, pairs * sizeof(float), scratch_bytes_));
        PH_TRY(allocate(moe_pairs_, pairs * sizeof(int32_t), scratch_bytes_));
        PH_TRY(allocate(moe_in_, pairs * hp_.n_embd * sizeof(float), scratch_bytes_));
        PH_TRY(allocate(moe_gate_, pairs * ff * sizeof(float), scratch_bytes_));
        PH_TRY(allocate(moe_up_, pairs * ff * sizeof(float), scratch_bytes_));
        PH_TRY(allocate(moe_out_, pairs * hp_.n_embd * sizeof(float), scratch_bytes_));
        PH_TRY(allocate(moe_slots_, pairs * hp_.n_embd * sizeof(float), scratch_bytes_));
        PH_TRY(check(host_moe_ids_.allocate(pairs), "allocating pinned memory"));
        PH_TRY(check(host_moe_pairs_.allocate(pairs), "allocating pinned memory"));
    }
    if (ram_weight_bytes_ > 0) {
        const size_t rows = n_batch;
        PH_TRY(check(host_expert_in_.allocate(rows * hp_.n_embd), "allocating pinned memory"));
        PH_TRY(check(host_expert_scores_.allocate(rows * hp_.experts.count), "allocating pinned memory"));
        PH_TRY(check(host_expert_out_.allocate(rows * hp_.n_embd), "allocating pinned memory"));
    }
    graphs_ = options_.use_graphs && shard_.comm == nullptr && ram_weight_bytes_ == 0 && !has_device_experts_;
    if (options_.use_graphs && ram_weight_bytes_ > 0) {
        graphs_note_ = "experts in RAM: the CPU's part of each step cannot be captured in a graph";
    } else if (options_.use_graphs && has_device_experts_) {
        graphs_note_ = "mixture of experts: each step groups the tokens by expert on the host";
    }
    whole_model_ = shard_.embedding && shard_.output && shard_.comm == nullptr;
    options_.upload_progress = nullptr;  // it refers to the loader's state, gone after load
    // The uploads ran on the legacy default stream, which the stage's stream does not wait
    // for; an upload error also surfaces here rather than at the first token.
    PH_TRY(check(cudaDeviceSynchronize(), "uploading the weights"));
    // What one decode step reads: every weight of the layers and the head (the embedding
    // table only for its one row, unless it is the output matrix too).
    std::vector<BoundWeight> step = head;
    for (const auto& l : layers) step.insert(step.end(), l.begin(), l.end());
    step.insert(step.end(), input.begin(), input.end());
    step_bytes_ = bytes_needed(step) + (embedding_ != nullptr ? embedding_row_bytes_ : 0);
    return {};
}

Result<void> CudaStage::wait_stream(std::string_view what) {
    const int status = cuda_wait_stream(stream_, interrupted_);
    if (status == kStreamWaitStopped) {
        return make_error(ErrorCode::device_failed, fmt::format("no answer while {}", what));
    }
    return check(status, what);
}

Result<void> CudaStage::finish(std::string_view what) {
    pending_ = false;
    PH_TRY(check(cudaEventRecord(stop_, stream_), "recording an event"));
    PH_TRY(wait_stream(what));
    float ms = 0;
    if (cudaEventElapsedTime(&ms, start_, stop_) == cudaSuccess) {
        gpu_seconds_ += ms / 1e3;
    } else {
        cudaGetLastError();  // not this call's failure to report, nor the next launch's
    }
    return {};
}

// By value in a kernel's arguments: no host buffer that queued work might still read.
Result<void> CudaStage::set_position(uint32_t pos) {
    return check(ph_set_i32(static_cast<int32_t*>(pos_.data()), static_cast<int32_t>(pos), stream_),
                 "setting the position");
}

// The positions matter only to encoders' position embeddings, which this stage refuses
// (cuda_stage_supports).
Result<void> CudaStage::embed(std::span<const TokenId> tokens, std::span<const int32_t> /*positions*/) {
    if (embedding_ == nullptr) return make_error(ErrorCode::internal, "this device does not hold the embedding");
    if (tokens.size() > std::max<uint32_t>(1, options_.n_batch)) {
        return make_error(ErrorCode::internal, "more tokens than the batch holds");
    }
    const auto start = Clock::now();
    // Queued work may still read the pinned ids (a prompt of several micro-batches).
    if (pending_) PH_TRY(finish("embedding the tokens"));
    PH_TRY(begin());
    for (size_t i = 0; i < tokens.size(); ++i) host_ids_.data()[i] = static_cast<int32_t>(tokens[i]);
    const int n = static_cast<int>(tokens.size());
    PH_TRY(check(cudaMemcpyAsync(ids_.data(), host_ids_.data(), tokens.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                                 stream_),
                 "uploading the tokens"));
    pending_ = true;  // the copy reads host_ids_: even a failure below must wait for it next time
    PH_TRY(check(ph_get_rows(static_cast<uint32_t>(embedding_type_), embedding_, embedding_row_bytes_,
                             static_cast<const int32_t*>(ids_.data()), n, hp_.n_embd, buffer(Buffer::x), stream_),
                 "looking up the embeddings"));
    for (const DeviceOp& op : input_) PH_TRY(enqueue_op(op, 0, n));
    Result<void> r = complete("embedding the tokens");
    busy_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
    return r;
}

Result<void> CudaStage::enqueue_layers(int n) {
    activations_changed();  // embed, a partner or write_buffer filled x since
    for (uint32_t l = layout_.first_layer; l < layout_.last_layer; ++l) {
        PH_TRY(enqueue_ops(layers_[l - layout_.first_layer], l, n));
    }
    return {};
}

Result<void> CudaStage::graphs_failed(int status, std::string_view step, int n) {
    cudaGetLastError();
    graphs_ = false;
    graphs_note_ = cuda_error(status, fmt::format("{}: {}", gpu_, step)).message;
    return enqueue_layers(n);
}

// The decode step of n sequences (one token each) as a CUDA graph: captured on first use,
// then replayed; positions and block tables are read from device memory, so one graph serves
// every step of that size. A capture that fails (a driver that cannot capture something)
// falls back to plain launches for good; usage() then says so, with the reason, and `bench`
// prints it.
Result<void> CudaStage::run_decode_graph(int n) {
    auto found = graphs_by_n_.find(n);
    if (found == graphs_by_n_.end()) {
        if (const int began = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal); began != 0) {
            return graphs_failed(began, "starting the capture of the decode step", n);
        }
        // A capture runs nothing: its fused launches count at each replay.
        const uint64_t fused_before = fused_launches_;
        Result<void> enqueued = enqueue_layers(n);
        const uint64_t fused_in_graph = fused_launches_ - fused_before;
        fused_launches_ = fused_before;
        cudaGraph_t graph = nullptr;
        const int ended = cudaStreamEndCapture(stream_, &graph);
        if (!enqueued || ended != 0) {
            if (graph != nullptr) cudaGraphDestroy(graph);
            if (!enqueued) {
                cudaGetLastError();
                graphs_ = false;
                graphs_note_ = enqueued.error().message;
                return enqueue_layers(n);
            }
            return graphs_failed(ended, "capturing the decode step", n);
        }
        cudaGraphExec_t exec = nullptr;
        const int made = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
        if (made != 0) return graphs_failed(made, "instantiating the decode graph", n);
        found = graphs_by_n_.emplace(n, exec).first;
        graph_fused_launches_[n] = fused_in_graph;
    }
    PH_TRY(check(cudaGraphLaunch(found->second, stream_), "replaying the decode step"));
    ++graph_replays_;
    fused_launches_ += graph_fused_launches_[n];
    return {};
}

// Paged: the batch's positions, its rows' sequences and their block tables (each cut or
// padded to table_stride_) to the device, in stream order.
Result<void> CudaStage::set_rows(const StageBatch& batch) {
    if (batch.n > rows_capacity_ || batch.table_stride <= 0) {
        return make_error(ErrorCode::internal, "the batch does not fit the stage's row buffers");
    }
    int32_t* host = host_rows_.data();
    int n_seq = 0;
    for (int t = 0; t < batch.n; ++t) n_seq = std::max(n_seq, batch.seq[t] + 1);
    if (n_seq > table_rows_) {
        return make_error(ErrorCode::internal, fmt::format("a batch of {} sequences (the stage takes {})", n_seq,
                                                           table_rows_));
    }
    for (int t = 0; t < batch.n; ++t) {
        host[t] = batch.pos[t];
        host[rows_capacity_ + t] = batch.seq[t];
        if (batch.pos[t] < 0 || static_cast<uint32_t>(batch.pos[t]) >= options_.n_ctx ||
            batch.slot(t, batch.pos[t]) >= int64_t{kv_rows_}) {
            return make_error(ErrorCode::internal, fmt::format("row {} is position {} in cache row {}, past the cache",
                                                               t, batch.pos[t], batch.slot(t, batch.pos[t])));
        }
    }
    int32_t* tables = host + 2 * rows_capacity_;
    const int copy = std::min(batch.table_stride, table_stride_);
    for (int s = 0; s < n_seq; ++s) {
        const int32_t* from = batch.tables + static_cast<ptrdiff_t>(s) * batch.table_stride;
        std::copy_n(from, copy, tables + static_cast<ptrdiff_t>(s) * table_stride_);
        std::fill_n(tables + static_cast<ptrdiff_t>(s) * table_stride_ + copy, table_stride_ - copy, 0);
    }
    const size_t ints = 2 * static_cast<size_t>(rows_capacity_) + static_cast<size_t>(n_seq) * table_stride_;
    return check(cudaMemcpyAsync(rows_.data(), host, ints * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
                 "uploading the positions and block tables");
}

Result<void> CudaStage::copy_kv_blocks(std::span<const KvBlockCopy> copies) {
    if (copies.empty()) return {};
    if (!paged_) return make_error(ErrorCode::internal, "the CUDA stage keeps one sequence and copies no KV blocks");
    PH_TRY(select());
    const size_t block_bytes = size_t{options_.kv_block_size} * kv_row_bytes_;
    const size_t layer_bytes = size_t{kv_rows_} * kv_row_bytes_;
    const size_t n_layers = layout_.last_layer - layout_.first_layer;
    for (const KvBlockCopy& c : copies) {
        if (c.from < 0 || c.to < 0 || (size_t(c.from) + 1) * block_bytes > layer_bytes ||
            (size_t(c.to) + 1) * block_bytes > layer_bytes) {
            return make_error(ErrorCode::internal, fmt::format("a KV block copy {} -> {} past the cache", c.from, c.to));
        }
        for (size_t l = 0; l < n_layers; ++l) {
            for (DeviceBuffer* cache : {&kv_k_, &kv_v_}) {
                auto* base = static_cast<std::byte*>(cache->data()) + l * layer_bytes;
                PH_TRY(check(cudaMemcpyAsync(base + size_t(c.to) * block_bytes, base + size_t(c.from) * block_bytes,
                                             block_bytes, cudaMemcpyDeviceToDevice, stream_),
                             "copying a KV block"));
            }
        }
    }
    return {};
}

namespace {

// The injected hang (CudaShard::fail_hangs): the stream stops at this host function until
// the stage is interrupted, so the stage's wait meets a stream that does not finish, as it
// would with a hung kernel, and must be ended by the step's deadline.
void CUDART_CB hang_until_interrupted(void* flag) {
    const auto* interrupted = static_cast<const std::atomic<bool>*>(flag);
    while (!interrupted->load(std::memory_order_relaxed)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace

Result<void> CudaStage::run_layers(const StageBatch& batch) {
    if (shard_.fail_after >= 0 && injected_steps_++ >= shard_.fail_after) {
        if (!shard_.fail_hangs) {
            return make_error(ErrorCode::device_failed, "stopped answering (a fault injected for testing)");
        }
        PH_TRY(select());
        PH_TRY(check(cudaLaunchHostFunc(stream_, hang_until_interrupted, &interrupted_), "injecting a hang"));
        return wait_stream("a step that hangs (injected for testing)");
    }
    const int n = batch.n;
    if (n <= 0 || static_cast<uint32_t>(n) > std::max<uint32_t>(1, options_.n_batch) || batch.pos[0] < 0 ||
        static_cast<uint32_t>(batch.pos[0]) >= options_.n_ctx) {
        return make_error(ErrorCode::internal, "the batch does not fit the stage's buffers or context");
    }
    const auto start = Clock::now();
    PH_TRY(begin());
    if (paged_) {
        PH_TRY(set_rows(batch));
    } else {
        // One sequence at consecutive positions, held at the same rows of the cache.
        for (int i = 0; i < n; ++i) {
            if (batch.seq[i] != batch.seq[0] || batch.pos[i] != batch.pos[0] + i ||
                batch.slot(i, batch.pos[i]) != batch.pos[i]) {
                return make_error(ErrorCode::internal,
                                  "the CUDA stage loaded for one sequence runs it from the cache's start");
            }
        }
        if (static_cast<uint32_t>(batch.pos[0]) + static_cast<uint32_t>(n) > options_.n_ctx) {
            return make_error(ErrorCode::internal, "the batch does not fit the stage's context");
        }
        PH_TRY(set_position(static_cast<uint32_t>(batch.pos[0])));
    }
    // A decode step (a token of each sequence, no more than a head takes) replays a graph.
    const bool decode = n <= head_rows_ && n < kCublasMinTokens;
    Result<void> r = decode && graphs_ ? run_decode_graph(n) : enqueue_layers(n);
    if (r) r = complete("running the layers");
    busy_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
    return r;
}

Result<void> CudaStage::enqueue_head(std::span<const int> rows, bool hidden, const Op** projection) {
    if (!shard_.output) return make_error(ErrorCode::internal, "this device does not hold the output layer");
    if (rows.empty() || rows.size() > static_cast<size_t>(head_rows_)) {
        return make_error(ErrorCode::internal,
                          fmt::format("the head of {} rows (the stage takes 1 to {})", rows.size(), head_rows_));
    }
    activations_changed();
    const size_t w = width(Buffer::x);
    DeviceBuffer& x = buffers_[static_cast<size_t>(Buffer::x)];
    for (size_t i = 0; i < rows.size(); ++i) {
        if (rows[i] < 0 || static_cast<uint32_t>(rows[i]) >= std::max<uint32_t>(1, options_.n_batch)) {
            return make_error(ErrorCode::internal, fmt::format("head row {} is outside the batch", rows[i]));
        }
        PH_TRY(check(cudaMemcpyAsync(static_cast<float*>(head_x_.data()) + i * w,
                                     static_cast<const float*>(x.data()) + static_cast<size_t>(rows[i]) * w,
                                     w * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
                     "selecting the rows for the logits"));
    }
    std::swap(x, head_x_);
    Result<void> r;
    const Op* found = nullptr;
    for (const DeviceOp& op : head_) {
        if (op.op->dst == Buffer::logits && found == nullptr) found = op.op;
        if (hidden && found != nullptr) break;
        if (r = enqueue_op(op, 0, static_cast<int>(rows.size())); !r) break;
    }
    std::swap(x, head_x_);
    activations_changed();
    if (projection != nullptr) *projection = found;
    return r;
}

Result<std::span<const float>> CudaStage::head_hidden(std::span<const int> rows) {
    const auto start = Clock::now();
    PH_TRY(begin());
    const Op* projection = nullptr;
    PH_TRY(enqueue_head(rows, true, &projection));
    // The host buffer of the logits holds rows * n_vocab floats: n_embd per row fit (every
    // model's vocabulary is wider than its activations; checked).
    if (projection == nullptr || width(projection->a) != hp_.n_embd || hp_.n_embd > hp_.n_vocab) {
        return make_error(ErrorCode::unsupported, "this model's output head gives no embeddings on this device");
    }
    const size_t count = rows.size() * hp_.n_embd;
    PH_TRY(check(cudaMemcpyAsync(host_logits_.data(), buffer(projection->a), count * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream_),
                 "copying the embeddings"));
    PH_TRY(finish("computing the embeddings"));
    busy_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
    return std::span<const float>(host_logits_.data(), count);
}

Result<void> CudaStage::head_argmax(std::span<const int> rows, std::span<TokenId> out) {
    if (out.size() != rows.size()) return make_error(ErrorCode::internal, "an argmax for each head row");
    const auto start = Clock::now();
    PH_TRY(begin());
    PH_TRY(enqueue_head(rows));
    auto* best = static_cast<int32_t*>(best_.data());
    for (size_t i = 0; i < rows.size(); ++i) {
        PH_TRY(check(ph_argmax(buffer(Buffer::logits) + i * hp_.n_vocab, static_cast<int>(hp_.n_vocab), best + i,
                               stream_),
                     "greedy choice"));
    }
    PH_TRY(check(cudaMemcpyAsync(host_best_.data(), best, rows.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                 stream_),
                 "copying the chosen tokens"));
    PH_TRY(finish("choosing the next token"));
    busy_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
    for (size_t i = 0; i < rows.size(); ++i) out[i] = static_cast<TokenId>(host_best_.data()[i]);
    return {};
}

Result<std::span<const float>> CudaStage::head(std::span<const int> rows) {
    const auto start = Clock::now();
    PH_TRY(begin());
    PH_TRY(enqueue_head(rows));
    const size_t count = rows.size() * hp_.n_vocab;
    PH_TRY(check(cudaMemcpyAsync(host_logits_.data(), buffer(Buffer::logits), count * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream_),
                 "copying the logits"));
    PH_TRY(finish("computing the logits"));
    busy_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
    return std::span<const float>(host_logits_.data(), count);
}

Result<void> CudaStage::enqueue_matmul(const DeviceOp& op, int n) {
    const float* src = buffer(op.op->a);
    float* dst = buffer(op.op->dst);
    if (have_cublas_ && n >= kCublasMinTokens) {
        auto* w32 = static_cast<float*>(f32_weights_.data());
        PH_TRY(dequantize_device(op.type, op.weight, w32, DequantOutput::f32, op.in * op.rows, stream_));
        PH_TRY(cublas_.gemm_tf32(stream_, static_cast<int>(op.rows), n, static_cast<int>(op.in), w32, src, dst));
        ++cublas_gemms_;
    } else {
        PH_TRY(product(op.type, op.weight, op.row_bytes, op.rows, op.in, src, n, dst, op.op->weight));
    }
    if (!op.all_reduce) return {};
    PH_TRY(wait_stream("a partial product"));
    return shard_.comm->all_reduce_sum(shard_.rank, dst, static_cast<size_t>(op.rows) * static_cast<size_t>(n));
}

bool CudaStage::batch_takes_q8(int n) const {
    return n <= act_rows_ && !(have_cublas_ && n >= kCublasMinTokens);
}

bool CudaStage::quantized_path(GgmlType type, const void* w, uint64_t row_bytes, int n) const {
    return batch_takes_q8(n) && ph_matmul_q8_usable(static_cast<uint32_t>(type), w, row_bytes) != 0;
}

void CudaStage::activations_hold(const float* x, GgmlType type, int n, int64_t in) {
    act_src_ = x;
    act_per_256_ = cpu::activation_type(type) == GgmlType::q8_k;
    act_n_ = n;
    act_in_ = in;
}

Result<void> CudaStage::quantize_input(GgmlType type, const float* x, int n, int64_t in, std::string_view what) {
    const bool per_256 = cpu::activation_type(type) == GgmlType::q8_k;
    if (act_src_ == x && act_per_256_ == per_256 && act_n_ == n && act_in_ == in) return {};
    const int status = ph_quantize_activations(static_cast<uint32_t>(type), x, in, in, n, act_.data(), act_stride_,
                                               stream_);
    if (status != 0) return check(status, fmt::format("quantizing the activations for '{}'", what));
    activations_hold(x, type, n, in);
    return {};
}

Result<void> CudaStage::product(GgmlType type, const void* w, uint64_t row_bytes, int64_t rows, int64_t in,
                                const float* x, int n, float* y, std::string_view what) {
    const auto id = static_cast<uint32_t>(type);
    int status = 0;
    if (n <= act_rows_ && ph_matmul_q8_usable(id, w, row_bytes) != 0) {
        PH_TRY(quantize_input(type, x, n, in, what));
        status = ph_matmul_q8(id, w, row_bytes, rows, in, act_.data(), act_stride_, n, y, rows, stream_);
    } else {
        status = ph_matmul(id, w, row_bytes, rows, in, x, in, y, rows, n, stream_);
    }
    if (y == act_src_) activations_changed();
    if (status != 0) return check(status, fmt::format("multiplying by '{}'", what));
    return {};
}

void CudaStage::plan_layer_fusions() {
    std::vector<const Op*> head;
    for (const DeviceOp& d : head_) head.push_back(d.op);
    for (std::vector<DeviceOp>& ops : layers_) {
        std::vector<const Op*> layer;
        for (const DeviceOp& d : ops) layer.push_back(d.op);
        const FusionPlan plan = plan_fusions(layer, head);
        const auto takes_q8 = [](const DeviceOp& d) {
            return d.op->kind == OpKind::matmul && !d.all_reduce && d.weight != nullptr &&
                   ph_matmul_q8_usable(static_cast<uint32_t>(d.type), d.weight, d.row_bytes) != 0;
        };
        for (size_t i = 0; i < ops.size(); ++i) {
            if (const int k = plan.quantize_for[i]; k >= 0) {
                const DeviceOp& product = ops[static_cast<size_t>(k)];
                if (takes_q8(product) && static_cast<uint64_t>(product.in) == width(ops[i].op->dst)) {
                    ops[i].quantize_next = true;
                    ops[i].quantize_type = product.type;
                }
            }
            if (plan.residual_next[i] && takes_q8(ops[i]) &&
                static_cast<uint64_t>(ops[i].rows) == width(ops[i + 1].op->dst)) {
                ops[i].residual_next = true;
            }
            ops[i].rope_pair_next = plan.rope_pair_next[i];
            if (plan.same_input_next[i] && takes_q8(ops[i]) && takes_q8(ops[i + 1]) &&
                ops[i].type == ops[i + 1].type && ops[i].in == ops[i + 1].in) {
                ops[i].set_next = true;
            }
        }
    }
}

Result<void> CudaStage::enqueue_ops(const std::vector<DeviceOp>& ops, uint32_t layer, int n) {
    for (size_t i = 0; i < ops.size(); ++i) {
        const DeviceOp& d = ops[i];
        if (d.residual_next && quantized_path(d.type, d.weight, d.row_bytes, n)) {
            PH_TRY(enqueue_residual_product(d, ops[i + 1], n));
            ++i;  // the add is done
            continue;
        }
        if (d.set_next && quantized_path(d.type, d.weight, d.row_bytes, n)) {
            int count = 1;
            while (count < PH_MAX_PRODUCTS && ops[i + static_cast<size_t>(count) - 1].set_next) ++count;
            PH_TRY(enqueue_product_set(ops, i, count, n));
            i += static_cast<size_t>(count) - 1;
            continue;
        }
        if (d.rope_pair_next) {
            PH_TRY(enqueue_rope(d, &ops[i + 1], layer, n));
            ++i;  // its partner rotated in the same launch
            continue;
        }
        PH_TRY(enqueue_op(d, layer, n));
    }
    return {};
}

Result<void> CudaStage::enqueue_rope(const DeviceOp& d, const DeviceOp* second, uint32_t layer, int n) {
    PH_TRY(enqueue_rotation(d, second, layer, n));
    // Llama 4's attention temperature, after the rotation (Op::value of Q's rope).
    for (const DeviceOp* r : {&d, second}) {
        if (r == nullptr || r->op->value == 0.0f) continue;
        activations_changed();
        PH_TRY(check(ph_scale_by_position(buffer(r->op->dst), static_cast<int64_t>(width(r->op->dst)), n, r->op->value,
                                          static_cast<int>(hp_.attn_temperature_length), rows(), stream_),
                     "the attention temperature"));
    }
    return {};
}

Result<void> CudaStage::enqueue_rotation(const DeviceOp& d, const DeviceOp* second, uint32_t layer, int n) {
    const arch::LayerAttention& la = program_.layers[layer];
    if (!la.rope) return {};  // a NoPE layer
    activations_changed();
    const Op& op = *d.op;
    float corr_low = 0.0f, corr_high = 0.0f;
    if (hp_.yarn.ext_factor != 0.0f) {
        cpu::yarn_corr_dims(hp_.rope_dims, hp_.yarn.orig_ctx, la.rope_base, hp_.yarn.beta_fast, hp_.yarn.beta_slow,
                            corr_low, corr_high);
    }
    const auto heads = [&](const Op& o) { return static_cast<int64_t>(width(o.dst) / hp_.head_dim); };
    if (second != nullptr) ++fused_launches_;
    return check(ph_rope_rows_pair(buffer(op.dst), heads(op), second != nullptr ? buffer(second->op->dst) : nullptr,
                                   second != nullptr ? heads(*second->op) : 0, n, static_cast<int>(hp_.head_dim),
                                   static_cast<int>(hp_.rope_dims), hp_.rope_layout == arch::RopeLayout::neox ? 1 : 0,
                                   la.rope_base, la.rope_freq_scale, rope_freqs_, hp_.yarn.ext_factor,
                                   hp_.yarn.attn_factor, corr_low, corr_high, rows(), stream_),
                 "RoPE");
}

Result<void> CudaStage::enqueue_residual_product(const DeviceOp& d, const DeviceOp& add, int n) {
    const Op& op = *d.op;
    const Buffer residual = add.op->a == op.dst ? add.op->b : add.op->a;
    const float* x = buffer(op.a);
    PH_TRY(quantize_input(d.type, x, n, d.in, op.weight));
    float* y = buffer(add.op->dst);
    const int status = ph_matmul_q8_residual(static_cast<uint32_t>(d.type), d.weight, d.row_bytes, d.rows, d.in,
                                             act_.data(), act_stride_, n, y, d.rows, buffer(residual), stream_);
    if (y == act_src_) activations_changed();
    ++fused_launches_;
    return check(status, fmt::format("multiplying by '{}' and adding the residual", op.weight));
}

Result<void> CudaStage::enqueue_product_set(const std::vector<DeviceOp>& ops, size_t first, int count, int n) {
    const DeviceOp& lead = ops[first];
    PH_TRY(quantize_input(lead.type, buffer(lead.op->a), n, lead.in, lead.op->weight));
    std::array<PhProduct, PH_MAX_PRODUCTS> products{};
    for (int m = 0; m < count; ++m) {
        const DeviceOp& d = ops[first + static_cast<size_t>(m)];
        products[static_cast<size_t>(m)] = PhProduct{d.weight, d.row_bytes, d.rows, buffer(d.op->dst), d.rows, nullptr};
        if (buffer(d.op->dst) == act_src_) activations_changed();
    }
    const int status = ph_matmul_q8_set(static_cast<uint32_t>(lead.type), products.data(), count, lead.in,
                                        act_.data(), act_stride_, n, stream_);
    fused_launches_ += static_cast<uint64_t>(count - 1);
    return check(status, fmt::format("multiplying by '{}' and the {} after it", lead.op->weight, count - 1));
}

Result<void> CudaStage::enqueue_quantizing(const DeviceOp& d, int n) {
    const Op& op = *d.op;
    const auto id = static_cast<uint32_t>(d.quantize_type);
    const auto w = static_cast<int64_t>(width(op.dst));
    int status = 0;
    if (op.kind == OpKind::rms_norm) {
        status = ph_rms_norm_quantize(id, buffer(op.a), buffer(op.dst), static_cast<const float*>(d.weight), w, n,
                                      hp_.rms_eps, act_.data(), act_stride_, stream_);
    } else {
        status = ph_gate_quantize(id, op.kind == OpKind::swiglu ? PH_GATE_SILU : PH_GATE_GELU, buffer(op.a),
                                  buffer(op.b), buffer(op.dst), w, n, act_.data(), act_stride_, stream_);
    }
    PH_TRY(check(status, op.kind == OpKind::rms_norm ? "RMS norm and quantizing" : "gate and quantizing"));
    activations_hold(buffer(op.dst), d.quantize_type, n, w);
    ++fused_launches_;
    return {};
}

Result<void> CudaStage::enqueue_op(const DeviceOp& d, uint32_t layer, int n) {
    const Op& op = *d.op;
    if (op.kind != OpKind::matmul) activations_changed();  // any other op may write any buffer
    const int64_t count = static_cast<int64_t>(width(op.dst)) * n;
    const auto* values = static_cast<const float*>(d.weight);
    if (d.quantize_next && batch_takes_q8(n)) {
        return enqueue_quantizing(d, n);
    }
    switch (op.kind) {
        case OpKind::rms_norm:
            return check(ph_rms_norm(buffer(op.a), buffer(op.dst), values, static_cast<int64_t>(width(op.dst)), n,
                                     hp_.rms_eps, stream_),
                         "RMS norm");
        case OpKind::head_rms_norm:
            return check(ph_rms_norm(buffer(op.a), buffer(op.dst), values, hp_.head_dim,
                                     static_cast<int64_t>(width(op.dst) / hp_.head_dim) * n, hp_.rms_eps, stream_),
                         "per-head RMS norm");
        case OpKind::matmul:
            return enqueue_matmul(d, n);
        case OpKind::add_bias:
            return check(ph_add_bias(buffer(op.dst), values, static_cast<int64_t>(width(op.dst)), n, stream_), "bias");
        case OpKind::rope:
            return enqueue_rope(d, nullptr, layer, n);
        case OpKind::attention: {
            const size_t layer_bytes = size_t{kv_rows_} * kv_row_bytes_;
            auto* k = static_cast<std::byte*>(kv_k_.data()) + (layer - layout_.first_layer) * layer_bytes;
            auto* v = static_cast<std::byte*>(kv_v_.data()) + (layer - layout_.first_layer) * layer_bytes;
            PH_TRY(check(ph_kv_store_rows(kv_type_, buffer(Buffer::k), buffer(Buffer::v), k, v, kv_row_bytes_,
                                          static_cast<int64_t>(layout_.kv_width), n, rows(), stream_),
                         "storing keys and values"));
            const float scale = op.value != 0 ? op.value : 1.0f / std::sqrt(static_cast<float>(hp_.head_dim));
            const int splits =
                n == 1 ? decode_splits_
                       : attention_splits(n, static_cast<int>(layout_.n_head), options_.n_ctx, multiprocessors_);
            // values: the stage's heads' attention sinks, or null.
            return check(ph_attention_rows(kv_type_, buffer(Buffer::q), k, v, kv_row_bytes_, buffer(op.dst), n,
                                           static_cast<int>(layout_.n_head), static_cast<int>(layout_.n_head_kv),
                                           static_cast<int>(hp_.head_dim), scale, program_.layers[layer].window,
                                           static_cast<int>(options_.n_ctx), splits,
                                           static_cast<float*>(partial_.data()), values, rows(), stream_),
                         "attention");
        }
        case OpKind::swiglu:
            return check(ph_swiglu(buffer(op.a), buffer(op.b), buffer(op.dst), count, stream_), "SwiGLU");
        case OpKind::geglu:
            return check(ph_geglu(buffer(op.a), buffer(op.b), buffer(op.dst), count, stream_), "GeGLU");
        case OpKind::scale:
            return check(ph_scale(buffer(op.a), buffer(op.dst), op.value, count, stream_), "scale");
        case OpKind::add:
            return check(ph_add(buffer(op.a), buffer(op.b), buffer(op.dst), count, stream_), "add");
        case OpKind::moe:
            return d.device_experts ? run_device_experts(d, n) : run_ram_experts(d, n);
        case OpKind::layer_norm:
        case OpKind::gelu:
        case OpKind::add_row:
            // Encoders' ops: cuda_stage_supports refuses their programs before any load.
            return make_error(ErrorCode::internal, "the CUDA stage has no kernels for encoders' ops");
    }
    return {};
}

DeviceUsage CudaStage::usage() const {
    DeviceUsage u;
    u.name = shard_.name;
    u.part = describe_stage(hp_, layout_, shard_.embedding, shard_.output);
    if (!have_cublas_ && !cublas_note_.empty()) u.part += " (prompts without cuBLAS)";
    u.cuda_graphs = graphs_;
    u.graph_replays = graph_replays_;
    u.graphs_note = graphs_note_;
    if (!options_.use_graphs)
        u.graphs_note = "turned off (cuda_graphs = false)";
    else if (shard_.comm != nullptr)
        u.graphs_note = "off for a tensor-split stage (its all-reduces wait on the host)";
    u.cublas = have_cublas_;
    u.cublas_gemms = cublas_gemms_;
    u.fused_launches = fused_launches_;
    u.cublas_note = cublas_note_;
    if (!options_.use_cublas) u.cublas_note = "turned off";
    u.weight_bytes = weight_bytes_;
    u.ram_weight_bytes = ram_weight_bytes_;
    u.kv_cache_bytes = kv_bytes_;
    u.scratch_bytes = scratch_bytes_;
    u.planned_bytes = shard_.planned_bytes;
    u.busy_seconds = busy_seconds_;
    u.gpu_seconds = gpu_seconds_;
    u.bandwidth_gb_s = bandwidth_gb_s_;
    u.step_bytes = step_bytes_;
    return u;
}

Result<void> CudaStage::write_buffer(Buffer b, std::span<const float> values) {
    const DeviceBuffer& into = buffers_[static_cast<size_t>(b)];
    Result<size_t> rows = buffer_rows(layout_, b, values.size(), into.size() / sizeof(float), shard_.name);
    if (!rows) return rows.error();
    PH_TRY(select());
    if (pending_) PH_TRY(finish("the work before writing a buffer"));
    PH_TRY(check(cudaMemcpyAsync(buffer(b), values.data(), values.size_bytes(), cudaMemcpyHostToDevice, stream_),
                 "writing an activation buffer"));
    return check(cudaStreamSynchronize(stream_), "writing an activation buffer");
}

Result<void> CudaStage::read_buffer(Buffer b, std::span<float> out) {
    const DeviceBuffer& from = buffers_[static_cast<size_t>(b)];
    Result<size_t> rows = buffer_rows(layout_, b, out.size(), from.size() / sizeof(float), shard_.name);
    if (!rows) return rows.error();
    PH_TRY(select());
    if (pending_) PH_TRY(finish("the work before reading a buffer"));
    PH_TRY(check(cudaMemcpyAsync(out.data(), buffer(b), out.size_bytes(), cudaMemcpyDeviceToHost, stream_),
                 "reading an activation buffer"));
    return check(cudaStreamSynchronize(stream_), "reading an activation buffer");
}

}  // namespace detail

int attention_splits(int n_tokens, int n_head, uint32_t n_ctx, int multiprocessors) {
    const int most = std::max(1, std::min(64, static_cast<int>(n_ctx / 128)));
    const int blocks = std::max(1, n_tokens) * std::max(1, n_head);
    const int wanted = (2 * std::max(1, multiprocessors) + blocks - 1) / blocks;
    if (n_tokens <= 1) return most;
    return std::clamp(wanted, 1, most);
}

Result<std::unique_ptr<DeviceStage>> create_cuda_stage(const GgufModel& model, const arch::Hparams& hparams,
                                                       const arch::StepProgram& program,
                                                       const CudaStageOptions& options, const CudaShard& shard) {
    if (options.n_ctx == 0) return make_error(ErrorCode::invalid_argument, "the context length must be at least 1");
    auto stage = std::make_unique<detail::CudaStage>(hparams, program, options, shard);
    Result<void> ready = stage->init(model);
    if (!ready) return ready.error();
    return std::unique_ptr<DeviceStage>(std::move(stage));
}

}  // namespace powerhouse::cuda
