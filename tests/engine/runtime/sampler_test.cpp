// The Sampler end to end: parameters, greedy, the filters' effect on what is drawn, the drawn
// distribution against softmax, reproducibility, penalties and non-finite logits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "powerhouse/sampler.h"

namespace powerhouse {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// All filters and penalties off.
SamplingParams plain(float temperature, uint64_t seed = 1) {
    SamplingParams params;
    params.temperature = temperature;
    params.top_k = 0;
    params.top_p = 1.0f;
    params.min_p = 0.0f;
    params.seed = seed;
    return params;
}

// sample() may scribble on the logits: give it a copy each time.
TokenId sample_copy(Sampler& sampler, const std::vector<float>& logits) {
    std::vector<float> scratch = logits;
    return sampler.sample(scratch);
}

std::vector<int> histogram(Sampler& sampler, const std::vector<float>& logits, int draws) {
    std::vector<int> counts(logits.size(), 0);
    for (int i = 0; i < draws; ++i) {
        const TokenId id = sample_copy(sampler, logits);
        EXPECT_GE(id, 0);
        EXPECT_LT(id, static_cast<TokenId>(logits.size()));
        if (id >= 0 && id < static_cast<TokenId>(logits.size())) ++counts[static_cast<size_t>(id)];
    }
    return counts;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
    double max_logit = -INFINITY;
    for (float l : logits) max_logit = std::max(max_logit, static_cast<double>(l));
    std::vector<double> p;
    double sum = 0.0;
    for (float l : logits) {
        p.push_back(std::exp((l - max_logit) / temperature));
        sum += p.back();
    }
    for (double& x : p) x /= sum;
    return p;
}

// Upper quantile of the chi-square distribution with `df` degrees of freedom for the standard
// normal quantile z (Wilson-Hilferty; within 1% of the exact value for df >= 3).
double chi_square_quantile(int df, double z) {
    const double k = df;
    const double a = 2.0 / (9.0 * k);
    return k * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Checks the counts against the probabilities: Pearson's chi-square below its 1 - 1e-6
// quantile, and every bin within 5 standard errors of its expectation (both fail by chance
// with probability around 1e-6; the seed is fixed anyway, so a pass is a stable pass).
void expect_matches(const std::vector<int>& counts, const std::vector<double>& p, int draws) {
    constexpr double kZ = 4.753;  // standard normal 1 - 1e-6 quantile
    double chi_square = 0.0;
    int bins = 0;
    for (size_t i = 0; i < p.size(); ++i) {
        const double expected = draws * p[i];
        if (p[i] == 0.0) {
            EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
            continue;
        }
        const double standard_error = std::sqrt(draws * p[i] * (1.0 - p[i]));
        EXPECT_LE(std::abs(counts[i] - expected), 5.0 * standard_error)
            << "token " << i << ": " << counts[i] << " draws, expected " << expected;
        chi_square += (counts[i] - expected) * (counts[i] - expected) / expected;
        ++bins;
    }
    if (bins >= 2) {
        EXPECT_LT(chi_square, chi_square_quantile(bins - 1, kZ)) << "bins " << bins;
    }
}

// --- parameters ---------------------------------------------------------------------------

TEST(SamplingParams, DefaultsAndBoundariesAreValid) {
    EXPECT_TRUE(SamplingParams{}.validate().ok());
    SamplingParams edge;
    edge.temperature = 0.0f;
    edge.top_p = 1.0f;
    edge.min_p = 1.0f;
    edge.top_k = -5;
    edge.repeat_last_n = 0;
    edge.presence_penalty = -2.0f;
    edge.frequency_penalty = 2.0f;
    edge.repeat_penalty = 0.01f;
    EXPECT_TRUE(edge.validate().ok());
    edge.min_p = 0.0f;
    edge.top_p = 1e-6f;
    EXPECT_TRUE(edge.validate().ok());
}

TEST(SamplingParams, BadValuesAreRejectedNamingTheField) {
    struct Case {
        std::string field;
        void (*set)(SamplingParams&);
    };
    const std::vector<Case> cases = {
        {"temperature", [](SamplingParams& p) { p.temperature = -0.1f; }},
        {"temperature", [](SamplingParams& p) { p.temperature = kNan; }},
        {"temperature", [](SamplingParams& p) { p.temperature = kInf; }},
        {"top_p", [](SamplingParams& p) { p.top_p = 0.0f; }},
        {"top_p", [](SamplingParams& p) { p.top_p = -0.5f; }},
        {"top_p", [](SamplingParams& p) { p.top_p = 1.01f; }},
        {"top_p", [](SamplingParams& p) { p.top_p = kNan; }},
        {"min_p", [](SamplingParams& p) { p.min_p = -0.01f; }},
        {"min_p", [](SamplingParams& p) { p.min_p = 1.5f; }},
        {"min_p", [](SamplingParams& p) { p.min_p = kNan; }},
        {"repeat_penalty", [](SamplingParams& p) { p.repeat_penalty = 0.0f; }},
        {"repeat_penalty", [](SamplingParams& p) { p.repeat_penalty = -1.1f; }},
        {"repeat_penalty", [](SamplingParams& p) { p.repeat_penalty = kInf; }},
        {"repeat_last_n", [](SamplingParams& p) { p.repeat_last_n = -1; }},
        {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = kNan; }},
        {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -kInf; }},
        {"logit_bias",
         [](SamplingParams& p) {
             p.logit_bias = {{3, 1.0f}, {-1, 1.0f}};
         }},
        {"logit_bias",
         [](SamplingParams& p) {
             p.logit_bias = {{3, kNan}};
         }},
    };
    for (const Case& c : cases) {
        SamplingParams params;
        c.set(params);
        const Result<void> checked = params.validate();
        ASSERT_FALSE(checked.ok()) << c.field;
        EXPECT_EQ(checked.error().code, ErrorCode::invalid_argument);
        EXPECT_NE(checked.error().message.find(c.field), std::string::npos) << checked.error().message;
        EXPECT_FALSE(Sampler::create(params).ok()) << c.field;
    }
    SamplingParams negative;
    negative.temperature = -1.5f;
    EXPECT_EQ(negative.validate().error().message,
              "sampling parameter temperature must be a finite number >= 0 (0 = greedy), got -1.5");
}

TEST(Sampler, OutOfRangeParametersFallBackToOff) {
    SamplingParams bad = plain(-1.0f);  // greedy
    bad.top_p = kNan;
    bad.min_p = 7.0f;
    bad.repeat_penalty = 0.0f;
    bad.repeat_last_n = -3;
    bad.presence_penalty = kInf;
    Sampler sampler(bad);
    EXPECT_EQ(sampler.params().temperature, 0.0f);
    EXPECT_EQ(sampler.params().top_p, 1.0f);
    EXPECT_EQ(sampler.params().min_p, 0.0f);
    EXPECT_EQ(sampler.params().repeat_penalty, 1.0f);
    EXPECT_EQ(sampler.params().repeat_last_n, 0);
    EXPECT_EQ(sampler.params().presence_penalty, 0.0f);
    EXPECT_EQ(sample_copy(sampler, {0.5f, 2.0f, 1.0f}), 1);
}

// --- greedy and top-k = 1 ---------------------------------------------------------------

TEST(Sampler, GreedyPicksTheArgmaxWithTiesToTheLowestId) {
    Sampler sampler(plain(0.0f));
    EXPECT_EQ(sample_copy(sampler, {0.1f, -3.0f, 7.5f, 2.0f}), 2);
    EXPECT_EQ(sample_copy(sampler, {1.0f, 4.0f, 2.0f, 4.0f, 4.0f}), 1);
    EXPECT_EQ(sample_copy(sampler, {-2.0f, -2.0f}), 0);
    EXPECT_EQ(sample_copy(sampler, {3.0f}), 0);
}

TEST(Sampler, GreedyIgnoresTheFiltersAndTheSeed) {
    const std::vector<float> logits = {0.0f, 5.0f, 5.0f, 4.9f, -1.0f};
    for (uint64_t seed : {0u, 1u, 99u}) {
        SamplingParams params;  // default filters on
        params.temperature = 0.0f;
        params.seed = seed;
        params.top_k = 3;
        params.top_p = 0.01f;
        params.min_p = 1.0f;
        Sampler sampler(params);
        for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_copy(sampler, logits), 1);
    }
}

TEST(Sampler, TopKOneEqualsGreedyAtAnyTemperature) {
    std::mt19937_64 rng(3);
    std::uniform_int_distribution<int> small(-3, 3);  // many ties
    for (float temperature : {0.01f, 0.5f, 1.0f, 2.0f, 100.0f}) {
        SamplingParams params = plain(temperature, 11);
        params.top_k = 1;
        Sampler top1(params);
        Sampler greedy(plain(0.0f));
        for (int trial = 0; trial < 200; ++trial) {
            std::vector<float> logits(50);
            for (float& l : logits) l = static_cast<float>(small(rng));
            EXPECT_EQ(sample_copy(top1, logits), sample_copy(greedy, logits)) << "temperature " << temperature;
        }
    }
}

// --- the drawn distribution ---------------------------------------------------------------

TEST(Sampler, DrawsFollowSoftmaxAtTemperatureOne) {
    const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f, 2.5f, -2.0f};
    constexpr int kDraws = 20000;
    Sampler sampler(plain(1.0f, 2024));
    expect_matches(histogram(sampler, logits, kDraws), softmax(logits, 1.0), kDraws);
}

TEST(Sampler, DrawsFollowSoftmaxOfLogitsOverTemperature) {
    const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f};
    constexpr int kDraws = 20000;
    for (double temperature : {0.5, 2.0}) {
        Sampler sampler(plain(static_cast<float>(temperature), 77));
        expect_matches(histogram(sampler, logits, kDraws), softmax(logits, temperature), kDraws);
    }
}

TEST(Sampler, TopKDrawsFromTheRenormalizedBest) {
    const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f};
    SamplingParams params = plain(1.0f, 5);
    params.top_k = 3;  // tokens 4, 1, 0
    Sampler sampler(params);
    constexpr int kDraws = 20000;
    const std::vector<float> kept = {1.0f, 2.0f, -kInf, -kInf, 3.0f, -kInf};
    expect_matches(histogram(sampler, logits, kDraws), softmax(kept, 1.0), kDraws);
}

TEST(Sampler, TopPDrawsOnlyFromTheSmallestSetReachingP) {
    // Probabilities 0.5, 0.25, 0.15, 0.1 (ids 2, 0, 3, 1). p = 0.6 keeps ids 2 and 0.
    const std::vector<float> logits = {std::log(0.25f), std::log(0.1f), std::log(0.5f), std::log(0.15f)};
    SamplingParams params = plain(1.0f, 8);
    params.top_p = 0.6f;
    Sampler sampler(params);
    constexpr int kDraws = 6000;
    expect_matches(histogram(sampler, logits, kDraws), {1.0 / 3.0, 0.0, 2.0 / 3.0, 0.0}, kDraws);
}

TEST(Sampler, MinPDropsTokensBelowAShareOfTheBest) {
    // Probabilities 0.5, 0.25, 0.15, 0.1; min_p 0.25 drops those below 0.125: the 0.1.
    const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.1f), std::log(0.25f)};
    SamplingParams params = plain(1.0f, 9);
    params.min_p = 0.25f;
    Sampler sampler(params);
    constexpr int kDraws = 20000;
    expect_matches(histogram(sampler, logits, kDraws), {0.15 / 0.9, 0.5 / 0.9, 0.0, 0.25 / 0.9}, kDraws);
}

TEST(Sampler, TheFiltersComposeInLlamaCppOrder) {
    // Probabilities 0.4, 0.3, 0.2, 0.06, 0.04. top_k 4 keeps 0.4..0.06 (sum 0.96); top_p 0.7
    // over those needs 0.4/0.96 + 0.3/0.96 = 0.729: two; min_p 0.8 then drops 0.3 < 0.32.
    const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.06f),
                                       std::log(0.04f)};
    SamplingParams params = plain(1.0f, 10);
    params.top_k = 4;
    params.top_p = 0.7f;
    Sampler two(params);
    constexpr int kDraws = 5000;
    expect_matches(histogram(two, logits, kDraws), {4.0 / 7.0, 3.0 / 7.0, 0.0, 0.0, 0.0}, kDraws);
    params.min_p = 0.8f;
    Sampler one(params);
    expect_matches(histogram(one, logits, kDraws), {1.0, 0.0, 0.0, 0.0, 0.0}, kDraws);
}

TEST(Sampler, LargeVocabularyDrawsStayInTheTopPSet) {
    // 256k tokens, a peaked distribution: top-p without top-k sorts only a short prefix.
    std::mt19937_64 rng(12);
    std::normal_distribution<float> normal(0.0f, 4.0f);
    std::vector<float> logits(256000);
    for (float& l : logits) l = normal(rng);
    std::vector<size_t> order(logits.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
    const std::vector<double> p = softmax(logits, 1.0);
    std::set<TokenId> nucleus;
    double cumulative = 0.0;
    for (size_t i : order) {
        nucleus.insert(static_cast<TokenId>(i));
        cumulative += p[i];
        if (cumulative >= 0.9) break;
    }
    SamplingParams params = plain(1.0f, 13);
    params.top_p = 0.9f;
    Sampler sampler(params);
    for (int i = 0; i < 20; ++i) EXPECT_TRUE(nucleus.count(sample_copy(sampler, logits))) << "draw " << i;
}

// --- reproducibility ------------------------------------------------------------------------

std::vector<TokenId> sequence(Sampler& sampler, int length) {
    std::mt19937_64 logits_rng(555);  // the same logits for every call
    std::normal_distribution<float> normal(0.0f, 1.5f);
    std::vector<TokenId> out;
    for (int i = 0; i < length; ++i) {
        std::vector<float> logits(1000);
        for (float& l : logits) l = normal(logits_rng);
        out.push_back(sampler.sample(logits));
        sampler.accept(out.back());
    }
    return out;
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
    SamplingParams params;  // defaults: top-k 40, top-p 0.95, min-p 0.05, temperature 0.8
    params.temperature = 1.5f;
    params.repeat_penalty = 1.1f;
    params.seed = 42;
    Sampler a(params);
    Sampler b(params);
    const std::vector<TokenId> first = sequence(a, 200);
    EXPECT_EQ(sequence(b, 200), first);
    params.seed = 43;
    Sampler c(params);
    EXPECT_NE(sequence(c, 200), first);
    // reset() starts the same sequence again.
    a.reset();
    EXPECT_EQ(sequence(a, 200), first);
}

TEST(Sampler, TheRandomGeneratorIsTheDocumentedOne) {
    // Uniform over 4 tokens: token floor(4 u), u = top 53 bits of mt19937_64(seed) / 2^53.
    const uint64_t seed = 2718;
    std::mt19937_64 reference(seed);
    Sampler sampler(plain(1.0f, seed));
    for (int i = 0; i < 100; ++i) {
        const double u = static_cast<double>(reference() >> 11) * 0x1.0p-53;
        EXPECT_EQ(sample_copy(sampler, {0.0f, 0.0f, 0.0f, 0.0f}), static_cast<TokenId>(4.0 * u)) << "draw " << i;
    }
}

// --- penalties ------------------------------------------------------------------------------

TEST(Sampler, PenaltiesUseTheLastRepeatLastNTokens) {
    SamplingParams params = plain(0.0f);
    params.repeat_penalty = 2.0f;
    params.presence_penalty = 0.5f;
    params.frequency_penalty = 0.25f;
    params.repeat_last_n = 4;
    Sampler sampler(params);
    for (TokenId id : {3, 2, 0, 1, 1, 4}) sampler.accept(id);  // window: 0 1 1 4 (3 and 2 left it)
    std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
    sampler.apply_penalties(logits);
    EXPECT_FLOAT_EQ(logits[0], 2.0f / 2.0f - 0.25f - 0.5f);
    EXPECT_FLOAT_EQ(logits[1], -1.0f * 2.0f - 2 * 0.25f - 0.5f);
    EXPECT_FLOAT_EQ(logits[2], 0.5f);
    EXPECT_FLOAT_EQ(logits[3], 3.0f);
    EXPECT_FLOAT_EQ(logits[4], -0.25f - 0.5f);

    // The ring keeps sliding: after 7 and 0, the window is 1 4 7 0 (7 is outside this vocabulary).
    sampler.accept(7);
    sampler.accept(0);
    std::vector<float> again = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
    sampler.apply_penalties(again);
    EXPECT_FLOAT_EQ(again[0], 0.25f);
    EXPECT_FLOAT_EQ(again[1], -1.0f * 2.0f - 0.25f - 0.5f);
    EXPECT_FLOAT_EQ(again[4], -0.75f);

    sampler.reset();  // forgets the window
    std::vector<float> fresh = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
    sampler.apply_penalties(fresh);
    EXPECT_EQ(fresh, (std::vector<float>{2.0f, -1.0f, 0.5f, 3.0f, 0.0f}));
}

TEST(Sampler, PenaltiesChangeTheGreedyChoice) {
    SamplingParams params = plain(0.0f);
    params.repeat_penalty = 1.5f;
    Sampler sampler(params);
    const std::vector<float> logits = {2.9f, 3.0f, 1.0f};  // 3.0 / 1.5 = 2 < 2.9
    EXPECT_EQ(sample_copy(sampler, logits), 1);
    sampler.accept(1);
    EXPECT_EQ(sample_copy(sampler, logits), 0);
    sampler.accept(0);  // both penalized: 1.933 vs 2
    EXPECT_EQ(sample_copy(sampler, logits), 1);
}

// --- logit biases ---------------------------------------------------------------------------

TEST(Sampler, LogitBiasesComeBeforeThePenalties) {
    SamplingParams params = plain(0.0f);
    params.repeat_penalty = 2.0f;
    params.logit_bias = {{0, 2.0f}, {2, -0.5f}, {2, -0.25f}, {99, 5.0f}};  // 99: outside this vocabulary
    EXPECT_TRUE(params.validate().ok());
    Sampler sampler(params);
    EXPECT_FALSE(sampler.plain_greedy());  // the raw argmax is not the answer any more
    sampler.accept(0);
    std::vector<float> logits = {2.0f, 1.0f, 3.0f};
    sampler.apply_penalties(logits);
    EXPECT_FLOAT_EQ(logits[0], (2.0f + 2.0f) / 2.0f);  // biased, then penalized: not 2 / 2 + 2
    EXPECT_FLOAT_EQ(logits[1], 1.0f);
    EXPECT_FLOAT_EQ(logits[2], 3.0f - 0.75f);  // named twice: both biases
}

TEST(Sampler, ABiasOfMinusInfinityBansATokenAndPlusInfinityForcesIt) {
    const std::vector<float> logits = {1.0f, 4.0f, 2.0f, 3.0f};
    SamplingParams ban = plain(0.0f);
    ban.logit_bias = {{1, -kInf}};
    Sampler greedy(ban);
    EXPECT_EQ(sample_copy(greedy, logits), 3);
    ban.temperature = 5.0f;  // a hot draw, with no filter, never picks it either
    Sampler hot(ban);
    for (int i = 0; i < 200; ++i) EXPECT_NE(sample_copy(hot, logits), 1);
    SamplingParams force = plain(1.0f);
    force.logit_bias = {{0, kInf}};
    Sampler forced(force);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_copy(forced, logits), 0);
}

TEST(Sampler, ZeroWindowTurnsThePenaltiesOff) {
    SamplingParams params = plain(0.0f);
    params.repeat_penalty = 100.0f;
    params.frequency_penalty = 100.0f;
    params.repeat_last_n = 0;
    Sampler sampler(params);
    sampler.accept(1);
    EXPECT_EQ(sample_copy(sampler, {0.0f, 1.0f}), 1);
}

// --- non-finite logits ----------------------------------------------------------------------

TEST(Sampler, NanAndMinusInfinityAreNeverDrawn) {
    const std::vector<float> logits = {kNan, 0.0f, -kInf, 0.0f, kNan};
    for (float temperature : {0.0f, 1.0f}) {
        Sampler sampler(plain(temperature));
        const std::vector<int> counts = histogram(sampler, logits, 1000);
        EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
    }
    SamplingParams filtered;  // the default filters see no NaN either
    filtered.top_k = 2;
    Sampler sampler(filtered);
    const std::vector<int> counts = histogram(sampler, logits, 1000);
    EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
}

TEST(Sampler, PlusInfinityIsCertain) {
    for (float temperature : {0.0f, 0.7f}) {
        Sampler sampler(plain(temperature));
        EXPECT_EQ(sample_copy(sampler, {1.0f, kInf, 2.0f, kInf}), 1);
        EXPECT_EQ(sample_copy(sampler, {kNan, 3.0f, kInf}), 2);
    }
}

TEST(Sampler, NoUsableLogitGivesNoToken) {
    for (float temperature : {0.0f, 0.8f}) {
        Sampler sampler(plain(temperature));
        EXPECT_EQ(sample_copy(sampler, {}), kNoToken);
        EXPECT_EQ(sample_copy(sampler, {kNan, kNan, kNan}), kNoToken);
        EXPECT_EQ(sample_copy(sampler, {-kInf, kNan}), kNoToken);
        Sampler defaults{SamplingParams{}};
        EXPECT_EQ(sample_copy(defaults, {-kInf, -kInf}), kNoToken);
    }
}

TEST(Sampler, ExtremeLogitsAndTemperaturesStayFinite) {
    const std::vector<float> logits = {3e38f, -3e38f, 3e38f, 0.0f};
    for (float temperature : {1e-30f, 1.0f, 1e30f}) {
        Sampler sampler(plain(temperature, 4));
        for (int i = 0; i < 50; ++i) {
            const TokenId id = sample_copy(sampler, logits);
            if (temperature < 1.0f) {
                EXPECT_TRUE(id == 0 || id == 2);
            } else {
                EXPECT_TRUE(id >= 0 && id < 4);
            }
        }
    }
}

}  // namespace
}  // namespace powerhouse
