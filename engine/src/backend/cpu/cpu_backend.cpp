#include "backend/cpu/cpu_backend.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/encoder_ops.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/moe.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/quant_dot.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/vec.h"
#include "backend/split_backend.h"
#include "backend/stage_layout.h"
#include "plan/device_limits.h"
#include "platform/zeroed_pages.h"
#include "tensor/dequantize.h"

namespace powerhouse::cpu {

namespace {

using arch::Buffer;
using arch::Op;
using arch::OpKind;

using Clock = std::chrono::steady_clock;

// An op with its weight cut to the device's share (stage_layout.h), as the CPU kernels take it.
struct BoundOp {
    const Op* op = nullptr;
    MatmulWeights matrix;           // matmul: the rows and columns this device multiplies by
    const float* values = nullptr;  // norms and biases (F32): this device's part
    bool all_reduce = false;        // a row-parallel product or a share of the experts: sum the outputs
    BoundWeight experts;            // moe: the stage's experts
    RowTable table;                 // add_row: the table whose rows it adds
};

// The cache's rows: kv_rows (else n_ctx), rounded up to whole blocks.
uint32_t cache_rows(const CpuBackendOptions& o) {
    const uint32_t bs = std::max<uint32_t>(1, o.kv_block_size);
    const uint32_t rows = std::max<uint32_t>(1, o.kv_rows != 0 ? o.kv_rows : o.n_ctx);
    return (rows + bs - 1) / bs * bs;
}

class CpuStage final : public DeviceStage {
public:
    CpuStage(const GgufModel& model, arch::Hparams hp, arch::StepProgram program, const CpuBackendOptions& options,
             CpuShard shard);

    Result<void> bind();

    const std::string& name() const override { return shard_.name; }
    float* x() override { return buffer(Buffer::x); }
    Result<void> embed(std::span<const TokenId> tokens, std::span<const int32_t> positions) override;
    Result<void> run_layers(const StageBatch& batch) override;
    Result<void> copy_kv_blocks(std::span<const KvBlockCopy> copies) override;
    int max_head_rows() const override { return max_head_rows_; }
    bool paged_kv() const override { return true; }
    Result<std::span<const float>> head(std::span<const int> rows) override;
    Result<std::span<const float>> head_hidden(std::span<const int> rows) override;
    DeviceUsage usage() const override;
    Result<void> write_buffer(Buffer b, std::span<const float> values) override;
    Result<void> read_buffer(Buffer b, std::span<float> out) override;
    void interrupt() override {
        {
            const std::lock_guard lock(fault_mutex_);
            interrupted_ = true;
        }
        fault_wake_.notify_all();
    }

private:
    // The injected fault (CpuShard::fail_after): an error at once, or a hang that only an
    // interrupt ends.
    Result<void> injected_fault() {
        if (shard_.fail_hangs) {
            std::unique_lock lock(fault_mutex_);
            fault_wake_.wait(lock, [&] { return interrupted_; });
            return make_error(ErrorCode::device_failed, "stopped answering (a hang injected for testing)");
        }
        return make_error(ErrorCode::device_failed, "stopped answering (a fault injected for testing)");
    }

    size_t width(Buffer b) const { return layout_.width(b); }
    float* buffer(Buffer b) { return buffers_[static_cast<size_t>(b)].data(); }

    BoundOp to_bound_op(const BoundWeight& w) const;
    void interleave_weights();
    void prefault_in_place() const;
    Result<void> run_op(const BoundOp& bound, uint32_t layer, int n);
    Result<const arch::Op*> run_head(std::span<const int> rows, bool hidden);
    void rope(float* data, int64_t n_heads, uint32_t layer);
    void attention(uint32_t layer, int n, float scale, const float* sinks);

    const GgufModel& model_;
    arch::Hparams hp_;
    arch::StepProgram program_;
    CpuShard shard_;
    uint32_t n_ctx_;
    uint32_t n_batch_;
    uint32_t kv_rows_;
    uint32_t kv_block_size_;
    int max_head_rows_;
    ThreadPool pool_;
    StageLayout layout_;

    std::vector<BoundOp> input_;
    std::vector<std::vector<BoundOp>> layers_;  // the stage's layers, from layout_.first_layer
    std::vector<BoundOp> head_;
    const GgufTensorInfo* embedding_ = nullptr;
    const float* rope_freqs_ = nullptr;  // [rope_dims / 2] f32; null: none

    // Sized for a full batch; a page is resident once a step has written it.
    std::array<ZeroedArray<float>, arch::kBufferCount> buffers_;
    ZeroedArray<float> head_x_;                // the rows whose logits are asked for
    std::vector<std::byte> quantized_;         // activations for a matmul
    std::vector<std::vector<float>> scratch_;  // per thread: attention scores
    std::optional<GeluTable> gelu_;            // only for a program with GeGLU (256 KiB)
    MoeScratch moe_;                           // only for a mixture-of-experts program
    InterleavedCopies interleaved_;            // weights in interleave.h's layout
    KvCacheType kv_type_;
    KvCache kv_;
    KernelIsa isa_;
    bool interleave_;
    StageBatch batch_;  // the rows being run
    std::vector<int32_t> embed_positions_;  // the positions of the tokens embed() looks up
    std::span<const int32_t> positions_;    // the rows' positions: embed()'s, or the batch's
    std::vector<float> row_scratch_;        // add_row: one table row decoded
    uint64_t weight_bytes_ = 0;
    uint64_t ram_weight_bytes_ = 0;  // experts in RAM, run by shard_.host_experts
    int64_t steps_ = 0;
    double busy_seconds_ = 0;
    std::mutex fault_mutex_;
    std::condition_variable fault_wake_;
    bool interrupted_ = false;
};

CpuStage::CpuStage(const GgufModel& model, arch::Hparams hp, arch::StepProgram program,
                   const CpuBackendOptions& options, CpuShard shard)
    : model_(model),
      hp_(std::move(hp)),
      program_(std::move(program)),
      shard_(std::move(shard)),
      n_ctx_(options.n_ctx),
      n_batch_(std::max<uint32_t>(1, options.n_batch)),
      kv_rows_(cache_rows(options)),
      kv_block_size_(std::max<uint32_t>(1, options.kv_block_size)),
      max_head_rows_(std::max(1, options.max_head_rows)),
      pool_(options.n_threads > 0 ? options.n_threads
                                  : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      kv_type_(options.kv_cache_type),
      isa_(options.isa.value_or(best_isa())),
      interleave_(options.interleave) {}

// A bound weight (stage_layout.h) as the CPU kernels take it.
BoundOp CpuStage::to_bound_op(const BoundWeight& w) const {
    BoundOp bound{w.op, {}, w.values, w.all_reduce, {}, {}};
    if (w.op->kind == OpKind::matmul) bound.matrix = MatmulWeights{w.type, w.data, w.in, w.rows, w.row_stride};
    if (w.op->kind == OpKind::add_row) bound.table = RowTable{w.type, w.data, w.in, w.rows, w.row_stride};
    if (w.op->kind == OpKind::moe) {
        bound.experts = w;
        bound.all_reduce = w.expert_all_reduce;
    }
    return bound;
}

Result<void> CpuStage::bind() {
    Result<StageLayout> layout = make_stage_layout(hp_, program_, shard_.ranges);
    if (!layout) return layout.error();
    layout_ = *layout;
    // A row-parallel cut must also start and end on a block of the activations' format
    // (quant_dot.h).
    Result<BoundProgram> bound = bind_program(
        model_, hp_, program_, layout_, shard_.embedding, shard_.output, shard_.comm != nullptr, "CPU",
        [](GgmlType type) { return type_traits(type).has_reference && has_dot(type); },
        [](GgmlType type) { return activation_block(type); });
    if (!bound) return bound.error();
    embedding_ = bound->embedding;
    for (const BoundWeight& w : bound->input) {
        weight_bytes_ += w.bytes();
        input_.push_back(to_bound_op(w));
    }
    if (embedding_ != nullptr) weight_bytes_ += embedding_->n_bytes;
    layers_.resize(bound->layers.size());
    for (size_t l = 0; l < bound->layers.size(); ++l) {
        for (const BoundWeight& w : bound->layers[l]) {
            if (w.op->kind == OpKind::moe && w.experts_in_ram) {
                if (!shard_.host_experts) {
                    return make_error(ErrorCode::internal, "experts in RAM without a host to run them");
                }
                ram_weight_bytes_ += w.bytes();
            } else {
                weight_bytes_ += w.bytes();
            }
            layers_[l].push_back(to_bound_op(w));
        }
    }
    for (const BoundWeight& w : bound->head) {
        // A tied output matrix is the embedding table, counted once.
        const bool tied_here = embedding_ != nullptr && arch::weight_name(*w.op, 0) == embedding_->name;
        if (!tied_here) weight_bytes_ += w.bytes();
        head_.push_back(to_bound_op(w));
    }
    if (bound->rope_freqs != nullptr) rope_freqs_ = reinterpret_cast<const float*>(bound->rope_freqs->data);
    if (interleave_) interleave_weights();
    prefault_in_place();

    for (size_t i = 0; i < buffers_.size(); ++i) {
        // Row-parallel products write the full width; the logits are one row.
        const size_t rows = static_cast<Buffer>(i) == Buffer::logits ? static_cast<size_t>(max_head_rows_) : n_batch_;
        buffers_[i] = ZeroedArray<float>(layout_.widths[i] * rows);
    }
    if (!shard_.output) buffers_[static_cast<size_t>(Buffer::logits)].clear();
    // Room for the converted activations of the widest product input (never more than four
    // bytes a value, F32 weights included).
    size_t max_in = 0;
    const auto widest = [&](const std::vector<BoundOp>& ops) {
        for (const BoundOp& b : ops) {
            if (b.op->kind == OpKind::matmul) max_in = std::max(max_in, width(b.op->a));
        }
    };
    widest(input_);
    for (const auto& layer : layers_) widest(layer);
    widest(head_);
    quantized_.resize(max_in * n_batch_ * sizeof(float) + 64);
    scratch_.assign(static_cast<size_t>(pool_.size()), std::vector<float>(n_ctx_ + 2 * size_t{hp_.head_dim}));
    PH_TRY(cpu_stage_supports(StageShape{hp_.head_dim, kv_type_, n_batch_}));
    kv_.init(kv_type_, static_cast<uint32_t>(layers_.size()), kv_rows_, layout_.n_head_kv, hp_.head_dim);
    const auto uses = [&](OpKind kind) {
        const auto is = [&](const Op& op) { return op.kind == kind; };
        return std::any_of(program_.input.begin(), program_.input.end(), is) ||
               std::any_of(program_.layer.begin(), program_.layer.end(), is) ||
               std::any_of(program_.lead_layer.begin(), program_.lead_layer.end(), is) ||
               std::any_of(program_.head.begin(), program_.head.end(), is);
    };
    if (uses(OpKind::geglu) || uses(OpKind::gelu)) gelu_.emplace();
    row_scratch_.resize(layout_.full_width(Buffer::x));
    return {};
}

// The weights whose products are faster interleaved (interleave.h) are copied so, and the
// file's pages of each copy given back, except the token table's (a tied output matrix),
// which the embedding still reads. Experts in RAM are the host's to copy.
void CpuStage::interleave_weights() {
    const auto interleave = [&](BoundOp& b) {
        if (b.op->kind == OpKind::moe) {
            if (b.experts.experts_in_ram) {
                shard_.host_experts->interleave(b.experts, &model_);
            } else {
                interleave_experts(pool_, isa_, b.experts, interleaved_, &model_);
            }
            return;
        }
        MatmulWeights& m = b.matrix;
        if (b.op->kind != OpKind::matmul || m.data == nullptr) return;
        const size_t stride = m.row_stride != 0 ? m.row_stride : row_bytes(type_traits(m.type), m.in);
        const bool token_table = embedding_ != nullptr && m.data == embedding_->data;
        if (const std::byte* copy = interleaved_.copy(pool_, isa_, m.type, m.in, m.rows, stride, m.data, 1, 0,
                                                      token_table ? nullptr : &model_)) {
            m.data = copy;
            m.interleaved = true;
        }
    };
    for (BoundOp& b : input_) interleave(b);
    for (auto& layer : layers_) {
        for (BoundOp& b : layer) interleave(b);
    }
    for (BoundOp& b : head_) interleave(b);
}

// The weights used in place from the mapping, each page touched once now rather than page
// fault by page fault during the first prompt (the loader reads the files into the page cache
// meanwhile, so these are mostly minor faults). Norms and biases are a few pages: left.
void CpuStage::prefault_in_place() const {
    const auto page = static_cast<size_t>(std::max(4096L, sysconf(_SC_PAGESIZE)));
    volatile unsigned char sink = 0;
    const auto touch = [&](const std::byte* data, uint64_t bytes) {
        const auto* p = reinterpret_cast<const unsigned char*>(data);
        for (uint64_t at = 0; at < bytes; at += page) sink = static_cast<unsigned char>(sink + p[at]);
    };
    const auto in_place = [&](const BoundOp& b) {
        if (b.op->kind == OpKind::matmul && b.matrix.data != nullptr && !b.matrix.interleaved) {
            const size_t row = b.matrix.row_stride != 0 ? b.matrix.row_stride
                                                        : row_bytes(type_traits(b.matrix.type), b.matrix.in);
            touch(b.matrix.data, row * static_cast<uint64_t>(b.matrix.rows));
        }
        if (b.op->kind == OpKind::moe && !b.experts.experts_in_ram) {
            for (const BoundExperts& x : b.experts.experts) {
                if (x.data == nullptr || x.interleaved) continue;
                touch(x.data, x.expert_stride * (b.experts.expert_end - b.experts.expert_begin));
            }
        }
    };
    for (const BoundOp& b : input_) in_place(b);
    for (const auto& layer : layers_) {
        for (const BoundOp& b : layer) in_place(b);
    }
    for (const BoundOp& b : head_) in_place(b);
    if (embedding_ != nullptr) touch(embedding_->data, embedding_->n_bytes);
}

Result<void> CpuStage::embed(std::span<const TokenId> tokens, std::span<const int32_t> positions) {
    if (embedding_ == nullptr) return make_error(ErrorCode::internal, "this device does not hold the embedding");
    if (positions.size() != tokens.size() || tokens.size() > n_batch_) {
        return make_error(ErrorCode::internal, fmt::format("{} tokens with {} positions (the stage takes up to {})",
                                                           tokens.size(), positions.size(), n_batch_));
    }
    embed_positions_.assign(positions.begin(), positions.end());
    positions_ = embed_positions_;
    const auto start = Clock::now();
    const size_t w = width(Buffer::x);
    const uint64_t row = row_bytes(type_traits(embedding_->type), w);
    for (size_t t = 0; t < tokens.size(); ++t) {
        const std::byte* src = embedding_->data + row * static_cast<uint64_t>(tokens[t]);
        float* dst = buffer(Buffer::x) + t * w;
        if (embedding_->type == GgmlType::f32) {
            std::copy_n(reinterpret_cast<const float*>(src), w, dst);
        } else {
            dequantize_row(embedding_->type, src, dst, static_cast<int64_t>(w));
        }
    }
    Result<void> result;
    for (const BoundOp& op : input_) {
        if (result = run_op(op, 0, static_cast<int>(tokens.size())); !result) break;
    }
    busy_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
    return result;
}

Result<void> CpuStage::run_layers(const StageBatch& batch) {
    if (shard_.fail_after >= 0 && steps_ >= shard_.fail_after) return injected_fault();
    if (batch.n <= 0 || static_cast<uint32_t>(batch.n) > n_batch_) {
        return make_error(ErrorCode::internal, fmt::format("a batch of {} rows (the stage takes 1 to {})", batch.n,
                                                           n_batch_));
    }
    for (int t = 0; t < batch.n; ++t) {
        if (batch.pos[t] < 0 || static_cast<uint32_t>(batch.pos[t]) >= n_ctx_ ||
            batch.slot(t, batch.pos[t]) >= int64_t{kv_rows_}) {
            return make_error(ErrorCode::internal, fmt::format("row {} is position {} in cache row {}, past the cache", t,
                                                               batch.pos[t], batch.slot(t, batch.pos[t])));
        }
    }
    ++steps_;
    const auto start = Clock::now();
    const int n = batch.n;
    batch_ = batch;
    positions_ = std::span<const int32_t>(batch.pos, static_cast<size_t>(n));
    Result<void> result;
    for (uint32_t l = layout_.first_layer; l < layout_.last_layer && result; ++l) {
        for (const BoundOp& op : layers_[l - layout_.first_layer]) {
            if (result = run_op(op, l, n); !result) break;
        }
    }
    busy_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
    return result;
}

// Runs the head's ops on the given rows of x(): all of them, or (`hidden`) those before the
// output projection. Returns that projection (null when there is none).
Result<const arch::Op*> CpuStage::run_head(std::span<const int> rows, bool hidden) {
    if (!shard_.output) return make_error(ErrorCode::internal, "this device does not hold the output layer");
    if (rows.empty() || rows.size() > static_cast<size_t>(max_head_rows_)) {
        return make_error(ErrorCode::internal,
                          fmt::format("the head of {} rows (the stage takes 1 to {})", rows.size(), max_head_rows_));
    }
    const auto start = Clock::now();
    // Only the wanted rows: gather them into a buffer of their own, which stands in for x()
    // while the head runs (x() keeps every row, for a later call).
    const size_t w = width(Buffer::x);
    ZeroedArray<float>& x = buffers_[static_cast<size_t>(Buffer::x)];
    if (head_x_.size() < static_cast<size_t>(max_head_rows_) * w) {
        head_x_ = ZeroedArray<float>(static_cast<size_t>(max_head_rows_) * w);
    }
    for (size_t i = 0; i < rows.size(); ++i) {
        if (rows[i] < 0 || static_cast<uint32_t>(rows[i]) >= n_batch_) {
            return make_error(ErrorCode::internal, fmt::format("head row {} is outside the batch", rows[i]));
        }
        std::copy_n(x.data() + static_cast<size_t>(rows[i]) * w, w, head_x_.data() + i * w);
    }
    std::swap(x, head_x_);
    Result<void> ran;
    const arch::Op* projection = nullptr;
    for (const BoundOp& op : head_) {
        if (op.op->dst == Buffer::logits && projection == nullptr) projection = op.op;
        if (hidden && projection != nullptr) break;
        if (ran = run_op(op, 0, static_cast<int>(rows.size())); !ran) break;
    }
    std::swap(x, head_x_);
    if (!ran) return ran.error();
    busy_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
    return projection;
}

Result<std::span<const float>> CpuStage::head(std::span<const int> rows) {
    PH_TRY(run_head(rows, false));
    return std::span<const float>(buffer(Buffer::logits), size_t{hp_.n_vocab} * rows.size());
}

Result<std::span<const float>> CpuStage::head_hidden(std::span<const int> rows) {
    Result<const arch::Op*> projection = run_head(rows, true);
    if (!projection) return projection.error();
    // An encoder has no head: its embeddings are the last layer's rows, gathered in head_x_.
    if (*projection == nullptr && head_.empty()) {
        return std::span<const float>(head_x_.data(), size_t{hp_.n_embd} * rows.size());
    }
    if (*projection == nullptr || width((*projection)->a) != hp_.n_embd) {
        return make_error(ErrorCode::unsupported, "this model's output head gives no embeddings on this device");
    }
    return std::span<const float>(buffer((*projection)->a), size_t{hp_.n_embd} * rows.size());
}

Result<void> CpuStage::copy_kv_blocks(std::span<const KvBlockCopy> copies) {
    for (const KvBlockCopy& c : copies) {
        const int64_t bs = kv_block_size_;
        if (c.from < 0 || c.to < 0 || (int64_t{c.from} + 1) * bs > kv_rows_ || (int64_t{c.to} + 1) * bs > kv_rows_) {
            return make_error(ErrorCode::internal, fmt::format("a KV block copy {} -> {} past the cache", c.from, c.to));
        }
        kv_.copy_rows(c.from * bs, c.to * bs, bs);
    }
    return {};
}

DeviceUsage CpuStage::usage() const {
    DeviceUsage u;
    u.name = shard_.name;
    u.part = describe_stage(hp_, layout_, shard_.embedding, shard_.output);
    u.weight_bytes = weight_bytes_;
    u.ram_weight_bytes = ram_weight_bytes_;
    u.kv_cache_bytes = kv_.bytes();
    for (const auto& b : buffers_) u.scratch_bytes += b.size() * sizeof(float);
    u.scratch_bytes += quantized_.size() + moe_.bytes() + head_x_.size() * sizeof(float);
    for (const auto& s : scratch_) u.scratch_bytes += s.size() * sizeof(float);
    u.planned_bytes = shard_.planned_bytes;
    u.busy_seconds = busy_seconds_;
    return u;
}

Result<void> CpuStage::write_buffer(Buffer b, std::span<const float> values) {
    ZeroedArray<float>& into = buffers_[static_cast<size_t>(b)];
    Result<size_t> rows = buffer_rows(layout_, b, values.size(), into.size(), shard_.name);
    if (!rows) return rows.error();
    std::copy(values.begin(), values.end(), into.begin());
    return {};
}

Result<void> CpuStage::read_buffer(Buffer b, std::span<float> out) {
    const ZeroedArray<float>& from = buffers_[static_cast<size_t>(b)];
    Result<size_t> rows = buffer_rows(layout_, b, out.size(), from.size(), shard_.name);
    if (!rows) return rows.error();
    std::copy_n(from.begin(), out.size(), out.begin());
    return {};
}

Result<void> CpuStage::run_op(const BoundOp& bound, uint32_t layer, int n) {
    const Op& op = *bound.op;
    switch (op.kind) {
        case OpKind::rms_norm:
            rms_norm_rows(isa_, buffer(op.a), buffer(op.dst), bound.values, static_cast<int64_t>(width(op.dst)), n,
                          hp_.rms_eps);
            break;
        case OpKind::head_rms_norm:
            rms_norm_rows(isa_, buffer(op.a), buffer(op.dst), bound.values, hp_.head_dim,
                          static_cast<int64_t>(width(op.dst) / hp_.head_dim) * n, hp_.rms_eps);
            break;
        case OpKind::matmul:
            cpu::matmul(pool_, isa_, bound.matrix, buffer(op.a), buffer(op.dst), n, quantized_);
            if (bound.all_reduce) {
                return shard_.comm->all_reduce_sum(shard_.rank, buffer(op.dst), width(op.dst) * static_cast<size_t>(n));
            }
            break;
        case OpKind::add_bias:
            add_bias(buffer(op.dst), bound.values, width(op.dst), n);
            break;
        case OpKind::rope:
            rope(buffer(op.dst), static_cast<int64_t>(width(op.dst) / hp_.head_dim), layer);
            if (op.value != 0.0f) {  // Llama 4's attention temperature
                scale_by_position(buffer(op.dst), width(op.dst),
                                  std::span<const int32_t>(batch_.pos, static_cast<size_t>(n)), op.value,
                                  hp_.attn_temperature_length);
            }
            break;
        case OpKind::attention:
            attention(layer, n, op.value, bound.values);
            break;
        case OpKind::swiglu:
            swiglu(isa_, buffer(op.a), buffer(op.b), buffer(op.dst), width(op.dst) * static_cast<size_t>(n));
            break;
        case OpKind::geglu:
            geglu(*gelu_, buffer(op.a), buffer(op.b), buffer(op.dst), width(op.dst) * static_cast<size_t>(n));
            break;
        case OpKind::scale:
            scale(buffer(op.a), buffer(op.dst), op.value, width(op.dst) * static_cast<size_t>(n));
            break;
        case OpKind::add:
            add(isa_, buffer(op.a), buffer(op.b), buffer(op.dst), width(op.dst) * static_cast<size_t>(n));
            break;
        case OpKind::layer_norm:
            layer_norm_rows(buffer(op.a), buffer(op.dst), bound.values, static_cast<int64_t>(width(op.dst)), n,
                            hp_.norm_eps);
            break;
        case OpKind::gelu:
            gelu(*gelu_, buffer(op.a), buffer(op.dst), width(op.dst) * static_cast<size_t>(n));
            break;
        case OpKind::add_row: {
            // Row weight_row for every token, or each token's position (embed()'s tokens', or
            // the batch's rows').
            std::vector<int32_t> rows(op.weight_row ? static_cast<size_t>(n) : 0,
                                      static_cast<int32_t>(op.weight_row.value_or(0)));
            std::span<const int32_t> row_of(rows);
            if (!op.weight_row) row_of = positions_.first(static_cast<size_t>(n));
            for (const int32_t r : row_of) {
                if (r < 0 || r >= bound.table.rows) {
                    return make_error(ErrorCode::invalid_argument,
                                      fmt::format("position {} is past the {} rows of '{}': the model takes at most {} "
                                                  "tokens",
                                                  r, bound.table.rows, arch::weight_name(op, layer), bound.table.rows));
                }
            }
            add_rows(bound.table, row_of, buffer(op.dst), row_scratch_.data());
            break;
        }
        case OpKind::moe:
            if (bound.experts.experts_in_ram) {
                shard_.host_experts->run(bound.experts, buffer(op.a), buffer(op.b), buffer(op.dst), n,
                                         static_cast<int64_t>(width(op.dst)));
            } else {
                run_moe(pool_, isa_, bound.experts, buffer(op.a), buffer(op.b), buffer(op.dst), n,
                        static_cast<int64_t>(width(op.dst)), moe_);
            }
            if (bound.all_reduce) {
                return shard_.comm->all_reduce_sum(shard_.rank, buffer(op.dst), width(op.dst) * static_cast<size_t>(n));
            }
            break;
    }
    return {};
}

// RoPE at the batch's positions with the layer's base and scale (ops.h).
void CpuStage::rope(float* data, int64_t n_heads, uint32_t layer) {
    const arch::LayerAttention& la = program_.layers[layer];
    if (!la.rope) return;  // a NoPE layer
    RopeShape shape{hp_.head_dim, hp_.rope_dims,      hp_.rope_layout == arch::RopeLayout::neox,
                    la.rope_base, la.rope_freq_scale, rope_freqs_};
    shape.attn_factor = hp_.yarn.attn_factor;  // with or without YaRN (Phi-3's LongRoPE has one)
    if (hp_.yarn.ext_factor != 0.0f) {
        shape.ext_factor = hp_.yarn.ext_factor;
        yarn_corr_dims(hp_.rope_dims, hp_.yarn.orig_ctx, la.rope_base, hp_.yarn.beta_fast, hp_.yarn.beta_slow,
                       shape.corr_low, shape.corr_high);
    }
    cpu::rope(shape, data, n_heads, std::span<const int32_t>(batch_.pos, static_cast<size_t>(batch_.n)));
}

void CpuStage::attention(uint32_t layer, int n, float scale, const float* sinks) {
    for (int t = 0; t < n; ++t) {
        kv_.store(layer - layout_.first_layer, batch_.slot(t, batch_.pos[t]),
                  buffer(Buffer::k) + static_cast<size_t>(t) * layout_.kv_width,
                  buffer(Buffer::v) + static_cast<size_t>(t) * layout_.kv_width);
    }
    AttentionShape shape{layout_.n_head, layout_.n_head_kv, hp_.head_dim, scale, program_.layers[layer].window, sinks};
    shape.causal = program_.causal;
    cpu::attention(pool_, isa_, kv_, layer - layout_.first_layer, shape, buffer(Buffer::q), buffer(Buffer::attn), batch_,
                   scratch_);
}

}  // namespace

Result<std::unique_ptr<DeviceStage>> create_cpu_stage(const GgufModel& model, const arch::Hparams& hparams,
                                                      const arch::StepProgram& program,
                                                      const CpuBackendOptions& options, const CpuShard& shard) {
    if (options.n_ctx == 0) return make_error(ErrorCode::invalid_argument, "the context length must be at least 1");
    if (options.isa) {
        const std::span<const KernelIsa> isas = available_isas();
        if (std::find(isas.begin(), isas.end(), *options.isa) == isas.end()) {
            return make_error(ErrorCode::unsupported,
                              fmt::format("this processor cannot run the {} kernels", isa_name(*options.isa)));
        }
    }
    auto stage = std::make_unique<CpuStage>(model, hparams, program, options, shard);
    Result<void> bound = stage->bind();
    if (!bound) return bound.error();
    return std::unique_ptr<DeviceStage>(std::move(stage));
}

Result<std::unique_ptr<Backend>> create_cpu_backend(const GgufModel& model, const arch::Hparams& hparams,
                                                    const arch::StepProgram& program,
                                                    const CpuBackendOptions& options) {
    Result<std::unique_ptr<DeviceStage>> stage = create_cpu_stage(model, hparams, program, options, CpuShard{});
    if (!stage) return stage.error();
    std::vector<std::unique_ptr<DeviceStage>> stages;
    stages.push_back(std::move(stage).value());
    SplitShape shape;
    shape.mode = SplitMode::single;
    shape.n_ctx = options.n_ctx;
    shape.n_batch = std::max<uint32_t>(1, options.n_batch);
    shape.n_vocab = hparams.n_vocab;
    shape.n_embd = hparams.n_embd;
    shape.kv_block_size = std::max<uint32_t>(1, options.kv_block_size);
    shape.kv_blocks = cache_rows(options) / shape.kv_block_size;
    shape.max_sequences = static_cast<uint32_t>(std::max(1, options.max_head_rows));
    return make_split_backend(std::move(stages), make_host_communicator(1), shape);
}

}  // namespace powerhouse::cpu
