// Op-by-op conformance of the stages, as llama.cpp's test-backend-ops checks every backend:
// each OpKind of the step program (arch/step_program.h) runs as a one-op, one-layer model (a
// tiny GGUF with exactly the op's weights) through every stage this build and machine have,
// fed and read through the stage's activation buffers (DeviceStage::write_buffer and
// read_buffer), and is compared with the scalar CPU code:
//  - OnCpu: the CPU stage with the kernels chosen at run time (best_isa(): AVX2 or AVX-512)
//    and with every other ISA of the processor, against the stage forced to the scalar ISA;
//    each stage also bit for bit against the engine's CPU function it should call
//    (backend/cpu/ops.h, vec.h, matmul.h) with its ISA on the same inputs, which checks the
//    stage's wiring (buffers, weights, positions, the layer's parameters). Matrix products
//    and attention are also checked against float references in double.
//  - OnCuda: the CUDA stage against the scalar CPU stage, op by op; matrix products and
//    attention against the float references, since the GPU keeps f32 activations where the
//    CPU rounds them to 8 or 16 bits. Skipped without a usable GPU, failed instead when
//    POWERHOUSE_REQUIRE_GPU=1 (as tests/kernels/gpu_test.h).
// Names say the op and the shape: OpConformance/Matmul.OnCuda/Q4_K_in_768_rows_7_tokens_3.
// Each tolerance is derived where it is computed, from the roundings of the two paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/encoder_ops.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/quant_dot.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/vec.h"
#include "engine/backend/op_conformance_cases.h"
#include "engine/backend/op_conformance_support.h"
#include "support/test_support.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace powerhouse::test {

// Test failures name the case, not its bytes.
void PrintTo(const OpCase& c, std::ostream* os) {
    *os << c.name;
}

namespace {

using arch::Buffer;
using arch::OpKind;
using cpu::KernelIsa;

const std::vector<float>& values_of(const BufferValues& inputs, Buffer b) {
    for (const auto& [buffer, values] : inputs) {
        if (buffer == b) return values;
    }
    ADD_FAILURE() << "no input for buffer " << static_cast<int>(b);
    static const std::vector<float> none;
    return none;
}

std::vector<double> widen(const std::vector<float>& v) {
    return {v.begin(), v.end()};
}

// What a case keeps between its steps: its weight decoded, the GELU table, the keys and
// values as the cache holds them.
class OpState {
public:
    OpState(const OpCase& c, const GgufModel& model) : c_(c), pool_(2) {
        if (!c.op.weight.empty()) {
            tensor_ = model.find_tensor(arch::weight_name(c.op, 0));
            weight_ = decode_tensor(model, arch::weight_name(c.op, 0));
        }
        if (c.hp.has_rope_freqs) rope_freqs_ = decode_tensor(model, "rope_freqs.weight");
        if (c.op.kind == OpKind::geglu || c.op.kind == OpKind::gelu) gelu_.emplace();
    }

    // The inputs of one step: [n][width] f32 for each buffer the op reads.
    BufferValues inputs(const Step& step, std::mt19937& rng) const;
    // The engine's CPU function of the op with `isa` on the step's inputs: what a CPU stage
    // of that ISA must write, bit for bit. Not for attention.
    std::vector<float> cpu_function(const BufferValues& in, const Step& step, KernelIsa isa);
    // Tolerance of a SIMD stage against the scalar one; none: bit for bit.
    std::optional<std::vector<double>> simd_tolerance(const BufferValues& in, const Step& step,
                                                      const std::vector<float>& scalar) const;
    // Tolerance of the GPU against the scalar CPU stage (not for matmul and attention);
    // none: bit for bit.
    std::optional<std::vector<double>> gpu_tolerance(const BufferValues& in, const Step& step,
                                                     const std::vector<float>& scalar) const;

    // Matrix products in double: the exact product of the decoded weight and x, and what the
    // CPU's rounding of x to its activation format and its float sums may move it by.
    struct MatmulReference {
        std::vector<double> exact;      // [n][rows] weight . x
        std::vector<double> magnitude;  // [n][rows] sum of |weight * x|
        std::vector<double> cpu_own;    // [n][rows] weight . (x as the CPU rounds it)
        std::vector<double> cpu_float;  // [n][rows] the CPU's float error around cpu_own: its sums
        std::vector<double> cpu_sum;    // [n][rows] and its f16 block sums of Q8_1 (Q4_1, Q5_1)
        std::vector<double> cpu_act;    // [n][rows] sum of |weight| |x - x rounded|
    };
    MatmulReference matmul_reference(const BufferValues& in, const Step& step) const;

    // Keeps the step's keys and values as the cache stores them (before attention_reference).
    void store_kv(const BufferValues& in, const Step& step);
    // Attention in double over the stored keys and values, with the query rounded as the
    // backend rounds it, and the tolerance of that backend around it.
    enum class Backend { cpu, gpu };
    void attention_reference(const BufferValues& in, const Step& step, Backend backend, std::vector<double>& expected,
                             std::vector<double>& tolerance) const;

private:
    size_t width(Buffer b) const { return buffer_width(c_.hp, b); }

    const OpCase& c_;
    const GgufTensorInfo* tensor_ = nullptr;
    std::vector<float> weight_;      // the op's weight decoded: [rows][in] or [width] f32
    std::vector<float> rope_freqs_;  // [rope_dims / 2] f32; empty: none
    std::optional<cpu::GeluTable> gelu_;
    cpu::ThreadPool pool_;
    std::vector<std::byte> act_buffer_;
    std::vector<std::vector<float>> k_cache_, v_cache_;  // [pos][n_head_kv * head_dim] as stored
};

BufferValues OpState::inputs(const Step& step, std::mt19937& rng) const {
    std::vector<Buffer> reads;
    switch (c_.op.kind) {
        case OpKind::attention:
            reads = {Buffer::q, Buffer::k, Buffer::v};
            break;
        case OpKind::swiglu:
        case OpKind::geglu:
        case OpKind::add:
            reads = {c_.op.a, c_.op.b};
            break;
        default:
            reads = {c_.op.a};
    }
    BufferValues in;
    for (const Buffer b : reads) {
        const size_t w = width(b);
        std::vector<float> v;
        if (c_.op.kind == OpKind::scale) {
            v = uniform(w * static_cast<size_t>(step.n), -10.0f, 10.0f, rng);
        } else if ((c_.op.kind == OpKind::swiglu || c_.op.kind == OpKind::geglu || c_.op.kind == OpKind::gelu) &&
                   b == c_.op.a) {
            // Both tails of the activation, GELU's exact limits beyond +-10 and its edges.
            v = uniform(w * static_cast<size_t>(step.n), -12.0f, 12.0f, rng);
            const float edges[] = {0.0f, -0.0f, 10.0f, -10.0f, 10.5f, -10.5f, 30.0f, -30.0f, 9.999f, -9.999f};
            std::copy_n(edges, std::min(v.size(), std::size(edges)), v.begin());
        } else {
            v = uniform(w * static_cast<size_t>(step.n), -1.0f, 1.0f, rng);
        }
        if (c_.op.kind == OpKind::rms_norm || c_.op.kind == OpKind::layer_norm) {
            // Rows of very different sizes, so that each must take its own mean.
            const float sizes[] = {1.0f, 1e-3f, 50.0f, 1e3f, 0.3f};
            for (size_t i = 0; i < v.size(); ++i) v[i] *= sizes[(i / w) % std::size(sizes)];
        }
        in.emplace_back(b, std::move(v));
    }
    return in;
}

std::vector<float> OpState::cpu_function(const BufferValues& in, const Step& step, KernelIsa isa) {
    const int n = step.n;
    const size_t w = width(c_.op.dst);
    const size_t count = w * static_cast<size_t>(n);
    const std::vector<float>& a = values_of(in, c_.op.a);
    std::vector<float> out(count);
    switch (c_.op.kind) {
        case OpKind::rms_norm:
            cpu::rms_norm_rows(isa, a.data(), out.data(), weight_.data(), static_cast<int64_t>(w), n, c_.hp.rms_eps);
            break;
        case OpKind::head_rms_norm:
            cpu::rms_norm_rows(isa, a.data(), out.data(), weight_.data(), c_.hp.head_dim,
                               static_cast<int64_t>(w / c_.hp.head_dim) * n, c_.hp.rms_eps);
            break;
        case OpKind::matmul: {
            const cpu::MatmulWeights m{tensor_->type, tensor_->data, tensor_->ne[0], tensor_->ne[1], 0};
            cpu::matmul(pool_, isa, m, a.data(), out.data(), n, act_buffer_);
            break;
        }
        case OpKind::add_bias:
            out = a;
            cpu::add_bias(out.data(), weight_.data(), w, n);
            break;
        case OpKind::rope: {
            out = a;
            const arch::LayerAttention& la = c_.hp.layers[0];
            const cpu::RopeShape shape{
                c_.hp.head_dim, c_.hp.rope_dims,    c_.hp.rope_layout == arch::RopeLayout::neox,
                la.rope_base,   la.rope_freq_scale, rope_freqs_.empty() ? nullptr : rope_freqs_.data()};
            cpu::rope(shape, out.data(), static_cast<int64_t>(w / c_.hp.head_dim), n, step.pos);
            if (c_.op.value != 0.0f) {  // Llama 4's attention temperature
                std::vector<int32_t> positions(static_cast<size_t>(n));
                for (int t = 0; t < n; ++t) positions[static_cast<size_t>(t)] = static_cast<int32_t>(step.pos) + t;
                cpu::scale_by_position(out.data(), w, positions, c_.op.value, c_.hp.attn_temperature_length);
            }
            break;
        }
        case OpKind::swiglu:
            cpu::swiglu(isa, a.data(), values_of(in, c_.op.b).data(), out.data(), count);
            break;
        case OpKind::geglu:
            cpu::geglu(*gelu_, a.data(), values_of(in, c_.op.b).data(), out.data(), count);
            break;
        case OpKind::add:
            cpu::add(isa, a.data(), values_of(in, c_.op.b).data(), out.data(), count);
            break;
        case OpKind::scale:
            cpu::scale(a.data(), out.data(), c_.op.value, count);
            break;
        case OpKind::layer_norm:
            cpu::layer_norm_rows(a.data(), out.data(), weight_.data(), static_cast<int64_t>(w), n, c_.hp.norm_eps);
            break;
        case OpKind::gelu:
            cpu::gelu(*gelu_, a.data(), out.data(), count);
            break;
        case OpKind::add_row: {
            out = a;
            std::vector<int32_t> rows(static_cast<size_t>(n));
            for (int t = 0; t < n; ++t) {
                rows[static_cast<size_t>(t)] =
                    c_.op.weight_row ? static_cast<int32_t>(*c_.op.weight_row) : static_cast<int32_t>(step.pos) + t;
            }
            const cpu::RowTable table{tensor_->type, tensor_->data, tensor_->ne[0], tensor_->n_rows(),
                                      row_bytes(type_traits(tensor_->type), static_cast<uint64_t>(tensor_->ne[0]))};
            std::vector<float> scratch(w);
            cpu::add_rows(table, rows, out.data(), scratch.data());
            // And the table's own values, decoded apart: the row taken is the right one.
            for (int t = 0; t < n; ++t) {
                const float* row = weight_.data() + static_cast<size_t>(rows[static_cast<size_t>(t)]) * w;
                for (size_t i = 0; i < w; ++i) {
                    const float want = a[static_cast<size_t>(t) * w + i] + row[i];
                    if (out[static_cast<size_t>(t) * w + i] != want) {
                        ADD_FAILURE() << "add_rows: token " << t << " value " << i << " is not its row's";
                        return out;
                    }
                }
            }
            break;
        }
        case OpKind::attention:
        case OpKind::moe:  // tests/engine/cpu/moe_test.cpp
            ADD_FAILURE() << "attention and moe have no single CPU function to compare with";
            break;
    }
    return out;
}

std::optional<std::vector<double>> OpState::simd_tolerance(const BufferValues& in, const Step& step,
                                                           const std::vector<float>& scalar) const {
    std::vector<double> tol(scalar.size());
    switch (c_.op.kind) {
        case OpKind::rms_norm:
        case OpKind::head_rms_norm: {
            // The SIMD kernel sums the squares in f32 in 8 lanes (the scalar one in double):
            // a relative error of at most width / 8 + 3 roundings in the sum of positive
            // terms, halved by the square root, then the same two products.
            const double w = c_.op.kind == OpKind::rms_norm ? static_cast<double>(width(c_.op.dst)) : c_.hp.head_dim;
            for (size_t i = 0; i < tol.size(); ++i) tol[i] = (w / 8 + 16) * kRound * std::fabs(scalar[i]);
            return tol;
        }
        case OpKind::swiglu:
            // exp to within 2 ulp (vec.h) against libm's 1, then the same 1 + e, division
            // and product: a few roundings of the result; 16 leaves room.
            for (size_t i = 0; i < tol.size(); ++i) tol[i] = 16 * kRound * std::fabs(scalar[i]);
            return tol;
        case OpKind::matmul: {
            // The same activations (every ISA writes the same bytes) and exact integer
            // products per block: only the order of the float sums differs, and each path
            // stays within the error of its float sums around matmul_reference (the block
            // sums of Q8_1 are the same bytes in both).
            const MatmulReference ref = matmul_reference(in, step);
            for (size_t i = 0; i < tol.size(); ++i) tol[i] = 2 * ref.cpu_float[i];
            return tol;
        }
        default:
            (void)in;
            (void)step;
            return std::nullopt;  // no ISA-dependent arithmetic
    }
}

std::optional<std::vector<double>> OpState::gpu_tolerance(const BufferValues& in, const Step& step,
                                                          const std::vector<float>& scalar) const {
    std::vector<double> tol(scalar.size());
    switch (c_.op.kind) {
        case OpKind::rms_norm:
        case OpKind::head_rms_norm:
            // A GPU reduction in f32 against the CPU's double sum, then the same products:
            // a relative error far inside 1e-5 (tests/kernels/ops_kernel_test.cpp).
            for (size_t i = 0; i < tol.size(); ++i) tol[i] = 1e-5 * std::fabs(scalar[i]);
            return tol;
        case OpKind::swiglu:
            // The device's expf and division against libm's, a few ulp; the absolute term
            // covers the far negative tail, where silu is below 1e-7.
            for (size_t i = 0; i < tol.size(); ++i) tol[i] = 1e-5 * std::fabs(scalar[i]) + 1e-7;
            return tol;
        case OpKind::geglu: {
            // The GPU evaluates the tanh formula in f32 (1e-5 of |gelu| + 1; ops_kernel_test);
            // the CPU looks it up at x rounded to f16 (|gelu'| <= 1.13: 1.13 * 2^-11 |x|) and
            // rounds the result to f16 (2^-11 |gelu|): 2^-10 (|x| + |gelu|) holds both, all
            // in units of |up|.
            const std::vector<float>& a = values_of(in, c_.op.a);
            const std::vector<float>& b = values_of(in, c_.op.b);
            for (size_t i = 0; i < tol.size(); ++i) {
                const double g = std::fabs(static_cast<double>((*gelu_)(a[i])));
                tol[i] = std::fabs(b[i]) * (std::ldexp(std::fabs(a[i]) + g, -10) + 2e-5);
            }
            return tol;
        }
        case OpKind::rope: {
            // Angles reach 1072 rad, where an f32 ulp is 6e-5 and a device powf one or two ulp
            // off the host's moves the angles further: 1e-5 plus 6e-7 per unit of position
            // for |x| <= 1 (derived in ops_kernel_test.cpp); a wrong pair, frequency or
            // position errs by far more. Values past rope_dims must stay as they were.
            // The attention temperature multiplies every value by at most the last position's
            // factor (the same factor on both sides up to its own rounding: 2 ulp more).
            const int32_t last = static_cast<int32_t>(step.pos) + step.n - 1;
            const double factor =
                c_.op.value != 0.0f ? cpu::position_temperature(last, c_.op.value, c_.hp.attn_temperature_length) : 1.0;
            const double t = (1e-5 + 6e-7 * static_cast<double>(last)) * factor;
            const double ulps = c_.op.value != 0.0f ? 2.0 * factor * FLT_EPSILON : 0.0;
            for (size_t i = 0; i < tol.size(); ++i) tol[i] = i % c_.hp.head_dim < c_.hp.rope_dims ? t : ulps;
            return tol;
        }
        default:
            return std::nullopt;  // add, scale, bias: one IEEE operation per element, exact
    }
}

OpState::MatmulReference OpState::matmul_reference(const BufferValues& in, const Step& step) const {
    const int64_t inw = tensor_->ne[0];
    const int64_t rows = tensor_->ne[1];
    const GgmlType type = tensor_->type;
    const auto bs = static_cast<int64_t>(type_traits(type).block_size);
    const std::vector<float>& x = values_of(in, c_.op.a);
    const std::vector<float> xr = cpu_activations(type, x, inw, step.n);
    // The CPU's float sums: each errs by at most (terms + 8) roundings of the sum of the
    // magnitudes of its terms; one term per element for the float types; for the quantized
    // ones a scaled integer sum per 16 or 32 values (two for the types with a minimum), each
    // at most 3 max|w| |x| of its block (a scale times values up to max - min, or the
    // minimum itself). Q4_1 and Q5_1 also take the activations' block sum s from Q8_1, stored in f16
    // from the f32 scale while the values use the f16 scale: s is off d * sum(q) by at most
    // 2^-10 of itself (two f16 roundings), times the weights' minimum m of the block.
    const bool has_min = type == GgmlType::q4_1 || type == GgmlType::q5_1;
    const double terms = bs == 1 ? static_cast<double>(inw) : 2.0 * inw / std::min<int64_t>(bs, 16);
    const uint64_t row = row_bytes(type_traits(type), static_cast<uint64_t>(inw));
    MatmulReference ref;
    const size_t total = static_cast<size_t>(step.n * rows);
    ref.exact.resize(total);
    ref.magnitude.resize(total);
    ref.cpu_own.resize(total);
    ref.cpu_float.resize(total);
    ref.cpu_sum.resize(total);
    ref.cpu_act.resize(total);
    for (int t = 0; t < step.n; ++t) {
        const float* xt = x.data() + t * inw;
        const float* xrt = xr.data() + t * inw;
        for (int64_t r = 0; r < rows; ++r) {
            const float* wr = weight_.data() + r * inw;
            double exact = 0, mag = 0, own = 0, act = 0, cpu_mag = 0, s_err = 0;
            for (int64_t b0 = 0; b0 < inw; b0 += bs) {
                double block_max = 0, abs_x = 0, sum_x = 0;
                for (int64_t i = b0; i < b0 + bs; ++i) {
                    const double w = wr[i];
                    exact += w * xt[i];
                    mag += std::fabs(w * xt[i]);
                    own += w * xrt[i];
                    act += std::fabs(w) * std::fabs(static_cast<double>(xt[i]) - xrt[i]);
                    block_max = std::max(block_max, std::fabs(w));
                    abs_x += std::fabs(xrt[i]);
                    sum_x += xrt[i];
                }
                cpu_mag += bs == 1 ? std::fabs(wr[b0] * static_cast<double>(xrt[b0])) : 3 * block_max * abs_x;
                if (has_min) {
                    uint16_t m;  // the block's minimum: f16 after the f16 scale d
                    std::memcpy(&m,
                                tensor_->data + static_cast<uint64_t>(r) * row +
                                    static_cast<uint64_t>(b0 / bs) * type_traits(type).type_size + 2,
                                2);
                    s_err += std::fabs(f16_to_f32(m)) * (std::ldexp(std::fabs(sum_x), -10) + std::ldexp(1.0, -24));
                }
            }
            const auto i = static_cast<size_t>(t * rows + r);
            ref.exact[i] = exact;
            ref.magnitude[i] = mag;
            ref.cpu_own[i] = own;
            ref.cpu_float[i] = (terms + 8) * kRound * cpu_mag;
            ref.cpu_sum[i] = s_err;
            ref.cpu_act[i] = act;
        }
    }
    return ref;
}

void OpState::store_kv(const BufferValues& in, const Step& step) {
    const size_t w = width(Buffer::k);
    const std::vector<float>& k = values_of(in, Buffer::k);
    const std::vector<float>& v = values_of(in, Buffer::v);
    const auto stored = [&](const float* src) {
        std::vector<float> row(w);
        if (c_.kv == KvCacheType::q8_0) {
            // Quantized as activations are (attention.h), the same bytes on every ISA.
            std::vector<float> src_row(src, src + w);
            row = cpu_activations(GgmlType::q8_0, src_row, static_cast<int64_t>(w), 1);
        } else {
            for (size_t i = 0; i < w; ++i) row[i] = f16_to_f32(f32_to_f16(src[i]));
        }
        return row;
    };
    for (int t = 0; t < step.n; ++t) {
        const size_t pos = step.pos + static_cast<size_t>(t);
        if (k_cache_.size() <= pos) {
            k_cache_.resize(pos + 1);
            v_cache_.resize(pos + 1);
        }
        k_cache_[pos] = stored(k.data() + static_cast<size_t>(t) * w);
        v_cache_[pos] = stored(v.data() + static_cast<size_t>(t) * w);
    }
}

void OpState::attention_reference(const BufferValues& in, const Step& step, Backend backend,
                                  std::vector<double>& expected, std::vector<double>& tolerance) const {
    const uint32_t hd = c_.hp.head_dim;
    const uint32_t n_head = c_.hp.n_head;
    const uint32_t group = n_head / c_.hp.n_head_kv;
    const uint32_t window = c_.hp.layers[0].window;
    const float scale = c_.op.value != 0 ? c_.op.value : 1.0f / std::sqrt(static_cast<float>(hd));
    const bool f16 = c_.kv == KvCacheType::f16;
    const std::vector<float>& q = values_of(in, Buffer::q);
    expected.assign(q.size(), 0.0);
    tolerance.assign(q.size(), 0.0);
    for (int t = 0; t < step.n; ++t) {
        // Causal: up to the row's own position; an encoder's: up to the batch's last.
        const uint32_t n_keys =
            step.pos + (c_.hp.causal ? static_cast<uint32_t>(t) + 1 : static_cast<uint32_t>(step.n));
        const uint32_t first = window != 0 && n_keys > window ? n_keys - window : 0;
        const uint32_t count = n_keys - first;
        for (uint32_t h = 0; h < n_head; ++h) {
            const size_t at = (static_cast<size_t>(t) * n_head + h) * hd;
            // The query as the backend multiplies it: rounded to f16 for an F16 cache (both);
            // quantized to Q8_0 for a Q8_0 cache on the CPU; as it is on the GPU.
            std::vector<float> qh(q.begin() + static_cast<std::ptrdiff_t>(at),
                                  q.begin() + static_cast<std::ptrdiff_t>(at + hd));
            if (f16) {
                for (float& x : qh) x = f16_to_f32(f32_to_f16(x));
            } else if (backend == Backend::cpu) {
                qh = cpu_activations(GgmlType::q8_0, qh, hd, 1);
            }
            const size_t kv_at = static_cast<size_t>(h / group) * hd;
            std::vector<double> s(count);
            double max = -INFINITY, delta = 0;
            for (uint32_t j = 0; j < count; ++j) {
                const std::vector<float>& k = k_cache_[first + j];
                double dot = 0, mag = 0;
                for (uint32_t i = 0; i < hd; ++i) {
                    dot += static_cast<double>(qh[i]) * k[kv_at + i];
                    mag += std::fabs(static_cast<double>(qh[i]) * k[kv_at + i]);
                }
                s[j] = scale * dot;
                max = std::max(max, s[j]);
                // A score summed in f32 and scaled: (head_dim + 8) roundings of its terms.
                delta = std::max(delta, scale * (hd + 8) * kRound * mag);
            }
            double sum = 0;
            for (double& x : s) sum += (x = std::exp(x - max));
            // Scores off by at most delta move each probability by a factor within
            // exp(+-2 delta). The exponentials (a few ulp each), the normalization and the
            // sums with V in f32 add a few roundings per position: the CPU's one pass, or
            // the GPU's online softmax, whose running sum and weighted values each take a
            // product and an add per position (its rescalings hit both alike and cancel),
            // then the merging of warps and chunks: 8 per position and 64 more bound both,
            // of the weighted sum of |V|. The CPU rounds the probabilities to f16 before
            // the product with an F16 V: 2^-11 of each, or 2^-25 where they are subnormal.
            const bool p16 = f16 && backend == Backend::cpu;
            const double rel = std::expm1(2 * delta) + (8.0 * count + 64) * kRound + (p16 ? std::ldexp(1.0, -11) : 0);
            for (uint32_t e = 0; e < hd; ++e) {
                double out = 0, weighted = 0, total = 0;
                for (uint32_t j = 0; j < count; ++j) {
                    const double v = v_cache_[first + j][kv_at + e];
                    out += s[j] / sum * v;
                    weighted += s[j] / sum * std::fabs(v);
                    total += std::fabs(v);
                }
                expected[at + e] = out;
                tolerance[at + e] = weighted * rel + (p16 ? std::ldexp(total, -25) : 0) + 1e-30;
            }
        }
    }
}

// The stages of a CPU run: the scalar reference first.
struct CpuStageUnderTest {
    KernelIsa isa;
    std::unique_ptr<DeviceStage> stage;
};

void check_on_cpu(const OpCase& c) {
    if (c.gpu_shape) GTEST_SKIP() << "a width for the GPU; the CPU's tails are tested by the odd widths beside it";
    TempDir dir;
    Result<GgufModel> model = write_model(dir / "op.gguf", c.tensors);
    ASSERT_TRUE(model.ok()) << model.error().message;
    // The scalar kernels, the ones chosen at run time, and every other ISA the processor has.
    std::vector<std::optional<KernelIsa>> isas = {KernelIsa::scalar, std::nullopt};
    for (const KernelIsa isa : cpu::available_isas()) {
        if (isa != KernelIsa::scalar && isa != cpu::best_isa()) isas.push_back(isa);
    }
    std::vector<CpuStageUnderTest> stages;
    for (const std::optional<KernelIsa>& isa : isas) {
        Result<std::unique_ptr<DeviceStage>> stage = make_cpu_stage(*model, c, isa);
        ASSERT_TRUE(stage.ok()) << stage.error().message;
        stages.push_back({isa.value_or(cpu::best_isa()), std::move(stage).value()});
    }
    OpState state(c, *model);
    std::mt19937 rng(c.seed);
    for (const Step& step : c.steps) {
        SCOPED_TRACE(std::to_string(step.n) + " tokens at position " + std::to_string(step.pos));
        const BufferValues in = state.inputs(step, rng);
        std::vector<std::vector<float>> out(stages.size());
        for (size_t s = 0; s < stages.size(); ++s) ASSERT_TRUE(run_step(*stages[s].stage, c, in, step, out[s]));
        const std::vector<float>& scalar = out[0];
        if (c.op.kind == OpKind::attention) state.store_kv(in, step);
        std::vector<double> expected, tolerance;
        if (c.op.kind == OpKind::attention) {
            state.attention_reference(in, step, OpState::Backend::cpu, expected, tolerance);
        }
        const std::optional<OpState::MatmulReference> mm =
            c.op.kind == OpKind::matmul ? std::optional(state.matmul_reference(in, step)) : std::nullopt;
        for (size_t s = 0; s < stages.size(); ++s) {
            SCOPED_TRACE(stages[s].stage->name() + (s == 1 ? " (chosen at run time)" : ""));
            if (c.op.kind == OpKind::attention) {
                // Each ISA against the reference; a SIMD stage against the scalar one within
                // the sum of their two tolerances.
                EXPECT_TRUE(all_close(expected, out[s], tolerance)) << "against attention in double";
                if (s > 0) {
                    std::vector<double> twice(tolerance.size());
                    for (size_t i = 0; i < twice.size(); ++i) twice[i] = 2 * tolerance[i];
                    EXPECT_TRUE(all_close(widen(scalar), out[s], twice)) << "against the scalar stage";
                }
                continue;
            }
            EXPECT_TRUE(same_floats(state.cpu_function(in, step, stages[s].isa), out[s]))
                << "against the engine's CPU function with " << cpu::isa_name(stages[s].isa);
            if (s > 0) {
                const std::optional<std::vector<double>> tol = state.simd_tolerance(in, step, scalar);
                if (tol) {
                    EXPECT_TRUE(all_close(widen(scalar), out[s], *tol)) << "against the scalar stage";
                } else {
                    EXPECT_TRUE(same_floats(scalar, out[s])) << "against the scalar stage";
                }
            }
            if (mm) {
                std::vector<double> own(mm->cpu_float.size()), loose(mm->cpu_act.size());
                for (size_t i = 0; i < own.size(); ++i) own[i] = mm->cpu_float[i] + mm->cpu_sum[i];
                EXPECT_TRUE(all_close(mm->cpu_own, out[s], own))
                    << "against the product in double with the activations as the CPU rounds them";
                // The activations' rounding moves the product by at most sum |w| |x - x'|.
                for (size_t i = 0; i < loose.size(); ++i) loose[i] = mm->cpu_act[i] + own[i];
                EXPECT_TRUE(all_close(mm->exact, out[s], loose)) << "against the float reference";
            }
        }
    }
}

void check_on_cuda(const OpCase& c) {
    if (const std::optional<std::string> why = cuda_unavailable()) {
        if (gpu_required()) FAIL() << "POWERHOUSE_REQUIRE_GPU is set but: " << *why;
        GTEST_SKIP() << *why;
    }
    // A shape the planner refuses for the GPU never reaches it (the CPU's odd widths);
    // CudaShapes.EverySuiteHasCasesTheGpuTakes below keeps enough of them on the GPU.
    if (const Result<void> supported = c.cuda_supported(); !supported) {
        GTEST_SKIP() << "not a shape for the GPU: " << supported.error().message;
    }
    TempDir dir;
    Result<GgufModel> model = write_model(dir / "op.gguf", c.tensors);
    ASSERT_TRUE(model.ok()) << model.error().message;
    Result<std::unique_ptr<DeviceStage>> cpu = make_cpu_stage(*model, c, KernelIsa::scalar);
    ASSERT_TRUE(cpu.ok()) << cpu.error().message;
    // Products of 32 tokens and more go through cuBLAS where it loads: both paths.
    std::vector<std::unique_ptr<DeviceStage>> gpus;
    for (const bool cublas : {true, false}) {
        if (!cublas && c.op.kind != OpKind::matmul) break;
        Result<std::unique_ptr<DeviceStage>> gpu = make_cuda_stage(*model, c, cublas);
        ASSERT_TRUE(gpu.ok()) << gpu.error().message;
        gpus.push_back(std::move(gpu).value());
    }
    OpState state(c, *model);
    std::mt19937 rng(c.seed);
    for (const Step& step : c.steps) {
        SCOPED_TRACE(std::to_string(step.n) + " tokens at position " + std::to_string(step.pos));
        const BufferValues in = state.inputs(step, rng);
        std::vector<float> scalar;
        ASSERT_TRUE(run_step(**cpu, c, in, step, scalar));
        if (c.op.kind == OpKind::attention) state.store_kv(in, step);
        for (const std::unique_ptr<DeviceStage>& gpu : gpus) {
            SCOPED_TRACE(gpu->name());
            const uint64_t gemms = gpu->usage().cublas_gemms;
            std::vector<float> out;
            ASSERT_TRUE(run_step(*gpu, c, in, step, out));
            if (c.op.kind == OpKind::matmul) {
                const OpState::MatmulReference ref = state.matmul_reference(in, step);
                const bool via_cublas = gpu->usage().cublas_gemms > gemms;
                const GgufTensorInfo* weight = model->find_tensor(arch::weight_name(c.op, 0));
                const double in_w = static_cast<double>(weight->ne[0]);
                const GgmlType act = cpu::activation_type(weight->type);
                if (!via_cublas && (act == GgmlType::q8_0 || act == GgmlType::q8_1 || act == GgmlType::q8_k)) {
                    // The quantized types' fused products take the CPU's 8-bit activations
                    // (the same bytes) and exact integer sums per block: the scalar CPU stage
                    // and the GPU differ only in their float sums. The CPU's stay within
                    // cpu_float of the exact result on those activations; the GPU's scale
                    // each 32-block's integer sum (a few roundings of at most 3 max|w| |x|
                    // of the block) and add them per lane and across the warp: in / 16 + 16
                    // roundings of 3 sum |w x|.
                    std::vector<double> tol(ref.magnitude.size());
                    for (size_t i = 0; i < tol.size(); ++i) {
                        tol[i] = 2 * ref.cpu_float[i] + (in_w / 16 + 16) * kRound * 3 * ref.magnitude[i];
                    }
                    EXPECT_TRUE(all_close(widen(scalar), out, tol)) << "against the scalar CPU stage (8-bit activations)";
                    continue;
                }
                // f32 activations, FMAs summed per lane (in / 32 terms) and across the warp:
                // twice that many roundings of sum |w x|, plus 16. cuBLAS (the stage's
                // prompts) rounds both operands to TF32's 10-bit mantissa, 2^-9 of each
                // product, and sums in an order of its own.
                const double rel = via_cublas ? std::ldexp(1.0, -9) + (in_w + 16) * kRound : (in_w / 16 + 16) * kRound;
                std::vector<double> tol(ref.magnitude.size());
                for (size_t i = 0; i < tol.size(); ++i) tol[i] = rel * ref.magnitude[i];
                EXPECT_TRUE(all_close(ref.exact, out, tol))
                    << "against the float reference" << (via_cublas ? " (cuBLAS)" : " (fused kernels)");
            } else if (c.op.kind == OpKind::attention) {
                std::vector<double> expected, tolerance;
                state.attention_reference(in, step, OpState::Backend::gpu, expected, tolerance);
                EXPECT_TRUE(all_close(expected, out, tolerance)) << "against attention in double";
            } else if (const std::optional<std::vector<double>> tol = state.gpu_tolerance(in, step, scalar)) {
                EXPECT_TRUE(all_close(widen(scalar), out, *tol)) << "against the scalar CPU stage";
            } else {
                EXPECT_TRUE(same_floats(scalar, out)) << "against the scalar CPU stage";
            }
        }
    }
}

std::string case_name(const ::testing::TestParamInfo<OpCase>& info) {
    return info.param.name;
}

}  // namespace

// One suite per op: OpConformance/<Op>.OnCpu/<shape> and OpConformance/<Op>.OnCuda/<shape>.
#define PH_OP_SUITE(Suite, cases)                             \
    class Suite : public ::testing::TestWithParam<OpCase> {}; \
    TEST_P(Suite, OnCpu) {                                    \
        check_on_cpu(GetParam());                             \
    }                                                         \
    TEST_P(Suite, OnCuda) {                                   \
        check_on_cuda(GetParam());                            \
    }                                                         \
    INSTANTIATE_TEST_SUITE_P(OpConformance, Suite, ::testing::ValuesIn(cases), case_name)

PH_OP_SUITE(RmsNorm, rms_norm_cases());
PH_OP_SUITE(HeadRmsNorm, head_rms_norm_cases());
PH_OP_SUITE(Matmul, matmul_cases());
PH_OP_SUITE(AddBias, add_bias_cases());
PH_OP_SUITE(Rope, rope_cases());
PH_OP_SUITE(Attention, attention_cases());
PH_OP_SUITE(Swiglu, glu_cases(OpKind::swiglu));
PH_OP_SUITE(Geglu, glu_cases(OpKind::geglu));
PH_OP_SUITE(Add, add_cases());
PH_OP_SUITE(Scale, scale_cases());
PH_OP_SUITE(LayerNorm, layer_norm_cases());
PH_OP_SUITE(Gelu, gelu_cases());
PH_OP_SUITE(AddRow, add_row_cases());
PH_OP_SUITE(FullAttention, full_attention_cases());

// Every OpKind has its suite above: a new kind must get one.
static_assert(static_cast<int>(OpKind::add_row) == 13, "an OpKind without a conformance suite");

// The encoders' ops run on the CPU only for now: the CUDA stage refuses every case of them,
// before any load (the planner asks the same function), with a reason that says so.
TEST(CudaShapes, EncoderOpsAreRefusedWithAReason) {
    for (const std::vector<OpCase>& cases :
         {layer_norm_cases(), gelu_cases(), add_row_cases(), full_attention_cases()}) {
        for (const OpCase& c : cases) {
            const Result<void> supported = c.cuda_supported();
            ASSERT_FALSE(supported.ok()) << c.name;
            EXPECT_EQ(supported.error().code, ErrorCode::unsupported) << c.name;
            EXPECT_NE(supported.error().message.find("encoder models run on the CPU for now"), std::string::npos)
                << supported.error().message;
        }
    }
    // The same shape as a decoder's is taken.
    OpCase decoder = full_attention_cases()[0];
    decoder.hp.embedding_only = false;
    decoder.hp.causal = true;
    EXPECT_TRUE(decoder.cuda_supported().ok()) << decoder.cuda_supported().error().message;
}

// The GPU's share of every suite, checked without a GPU: each suite has cases the CUDA
// stage takes (so that no op goes unchecked on the GPU, as when every width was odd), and
// the products have them for every weight type, for three shapes (24 and 32 rows of the
// short length, 40 of the long one) and every token count.
TEST(CudaShapes, EverySuiteHasCasesTheGpuTakes) {
    const std::pair<const char*, std::vector<OpCase>> suites[] = {
        {"RmsNorm", rms_norm_cases()},   {"HeadRmsNorm", head_rms_norm_cases()},
        {"Matmul", matmul_cases()},      {"AddBias", add_bias_cases()},
        {"Rope", rope_cases()},          {"Attention", attention_cases()},
        {"Swiglu", glu_cases(OpKind::swiglu)}, {"Geglu", glu_cases(OpKind::geglu)},
        {"Add", add_cases()},            {"Scale", scale_cases()}};
    for (const auto& [suite, cases] : suites) {
        size_t taken = 0;
        for (const OpCase& c : cases) taken += c.cuda_supported().ok() ? 1 : 0;
        EXPECT_GE(taken, std::min<size_t>(cases.size(), 2)) << suite << ": too few cases the GPU takes";
    }
    std::map<std::string, int> per_type;
    for (const OpCase& c : matmul_cases()) {
        if (c.cuda_supported()) ++per_type[c.name.substr(0, c.name.find("_in_"))];
    }
    for (const GgmlType type : kMatmulTypes) {
        EXPECT_EQ(per_type[std::string(type_traits(type).name)], 12) << type_traits(type).name
                                                        << ": three shapes times four token counts";
    }
}

// The buffers themselves: whole rows only, never more than the batch.
TEST(StageBuffers, RoundTripAndRefuseAPartialRowOrMoreThanTheBatch) {
    OpCase c = rms_norm_cases()[0];  // width 7, a batch of 33
    TempDir dir;
    Result<GgufModel> model = write_model(dir / "op.gguf", c.tensors);
    ASSERT_TRUE(model.ok()) << model.error().message;
    Result<std::unique_ptr<DeviceStage>> stage = make_cpu_stage(*model, c, std::nullopt);
    ASSERT_TRUE(stage.ok()) << stage.error().message;
    DeviceStage& s = **stage;
    std::mt19937 rng(1);
    const std::vector<float> rows = uniform(7 * 33, -1.0f, 1.0f, rng);
    ASSERT_TRUE(s.write_buffer(Buffer::x, rows).ok());
    std::vector<float> back(rows.size());
    ASSERT_TRUE(s.read_buffer(Buffer::x, back).ok());
    EXPECT_TRUE(same_floats(rows, back));
    std::vector<float> two(14);
    ASSERT_TRUE(s.read_buffer(Buffer::x, two).ok());
    EXPECT_TRUE(same_floats(std::vector<float>(rows.begin(), rows.begin() + 14), two)) << "the first rows";

    const Result<void> partial = s.write_buffer(Buffer::x, std::span<const float>(rows).first(8));
    ASSERT_FALSE(partial.ok());
    EXPECT_NE(partial.error().message.find("not whole rows of buffer x"), std::string::npos) << partial.error().message;
    const std::vector<float> too_many(7 * 34, 0.0f);
    EXPECT_FALSE(s.write_buffer(Buffer::x, too_many).ok()) << "34 rows into a batch of 33";
    std::vector<float> read_too_many(7 * 34);
    EXPECT_FALSE(s.read_buffer(Buffer::x, read_too_many).ok());
    std::vector<float> logit(8);
    EXPECT_FALSE(s.read_buffer(Buffer::logits, logit).ok()) << "a stage without the output layer has no logits";
}

}  // namespace powerhouse::test
