// Speculative decoding by prompt lookup (GenerationSettings::lookup): the guesses are the
// tokens that followed the latest earlier run of the conversation's last tokens, and an answer
// written with them is the answer written without, token for token, text, stop reason and
// log-probabilities: greedy or sampled with a seed and penalties, under a grammar, with stop
// strings, at the token and context limits, many requests at once and through pauses for
// lack of KV blocks. It takes fewer steps where the answer repeats what came before.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "powerhouse/generation.h"
#include "powerhouse/grammar.h"
#include "powerhouse/model.h"
#include "powerhouse/scheduler.h"
#include "powerhouse/synth.h"
#include "runtime/lookup_draft.h"
#include "support/test_support.h"

namespace powerhouse {
namespace lookup_decoding_test {
namespace {

std::vector<TokenId> draft(const std::vector<TokenId>& prompt, const std::vector<TokenId>& answer, uint32_t limit,
                           uint32_t min_match = 2, uint32_t max_match = 4) {
    LookupSettings s;
    s.max_draft = limit;
    s.min_match = min_match;
    s.max_match = max_match;
    return lookup_draft(prompt, answer, s, limit);
}

TEST(LookupDraft, GuessesWhatFollowedTheLatestLongestRunOfTheLastTokens) {
    // "1 2 3" appeared twice, followed by 9 then by 4 5; the latest wins.
    EXPECT_EQ(draft({1, 2, 3, 9, 9, 1, 2, 3, 4, 5, 6}, {7, 1, 2, 3}, 3), (std::vector<TokenId>{4, 5, 6}));
    // A longer run beats a later shorter one: "8 2 3" once (then 11), "2 3" later (then 12).
    EXPECT_EQ(draft({8, 2, 3, 11, 0, 2, 3, 12}, {8, 2, 3}, 1), (std::vector<TokenId>{11}));
    // The guess may run on into the answer itself, and stops at the limit.
    EXPECT_EQ(draft({5, 6}, {5, 6, 5, 6}, 8), (std::vector<TokenId>{5, 6}));
    EXPECT_EQ(draft({1, 2, 3, 4, 5, 6, 7}, {1, 2}, 2), (std::vector<TokenId>{3, 4}));
}

TEST(LookupDraft, GuessesNothingWithoutARunLongEnough) {
    EXPECT_TRUE(draft({1, 2, 3, 4}, {5, 6}, 4).empty()) << "never seen";
    EXPECT_TRUE(draft({1, 2, 9, 3}, {7, 3}, 4).empty()) << "only the last token seen; two asked";
    EXPECT_EQ(draft({1, 2, 9, 3}, {7, 3}, 4, 1), (std::vector<TokenId>{7, 3})) << "one token is enough when asked";
    EXPECT_EQ(draft({1, 9, 3, 8}, {7, 3}, 4, 1), (std::vector<TokenId>{8, 7, 3}));
    EXPECT_TRUE(draft({1, 2, 1, 2}, {1, 2}, 0).empty()) << "limit 0";
    EXPECT_TRUE(draft({}, {1}, 4, 1).empty()) << "one token has nothing before it";
}

TEST(LookupDraft, APredictionIsLookedUpFirstWhereTheAnswerHasGotTo) {
    LookupSettings s;
    s.max_draft = 3;
    s.prediction = {10, 1, 2, 30, 40, 1, 2, 50, 60};
    // "1 2" twice in the prediction: the place nearest the answer's length wins.
    EXPECT_EQ(lookup_draft(std::vector<TokenId>{7, 7}, std::vector<TokenId>{10, 1, 2}, s, 3),
              (std::vector<TokenId>{30, 40, 1}));
    EXPECT_EQ(lookup_draft(std::vector<TokenId>{7, 7}, std::vector<TokenId>{10, 1, 2, 30, 40, 1, 2}, s, 3),
              (std::vector<TokenId>{50, 60}));
    // Before the conversation, even where the conversation has a longer run.
    EXPECT_EQ(lookup_draft(std::vector<TokenId>{5, 1, 2, 8}, std::vector<TokenId>{5, 1, 2}, s, 1),
              (std::vector<TokenId>{30}));
    // Nothing in the prediction: the conversation.
    EXPECT_EQ(lookup_draft(std::vector<TokenId>{5, 3, 4, 8}, std::vector<TokenId>{3, 4}, s, 2),
              (std::vector<TokenId>{8, 3}));
}

Model load_smollm2(uint32_t max_sequences, uint32_t n_ctx = 512, uint32_t kv_tokens = 0, uint32_t block = 32) {
    ModelOptions o;
    o.n_ctx = n_ctx;
    o.n_threads = 2;
    o.n_batch = 64;
    o.max_sequences = max_sequences;
    o.kv_cache_tokens = kv_tokens;
    o.kv_block_size = block;
    Result<Model> m = Model::load(test::test_model_path(), o);
    if (!m) ADD_FAILURE() << m.error().message;
    return std::move(m).value();
}

struct Ask {
    std::vector<TokenId> prompt;
    GenerationSettings settings;
};

struct Ran {
    std::vector<GenerationResult> results;
    SchedulerStats stats;
};

// Every request through one scheduler, `max_sequences` at a time; the streamed text must be
// the answer. Guesses are made as asked (GuessPolicy::always) unless `costs` are given:
// these tests count them, and whether they pay on this machine is guess_policy_test's.
Ran run(Model& model, const std::vector<Ask>& asks, uint32_t max_sequences,
        std::optional<GuessCosts> costs = std::nullopt) {
    SchedulerOptions so;
    so.max_sequences = max_sequences;
    so.guesses = costs ? GuessPolicy::when_they_pay : GuessPolicy::always;
    so.guess_costs = std::move(costs);
    Scheduler scheduler(model, so);
    Ran out;
    out.results.resize(asks.size());
    std::map<uint64_t, std::string> streamed;
    for (size_t i = 0; i < asks.size(); ++i) {
        const Result<void> ok = scheduler.submit(
            i, asks[i].prompt, asks[i].settings,
            [&](uint64_t id, std::string_view t, std::span<const TokenLogprob>) { streamed[id] += t; },
            [&](uint64_t id, Result<GenerationResult> r) {
                if (!r) {
                    ADD_FAILURE() << "request " << id << ": " << r.error().message;
                    return;
                }
                out.results[id] = std::move(r).value();
            });
        EXPECT_TRUE(ok) << ok.error().message;
    }
    const Result<void> ran = scheduler.run();
    EXPECT_TRUE(ran) << ran.error().message;
    for (size_t i = 0; i < asks.size(); ++i) EXPECT_EQ(streamed[i], out.results[i].text) << "request " << i;
    out.stats = scheduler.stats();
    return out;
}

void expect_same_answers(const Ran& plain, const Ran& guessing) {
    ASSERT_EQ(plain.results.size(), guessing.results.size());
    for (size_t i = 0; i < plain.results.size(); ++i) {
        SCOPED_TRACE(testing::Message() << "request " << i);
        const GenerationResult& a = plain.results[i];
        const GenerationResult& b = guessing.results[i];
        EXPECT_EQ(b.ids, a.ids);
        EXPECT_EQ(b.text, a.text);
        EXPECT_EQ(b.stats.stop_reason, a.stats.stop_reason);
        EXPECT_EQ(b.stats.generated_tokens, a.stats.generated_tokens);
        ASSERT_EQ(b.logprobs.size(), a.logprobs.size());
        for (size_t t = 0; t < a.logprobs.size(); ++t) {
            EXPECT_EQ(b.logprobs[t].chosen.id, a.logprobs[t].chosen.id) << "token " << t;
            EXPECT_EQ(b.logprobs[t].chosen.logprob, a.logprobs[t].chosen.logprob) << "token " << t;
            ASSERT_EQ(b.logprobs[t].top.size(), a.logprobs[t].top.size()) << "token " << t;
            for (size_t k = 0; k < a.logprobs[t].top.size(); ++k) {
                EXPECT_EQ(b.logprobs[t].top[k].id, a.logprobs[t].top[k].id) << "token " << t;
            }
        }
    }
}

std::vector<Ask> with_lookup(std::vector<Ask> asks, uint32_t max_draft) {
    for (Ask& a : asks) a.settings.lookup.max_draft = max_draft;
    return asks;
}

// A passage the answer goes on to repeat, so that guesses come true; and prompts of other
// kinds, where few do.
const char* kPassage =
    "Instructions for the night shift. Check the pressure gauge on tank four every hour, write the reading "
    "in the log book, and call the supervisor if it rises above eighty. Lock the east door at ten.\n"
    "Repeat the instructions word for word.\n"
    "Instructions for the night shift. Check the";

std::vector<Ask> varied_asks(const Model& model, size_t n) {
    const std::vector<std::string> texts = {
        kPassage,
        "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n",
        "The quick brown fox",
        "1, 2, 3, 4, 5, 6, 7, 8,",
    };
    std::vector<Ask> out;
    for (size_t i = 0; i < n; ++i) {
        Ask a;
        a.prompt = raw_prompt(model, texts[i % texts.size()]);
        a.settings.max_tokens = 40 + static_cast<int32_t>(i % 3) * 7;
        a.settings.ignore_eos = true;
        a.settings.sampling.temperature = 0;
        out.push_back(std::move(a));
    }
    return out;
}

TEST(LookupDecoding, AGreedyAnswerIsTheSameInFewerSteps) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    Model model = load_smollm2(1);
    const std::vector<Ask> asks = varied_asks(model, 1);
    const Ran plain = run(model, asks, 1);
    const Ran guessing = run(model, with_lookup(asks, 8), 1);
    expect_same_answers(plain, guessing);
    const GenerationStats& st = guessing.results[0].stats;
    EXPECT_GT(st.drafted_tokens, 0u);
    EXPECT_GT(st.accepted_tokens, 10u) << "the answer repeats the passage";
    EXPECT_LT(st.accepted_tokens, st.drafted_tokens) << "some guesses failed, and their rows were dropped";
    EXPECT_EQ(guessing.stats.accepted_tokens, st.accepted_tokens);
    EXPECT_EQ(guessing.stats.drafted_tokens, st.drafted_tokens);
    // Each accepted guess saved a step.
    EXPECT_EQ(guessing.stats.steps + st.accepted_tokens, plain.stats.steps);
    EXPECT_EQ(plain.results[0].stats.drafted_tokens, 0u) << "off unless asked";
}

TEST(LookupDecoding, SampledConstrainedAndStoppedAnswersAreTheSame) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    Model model = load_smollm2(4);
    std::vector<Ask> asks = varied_asks(model, 4);
    // Sampling with a seed and penalties, the seed's draws taken in the same order.
    asks[0].settings.sampling.temperature = 0.7f;
    asks[0].settings.sampling.top_k = 20;
    asks[0].settings.sampling.repeat_penalty = 1.05f;
    asks[0].settings.sampling.seed = 7;
    asks[0].settings.logprobs = true;
    asks[0].settings.top_logprobs = 3;
    // A grammar that lets the model copy the code's shape.
    Result<Grammar> g =
        Grammar::parse(R"(root ::= "    return a * b\n" ("def " [a-z]+ "(a, b):\n    return a " [-+*/] " b\n\n")+)");
    ASSERT_TRUE(g) << g.error().message;
    asks[1].settings.grammar = *g;
    // A stop string that a guess runs past.
    asks[2].settings.stop = {"the"};
    asks[3].settings.logprobs = true;
    const Ran plain = run(model, asks, 1);
    const Ran guessing = run(model, with_lookup(asks, 6), 4);
    expect_same_answers(plain, guessing);
    EXPECT_GT(guessing.results[0].stats.accepted_tokens, 0u) << "sampling at 0.7 still copies the passage";
    EXPECT_GT(guessing.results[1].stats.accepted_tokens, 0u) << "the grammar's answer repeats itself";
    EXPECT_GT(guessing.results[3].stats.accepted_tokens, 0u) << "the count goes on";
}

TEST(LookupDecoding, GuessesStopAtTheTokenAndContextLimits) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    // A context the passage nearly fills: the answer ends at the context's end either way.
    Model model = load_smollm2(1, 96);
    std::vector<Ask> asks = varied_asks(model, 1);
    asks[0].settings.max_tokens = 200;
    ASSERT_LT(asks[0].prompt.size() + 10, 96u);
    Ran plain = run(model, asks, 1);
    Ran guessing = run(model, with_lookup(asks, 16), 1);
    expect_same_answers(plain, guessing);
    EXPECT_EQ(guessing.results[0].stats.stop_reason, StopReason::context);
    EXPECT_GT(guessing.results[0].stats.accepted_tokens, 0u);
    // And at max_tokens, exactly.
    asks[0].settings.max_tokens = 13;
    plain = run(model, asks, 1);
    guessing = run(model, with_lookup(asks, 16), 1);
    expect_same_answers(plain, guessing);
    EXPECT_EQ(guessing.results[0].ids.size(), 13u);
    EXPECT_EQ(guessing.results[0].stats.stop_reason, StopReason::length);
}

TEST(LookupDecoding, RequestsPausedForLackOfBlocksGiveTheSameAnswers) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    // Six blocks of 16 for four requests of up to 90 positions.
    Model model = load_smollm2(4, 512, 96 + 64, 16);
    std::vector<Ask> asks = varied_asks(model, 4);
    for (Ask& a : asks) a.settings.max_tokens = 24;
    const Ran plain = run(model, asks, 1);
    const Ran guessing = run(model, with_lookup(asks, 8), 4);
    expect_same_answers(plain, guessing);
    EXPECT_GT(guessing.stats.pauses, 0u) << "the pool was too small for all at once";
    EXPECT_GT(guessing.stats.accepted_tokens, 0u);
}

TEST(LookupDecoding, AConversationGoesOnFromTheCacheAsFromAFreshModel) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    // The first answer, written with guesses the model turned down, is cached when it ends;
    // the next request goes on from it, and answers as it does from a fresh model.
    Model model = load_smollm2(1);
    std::vector<Ask> first = with_lookup(varied_asks(model, 1), 8);
    first[0].settings.max_tokens = 30;
    const Ran one = run(model, first, 1);
    ASSERT_GT(one.results[0].stats.drafted_tokens, one.results[0].stats.accepted_tokens);
    Ask next;
    next.prompt = first[0].prompt;
    next.prompt.insert(next.prompt.end(), one.results[0].ids.begin(), one.results[0].ids.end());
    const std::vector<TokenId> more = raw_prompt(model, " Then", false);
    next.prompt.insert(next.prompt.end(), more.begin(), more.end());
    next.settings = first[0].settings;
    next.settings.max_tokens = 12;
    const Ran reused = run(model, {next}, 1);
    EXPECT_GE(reused.results[0].stats.reused_tokens, first[0].prompt.size() + one.results[0].ids.size() - 1);

    Model fresh = load_smollm2(1);
    const Ran alone = run(fresh, {next}, 1);
    EXPECT_EQ(alone.results[0].stats.reused_tokens, 0u);
    EXPECT_EQ(reused.results[0].ids, alone.results[0].ids);
}

// A draft model (Scheduler::set_draft): the target's own twin guesses every greedy token
// right; one with random weights and the same vocabulary size guesses nearly all wrong; the
// answers are the target's alone either way, sampled too, several requests at once.
std::vector<Ask> with_draft(std::vector<Ask> asks, uint32_t tokens) {
    for (Ask& a : asks) a.settings.draft_tokens = tokens;
    return asks;
}

Ran run_with_draft(Model& model, Model& draft, const std::vector<Ask>& asks, uint32_t max_sequences,
                   std::optional<GuessCosts> costs = std::nullopt) {
    SchedulerOptions so;
    so.max_sequences = max_sequences;
    so.guesses = costs ? GuessPolicy::when_they_pay : GuessPolicy::always;
    so.guess_costs = std::move(costs);
    Scheduler scheduler(model, so);
    scheduler.set_draft(&draft, 0);
    Ran out;
    out.results.resize(asks.size());
    for (size_t i = 0; i < asks.size(); ++i) {
        EXPECT_TRUE(
            scheduler.submit(i, asks[i].prompt, asks[i].settings, {}, [&](uint64_t id, Result<GenerationResult> r) {
                if (!r) {
                    ADD_FAILURE() << "request " << id << ": " << r.error().message;
                    return;
                }
                out.results[id] = std::move(r).value();
            }));
    }
    const Result<void> ran = scheduler.run();
    EXPECT_TRUE(ran) << ran.error().message;
    out.stats = scheduler.stats();
    EXPECT_EQ(draft.kv_stats().sequences, 0u) << "every draft sequence closed";
    return out;
}

TEST(DraftModel, ItsTwinGuessesEveryGreedyTokenAndTheAnswersStayTheTargets) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    Model model = load_smollm2(4);
    Model twin = load_smollm2(4);
    std::vector<Ask> asks = varied_asks(model, 3);
    asks[2].settings.sampling.temperature = 0.8f;  // sampled: the twin's argmax is sometimes not drawn
    asks[2].settings.sampling.seed = 11;
    const Ran plain = run(model, asks, 1);
    const Ran guessing = run_with_draft(model, twin, with_draft(asks, 5), 3);
    expect_same_answers(plain, guessing);
    for (size_t i = 0; i < 2; ++i) {
        const GenerationStats& st = guessing.results[i].stats;
        EXPECT_GT(st.drafted_tokens, 20u) << i;
        EXPECT_EQ(st.accepted_tokens, st.drafted_tokens) << i << ": the same model's argmax";
    }
    EXPECT_LT(guessing.results[2].stats.accepted_tokens, guessing.results[2].stats.drafted_tokens);
    EXPECT_LT(guessing.stats.steps, plain.stats.steps / 2);
}

TEST(DraftModel, ARandomDraftGuessesWrongAndChangesNothing) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    test::TempDir dir;
    SynthOptions so;
    so.preset = "smollm2-135m";  // SmolLM2's vocabulary size, random weights
    so.type = "q8_0";
    so.n_layer = 2;
    so.n_ctx = 512;
    so.output = dir / "draft.gguf";
    const Result<SynthResult> written = synthesize_model(so);
    ASSERT_TRUE(written) << written.error().message;
    Model model = load_smollm2(2);
    ModelOptions o;
    o.n_ctx = 512;
    o.n_threads = 2;
    o.max_sequences = 2;
    Result<Model> draft = Model::load(so.output, o);
    ASSERT_TRUE(draft) << draft.error().message;
    std::vector<Ask> asks = varied_asks(model, 2);
    asks[1].settings.sampling.temperature = 0.7f;
    asks[1].settings.sampling.seed = 5;
    const Ran plain = run(model, asks, 1);
    const Ran guessing = run_with_draft(model, *draft, with_draft(asks, 4), 2);
    expect_same_answers(plain, guessing);
    for (const GenerationResult& r : guessing.results) {
        EXPECT_GT(r.stats.drafted_tokens, 20u);
        EXPECT_LT(r.stats.accepted_tokens * 4, r.stats.drafted_tokens) << "a random model guesses wrong";
        // After a miss, one guess a step (each kept one doubles it): not the 4 asked for.
        EXPECT_LT(r.stats.drafted_tokens, r.stats.generated_tokens + 8) << "misses make fewer guesses";
    }
}

// After a guess the model turned down, the draft's cache must go on from the model's own
// token: the twin then keeps guessing the model's most likely token, which sampling at 0.8
// draws about half the time. A cache left with the turned-down guesses guesses from the
// wrong text: 62 of 532 guesses kept in the run that checked it, against 120 of 266.
TEST(DraftModel, AfterATurnedDownGuessTheDraftGoesOnFromTheModelsToken) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    Model model = load_smollm2(4);
    Model twin = load_smollm2(4);
    std::vector<Ask> asks = varied_asks(model, 4);
    for (Ask& a : asks) {
        a.settings.sampling.temperature = 0.8f;
        a.settings.sampling.seed = 11;
    }
    const Ran plain = run(model, asks, 1);
    const Ran guessing = run_with_draft(model, twin, with_draft(asks, 5), 4);
    expect_same_answers(plain, guessing);
    EXPECT_LT(guessing.stats.accepted_tokens, guessing.stats.drafted_tokens) << "some were turned down";
    EXPECT_GT(guessing.stats.accepted_tokens * 4, guessing.stats.drafted_tokens)
        << guessing.stats.accepted_tokens << " of " << guessing.stats.drafted_tokens << " kept";
}

// Whether guesses pay (SchedulerOptions::guesses), under costs given rather than timed so
// that the counts do not depend on this machine: a step of more rows may cost nearly
// nothing more (a GPU reading its weights once), or each row a whole step (guesses can
// never pay). The answers stay the model's either way.
GuessCosts rows_cost(double per_row) {
    return GuessCosts{[per_row](uint32_t rows) { return 1.0 + per_row * (rows - 1); }, 0.0};
}

TEST(GuessPolicy, RowsThatCostAWholeStepEachAreNotGuessedButForProbes) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    Model model = load_smollm2(2);
    Model twin = load_smollm2(2);
    std::vector<Ask> asks = varied_asks(model, 2);
    const Ran plain = run(model, asks, 1);
    const Ran free_rows = run_with_draft(model, twin, with_draft(asks, 4), 2, rows_cost(0.01));
    const Ran dear_rows = run_with_draft(model, twin, with_draft(asks, 4), 2, rows_cost(1.0));
    expect_same_answers(plain, free_rows);
    expect_same_answers(plain, dear_rows);
    for (size_t i = 0; i < asks.size(); ++i) {
        SCOPED_TRACE(testing::Message() << "request " << i);
        const GenerationStats& cheap = free_rows.results[i].stats;
        const GenerationStats& dear = dear_rows.results[i].stats;
        EXPECT_GT(cheap.drafted_tokens, cheap.generated_tokens / 2) << "the twin's guesses hold: made";
        // The first 4 guesses, to learn how they fare, then one every 16 steps it could have
        // guessed in, to notice guesses that begin to pay.
        EXPECT_GT(dear.drafted_tokens, 4u);
        EXPECT_LE(dear.drafted_tokens, 4 + dear.generated_tokens / 16 + 1) << "a row as dear as a step never pays";
        EXPECT_EQ(dear.accepted_tokens, dear.drafted_tokens);
    }
}

TEST(GuessPolicy, OnCpuLikeCostsGuessesThatHoldAreMadeAndThoseThatFailStop) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    test::TempDir dir;
    SynthOptions so;
    so.preset = "smollm2-135m";  // SmolLM2's vocabulary size, random weights
    so.type = "q8_0";
    so.n_layer = 2;
    so.n_ctx = 512;
    so.output = dir / "draft.gguf";
    ASSERT_TRUE(synthesize_model(so));
    Model model = load_smollm2(1);
    ModelOptions o;
    o.n_ctx = 512;
    o.n_threads = 2;
    Result<Model> random = Model::load(so.output, o);
    ASSERT_TRUE(random) << random.error().message;
    std::vector<Ask> asks = varied_asks(model, 1);  // an answer that repeats the passage
    asks[0].settings.max_tokens = 64;
    const GuessCosts cpu = rows_cost(0.35);  // as timed for SmolLM2 on 2 threads
    const Ran plain = run(model, asks, 1);
    const Ran lookup = run(model, with_lookup(asks, 8), 1, cpu);
    const Ran drafted = run_with_draft(model, *random, with_draft(asks, 4), 1, cpu);
    expect_same_answers(plain, lookup);
    expect_same_answers(plain, drafted);
    const GenerationStats& held = lookup.results[0].stats;
    EXPECT_GT(held.accepted_tokens, 20u) << "the passage's guesses hold, and pay";
    EXPECT_GT(held.accepted_tokens * 2, held.drafted_tokens);
    const GenerationStats& failed = drafted.results[0].stats;
    EXPECT_LT(failed.drafted_tokens, 12u) << "a random draft's misses stop it: " << failed.drafted_tokens;
    // The same draft when rows are free guesses on (the first test's GuessPolicy::always is
    // the same but for the cost of its misses).
    const Ran gpu = run_with_draft(model, *random, with_draft(asks, 4), 1, rows_cost(0.001));
    expect_same_answers(plain, gpu);
    EXPECT_GT(gpu.results[0].stats.drafted_tokens, 40u);
}

TEST(GuessPolicy, TimedOnThisMachineTheAnswersAreTheSame) {
    if (!std::filesystem::exists(test::test_model_path())) GTEST_SKIP() << "no test model";
    Model model = load_smollm2(2);
    std::vector<Ask> asks = varied_asks(model, 2);
    const Ran plain = run(model, asks, 1);
    SchedulerOptions so;
    so.max_sequences = 2;  // GuessPolicy::when_they_pay, timed: the counts are this machine's
    Scheduler scheduler(model, so);
    std::vector<GenerationResult> got(asks.size());
    const std::vector<Ask> guessing = with_lookup(asks, 6);
    for (size_t i = 0; i < guessing.size(); ++i) {
        ASSERT_TRUE(scheduler.submit(i, guessing[i].prompt, guessing[i].settings, {},
                                     [&](uint64_t id, Result<GenerationResult> r) {
                                         ASSERT_TRUE(r) << r.error().message;
                                         got[id] = std::move(r).value();
                                     }));
    }
    ASSERT_TRUE(scheduler.run());
    expect_same_answers(plain, Ran{got, scheduler.stats()});
}

}  // namespace
}  // namespace lookup_decoding_test
}  // namespace powerhouse
