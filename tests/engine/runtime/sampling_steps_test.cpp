// The sampler's steps one by one, against values computed by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "runtime/sampling_steps.h"

namespace powerhouse {
namespace {

using sampling::apply_penalties;
using sampling::argmax;
using sampling::draw;
using sampling::keep_min_p;
using sampling::keep_top_k;
using sampling::keep_top_p;
using sampling::to_weights;

// Candidates for logits ln(probabilities): their softmax gives the probabilities back.
std::vector<TokenCandidate> from_probabilities(const std::vector<double>& probabilities) {
    std::vector<TokenCandidate> candidates;
    for (size_t i = 0; i < probabilities.size(); ++i) {
        candidates.push_back({static_cast<float>(std::log(probabilities[i])), static_cast<TokenId>(i)});
    }
    return candidates;
}

std::vector<TokenId> ids(std::span<const TokenCandidate> candidates) {
    std::vector<TokenId> out;
    for (const TokenCandidate& c : candidates) out.push_back(c.id);
    return out;
}

// The kept set, whatever its order.
std::vector<TokenId> sorted_ids(std::span<const TokenCandidate> candidates) {
    std::vector<TokenId> out = ids(candidates);
    std::sort(out.begin(), out.end());
    return out;
}

TEST(SamplingSteps, ArgmaxTakesTheLargestAndTiesGoToTheLowestId) {
    const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 2.5f};
    EXPECT_EQ(argmax(logits), 1);
    const std::vector<float> all_equal(7, 0.25f);
    EXPECT_EQ(argmax(all_equal), 0);
}

TEST(SamplingSteps, ArgmaxIgnoresNanAndReportsNoUsableLogit) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    EXPECT_EQ(argmax(std::vector<float>{nan, -1.0f, nan, -0.5f}), 3);
    EXPECT_EQ(argmax(std::vector<float>{-5.0f, inf, inf, nan}), 1);
    EXPECT_EQ(argmax(std::vector<float>{nan, nan}), kNoToken);
    EXPECT_EQ(argmax(std::vector<float>{-inf, nan, -inf}), kNoToken);
    EXPECT_EQ(argmax(std::vector<float>{}), kNoToken);
}

TEST(SamplingSteps, PenaltiesFollowTheFormulas) {
    SamplingParams params;
    params.repeat_penalty = 2.0f;
    params.presence_penalty = 0.5f;
    params.frequency_penalty = 0.25f;
    std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f, 1.5f};
    // Token 0 once, token 1 twice, token 4 once, token 5 three times; 7 and -3 are not in
    // the vocabulary.
    const std::vector<TokenId> window = {1, 0, 7, 5, 1, 4, 5, -3, 5};
    std::vector<int32_t> counts(logits.size(), 0);
    apply_penalties(logits, window, params, counts);

    EXPECT_FLOAT_EQ(logits[0], 2.0f / 2.0f - 1 * 0.25f - 0.5f);   // 0.25: positive, divided
    EXPECT_FLOAT_EQ(logits[1], -1.0f * 2.0f - 2 * 0.25f - 0.5f);  // -3: negative, multiplied
    EXPECT_FLOAT_EQ(logits[2], 0.5f);                             // not in the window
    EXPECT_FLOAT_EQ(logits[3], 3.0f);
    EXPECT_FLOAT_EQ(logits[4], 0.0f * 2.0f - 1 * 0.25f - 0.5f);  // -0.75: zero is multiplied
    EXPECT_FLOAT_EQ(logits[5], 1.5f / 2.0f - 3 * 0.25f - 0.5f);  // -0.5
    EXPECT_EQ(std::count(counts.begin(), counts.end(), 0), static_cast<long>(counts.size()));
}

TEST(SamplingSteps, RepeatPenaltyBelowOneRewardsRepetition) {
    SamplingParams params;
    params.repeat_penalty = 0.5f;
    std::vector<float> logits = {4.0f, -4.0f};
    const std::vector<TokenId> window = {0, 1};
    std::vector<int32_t> counts(2, 0);
    apply_penalties(logits, window, params, counts);
    EXPECT_FLOAT_EQ(logits[0], 8.0f);
    EXPECT_FLOAT_EQ(logits[1], -2.0f);
}

TEST(SamplingSteps, TopKKeepsTheBestInCanonicalOrder) {
    const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f, 0.0f, 2.0f};
    const auto run = [&](int32_t k) {
        std::vector<TokenCandidate> candidates;
        for (size_t i = 0; i < logits.size(); ++i) candidates.push_back({logits[i], static_cast<TokenId>(i)});
        const size_t kept = keep_top_k(candidates, k);
        return ids(std::span(candidates).first(kept));
    };
    EXPECT_EQ(run(1), (std::vector<TokenId>{1}));  // tie between 1 and 2: the lower id
    EXPECT_EQ(run(2), (std::vector<TokenId>{1, 2}));
    EXPECT_EQ(run(3), (std::vector<TokenId>{1, 2, 3}));  // tie between 3 and 5: the lower id
    EXPECT_EQ(run(4), (std::vector<TokenId>{1, 2, 3, 5}));
    // Off, or at least the vocabulary: everything, untouched.
    EXPECT_EQ(run(0), (std::vector<TokenId>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(run(-1), (std::vector<TokenId>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(run(6), (std::vector<TokenId>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(run(100), (std::vector<TokenId>{0, 1, 2, 3, 4, 5}));
}

// Probabilities 0.5, 0.25, 0.15, 0.1: cumulative 0.5, 0.75, 0.9, 1.0.
TEST(SamplingSteps, TopPKeepsTheSmallestSetReachingP) {
    const std::vector<double> probabilities = {0.5, 0.25, 0.15, 0.1};
    struct Case {
        float p;
        std::vector<TokenId> kept;
    };
    const std::vector<Case> cases = {
        {0.3f, {0}},           {0.49f, {0}},           {0.51f, {0, 1}},      {0.6f, {0, 1}},
        {0.74f, {0, 1}},       {0.76f, {0, 1, 2}},     {0.85f, {0, 1, 2}},   {0.89f, {0, 1, 2}},
        {0.91f, {0, 1, 2, 3}}, {0.999f, {0, 1, 2, 3}}, {1.0f, {0, 1, 2, 3}},
    };
    for (const Case& c : cases) {
        // In order already, and shuffled (the unsorted path partitions and sorts).
        std::vector<TokenCandidate> sorted = from_probabilities(probabilities);
        EXPECT_EQ(ids(std::span(sorted).first(keep_top_p(sorted, c.p, true))), c.kept) << "p=" << c.p;
        std::vector<TokenCandidate> shuffled = from_probabilities(probabilities);
        std::swap(shuffled[0], shuffled[3]);
        std::swap(shuffled[1], shuffled[2]);
        const size_t kept = keep_top_p(shuffled, c.p, false);
        EXPECT_EQ(sorted_ids(std::span(shuffled).first(kept)), c.kept) << "p=" << c.p;
    }
}

TEST(SamplingSteps, TopPRenormalizesOverTheCandidatesGiven) {
    // Over the three that top-k kept (sum 0.9) the best weighs 0.5 / 0.9 = 0.556 >= 0.55: one
    // token. Over all four it weighs 0.5 < 0.55: two tokens.
    std::vector<TokenCandidate> three = from_probabilities({0.5, 0.25, 0.15});
    EXPECT_EQ(keep_top_p(three, 0.55f, true), 1u);
    std::vector<TokenCandidate> four = from_probabilities({0.5, 0.25, 0.15, 0.1});
    EXPECT_EQ(keep_top_p(four, 0.55f, true), 2u);
}

// Random logits of several shapes: peaked, flat, spread wider than the histogram's range,
// and coarse (many exact ties, broken by id).
std::vector<TokenCandidate> random_candidates(int n, int shape, std::mt19937_64& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<TokenCandidate> candidates;
    for (int i = 0; i < n; ++i) {
        const float x = normal(rng);
        const float logit = shape == 0   ? 3.0f * x
                            : shape == 1 ? 0.05f * x
                            : shape == 2 ? 40.0f * x
                                         : std::round(2.0f * x);
        candidates.push_back({logit, static_cast<TokenId>(i)});
    }
    return candidates;
}

TEST(SamplingSteps, TopKAndTopPOnLargeVocabulariesMatchAFullSort) {
    std::mt19937_64 rng(7);
    for (int shape = 0; shape < 4; ++shape) {
        for (int n : {1, 2, 63, 64, 65, 300, 5000, 70000}) {
            const std::vector<TokenCandidate> candidates = random_candidates(n, shape, rng);
            std::vector<TokenCandidate> reference = candidates;
            std::sort(reference.begin(), reference.end(), sampling::comes_before);
            const float max_logit = reference.front().logit;
            double total = 0.0;
            for (const TokenCandidate& c : reference) total += std::exp(c.logit - max_logit);

            for (int32_t k : {1, 40, 4096, 4097, 6000}) {
                std::vector<TokenCandidate> work = candidates;
                const size_t kept = keep_top_k(work, k);
                ASSERT_EQ(kept, std::min<size_t>(static_cast<size_t>(k), reference.size()));
                if (static_cast<size_t>(k) < reference.size()) {  // otherwise untouched
                    EXPECT_EQ(ids(std::span(work).first(kept)), ids(std::span(reference).first(kept)))
                        << "shape " << shape << " n=" << n << " k=" << k;
                }
            }

            for (float p : {0.01f, 0.3f, 0.9f, 0.95f, 0.999f}) {
                size_t expected = reference.size();
                double cumulative = 0.0;
                for (size_t i = 0; i < reference.size(); ++i) {
                    cumulative += std::exp(reference[i].logit - max_logit);
                    if (cumulative >= static_cast<double>(p) * total) {
                        expected = i + 1;
                        break;
                    }
                }
                const std::vector<TokenId> expected_ids = sorted_ids(std::span(reference).first(expected));
                std::vector<TokenCandidate> work = candidates;
                size_t kept = keep_top_p(work, p, false);
                ASSERT_EQ(kept, expected) << "shape " << shape << " n=" << n << " p=" << p;
                EXPECT_EQ(sorted_ids(std::span(work).first(kept)), expected_ids);
                // The sorted path keeps the same prefix, in place.
                work = reference;
                kept = keep_top_p(work, p, true);
                ASSERT_EQ(kept, expected) << "shape " << shape << " n=" << n << " p=" << p;
                EXPECT_EQ(ids(work), ids(reference));
            }
        }
    }
}

// Probabilities 0.5, 0.25, 0.15, 0.1; the largest is 0.5.
TEST(SamplingSteps, MinPDropsTokensBelowAShareOfTheLargest) {
    const std::vector<double> probabilities = {0.1, 0.5, 0.15, 0.25};  // not in order
    const float max_logit = std::log(0.5f);
    struct Case {
        float min_p;
        std::vector<TokenId> kept;
    };
    const std::vector<Case> cases = {
        {0.0f, {0, 1, 2, 3}},  // off
        {0.1f, {0, 1, 2, 3}},  // threshold 0.05
        {0.25f, {1, 2, 3}},    // threshold 0.125: 0.1 goes
        {0.4f, {1, 3}},        // threshold 0.2: 0.15 goes
        {0.6f, {1}},           // threshold 0.3
        {1.0f, {1}},           // only the largest
    };
    for (const Case& c : cases) {
        std::vector<TokenCandidate> candidates = from_probabilities(probabilities);
        const size_t kept = keep_min_p(candidates, c.min_p, max_logit);
        EXPECT_EQ(ids(std::span(candidates).first(kept)), c.kept) << "min_p=" << c.min_p;  // order kept
    }
}

TEST(SamplingSteps, WeightsAreTheSoftmaxNumeratorsAtTheTemperature) {
    const float ln2 = std::log(2.0f);
    std::vector<TokenCandidate> candidates = {{0.0f, 0}, {ln2, 1}, {-ln2, 2}};
    const double sum = to_weights(candidates, 1.0f, ln2);
    EXPECT_FLOAT_EQ(candidates[0].logit, 0.5f);
    EXPECT_FLOAT_EQ(candidates[1].logit, 1.0f);
    EXPECT_FLOAT_EQ(candidates[2].logit, 0.25f);
    EXPECT_NEAR(sum, 1.75, 1e-6);

    std::vector<TokenCandidate> cold = {{0.0f, 0}, {ln2, 1}, {-ln2, 2}};
    EXPECT_NEAR(to_weights(cold, 0.5f, ln2), 1.0 + 0.25 + 0.0625, 1e-6);  // exp(-2 ln2), exp(-4 ln2)
    EXPECT_FLOAT_EQ(cold[0].logit, 0.25f);
    EXPECT_FLOAT_EQ(cold[2].logit, 0.0625f);

    // A tiny temperature neither overflows nor divides infinities.
    std::vector<TokenCandidate> tiny = {{1e30f, 0}, {-1e30f, 1}, {1e30f, 2}};
    EXPECT_EQ(to_weights(tiny, 1e-30f, 1e30f), 2.0);
    EXPECT_EQ(tiny[1].logit, 0.0f);
}

TEST(SamplingSteps, DrawPicksTheIntervalHoldingU) {
    // Weights 1, 2, 1 of 4: token 0 for u in [0, 0.25), 1 for [0.25, 0.75), 2 for [0.75, 1).
    const std::vector<TokenCandidate> weighted = {{1.0f, 10}, {2.0f, 11}, {1.0f, 12}};
    EXPECT_EQ(draw(weighted, 4.0, 0.0), 0u);
    EXPECT_EQ(draw(weighted, 4.0, 0.2499), 0u);
    EXPECT_EQ(draw(weighted, 4.0, 0.25), 1u);
    EXPECT_EQ(draw(weighted, 4.0, 0.7499), 1u);
    EXPECT_EQ(draw(weighted, 4.0, 0.75), 2u);
    EXPECT_EQ(draw(weighted, 4.0, std::nextafter(1.0, 0.0)), 2u);
    // Zero weights are never drawn.
    const std::vector<TokenCandidate> sparse = {{0.0f, 0}, {1.0f, 1}, {0.0f, 2}};
    for (double u : {0.0, 0.5, std::nextafter(1.0, 0.0)}) EXPECT_EQ(draw(sparse, 1.0, u), 1u);
}

TEST(SamplingSteps, UnitIntervalUsesTheTop53Bits) {
    EXPECT_EQ(sampling::unit_interval(0), 0.0);
    EXPECT_EQ(sampling::unit_interval(uint64_t{1} << 63), 0.5);
    EXPECT_EQ(sampling::unit_interval(~uint64_t{0}), 1.0 - 0x1.0p-53);
    EXPECT_EQ(sampling::unit_interval((uint64_t{1} << 11) - 1), 0.0);  // the low 11 bits are dropped
}

}  // namespace
}  // namespace powerhouse
