#include "backend/cpu/cpu_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <thread>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/quant_dot.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/vec.h"
#include "tensor/dequantize.h"
#include "tensor/half.h"

namespace powerhouse::cpu {

namespace {

using arch::Buffer;
using arch::Op;
using arch::OpKind;

// An op with its weight found in the file.
struct BoundOp {
    const Op* op = nullptr;
    const GgufTensorInfo* weight = nullptr;
};

class CpuBackend final : public Backend {
public:
    CpuBackend(const GgufModel& model, arch::Hparams hp, arch::StepProgram program, const CpuBackendOptions& options);

    Result<void> bind();

    Result<std::span<const float>> decode(std::span<const TokenId> tokens) override;
    uint32_t n_past() const override { return n_past_; }
    uint32_t n_ctx() const override { return n_ctx_; }
    void truncate(uint32_t n) override { n_past_ = std::min(n_past_, n); }
    size_t kv_cache_bytes() const override { return kv_.bytes(); }

private:
    size_t width(Buffer b) const { return widths_[static_cast<size_t>(b)]; }
    float* buffer(Buffer b) { return buffers_[static_cast<size_t>(b)].data(); }

    void run_batch(std::span<const TokenId> tokens);
    void run_op(const BoundOp& bound, uint32_t layer, int n);
    void embed(std::span<const TokenId> tokens);
    void rms_norm(const float* src, float* dst, const float* weight, int64_t size, int64_t rows);
    void matmul(const GgufTensorInfo& w, const float* src, float* dst, int n);
    void rope(float* data, int64_t n_heads, int n, uint32_t layer);
    void attention(uint32_t layer, int n, float scale);
    void geglu(const float* gate, const float* up, float* dst, size_t count) const;

    const GgufModel& model_;
    arch::Hparams hp_;
    arch::StepProgram program_;
    uint32_t n_ctx_;
    uint32_t n_batch_;
    ThreadPool pool_;

    std::vector<BoundOp> input_;
    std::vector<std::vector<BoundOp>> layers_;
    std::vector<BoundOp> head_;
    const GgufTensorInfo* embedding_ = nullptr;
    const float* rope_freqs_ = nullptr;

    std::array<size_t, arch::kBufferCount> widths_{};
    std::array<std::vector<float>, arch::kBufferCount> buffers_;
    std::vector<std::byte> quantized_;         // activations for a matmul
    std::vector<std::vector<float>> scratch_;  // per thread: attention scores
    std::vector<float> gelu_table_;            // f16 bits of x -> gelu(x) rounded to f16 (as ggml)
    KvCacheType kv_type_;
    KvCache kv_;
    KernelIsa isa_ = best_isa();
    size_t kv_width_ = 0;
    uint32_t n_past_ = 0;
    uint32_t batch_pos_ = 0;  // position of the batch's first token
};

CpuBackend::CpuBackend(const GgufModel& model, arch::Hparams hp, arch::StepProgram program,
                       const CpuBackendOptions& options)
    : model_(model),
      hp_(std::move(hp)),
      program_(std::move(program)),
      n_ctx_(options.n_ctx),
      n_batch_(std::max<uint32_t>(1, options.n_batch)),
      pool_(options.n_threads > 0 ? options.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      kv_type_(options.kv_cache_type) {}

Result<void> CpuBackend::bind() {
    const auto find = [&](const std::string& name) -> Result<const GgufTensorInfo*> {
        const GgufTensorInfo* t = model_.find_tensor(name);
        if (t == nullptr) return make_error(ErrorCode::format, fmt::format("the model has no tensor '{}'", name));
        if (t->type != GgmlType::f32 && (!type_traits(t->type).has_reference || !has_dot(t->type))) {
            return make_error(ErrorCode::unsupported, fmt::format("tensor '{}' has type {}, which the CPU backend cannot "
                                                                  "run yet", name, type_traits(t->type).name));
        }
        return t;
    };
    const size_t q_width = size_t{hp_.n_head} * hp_.head_dim;
    kv_width_ = size_t{hp_.n_head_kv} * hp_.head_dim;
    const auto set_width = [&](Buffer b, size_t w) { widths_[static_cast<size_t>(b)] = w; };
    set_width(Buffer::x, hp_.n_embd);
    set_width(Buffer::norm, hp_.n_embd);
    set_width(Buffer::tmp, hp_.n_embd);
    set_width(Buffer::q, q_width);
    set_width(Buffer::attn, q_width);
    set_width(Buffer::k, kv_width_);
    set_width(Buffer::v, kv_width_);
    set_width(Buffer::gate, hp_.n_ff);
    set_width(Buffer::up, hp_.n_ff);
    set_width(Buffer::logits, hp_.n_vocab);

    // Checks an op's weight against the buffers it reads and writes.
    const auto bind_op = [&](const Op& op, uint32_t layer) -> Result<BoundOp> {
        BoundOp bound{&op, nullptr};
        if (op.weight.empty()) return bound;
        const std::string name = arch::weight_name(op, layer);
        Result<const GgufTensorInfo*> t = find(name);
        if (!t) return t.error();
        bound.weight = *t;
        const GgufTensorInfo& w = **t;
        int64_t want0 = 0, want1 = 1;
        switch (op.kind) {
            case OpKind::matmul:
                want0 = static_cast<int64_t>(width(op.a));
                want1 = static_cast<int64_t>(width(op.dst));
                break;
            case OpKind::rms_norm:
            case OpKind::add_bias:
                want0 = static_cast<int64_t>(width(op.dst));
                break;
            case OpKind::head_rms_norm:
                want0 = hp_.head_dim;
                break;
            default:
                break;
        }
        if (w.ne[0] != want0 || w.n_rows() != want1) {
            return make_error(ErrorCode::format, fmt::format("tensor '{}' is {}x{}, expected {}x{}", name, w.ne[0],
                                                             w.n_rows(), want0, want1));
        }
        if (op.kind != OpKind::matmul && w.type != GgmlType::f32) {
            return make_error(ErrorCode::unsupported, fmt::format("tensor '{}' must be F32", name));
        }
        if (op.kind == OpKind::matmul && want0 % activation_block(w.type) != 0) {
            return make_error(ErrorCode::format, fmt::format("tensor '{}' has rows of {} elements, not a multiple "
                                                             "of {}", name, want0, activation_block(w.type)));
        }
        return bound;
    };

    if (program_.layers.size() != hp_.n_layer) {
        return make_error(ErrorCode::internal, fmt::format("the step program describes {} layers, the model has {}",
                                                           program_.layers.size(), hp_.n_layer));
    }
    for (const Op& op : program_.input) {
        Result<BoundOp> b = bind_op(op, 0);
        if (!b) return b.error();
        input_.push_back(*b);
    }
    layers_.resize(hp_.n_layer);
    for (uint32_t l = 0; l < hp_.n_layer; ++l) {
        for (const Op& op : program_.layer) {
            Result<BoundOp> b = bind_op(op, l);
            if (!b) return b.error();
            layers_[l].push_back(*b);
        }
    }
    for (const Op& op : program_.head) {
        Result<BoundOp> b = bind_op(op, 0);
        if (!b) return b.error();
        head_.push_back(*b);
    }
    Result<const GgufTensorInfo*> embd = find(program_.embedding);
    if (!embd) return embd.error();
    embedding_ = *embd;
    if ((*embd)->ne[0] != hp_.n_embd) return make_error(ErrorCode::format, "token_embd.weight has the wrong width");
    if (hp_.has_rope_freqs) {
        Result<const GgufTensorInfo*> f = find("rope_freqs.weight");
        if (!f) return f.error();
        if ((*f)->type != GgmlType::f32 || (*f)->ne[0] != hp_.rope_dims / 2) {
            return make_error(ErrorCode::format, "rope_freqs.weight must be F32 with rope_dims / 2 values");
        }
        rope_freqs_ = reinterpret_cast<const float*>((*f)->data);
    }

    for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].assign(widths_[i] * n_batch_, 0.0f);
    size_t max_in = 0;
    for (size_t w : widths_) max_in = std::max(max_in, w);
    quantized_.resize(max_in * n_batch_ * sizeof(float) + 64);
    scratch_.assign(static_cast<size_t>(pool_.size()), std::vector<float>(n_ctx_ + 2 * size_t{hp_.head_dim}));
    if (kv_type_ == KvCacheType::f32) {
        return make_error(ErrorCode::unsupported, "the CPU backend keeps the KV cache in F16 or Q8_0, not F32");
    }
    if (kv_type_ == KvCacheType::q8_0 && hp_.head_dim % 32 != 0) {
        return make_error(ErrorCode::unsupported, fmt::format("a Q8_0 KV cache needs a head size that is a multiple "
                                                              "of 32, not {}", hp_.head_dim));
    }
    kv_.init(kv_type_, hp_.n_layer, n_ctx_, hp_.n_head_kv, hp_.head_dim);
    const auto uses = [&](OpKind kind) {
        const auto is = [&](const Op& op) { return op.kind == kind; };
        return std::any_of(program_.input.begin(), program_.input.end(), is) ||
               std::any_of(program_.layer.begin(), program_.layer.end(), is) ||
               std::any_of(program_.head.begin(), program_.head.end(), is);
    };
    if (uses(OpKind::geglu)) {
        // ggml's GELU on the CPU: tanh approximation evaluated once per f16 input, result
        // stored in f16.
        gelu_table_.resize(65536);
        for (uint32_t i = 0; i < 65536; ++i) {
            const float x = f16_to_f32(static_cast<uint16_t>(i));
            const float g = 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * x * (1.0f + 0.044715f * x * x)));
            gelu_table_[i] = f16_to_f32(f32_to_f16(g));
        }
    }
    return {};
}

Result<std::span<const float>> CpuBackend::decode(std::span<const TokenId> tokens) {
    if (tokens.empty()) return make_error(ErrorCode::invalid_argument, "decode() needs at least one token");
    if (n_past_ + tokens.size() > n_ctx_) {
        return make_error(ErrorCode::out_of_memory,
                          fmt::format("the context is full: {} tokens held, {} more asked, the context holds {}",
                                      n_past_, tokens.size(), n_ctx_));
    }
    for (TokenId id : tokens) {
        if (id < 0 || static_cast<uint32_t>(id) >= hp_.n_vocab) {
            return make_error(ErrorCode::invalid_argument, fmt::format("token id {} is out of range", id));
        }
    }
    for (size_t at = 0; at < tokens.size(); at += n_batch_) {
        const size_t n = std::min<size_t>(n_batch_, tokens.size() - at);
        run_batch(tokens.subspan(at, n));
    }
    return std::span<const float>(buffer(Buffer::logits), hp_.n_vocab);
}

void CpuBackend::run_batch(std::span<const TokenId> tokens) {
    const int n = static_cast<int>(tokens.size());
    batch_pos_ = n_past_;
    embed(tokens);
    for (const BoundOp& op : input_) run_op(op, 0, n);
    for (uint32_t l = 0; l < hp_.n_layer; ++l) {
        for (const BoundOp& op : layers_[l]) run_op(op, l, n);
    }
    // Only the last token's logits are wanted: run the head on it alone.
    const size_t last = static_cast<size_t>(n - 1) * width(Buffer::x);
    if (n > 1) std::copy_n(buffer(Buffer::x) + last, width(Buffer::x), buffer(Buffer::x));
    for (const BoundOp& op : head_) run_op(op, 0, 1);
    n_past_ += static_cast<uint32_t>(n);
}

void CpuBackend::run_op(const BoundOp& bound, uint32_t layer, int n) {
    const Op& op = *bound.op;
    const auto weight_f32 = [&] { return reinterpret_cast<const float*>(bound.weight->data); };
    switch (op.kind) {
        case OpKind::rms_norm:
            rms_norm(buffer(op.a), buffer(op.dst), weight_f32(), static_cast<int64_t>(width(op.dst)), n);
            break;
        case OpKind::head_rms_norm:
            rms_norm(buffer(op.a), buffer(op.dst), weight_f32(), hp_.head_dim,
                     static_cast<int64_t>(width(op.dst) / hp_.head_dim) * n);
            break;
        case OpKind::matmul:
            matmul(*bound.weight, buffer(op.a), buffer(op.dst), n);
            break;
        case OpKind::add_bias: {
            const size_t w = width(op.dst);
            float* d = buffer(op.dst);
            const float* bias = weight_f32();
            for (int t = 0; t < n; ++t) {
                for (size_t i = 0; i < w; ++i) d[t * w + i] += bias[i];
            }
            break;
        }
        case OpKind::rope:
            rope(buffer(op.dst), static_cast<int64_t>(width(op.dst) / hp_.head_dim), n, layer);
            break;
        case OpKind::attention:
            attention(layer, n, op.value);
            break;
        case OpKind::swiglu: {
            swiglu(isa_, buffer(op.a), buffer(op.b), buffer(op.dst), width(op.dst) * static_cast<size_t>(n));
            break;
        }
        case OpKind::geglu:
            geglu(buffer(op.a), buffer(op.b), buffer(op.dst), width(op.dst) * static_cast<size_t>(n));
            break;
        case OpKind::scale: {
            const size_t count = width(op.dst) * static_cast<size_t>(n);
            const float* a = buffer(op.a);
            float* d = buffer(op.dst);
            for (size_t i = 0; i < count; ++i) d[i] = a[i] * op.value;
            break;
        }
        case OpKind::add: {
            add(isa_, buffer(op.a), buffer(op.b), buffer(op.dst), width(op.dst) * static_cast<size_t>(n));
            break;
        }
    }
}

void CpuBackend::embed(std::span<const TokenId> tokens) {
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
}

// GeGLU as ggml computes it: gelu from the f16 table (the input rounded to f16), exact
// (x, 0) beyond +-10.
void CpuBackend::geglu(const float* gate, const float* up, float* dst, size_t count) const {
    for (size_t i = 0; i < count; ++i) {
        const float x = gate[i];
        float g;
        if (x <= -10.0f) {
            g = 0.0f;
        } else if (x >= 10.0f) {
            g = x;
        } else {
            g = gelu_table_[f32_to_f16(x)];
        }
        dst[i] = g * up[i];
    }
}

void CpuBackend::rms_norm(const float* src, float* dst, const float* weight, int64_t size, int64_t rows) {
    for (int64_t r = 0; r < rows; ++r) rms_norm_row(isa_, src + r * size, dst + r * size, weight, size, hp_.rms_eps);
}

void CpuBackend::matmul(const GgufTensorInfo& w, const float* src, float* dst, int n) {
    cpu::matmul(pool_, isa_, MatmulWeights{w.type, w.data, w.ne[0], w.ne[1]}, src, dst, n, quantized_);
}

// ggml's RoPE: the angle of pair i at position p is p * base^(-2i/rope_dims), computed by
// repeated multiplication in f32 as ggml does, divided by rope_freqs when the model has them.
void CpuBackend::rope(float* data, int64_t n_heads, int n, uint32_t layer) {
    const uint32_t dims = hp_.rope_dims;
    const arch::LayerAttention& la = program_.layers[layer];
    const float theta_scale = std::pow(la.rope_base, -2.0f / static_cast<float>(dims));
    std::vector<float> cos_sin(dims);
    for (int t = 0; t < n; ++t) {
        float theta = static_cast<float>(batch_pos_ + static_cast<uint32_t>(t));
        for (uint32_t i = 0; i < dims; i += 2) {
            const float ff = rope_freqs_ != nullptr ? rope_freqs_[i / 2] : 1.0f;
            const float angle = la.rope_freq_scale * (theta / ff);
            cos_sin[i] = std::cos(angle);
            cos_sin[i + 1] = std::sin(angle);
            theta *= theta_scale;
        }
        for (int64_t h = 0; h < n_heads; ++h) {
            float* x = data + (static_cast<int64_t>(t) * n_heads + h) * hp_.head_dim;
            for (uint32_t i = 0; i < dims; i += 2) {
                const uint32_t i0 = hp_.rope_layout == arch::RopeLayout::normal ? i : i / 2;
                const uint32_t i1 = hp_.rope_layout == arch::RopeLayout::normal ? i + 1 : i / 2 + dims / 2;
                const float x0 = x[i0];
                const float x1 = x[i1];
                x[i0] = x0 * cos_sin[i] - x1 * cos_sin[i + 1];
                x[i1] = x0 * cos_sin[i + 1] + x1 * cos_sin[i];
            }
        }
    }
}

void CpuBackend::attention(uint32_t layer, int n, float scale) {
    for (int t = 0; t < n; ++t) {
        kv_.store(layer, batch_pos_ + static_cast<uint32_t>(t), buffer(Buffer::k) + static_cast<size_t>(t) * kv_width_,
                  buffer(Buffer::v) + static_cast<size_t>(t) * kv_width_);
    }
    const AttentionShape shape{hp_.n_head, hp_.n_head_kv, hp_.head_dim, scale, program_.layers[layer].window};
    cpu::attention(pool_, isa_, kv_, layer, shape, buffer(Buffer::q), buffer(Buffer::attn), n, batch_pos_, scratch_);
}

}  // namespace

Result<std::unique_ptr<Backend>> create_cpu_backend(const GgufModel& model, const arch::Hparams& hparams,
                                                    const arch::StepProgram& program,
                                                    const CpuBackendOptions& options) {
    if (options.n_ctx == 0) return make_error(ErrorCode::invalid_argument, "the context length must be at least 1");
    auto backend = std::make_unique<CpuBackend>(model, hparams, program, options);
    Result<void> bound = backend->bind();
    if (!bound) return bound.error();
    return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace powerhouse::cpu
