// Log-probabilities of generated tokens (GenerationSettings::logprobs, used by the API
// server's `logprobs` / `top_logprobs`): each is the log-softmax of the model's logits at
// that place, computed here again from Model::decode in double precision; the likeliest
// alternatives come sorted; asking for them changes no token; they are streamed with the
// text they belong to.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "powerhouse/generation.h"
#include "powerhouse/model.h"
#include "powerhouse/scheduler.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

Model load_smollm2() {
    ModelOptions o;
    o.n_ctx = 256;
    o.n_threads = 2;
    o.max_sequences = 2;
    Result<Model> m = Model::load(test::test_model_path(), o);
    if (!m) ADD_FAILURE() << m.error().message;
    return std::move(m).value();
}

// log-softmax of `logits` at `id`, in double.
double log_softmax_at(std::span<const float> logits, TokenId id) {
    double max = -INFINITY;
    for (float v : logits) max = std::max(max, static_cast<double>(v));
    double sum = 0;
    for (float v : logits) sum += std::exp(static_cast<double>(v) - max);
    return static_cast<double>(logits[static_cast<size_t>(id)]) - max - std::log(sum);
}

TEST(Logprobs, AreTheLogSoftmaxOfTheModelsLogitsAndChangeNoToken) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    Model model = load_smollm2();
    const std::vector<TokenId> prompt = raw_prompt(model, "The three primary colours are");
    GenerationSettings plain;
    plain.max_tokens = 12;
    plain.ignore_eos = true;
    plain.sampling.temperature = 0;
    Result<GenerationResult> without = generate(model, prompt, plain);
    ASSERT_TRUE(without) << without.error().message;

    GenerationSettings with = plain;
    with.logprobs = true;
    with.top_logprobs = 5;
    std::string streamed;
    size_t streamed_logprobs = 0;
    Scheduler scheduler(model);
    std::optional<Result<GenerationResult>> done;
    ASSERT_TRUE(scheduler.submit(
        1, prompt, with,
        [&](uint64_t, std::string_view text, std::span<const TokenLogprob> lp) {
            streamed += text;
            streamed_logprobs += lp.size();
        },
        [&](uint64_t, Result<GenerationResult> r) { done = std::move(r); }));
    ASSERT_TRUE(scheduler.run());
    ASSERT_TRUE(done && *done) << (done ? done->error().message : "no answer");
    const GenerationResult& r = **done;
    EXPECT_EQ(r.ids, without->ids) << "asking for logprobs changes no token";
    EXPECT_EQ(r.text, streamed);
    ASSERT_EQ(r.logprobs.size(), r.ids.size());
    EXPECT_EQ(streamed_logprobs, r.logprobs.size()) << "every token's logprobs are streamed with its text";

    // The same positions again, one token at a time, from an empty cache.
    model.truncate(0);
    Result<std::span<const float>> logits = model.decode(prompt);
    for (size_t i = 0; i < r.ids.size(); ++i) {
        ASSERT_TRUE(logits) << logits.error().message;
        const TokenLogprob& lp = r.logprobs[i];
        EXPECT_EQ(lp.chosen.id, r.ids[i]);
        EXPECT_EQ(lp.chosen.bytes, model.tokenizer().token_piece(r.ids[i], true));
        EXPECT_NEAR(lp.chosen.logprob, log_softmax_at(*logits, r.ids[i]), 2e-3) << "token " << i;
        ASSERT_EQ(lp.top.size(), 5u);
        EXPECT_EQ(lp.top[0].id, r.ids[i]) << "greedy: the chosen token is the likeliest";
        for (size_t k = 0; k < lp.top.size(); ++k) {
            EXPECT_NEAR(lp.top[k].logprob, log_softmax_at(*logits, lp.top[k].id), 2e-3);
            if (k > 0) {
                EXPECT_GE(lp.top[k - 1].logprob, lp.top[k].logprob) << "sorted, likeliest first";
            }
        }
        // Nothing outside the top 5 is likelier than the fifth.
        const std::vector<float> all(logits->begin(), logits->end());
        const float fifth = all[static_cast<size_t>(lp.top[4].id)];
        const auto likelier = std::count_if(all.begin(), all.end(), [&](float v) { return v > fifth; });
        EXPECT_LE(likelier, 4);
        const TokenId next = r.ids[i];
        logits = model.decode(std::span<const TokenId>(&next, 1));
    }
}

TEST(Logprobs, TopLogprobsOutOfRangeAreRefused) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    Model model = load_smollm2();
    Scheduler scheduler(model);
    GenerationSettings s;
    s.logprobs = true;
    s.top_logprobs = 21;
    const Result<void> r = scheduler.submit(1, raw_prompt(model, "Hi"), s, {}, {});
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("top_logprobs"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace powerhouse
