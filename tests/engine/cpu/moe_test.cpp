// The CPU routed feed-forward (backend/cpu/moe.h): the router's choices and weights for each
// gating, and run_moe against a plain per-token evaluation of the same experts in double
// precision, for one token, a few and a prompt, with biases and both activations, and with
// the experts cut between two "devices" whose partial outputs add up to the whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <random>
#include <vector>

#include "backend/cpu/moe.h"
#include "backend/cpu/thread_pool.h"
#include "support/random_data.h"
#include "tensor/dequantize.h"
#include "tensor/quantize.h"

namespace powerhouse::cpu {
namespace {

using test::random_floats;

using arch::ExpertActivation;
using arch::ExpertGating;
using arch::MoeSpec;

MoeSpec spec_of(uint32_t n_expert, uint32_t n_used, uint32_t n_ff, ExpertGating gating, bool normalize) {
    MoeSpec s;
    s.n_expert = n_expert;
    s.n_used = n_used;
    s.n_ff = n_ff;
    s.gating = gating;
    s.normalize = normalize;
    return s;
}

struct Routed {
    std::vector<uint32_t> experts;
    std::vector<float> weights;
};

Routed route(const MoeSpec& spec, const std::vector<float>& scores, const std::vector<float>& bias = {}) {
    Routed r{std::vector<uint32_t>(spec.n_used), std::vector<float>(spec.n_used)};
    route_experts(spec, scores, bias, r.experts, r.weights);
    return r;
}

std::vector<double> softmax(const std::vector<double>& x) {
    const double max = *std::max_element(x.begin(), x.end());
    std::vector<double> out(x.size());
    double sum = 0;
    for (size_t i = 0; i < x.size(); ++i) sum += out[i] = std::exp(x[i] - max);
    for (double& v : out) v /= sum;
    return out;
}

TEST(MoeRouting, SoftmaxOverEveryExpertThenTheTopK) {
    const std::vector<float> scores = {0.5f, 2.0f, -1.0f, 1.5f, 3.0f, 0.0f};
    const std::vector<double> p = softmax({0.5, 2.0, -1.0, 1.5, 3.0, 0.0});
    const Routed r = route(spec_of(6, 3, 8, ExpertGating::softmax, false), scores);
    EXPECT_EQ(r.experts, (std::vector<uint32_t>{4, 1, 3}));
    for (size_t s = 0; s < 3; ++s) EXPECT_NEAR(r.weights[s], p[r.experts[s]], 1e-7) << s;
    // Normalised (Mixtral, Qwen3-MoE): the same choice, weights summing to one.
    const Routed n = route(spec_of(6, 3, 8, ExpertGating::softmax, true), scores);
    EXPECT_EQ(n.experts, r.experts);
    const double sum = p[4] + p[1] + p[3];
    for (size_t s = 0; s < 3; ++s) EXPECT_NEAR(n.weights[s], p[n.experts[s]] / sum, 1e-7) << s;
}

TEST(MoeRouting, SoftmaxOverTheChosenScores) {
    const std::vector<float> scores = {0.5f, 2.0f, -1.0f, 1.5f, 3.0f, 0.0f};
    const Routed r = route(spec_of(6, 2, 8, ExpertGating::softmax_chosen, false), scores);
    EXPECT_EQ(r.experts, (std::vector<uint32_t>{4, 1}));
    const std::vector<double> p = softmax({3.0, 2.0});
    EXPECT_NEAR(r.weights[0], p[0], 1e-7);
    EXPECT_NEAR(r.weights[1], p[1], 1e-7);
}

// GLM-4.5 and DeepSeek V3: sigmoids, the experts chosen by sigmoid plus a bias, weighted by the
// sigmoid alone, normalised, then scaled.
TEST(MoeRouting, SigmoidsChosenWithABiasWeightedWithout) {
    const std::vector<float> scores = {0.5f, 2.0f, -1.0f, 1.5f, 3.0f, 0.0f};
    const auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
    MoeSpec spec = spec_of(6, 2, 8, ExpertGating::sigmoid, false);
    const Routed plain = route(spec, scores);
    EXPECT_EQ(plain.experts, (std::vector<uint32_t>{4, 1}));
    EXPECT_NEAR(plain.weights[0], sigmoid(3.0), 1e-7);
    EXPECT_NEAR(plain.weights[1], sigmoid(2.0), 1e-7);
    // The bias lifts expert 2 (sigmoid 0.27 + 1) over expert 1 (0.88): chosen, but weighted
    // by its own sigmoid.
    const std::vector<float> bias = {0.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f};
    const Routed biased = route(spec, scores, bias);
    EXPECT_EQ(biased.experts, (std::vector<uint32_t>{2, 4}));
    EXPECT_NEAR(biased.weights[0], sigmoid(-1.0), 1e-7);
    EXPECT_NEAR(biased.weights[1], sigmoid(3.0), 1e-7);
    // Normalised then scaled (GLM-4.5-Air: 1; GLM-4.5: 2.5).
    spec.normalize = true;
    spec.weights_scale = 2.5f;
    const Routed scaled = route(spec, scores, bias);
    const double sum = sigmoid(-1.0) + sigmoid(3.0);
    EXPECT_NEAR(scaled.weights[0], 2.5 * sigmoid(-1.0) / sum, 1e-6);
    EXPECT_NEAR(scaled.weights[1], 2.5 * sigmoid(3.0) / sum, 1e-6);
}

TEST(MoeRouting, EqualScoresGoToTheLowerExpertFirst) {
    const Routed r = route(spec_of(5, 3, 8, ExpertGating::softmax, true), {1.0f, 2.0f, 0.5f, 2.0f, 2.0f});
    EXPECT_EQ(r.experts, (std::vector<uint32_t>{1, 3, 4}));
    for (float w : r.weights) EXPECT_NEAR(w, 1.0f / 3.0f, 1e-7);
    // All equal, one used: the first.
    EXPECT_EQ(route(spec_of(4, 1, 8, ExpertGating::softmax, true), {0.0f, 0.0f, 0.0f, 0.0f}).experts,
              (std::vector<uint32_t>{0}));
}

// Experts as a model file holds them, [n_expert][rows][in] in `type`, and their f32 values.
struct ExpertTensor {
    std::vector<std::byte> bytes;
    std::vector<float> values;  // dequantized: what the products multiply by
    std::vector<float> bias;    // [n_expert][rows]; empty: none
    int64_t in = 0, rows = 0;
};

ExpertTensor make_experts(GgmlType type, uint32_t n_expert, int64_t rows, int64_t in, bool bias, std::mt19937& rng) {
    ExpertTensor t;
    t.in = in;
    t.rows = rows;
    std::normal_distribution<float> dist(0.0f, 1.0f / std::sqrt(static_cast<float>(in)));
    std::vector<float> x(static_cast<size_t>(n_expert * rows * in));
    for (float& v : x) v = dist(rng);
    const uint64_t row = row_bytes(type_traits(type), static_cast<uint64_t>(in));
    t.bytes.resize(row * n_expert * static_cast<uint64_t>(rows));
    t.values.resize(x.size());
    for (int64_t r = 0; r < static_cast<int64_t>(n_expert) * rows; ++r) {
        std::byte* dst = t.bytes.data() + row * static_cast<uint64_t>(r);
        if (type == GgmlType::f32) {
            std::memcpy(dst, x.data() + r * in, row);
        } else {
            quantize_row(type, x.data() + r * in, dst, in);
        }
        dequantize_row(type, dst, t.values.data() + r * in, in);
    }
    if (bias) {
        t.bias.resize(static_cast<size_t>(n_expert * rows));
        for (float& v : t.bias) v = 0.1f * dist(rng) * std::sqrt(static_cast<float>(in));
    }
    return t;
}

BoundExperts bind(const ExpertTensor& t, GgmlType type, uint32_t begin) {
    BoundExperts b;
    b.type = type;
    b.in = t.in;
    b.rows = t.rows;
    b.row_stride = row_bytes(type_traits(type), static_cast<uint64_t>(t.in));
    b.expert_stride = b.row_stride * static_cast<uint64_t>(t.rows);
    b.data = t.bytes.data() + b.expert_stride * begin;
    b.bias = t.bias.empty() ? nullptr : t.bias.data() + static_cast<size_t>(t.rows) * begin;
    return b;
}

struct MoeFixture {
    MoeSpec spec;
    int64_t n_embd = 0;
    ExpertTensor gate, up, down;
    std::vector<float> selection_bias;                 // empty: none
    ExpertTensor shared_gate, shared_up, shared_down;  // one expert each; spec.n_ff_shared 0: none
    arch::Op op;
    GgmlType type = GgmlType::f32;

    BoundWeight bound(uint32_t begin, uint32_t end) const {
        BoundWeight w;
        w.op = &op;
        w.expert_begin = begin;
        w.expert_end = end;
        w.experts = {bind(gate, type, begin), bind(up, type, begin), bind(down, type, begin)};
        w.selection_bias = selection_bias.empty() ? nullptr : selection_bias.data();
        if (spec.n_ff_shared != 0 && begin == 0) {  // as bind_experts: where expert 0 is
            w.shared = {bind(shared_gate, type, 0), bind(shared_up, type, 0), bind(shared_down, type, 0)};
            for (BoundExperts& b : w.shared) b.tensor = &kSharedTensor;
        }
        return w;
    }

    // The routed feed-forward of one token in double precision, from the dequantized weights,
    // plus the shared expert's output.
    std::vector<double> reference(const float* x, const float* scores) const {
        std::vector<uint32_t> chosen(spec.n_used);
        std::vector<float> weights(spec.n_used);
        route_experts(spec, std::span<const float>(scores, spec.n_expert), selection_bias, chosen, weights);
        std::vector<double> out(static_cast<size_t>(n_embd), 0.0);
        const auto product = [](const ExpertTensor& t, uint32_t e, const std::vector<double>& in) {
            std::vector<double> y(static_cast<size_t>(t.rows));
            for (int64_t r = 0; r < t.rows; ++r) {
                const float* w = t.values.data() + (static_cast<int64_t>(e) * t.rows + r) * t.in;
                double sum = t.bias.empty() ? 0.0 : t.bias[static_cast<size_t>(e * t.rows + r)];
                for (int64_t i = 0; i < t.in; ++i) sum += static_cast<double>(w[i]) * in[static_cast<size_t>(i)];
                y[static_cast<size_t>(r)] = sum;
            }
            return y;
        };
        const std::vector<double> xin(x, x + n_embd);
        for (uint32_t s = 0; s < spec.n_used; ++s) {
            const std::vector<double> g = product(gate, chosen[s], xin);
            const std::vector<double> u = product(up, chosen[s], xin);
            std::vector<double> h(g.size());
            for (size_t i = 0; i < h.size(); ++i) {
                if (spec.activation == ExpertActivation::silu) {
                    h[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
                } else {
                    const double a = std::min<double>(g[i], spec.limit);
                    const double b = std::clamp<double>(u[i], -spec.limit, spec.limit);
                    h[i] = a / (1.0 + std::exp(-spec.alpha * a)) * (b + 1.0);
                }
            }
            const std::vector<double> y = product(down, chosen[s], h);
            for (size_t i = 0; i < out.size(); ++i) out[i] += weights[s] * y[i];
        }
        if (spec.n_ff_shared != 0) {
            const std::vector<double> g = product(shared_gate, 0, xin);
            const std::vector<double> u = product(shared_up, 0, xin);
            std::vector<double> h(g.size());
            for (size_t i = 0; i < h.size(); ++i) h[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
            const std::vector<double> y = product(shared_down, 0, h);
            for (size_t i = 0; i < out.size(); ++i) out[i] += y[i];
        }
        return out;
    }

    // run_moe only asks whether the shared expert's tensors are there.
    static inline const GgufTensorInfo kSharedTensor{};
};

MoeFixture make_fixture(GgmlType type, MoeSpec spec, int64_t n_embd, bool biases, uint32_t seed) {
    std::mt19937 rng(seed);
    MoeFixture f;
    f.spec = spec;
    f.n_embd = n_embd;
    f.type = type;
    f.gate = make_experts(type, spec.n_expert, spec.n_ff, n_embd, biases, rng);
    f.up = make_experts(type, spec.n_expert, spec.n_ff, n_embd, biases, rng);
    f.down = make_experts(type, spec.n_expert, n_embd, spec.n_ff, biases, rng);
    if (spec.n_ff_shared != 0) {
        f.shared_gate = make_experts(type, 1, spec.n_ff_shared, n_embd, false, rng);
        f.shared_up = make_experts(type, 1, spec.n_ff_shared, n_embd, false, rng);
        f.shared_down = make_experts(type, 1, n_embd, spec.n_ff_shared, false, rng);
    }
    if (!spec.selection_bias.empty()) {
        std::normal_distribution<float> dist(0.0f, 0.5f);
        for (uint32_t e = 0; e < spec.n_expert; ++e) f.selection_bias.push_back(dist(rng));
    }
    f.op = arch::Op{arch::OpKind::moe, arch::Buffer::tmp, arch::Buffer::norm, arch::Buffer::router, ""};
    f.op.moe = std::make_shared<const MoeSpec>(spec);
    return f;
}

struct MoeCase {
    const char* name;
    GgmlType type;
    ExpertGating gating;
    bool normalize;
    ExpertActivation activation;
    bool biases;
    double tolerance;  // relative to the largest output
    bool glm = false;  // GLM-4.5's: a selection bias, weights scaled by 2.5, a shared expert
};

// GLM-4.5's routed feed-forward on top of `spec`.
MoeSpec with_glm_extras(MoeSpec spec) {
    spec.selection_bias = "blk.{}.exp_probs_b.bias";
    spec.weights_scale = 2.5f;
    spec.n_ff_shared = 64;  // whole Q8_0 blocks of 32 in the down projection's rows
    return spec;
}

// F32 experts: only float rounding against the double reference. Q8_0: the activations are
// quantized to 8 bits as for every Q8_0 product, about 1% of the output.
const MoeCase kCases[] = {
    {"f32_softmax_normalized", GgmlType::f32, ExpertGating::softmax, true, ExpertActivation::silu, false, 1e-5},
    {"f32_chosen_softmax_oai_biases", GgmlType::f32, ExpertGating::softmax_chosen, false, ExpertActivation::swiglu_oai,
     true, 1e-5},
    {"q8_0_softmax_normalized", GgmlType::q8_0, ExpertGating::softmax, true, ExpertActivation::silu, false, 2e-2},
    {"f32_sigmoid_glm", GgmlType::f32, ExpertGating::sigmoid, true, ExpertActivation::silu, false, 1e-5, true},
    {"q8_0_sigmoid_glm", GgmlType::q8_0, ExpertGating::sigmoid, true, ExpertActivation::silu, false, 2e-2, true},
};

TEST(MoeRun, AgreesWithAPerTokenEvaluationOfTheChosenExperts) {
    ThreadPool pool(2);
    for (const MoeCase& c : kCases) {
        SCOPED_TRACE(c.name);
        MoeSpec spec = spec_of(8, 3, 64, c.gating, c.normalize);
        spec.activation = c.activation;
        if (c.glm) spec = with_glm_extras(spec);
        const int64_t n_embd = 96;
        const MoeFixture f = make_fixture(c.type, spec, n_embd, c.biases, 7);
        for (const int n : {1, 5, 33}) {
            SCOPED_TRACE(n);
            const std::vector<float> x = random_floats(static_cast<size_t>(n * n_embd), 100 + n, 1.0f);
            const std::vector<float> scores = random_floats(static_cast<size_t>(n) * spec.n_expert, 200 + n, 2.0f);
            std::vector<float> out(x.size());
            MoeScratch scratch;
            run_moe(pool, best_isa(), f.bound(0, spec.n_expert), x.data(), scores.data(), out.data(), n, n_embd,
                    scratch);
            double worst = 0, largest = 0;
            for (int t = 0; t < n; ++t) {
                const std::vector<double> want = f.reference(x.data() + t * n_embd, scores.data() + t * spec.n_expert);
                for (int64_t i = 0; i < n_embd; ++i) {
                    worst = std::max(worst, std::abs(out[static_cast<size_t>(t * n_embd + i)] - want[i]));
                    largest = std::max(largest, std::abs(want[i]));
                }
            }
            ASSERT_GT(largest, 0.05) << "outputs too small to say anything";
            EXPECT_LE(worst, c.tolerance * largest);
        }
    }
}

// Two devices holding experts 0-2 and 3-7: their outputs add up to the single device's
// (each token's slots are summed in order on each device, then the two partial sums); a
// shared expert is run by the first device only, so it counts once.
TEST(MoeRun, ExpertSharesAddUpToTheWhole) {
    ThreadPool pool(1);
    for (const bool glm : {false, true}) {
        SCOPED_TRACE(glm ? "with GLM-4.5's shared expert and selection bias" : "plain");
        MoeSpec spec = spec_of(8, 3, 32, glm ? ExpertGating::sigmoid : ExpertGating::softmax, true);
        if (glm) spec = with_glm_extras(spec);
        const int64_t n_embd = 64;
        const MoeFixture f = make_fixture(GgmlType::q8_0, spec, n_embd, false, 11);
        const int n = 9;
        const std::vector<float> x = random_floats(static_cast<size_t>(n * n_embd), 5, 1.0f);
        const std::vector<float> scores = random_floats(static_cast<size_t>(n) * spec.n_expert, 6, 2.0f);
        std::vector<float> whole(x.size()), first(x.size()), second(x.size());
        MoeScratch s1, s2, s3;
        run_moe(pool, best_isa(), f.bound(0, 8), x.data(), scores.data(), whole.data(), n, n_embd, s1);
        run_moe(pool, best_isa(), f.bound(0, 3), x.data(), scores.data(), first.data(), n, n_embd, s2);
        run_moe(pool, best_isa(), f.bound(3, 8), x.data(), scores.data(), second.data(), n, n_embd, s3);
        double worst = 0;
        size_t both = 0;
        for (size_t i = 0; i < whole.size(); ++i) {
            worst = std::max(worst, static_cast<double>(std::abs(first[i] + second[i] - whole[i])));
            both += first[i] != 0.0f && second[i] != 0.0f;
        }
        EXPECT_GT(both, 0u) << "some token should use experts on both devices";
        EXPECT_LE(worst, 1e-5);
    }
}

// Interleaved experts (what a CPU stage runs on AVX2 and AVX-512) give the bits of the
// file's rows, for one token, a few, and a batch, for all the experts and for a share of them.
TEST(MoeRun, InterleavedExpertsGiveTheFilesBits) {
    std::vector<KernelIsa> isas;
    for (KernelIsa isa : available_isas()) {
        if (isa != KernelIsa::scalar) isas.push_back(isa);
    }
    if (isas.empty()) GTEST_SKIP() << "no AVX2: nothing is interleaved on this processor";
    ThreadPool pool(2);
    for (KernelIsa isa : isas) {
        for (GgmlType type : {GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k}) {
            if (!can_interleave(isa, type, 256, 256, row_bytes(type_traits(type), 256))) continue;  // AVX2's Q6_K
            SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(type_traits(type).name));
            const MoeSpec spec = spec_of(8, 3, 256, ExpertGating::softmax, true);
            const int64_t n_embd = 256;
            const MoeFixture f = make_fixture(type, spec, n_embd, false, 13);
            for (const auto& [begin, end] : {std::pair<uint32_t, uint32_t>{0, 8}, {3, 8}}) {
                BoundWeight packed = f.bound(begin, end);
                InterleavedCopies copies;
                interleave_experts(pool, isa, packed, copies, nullptr);
                uint64_t bytes = 0;
                for (const BoundExperts& x : packed.experts) {
                    EXPECT_TRUE(x.interleaved);
                    bytes += x.expert_stride * (end - begin);
                }
                EXPECT_EQ(copies.bytes(), bytes);
                for (const int n : {1, 5, 33}) {
                    SCOPED_TRACE(n);
                    const std::vector<float> x = random_floats(static_cast<size_t>(n * n_embd), 300 + n, 1.0f);
                    const std::vector<float> scores = random_floats(static_cast<size_t>(n) * spec.n_expert, 400 + n, 2.0f);
                    std::vector<float> want(x.size()), got(x.size(), -1.0f);
                    MoeScratch s1, s2;
                    run_moe(pool, isa, f.bound(begin, end), x.data(), scores.data(), want.data(), n, n_embd, s1);
                    run_moe(pool, isa, packed, x.data(), scores.data(), got.data(), n, n_embd, s2);
                    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
                }
            }
        }
    }
}

}  // namespace
}  // namespace powerhouse::cpu
