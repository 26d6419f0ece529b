// The mixture-of-experts kernels (kernels/moe.cu) against the CPU backend (backend/cpu/moe.h):
// the routing of each gating, exactly the same experts and weights to float rounding; the
// gather, weighted scatter and in-order slot sum bit for bit; gpt-oss's clamped SwiGLU to
// the ulp differences of exp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/moe.h"
#include "gpu_test.h"
#include "kernel_test_support.h"
#include "powerhouse_kernels.h"

namespace powerhouse::test {
namespace {

class MoeKernel : public GpuTest {};

TEST_F(MoeKernel, RoutingChoosesTheCpusExpertsWithItsWeights) {
    std::mt19937 rng(5);
    struct Case {
        uint32_t n_expert, k;
        arch::ExpertGating gating;
        bool normalize;
        bool biased = false;  // a selection bias, and the weights scaled by 2.5 (GLM-4.5)
    };
    const Case cases[] = {{8, 2, arch::ExpertGating::softmax, true},           // Mixtral
                          {128, 8, arch::ExpertGating::softmax, true},         // Qwen3-MoE
                          {32, 4, arch::ExpertGating::softmax_chosen, false},  // gpt-oss
                          {512, 64, arch::ExpertGating::softmax, false},
                          {128, 8, arch::ExpertGating::sigmoid, true, true},  // GLM-4.5-Air
                          {160, 8, arch::ExpertGating::sigmoid, false}};
    for (const Case& c : cases) {
        SCOPED_TRACE(c.n_expert);
        const int n = 37;
        std::vector<float> scores = uniform(static_cast<size_t>(n) * c.n_expert, -4.0f, 4.0f, rng);
        // Ties: the lower index goes first on both.
        scores[3] = scores[5] = 10.0f;
        arch::MoeSpec spec;
        spec.n_expert = c.n_expert;
        spec.n_used = c.k;
        spec.gating = c.gating;
        spec.normalize = c.normalize;
        std::vector<float> bias;
        if (c.biased) {
            bias = uniform(c.n_expert, -0.5f, 0.5f, rng);
            spec.weights_scale = 2.5f;
        }
        const int gating = c.gating == arch::ExpertGating::softmax          ? 0
                           : c.gating == arch::ExpertGating::softmax_chosen ? 1
                                                                            : 2;
        DeviceArray<float> scores_dev(scores), weights_dev(static_cast<size_t>(n) * c.k);
        DeviceArray<float> bias_dev(c.biased ? bias : std::vector<float>(1));
        DeviceArray<int32_t> ids_dev(static_cast<size_t>(n) * c.k);
        ASSERT_TRUE(ran(ph_moe_route(scores_dev.get(), n, static_cast<int>(c.n_expert), static_cast<int>(c.k), gating,
                                     c.normalize ? 1 : 0, c.biased ? bias_dev.get() : nullptr, spec.weights_scale,
                                     ids_dev.get(), weights_dev.get(), nullptr)));
        const std::vector<int32_t> ids = ids_dev.download();
        const std::vector<float> weights = weights_dev.download();
        for (int t = 0; t < n; ++t) {
            std::vector<uint32_t> want_ids(c.k);
            std::vector<float> want_w(c.k);
            cpu::route_experts(spec,
                               std::span<const float>(scores.data() + static_cast<size_t>(t) * c.n_expert, c.n_expert),
                               bias, want_ids, want_w);
            for (uint32_t s = 0; s < c.k; ++s) {
                const size_t i = static_cast<size_t>(t) * c.k + s;
                ASSERT_EQ(ids[i], static_cast<int32_t>(want_ids[s])) << "token " << t << " slot " << s;
                EXPECT_NEAR(weights[i], want_w[s], 1e-6f * std::fabs(want_w[s]) + 1e-9f) << "token " << t;
            }
        }
    }
}

TEST_F(MoeKernel, GatherScatterAndSlotSumsAreExact) {
    std::mt19937 rng(6);
    const int n = 9, k = 3;
    const int64_t width = 77;
    const std::vector<float> src = uniform(static_cast<size_t>(n) * width, -2.0f, 2.0f, rng);
    const std::vector<int32_t> pairs = {2, 5, 6, 14, 26};  // (token, slot) = pair / k, pair % k
    const std::vector<float> weights = uniform(static_cast<size_t>(n) * k, 0.0f, 1.0f, rng);
    DeviceArray<float> src_dev(src), gathered_dev(pairs.size() * width), weights_dev(weights);
    DeviceArray<int32_t> pairs_dev(pairs);
    ASSERT_TRUE(ran(ph_moe_gather(src_dev.get(), width, pairs_dev.get(), k, static_cast<int>(pairs.size()),
                                  gathered_dev.get(), nullptr)));
    const std::vector<float> gathered = gathered_dev.download();
    for (size_t i = 0; i < pairs.size(); ++i) {
        for (int64_t j = 0; j < width; ++j) {
            ASSERT_EQ(gathered[i * width + j], src[static_cast<size_t>(pairs[i] / k) * width + j]);
        }
    }
    // Scatter the gathered rows back, weighted, into zeroed slots; then sum the slots.
    std::vector<float> slots(static_cast<size_t>(n) * k * width, 0.0f);
    DeviceArray<float> slots_dev(slots), sum_dev(static_cast<size_t>(n) * width);
    ASSERT_TRUE(ran(ph_moe_scatter(gathered_dev.get(), width, pairs_dev.get(), weights_dev.get(),
                                   static_cast<int>(pairs.size()), slots_dev.get(), nullptr)));
    for (size_t i = 0; i < pairs.size(); ++i) {
        for (int64_t j = 0; j < width; ++j) {
            slots[static_cast<size_t>(pairs[i]) * width + j] = gathered[i * width + j] * weights[pairs[i]];
        }
    }
    EXPECT_TRUE(same_floats(slots, slots_dev.download()));
    ASSERT_TRUE(ran(ph_moe_sum_slots(slots_dev.get(), n, k, width, sum_dev.get(), nullptr)));
    std::vector<float> sums(static_cast<size_t>(n) * width);
    for (int t = 0; t < n; ++t) {
        for (int64_t j = 0; j < width; ++j) {
            float s = slots[(static_cast<size_t>(t) * k) * width + j];
            for (int slot = 1; slot < k; ++slot) s += slots[(static_cast<size_t>(t) * k + slot) * width + j];
            sums[static_cast<size_t>(t) * width + j] = s;
        }
    }
    EXPECT_TRUE(same_floats(sums, sum_dev.download()));
}

TEST_F(MoeKernel, ClampedSwigluMatchesTheFormula) {
    std::mt19937 rng(7);
    const size_t n = 50001;
    std::vector<float> a = {0.0f, -0.0f, 7.0f, -7.0f, 7.5f, 100.0f, -100.0f};
    const std::vector<float> rest = uniform(n - a.size(), -12.0f, 12.0f, rng);
    a.insert(a.end(), rest.begin(), rest.end());
    const std::vector<float> b = uniform(n, -10.0f, 10.0f, rng);
    DeviceArray<float> a_dev(a), b_dev(b), y_dev(n);
    ASSERT_TRUE(ran(ph_swiglu_oai(a_dev.get(), b_dev.get(), y_dev.get(), static_cast<int64_t>(n), 1.702f, 7.0f,
                                  nullptr)));
    std::vector<double> expected(n), tolerance(n);
    for (size_t i = 0; i < n; ++i) {
        const double x = std::min<double>(a[i], 7.0);
        const double y = std::clamp<double>(b[i], -7.0, 7.0);
        expected[i] = x / (1.0 + std::exp(-1.702 * x)) * (y + 1.0);
        tolerance[i] = 1e-5 * std::fabs(expected[i]) + 1e-6;
    }
    EXPECT_TRUE(all_close(expected, y_dev.download(), tolerance));
}

TEST_F(MoeKernel, RefusesBadArguments) {
    DeviceArray<float> f(64);
    DeviceArray<int32_t> i(64);
    EXPECT_NE(ph_moe_route(f.get(), 1, 0, 1, 0, 0, nullptr, 0.0f, i.get(), f.get(), nullptr), 0);    // no experts
    EXPECT_NE(ph_moe_route(f.get(), 1, 600, 2, 0, 0, nullptr, 0.0f, i.get(), f.get(), nullptr), 0);  // too many
    EXPECT_NE(ph_moe_route(f.get(), 1, 8, 9, 0, 0, nullptr, 0.0f, i.get(), f.get(), nullptr), 0);    // k > experts
    EXPECT_NE(ph_moe_route(f.get(), 1, 8, 2, 3, 0, nullptr, 0.0f, i.get(), f.get(), nullptr), 0);    // no such gating
    EXPECT_NE(ph_moe_gather(nullptr, 8, i.get(), 1, 1, f.get(), nullptr), 0);
    EXPECT_NE(ph_moe_sum_slots(f.get(), 1, 0, 8, f.get(), nullptr), 0);
}

}  // namespace
}  // namespace powerhouse::test
