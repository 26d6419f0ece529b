// Continuous batching (powerhouse/scheduler.h, issue 18): requests run together give the
// tokens they give alone, bit for bit on the CPU, with 1 to 16 at once, mixed prompt
// lengths, sampling with seeds, cancels, pauses for lack of KV blocks, layer and tensor
// splits, a Q8_0 cache and a mixture of experts; the prompt cache reuses a conversation's
// history when the user goes back to it; a shared system prompt shares its blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "powerhouse/generation.h"
#include "powerhouse/model.h"
#include "powerhouse/scheduler.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

ModelOptions options_for(uint32_t max_sequences, uint32_t n_ctx = 512) {
    ModelOptions o;
    o.n_ctx = n_ctx;
    o.n_threads = 2;
    o.n_batch = 32;
    o.max_sequences = max_sequences;
    return o;
}

Model load_model(const std::filesystem::path& path, const ModelOptions& options) {
    Result<Model> m = Model::load(path, options);
    if (!m) ADD_FAILURE() << m.error().message;
    return std::move(m).value();
}

struct Ask {
    std::vector<TokenId> prompt;
    GenerationSettings settings;
};

// Requests of mixed prompt lengths and answer lengths; every third samples with its own seed.
std::vector<Ask> mixed_requests(const Model& model, size_t n) {
    const std::vector<std::string> texts = {
        "The quick brown fox",
        "Once upon a time, in a land far away, there lived a king who had three daughters.",
        "def fibonacci(n):",
        "List the planets of the solar system in order from the sun:",
        "Q: What is the capital of France?\nA:",
        "In 1969, the first humans",
        "Water boils at",
        "The most important thing about writing software that lasts is",
    };
    std::vector<Ask> out;
    for (size_t i = 0; i < n; ++i) {
        Ask a;
        a.prompt = raw_prompt(model, texts[i % texts.size()] + std::string(i / texts.size(), '!'));
        a.settings.max_tokens = 6 + static_cast<int32_t>((i * 5) % 13);
        a.settings.ignore_eos = true;
        if (i % 3 == 2) {
            a.settings.sampling.temperature = 0.8f;
            a.settings.sampling.top_k = 40;
            a.settings.sampling.seed = 1000 + i;
        } else {
            a.settings.sampling.temperature = 0;
        }
        out.push_back(std::move(a));
    }
    return out;
}

struct Outcome {
    std::vector<TokenId> ids;
    std::string text;
    StopReason reason = StopReason::length;
    uint32_t reused = 0;
    std::string error;
};

// Each request alone: one at a time through generate(), from an empty cache.
std::vector<Outcome> run_alone(Model& model, const std::vector<Ask>& asks) {
    std::vector<Outcome> out;
    for (const Ask& a : asks) {
        Result<GenerationResult> r = generate(model, a.prompt, a.settings);
        Outcome o;
        if (r) {
            o.ids = r->ids;
            o.text = r->text;
            o.reason = r->stats.stop_reason;
        } else {
            o.error = r.error().message;
        }
        out.push_back(std::move(o));
    }
    return out;
}

// All at once through one scheduler; `each_step` runs after every step.
std::vector<Outcome> run_together(Model& model, const std::vector<Ask>& asks, uint32_t max_sequences,
                                  const std::function<void(Scheduler&, uint64_t step)>& each_step = {},
                                  SchedulerStats* final_stats = nullptr) {
    SchedulerOptions so;
    so.max_sequences = max_sequences;
    Scheduler scheduler(model, so);
    std::vector<Outcome> out(asks.size());
    std::map<uint64_t, std::string> streamed;
    for (size_t i = 0; i < asks.size(); ++i) {
        Result<void> ok = scheduler.submit(
            i, asks[i].prompt, asks[i].settings, [&](uint64_t id, std::string_view t, std::span<const TokenLogprob>) { streamed[id] += t; },
            [&](uint64_t id, Result<GenerationResult> r) {
                Outcome& o = out[id];
                if (!r) {
                    o.error = r.error().message;
                    return;
                }
                o.ids = r->ids;
                o.text = r->text;
                o.reason = r->stats.stop_reason;
                o.reused = r->stats.reused_tokens;
            });
        EXPECT_TRUE(ok) << ok.error().message;
    }
    uint64_t steps = 0;
    while (!scheduler.idle()) {
        Result<void> r = scheduler.step();
        EXPECT_TRUE(r) << r.error().message;
        if (!r) break;
        if (each_step) each_step(scheduler, ++steps);
        if (steps > 100000) {
            ADD_FAILURE() << "the scheduler does not finish";
            break;
        }
    }
    for (size_t i = 0; i < out.size(); ++i) {
        EXPECT_EQ(streamed[i], out[i].text) << "request " << i << ": the streamed text is the answer";
    }
    if (final_stats != nullptr) *final_stats = scheduler.stats();
    return out;
}

void expect_same(const std::vector<Outcome>& alone, const std::vector<Outcome>& together) {
    ASSERT_EQ(alone.size(), together.size());
    for (size_t i = 0; i < alone.size(); ++i) {
        EXPECT_EQ(alone[i].error, "") << "request " << i;
        EXPECT_EQ(together[i].error, "") << "request " << i;
        EXPECT_EQ(together[i].ids, alone[i].ids) << "request " << i;
        EXPECT_EQ(together[i].text, alone[i].text) << "request " << i;
        EXPECT_EQ(together[i].reason, alone[i].reason) << "request " << i;
    }
}

TEST(Scheduler, BatchedRequestsGiveTheTokensTheyGiveAlone) {
    ModelOptions o = options_for(16);
    o.kv_cache_tokens = 16 * 64;  // room for all sixteen at once
    Model model = load_model(test::test_model_path(), o);
    const std::vector<Ask> asks = mixed_requests(model, 16);
    const std::vector<Outcome> alone = run_alone(model, asks);
    for (uint32_t concurrent : {1u, 4u, 16u}) {
        SCOPED_TRACE(testing::Message() << concurrent << " at once");
        uint32_t most = 0;
        const std::vector<Outcome> together = run_together(model, asks, concurrent, [&](Scheduler& s, uint64_t) {
            most = std::max(most, s.stats().running);
        });
        expect_same(alone, together);
        EXPECT_EQ(most, concurrent) << "as many ran at once as allowed";
    }
}

TEST(Scheduler, CancelledRequestsEndAndTheOthersAreUnchanged) {
    Model model = load_model(test::test_model_path(), options_for(8));
    const std::vector<Ask> asks = mixed_requests(model, 8);
    const std::vector<Outcome> alone = run_alone(model, asks);
    const std::vector<Outcome> together = run_together(model, asks, 8, [](Scheduler& s, uint64_t step) {
        if (step == 1) s.cancel(3);  // while reading its prompt, or just after
        if (step == 4) s.cancel(6);  // while generating
    });
    for (size_t i = 0; i < asks.size(); ++i) {
        if (i == 3 || i == 6) {
            EXPECT_EQ(together[i].reason, StopReason::cancelled) << i;
            EXPECT_LT(together[i].ids.size(), alone[i].ids.size()) << i;
            // What it generated before the cancel is what it generates alone.
            EXPECT_TRUE(std::equal(together[i].ids.begin(), together[i].ids.end(), alone[i].ids.begin())) << i;
        } else {
            EXPECT_EQ(together[i].ids, alone[i].ids) << i;
        }
    }
}

TEST(Scheduler, RequestsPausedForLackOfBlocksResumeAndFinishAsAlone) {
    // A pool of 96 positions (six blocks of 16) for eight requests of up to 40 positions.
    ModelOptions o = options_for(8);
    o.kv_cache_tokens = 96;
    o.kv_block_size = 16;
    Model model = load_model(test::test_model_path(), o);
    std::vector<Ask> asks = mixed_requests(model, 8);
    for (Ask& a : asks) a.settings.max_tokens = 18;
    const std::vector<Outcome> alone = run_alone(model, asks);
    SchedulerStats stats;
    const std::vector<Outcome> together = run_together(model, asks, 8, {}, &stats);
    expect_same(alone, together);
    EXPECT_GT(stats.pauses, 0u) << "the pool was too small for all at once";
    EXPECT_EQ(stats.kv.sequences, 0u);
}

// Chunked prefill: while a long prompt is read, a chunk a step, the sequence already
// generating gets its next token in every one of those steps.
TEST(Scheduler, ALongPromptNeverHoldsUpTheOthersForMoreThanAStep) {
    Model model = load_model(test::test_model_path(), options_for(4, 1024));
    SchedulerOptions so;
    so.prefill_chunk = 32;
    Scheduler scheduler(model, so);
    GenerationSettings s;
    s.max_tokens = 40;
    s.ignore_eos = true;
    ASSERT_TRUE(scheduler.submit(1, raw_prompt(model, "The quick brown fox"), s, {}, {}));
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(scheduler.step());
    ASSERT_EQ(scheduler.stats().last_decode_rows, 1u) << "the first request generates";
    std::vector<TokenId> long_prompt;
    while (long_prompt.size() < 200) {
        const std::vector<TokenId> more = raw_prompt(model, "Once upon a time there was a lighthouse keeper. ");
        long_prompt.insert(long_prompt.end(), more.begin(), more.end());
    }
    s.max_tokens = 2;
    ASSERT_TRUE(scheduler.submit(2, long_prompt, s, {}, {}));
    uint32_t prompt_rows = 0;
    int steps = 0;
    for (;;) {
        ASSERT_TRUE(scheduler.step());
        const SchedulerStats st = scheduler.stats();
        if (st.last_prompt_rows == 0) break;  // the long prompt is read
        EXPECT_EQ(st.last_decode_rows, 1u) << "step " << steps << ": the first request's token";
        EXPECT_LE(st.last_prompt_rows, 32u) << "step " << steps;
        prompt_rows += st.last_prompt_rows;
        ++steps;
    }
    // All of it but what it shares with the first request's prompt (a BOS token, if any).
    EXPECT_GE(prompt_rows + 1, long_prompt.size());
    EXPECT_EQ(steps, static_cast<int>((prompt_rows + 31) / 32)) << "full chunks until the last";
    ASSERT_TRUE(scheduler.run());
}

TEST(Scheduler, APromptThatCanNeverFitThePoolIsRefused) {
    ModelOptions o = options_for(4);
    o.kv_cache_tokens = 32;
    o.kv_block_size = 16;
    Model model = load_model(test::test_model_path(), o);
    Scheduler scheduler(model);
    std::vector<TokenId> prompt(40, 1);
    Result<void> r = scheduler.submit(1, prompt, {}, {}, {});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::out_of_memory);
    EXPECT_NE(r.error().message.find("KV cache holds 32 positions"), std::string::npos) << r.error().message;
    Result<void> empty = scheduler.submit(2, {}, {}, {}, {});
    EXPECT_FALSE(empty);
    std::vector<TokenId> fits(10, 1);
    ASSERT_TRUE(scheduler.submit(3, fits, {}, {}, {}));
    EXPECT_FALSE(scheduler.submit(3, fits, {}, {}, {})) << "an id in use";
}

// Two long conversations, the user going back and forth: each turn reprocesses only what is
// new since that conversation's last answer.
TEST(Scheduler, GoingBackToAConversationReusesItsHistory) {
    Model model = load_model(test::test_model_path(), options_for(4, 1024));
    std::vector<std::vector<ChatMessage>> chats = {
        {{"system", "You are a helpful assistant who answers briefly."},
         {"user", "Tell me about the history of the printing press in Europe, from Gutenberg onwards."}},
        {{"system", "You are a poet."}, {"user", "Write four lines about the sea at night, with a rhyme."}},
    };
    std::vector<std::vector<TokenId>> held(2);  // what the cache holds of each conversation
    GenerationSettings settings;
    settings.max_tokens = 12;
    settings.sampling.temperature = 0;
    for (int turn = 0; turn < 3; ++turn) {
        for (size_t c = 0; c < 2; ++c) {
            Result<std::vector<TokenId>> prompt = chat_prompt(model, chats[c]);
            ASSERT_TRUE(prompt) << prompt.error().message;
            Result<GenerationResult> r = generate(model, *prompt, settings);
            ASSERT_TRUE(r) << r.error().message;
            // What the cache could hold of this prompt: this conversation's last prompt and answer.
            size_t common = 0;
            while (common < held[c].size() && common + 1 < prompt->size() && held[c][common] == (*prompt)[common]) {
                ++common;
            }
            if (turn > 0) {
                EXPECT_EQ(r->stats.reused_tokens, common) << "turn " << turn << ", conversation " << c;
                EXPECT_GT(common, held[c].size() - 4) << "most of the history is the same tokens";
                EXPECT_LT(prompt->size() - r->stats.reused_tokens, 40u) << "only the new message is processed";
            }
            // The cache holds the prompt and the answer but its last token (never decoded).
            held[c] = *prompt;
            held[c].insert(held[c].end(), r->ids.begin(), r->ids.end() - 1);
            chats[c].push_back({"assistant", r->text});
            chats[c].push_back({"user", turn == 0 ? "Go on." : "And then?"});
        }
    }
}

TEST(Scheduler, RequestsWithTheSameSystemPromptShareItsBlocks) {
    Model model = load_model(test::test_model_path(), options_for(4));
    std::string system = "You are a careful assistant. ";
    for (int i = 0; i < 8; ++i) system += "Answer in full sentences and check every fact twice. ";
    const std::vector<TokenId> first = raw_prompt(model, system + "What is two plus two?");
    const std::vector<TokenId> second = raw_prompt(model, system + "Name a colour.");
    size_t common = 0;
    while (first[common] == second[common]) ++common;
    ASSERT_GT(common, 64u);
    GenerationSettings s;
    s.max_tokens = 8;
    s.ignore_eos = true;
    Scheduler scheduler(model);
    uint32_t reused = 0;
    ASSERT_TRUE(scheduler.submit(1, first, s, {}, {}));
    // Let the first read its prompt, then start the second beside it.
    while (model.kv_stats().sequences == 0 || scheduler.stats().waiting > 0) ASSERT_TRUE(scheduler.step());
    for (int i = 0; i < 6; ++i) ASSERT_TRUE(scheduler.step());
    ASSERT_TRUE(scheduler.submit(2, second, s, {},
                                 [&](uint64_t, Result<GenerationResult> r) { reused = r ? r->stats.reused_tokens : 0; }));
    ASSERT_TRUE(scheduler.step());
    EXPECT_GE(model.kv_stats().shared_blocks, common / 32) << "the system prompt's whole blocks are shared";
    ASSERT_TRUE(scheduler.run());
    EXPECT_EQ(reused, common);
}

// The arch fixtures (synthetic models with the shapes of real ones, tests/data/arch) and the
// test model split over virtual CPU devices: together as alone on the same devices.
struct ModelSetup {
    std::string name;
    std::filesystem::path path;
    ModelOptions options;
};

class BatchedAsAlone : public testing::TestWithParam<ModelSetup> {};

TEST_P(BatchedAsAlone, OnThisModelAndSplit) {
    const ModelSetup& setup = GetParam();
    Model model = load_model(setup.path, setup.options);
    std::vector<Ask> asks;
    for (size_t i = 0; i < 6; ++i) {
        Ask a;
        for (size_t t = 0; t < 5 + i * 9; ++t) a.prompt.push_back(static_cast<TokenId>((t * 31 + i * 7) % 200 + 1));
        a.settings.max_tokens = 10;
        a.settings.ignore_eos = true;
        a.settings.sampling.temperature = i % 2 == 0 ? 0.0f : 0.7f;
        a.settings.sampling.seed = 77 + i;
        asks.push_back(std::move(a));
    }
    const std::vector<Outcome> alone = run_alone(model, asks);
    expect_same(alone, run_together(model, asks, 6));
}

std::vector<ModelSetup> setups() {
    std::vector<ModelSetup> out;
    const auto arch = [](const std::string& file) { return test::data_dir() / "arch" / file; };
    ModelOptions one = options_for(6, 256);
    out.push_back({"llama_q4_k", arch("llama-q4_k.gguf"), one});
    out.push_back({"qwen3moe_q8_0", arch("qwen3moe-q8_0.gguf"), one});
    out.push_back({"gemma3_q8_0", arch("gemma3-q8_0.gguf"), one});
    out.push_back({"gpt_oss_mxfp4", arch("gpt-oss-mxfp4.gguf"), one});
    ModelOptions q8 = one;
    q8.kv_cache_type = KvCacheType::q8_0;
    out.push_back({"smollm2_q8_0_cache", test::test_model_path(), q8});
    ModelOptions layer = one;
    layer.devices = "cpu:2";
    layer.split = SplitMode::layer;
    out.push_back({"smollm2_layer_split", test::test_model_path(), layer});
    ModelOptions tensor = layer;
    tensor.split = SplitMode::tensor;
    out.push_back({"smollm2_tensor_split", test::test_model_path(), tensor});
    return out;
}

INSTANTIATE_TEST_SUITE_P(Models, BatchedAsAlone, testing::ValuesIn(setups()),
                         [](const testing::TestParamInfo<ModelSetup>& p) { return p.param.name; });

}  // namespace
}  // namespace powerhouse
