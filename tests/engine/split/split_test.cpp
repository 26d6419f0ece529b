// Running a model split over several virtual CPU devices (issue 5): the in-process
// communicator, layer split over 2, 3 and 4 devices and tensor split over 2 and 3 on the
// SmolLM2 test model and on the small random models of every architecture, each against the
// same model on one device; the devices' memory against the planner's prediction; and a
// device that fails in the middle of a generation.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "backend/communicator.h"
#include "powerhouse/engine.h"
#include "powerhouse/generation.h"
#include "powerhouse/model.h"
#include "powerhouse/plan.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

using namespace std::chrono_literals;

// --- the communicator -----------------------------------------------------------------

TEST(HostCommunicator, AllReduceGivesEveryRankTheSumInRankOrder) {
    constexpr int kRanks = 3;
    std::unique_ptr<Communicator> comm = make_host_communicator(kRanks);
    std::vector<std::vector<float>> data(kRanks);
    for (int r = 0; r < kRanks; ++r) {
        for (int i = 0; i < 1000; ++i) data[r].push_back(static_cast<float>(r + 1) * 0.1f + static_cast<float>(i));
    }
    std::vector<float> expected(1000);
    for (int i = 0; i < 1000; ++i) expected[i] = (data[0][i] + data[1][i]) + data[2][i];
    for (int round = 0; round < 50; ++round) {  // the same communicator, step after step
        std::vector<std::vector<float>> work = data;
        std::vector<std::thread> threads;
        // Not vector<bool>: its elements share words, so threads setting their own would race.
        std::vector<char> ok(kRanks, 0);
        for (int r = 0; r < kRanks; ++r) {
            threads.emplace_back([&, r] { ok[r] = comm->all_reduce_sum(r, work[r].data(), work[r].size()).ok(); });
        }
        for (auto& t : threads) t.join();
        for (int r = 0; r < kRanks; ++r) {
            ASSERT_TRUE(ok[r]);
            ASSERT_EQ(work[r], expected) << "rank " << r << ", round " << round;
        }
    }
    EXPECT_GT(comm->seconds(0), 0.0);
}

TEST(HostCommunicator, AbortReleasesTheRanksThatWait) {
    std::unique_ptr<Communicator> comm = make_host_communicator(3);
    std::vector<float> a(8, 1.0f), b(8, 2.0f);
    Result<void> ra, rb;
    std::thread ta([&] { ra = comm->all_reduce_sum(0, a.data(), a.size()); });
    std::thread tb([&] { rb = comm->all_reduce_sum(1, b.data(), b.size()); });
    std::this_thread::sleep_for(50ms);  // rank 2 never comes: its device failed
    comm->abort("CPU 2 failed");
    ta.join();
    tb.join();
    ASSERT_FALSE(ra);
    ASSERT_FALSE(rb);
    EXPECT_EQ(ra.error().code, ErrorCode::cancelled);
    EXPECT_NE(rb.error().message.find("CPU 2 failed"), std::string::npos) << rb.error().message;
    EXPECT_FALSE(comm->all_reduce_sum(2, b.data(), b.size())) << "aborted until reset";
    comm->reset();
    // Usable again after a reset.
    std::vector<std::vector<float>> work = {{1, 2}, {3, 4}, {5, 6}};
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r) threads.emplace_back([&, r] { ASSERT_TRUE(comm->all_reduce_sum(r, work[r].data(), 2)); });
    for (auto& t : threads) t.join();
    EXPECT_EQ(work[1], (std::vector<float>{9, 12}));
}

TEST(HostCommunicator, CopiesBetweenDevicesAndRefusesUnknownOnes) {
    std::unique_ptr<Communicator> comm = make_host_communicator(2);
    std::vector<float> src = {1, 2, 3}, dst(3, 0);
    ASSERT_TRUE(comm->copy(0, src.data(), 1, dst.data(), 3));
    EXPECT_EQ(dst, src);
    EXPECT_FALSE(comm->copy(0, src.data(), 2, dst.data(), 3));
}

// --- models on split devices --------------------------------------------------------------

ModelOptions options_for(const std::string& devices, SplitMode split, uint32_t n_ctx = 256) {
    ModelOptions o;
    o.n_ctx = n_ctx;
    o.n_threads = 2;
    o.n_batch = 16;
    o.devices = devices;
    o.split = split;
    return o;
}

// Logits after the prompt (one batch) and after each greedy token, and the tokens.
struct GreedyRun {
    std::vector<std::vector<float>> logits;
    std::vector<TokenId> tokens;
};

int argmax(std::span<const float> v) {
    return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

GreedyRun run_greedy(Model& model, const std::vector<TokenId>& prompt, int n_new) {
    GreedyRun run;
    Result<std::span<const float>> logits = model.decode(prompt);
    for (int i = 0;; ++i) {
        if (!logits) {
            ADD_FAILURE() << logits.error().message;
            return run;
        }
        run.logits.emplace_back(logits->begin(), logits->end());
        if (i == n_new) return run;
        const TokenId next = argmax(*logits);
        run.tokens.push_back(next);
        const TokenId one[] = {next};
        logits = model.decode(one);
    }
}

float max_diff(const GreedyRun& a, const GreedyRun& b) {
    float worst = 0;
    for (size_t s = 0; s < std::min(a.logits.size(), b.logits.size()); ++s) {
        for (size_t i = 0; i < a.logits[s].size(); ++i) worst = std::max(worst, std::abs(a.logits[s][i] - b.logits[s][i]));
    }
    return worst;
}

Result<Model> load(const std::filesystem::path& path, const ModelOptions& options) { return Model::load(path, options); }

struct SplitCase {
    const char* devices;
    SplitMode split;
};

const SplitCase kSmolSplits[] = {{"cpu:2", SplitMode::layer},  {"cpu:3", SplitMode::layer},
                                 {"cpu:4", SplitMode::layer},  {"cpu:2", SplitMode::tensor},
                                 {"cpu:3", SplitMode::tensor}};

// A prompt longer than a batch, so that the layer split pipelines several micro-batches.
std::vector<TokenId> smollm2_prompt(const Model& model) {
    return model.tokenizer().tokenize(
        "The capital of France is Paris. The capital of Germany is Berlin. The capital of Italy is", true, false);
}

TEST(SplitModel, SmolLM2GivesTheSingleDeviceTokensOnEverySplit) {
    Result<Model> single = load(test::test_model_path(), options_for("cpu", SplitMode::single));
    ASSERT_TRUE(single) << single.error().message;
    const std::vector<TokenId> prompt = smollm2_prompt(*single);
    ASSERT_GT(prompt.size(), 16u);
    const GreedyRun reference = run_greedy(*single, prompt, 12);
    ASSERT_EQ(reference.tokens.size(), 12u);
    for (const SplitCase& c : kSmolSplits) {
        SCOPED_TRACE(std::string(c.devices) + " " + split_mode_name(c.split));
        Result<Model> split = load(test::test_model_path(), options_for(c.devices, c.split));
        ASSERT_TRUE(split) << split.error().message;
        EXPECT_EQ(split->summary().split, c.split);
        EXPECT_EQ(split->summary().devices.size(), static_cast<size_t>(c.devices[4] - '0'));
        const GreedyRun run = run_greedy(*split, prompt, 12);
        EXPECT_EQ(run.tokens, reference.tokens);
        // Layer split runs the same arithmetic (measured: bit-identical). Tensor split adds
        // the shards' partial products of the output and down projections in another order;
        // on 30 layers of Q4_1 with 8-bit activations, the last-bit differences flip the
        // rounding of some activations, and the logits move by up to 1.24 (measured; the
        // engine's own scalar and AVX-512 kernels differ from each other as much). The
        // random models below, with F32 and Q8_0 weights, bound the split's arithmetic
        // itself far more tightly.
        const float tolerance = c.split == SplitMode::layer ? 1e-4f : 2.0f;
        EXPECT_LE(max_diff(run, reference), tolerance);
        const std::vector<DeviceUsage> usage = split->device_usage();
        for (const DeviceUsage& u : usage) {
            EXPECT_GT(u.busy_seconds, 0.0) << u.name;
            EXPECT_GT(u.weight_bytes, 0u) << u.name;
            EXPECT_GE(u.busy_seconds, 0.0) << u.name;
        }
    }
}

// Greedy decoding through decode_argmax (the engine's path for temperature 0 without
// penalties) picks what the argmax of decode's logits picks, on one device and on every
// split, prompt batch and single tokens alike, and keeps the cache the same way.
TEST(SplitModel, DecodeArgmaxPicksTheArgmaxOfTheLogits) {
    Result<Model> single = load(test::test_model_path(), options_for("cpu", SplitMode::single));
    ASSERT_TRUE(single) << single.error().message;
    const std::vector<TokenId> prompt = smollm2_prompt(*single);
    const GreedyRun reference = run_greedy(*single, prompt, 6);
    ASSERT_EQ(reference.tokens.size(), 6u);
    for (const SplitCase& c : {SplitCase{"cpu", SplitMode::single}, SplitCase{"cpu:3", SplitMode::layer},
                               SplitCase{"cpu:2", SplitMode::tensor}}) {
        SCOPED_TRACE(std::string(c.devices) + " " + split_mode_name(c.split));
        Result<Model> model = load(test::test_model_path(), options_for(c.devices, c.split));
        ASSERT_TRUE(model) << model.error().message;
        Result<TokenId> next = model->decode_argmax(prompt);
        std::vector<TokenId> tokens;
        for (int i = 0; i < 6; ++i) {
            ASSERT_TRUE(next) << next.error().message;
            tokens.push_back(*next);
            const TokenId one[] = {*next};
            next = model->decode_argmax(one);
        }
        EXPECT_EQ(tokens, reference.tokens);
        EXPECT_EQ(model->n_past(), prompt.size() + 6);
        EXPECT_EQ(model->cached_tokens().size(), prompt.size() + 6);
    }
}

// The plan the model was loaded with, made again by the planner for the CPU devices: what the
// two tests below hold the loaded model's devices to.
Result<DevicePlan> plan_of(const ModelShape& shape, const Model& model, const ModelOptions& options) {
    Result<std::vector<DeviceDesc>> devices = cpu_devices(options.devices);
    if (!devices) return devices.error();
    PlanOptions p;
    p.mode = options.split;
    p.reserve_bytes = 0;
    p.n_ctx = model.n_ctx();
    p.kv_tokens = model.kv_stats().total_blocks * model.kv_stats().block_size;
    p.max_sequences = options.max_sequences;
    p.n_batch = options.n_batch;
    p.experts_in_ram = options.experts_in_ram;
    return plan_devices(shape, *devices, p);
}

// Each device's KV cache exactly, and its weights to the bytes the planner shares a layer's
// tensors by (it counts bytes, the device the rows it holds: a few bytes per tensor).
void expect_held_as_planned(const DeviceUsage& usage, const DeviceAssignment& a) {
    EXPECT_EQ(usage.kv_cache_bytes, a.kv_cache_bytes) << usage.name;
    EXPECT_NEAR(static_cast<double>(usage.weight_bytes), static_cast<double>(a.weight_bytes),
                1e-3 * static_cast<double>(a.weight_bytes))
        << usage.name << " holds " << usage.part;
}

TEST(SplitModel, EachDeviceHoldsWhatThePlannerPredicted) {
    Result<ModelShape> shape = read_model_shape(test::test_model_path());
    ASSERT_TRUE(shape) << shape.error().message;
    for (const SplitCase& c : kSmolSplits) {
        SCOPED_TRACE(std::string(c.devices) + " " + split_mode_name(c.split));
        const ModelOptions options = options_for(c.devices, c.split);
        Result<Model> model = load(test::test_model_path(), options);
        ASSERT_TRUE(model) << model.error().message;
        Result<DevicePlan> plan = plan_of(*shape, *model, options);
        ASSERT_TRUE(plan) << plan.error().message;
        const std::vector<DeviceUsage> usage = model->device_usage();
        ASSERT_EQ(usage.size(), plan->devices.size());
        uint64_t weights = 0;
        for (size_t i = 0; i < usage.size(); ++i) {
            const DeviceAssignment& a = plan->devices[i];
            expect_held_as_planned(usage[i], a);
            EXPECT_LE(usage[i].scratch_bytes, a.scratch_bytes + a.comm_bytes) << usage[i].name;
            EXPECT_EQ(usage[i].planned_bytes, a.total_bytes());
            weights += usage[i].weight_bytes;
        }
        if (c.split == SplitMode::layer) {
            // Every tensor once, and the tied embedding twice: as the first device's
            // embedding and as the last one's output layer.
            EXPECT_EQ(weights, model->summary().weight_bytes + (shape->tied_output ? shape->embedding_bytes : 0));
        }
    }
}

// The same for mixtures of experts: expert-parallel shares, experts in RAM, and what each
// device allocates against the planner's prediction.
TEST(SplitModel, EachDeviceOfAMixtureOfExpertsHoldsWhatThePlannerPredicted) {
    struct Case {
        const char* devices;
        SplitMode split;
        int32_t experts_in_ram;
    };
    const Case cases[] = {{"cpu", SplitMode::single, 0},
                          {"cpu:2", SplitMode::layer, 0},
                          {"cpu:2", SplitMode::tensor, 0},
                          {"cpu", SplitMode::single, 1},
                          {"cpu:2", SplitMode::tensor, kExpertsInRamAll}};
    for (const char* file : {"qwen3moe-q8_0.gguf", "gpt-oss-mxfp4.gguf", "mixtral-q4_k.gguf"}) {
        const std::filesystem::path path = test::data_dir() / "arch" / file;
        Result<ModelShape> shape = read_model_shape(path);
        ASSERT_TRUE(shape) << shape.error().message;
        for (const Case& c : cases) {
            SCOPED_TRACE(std::string(file) + " " + c.devices + " " + split_mode_name(c.split) + " " +
                         std::to_string(c.experts_in_ram));
            ModelOptions options = options_for(c.devices, c.split, 64);
            options.experts_in_ram = c.experts_in_ram;
            Result<Model> model = load(path, options);
            if (!model && c.split == SplitMode::tensor) continue;  // too few KV heads: said elsewhere
            ASSERT_TRUE(model) << model.error().message;
            // A whole batch first, so that the buffers that grow on use (the experts') have grown.
            std::vector<TokenId> batch;
            for (TokenId t = 0; t < static_cast<TokenId>(options.n_batch); ++t) batch.push_back(t * 7 % 200);
            ASSERT_TRUE(model->decode(batch));
            Result<DevicePlan> plan = plan_of(*shape, *model, options);
            ASSERT_TRUE(plan) << plan.error().message;
            const std::vector<DeviceUsage> usage = model->device_usage();
            ASSERT_EQ(usage.size(), plan->devices.size());
            uint64_t ram = 0;
            for (size_t i = 0; i < usage.size(); ++i) {
                const DeviceAssignment& a = plan->devices[i];
                expect_held_as_planned(usage[i], a);
                // CPU devices sum in host memory: no communication buffers of their own. The
                // work buffers are planned for the worst routing (every token's experts on this
                // device), a bound: in these tiny models they are a third to a half of the
                // total, so the total is checked from above and to within 25% from below (in
                // real models they are well under 1% of it and the weights and KV cache are
                // exact).
                const double allocated =
                    static_cast<double>(usage[i].weight_bytes + usage[i].kv_cache_bytes + usage[i].scratch_bytes);
                const auto planned = static_cast<double>(a.total_bytes() - a.comm_bytes);
                EXPECT_LE(allocated, planned * 1.01) << usage[i].name;
                EXPECT_GE(allocated, planned * 0.75)
                    << usage[i].name << ": weights " << usage[i].weight_bytes << ", KV " << usage[i].kv_cache_bytes
                    << ", scratch " << usage[i].scratch_bytes << " against " << a.weight_bytes << ", "
                    << a.kv_cache_bytes << ", " << a.scratch_bytes;
                ram += usage[i].ram_weight_bytes;
            }
            EXPECT_EQ(ram, plan->ram_expert_bytes);
        }
    }
}

// The random models of tests/data/arch (scripts/fixtures/make_arch_fixture.py).
std::vector<std::string> arch_models() {
    const nlohmann::json manifest =
        nlohmann::json::parse(test::read_file(test::data_dir() / "arch" / "arch_models.json"), nullptr, false);
    std::vector<std::string> names;
    if (!manifest.is_object()) return names;
    for (const auto& m : manifest.at("models")) names.push_back(m.at("gguf").get<std::string>());
    return names;
}

TEST(SplitModel, EveryArchitectureGivesTheSingleDeviceLogitsOnEverySplitItAllows) {
    const std::vector<std::string> names = arch_models();
    ASSERT_EQ(names.size(), 80u);
    int tensor_runs = 0, expert_parallel_runs = 0, fused_tensor_runs = 0;
    for (const std::string& name : names) {
        SCOPED_TRACE(name);
        const std::filesystem::path path = test::data_dir() / "arch" / name;
        Result<Model> single = load(path, options_for("cpu", SplitMode::single, 64));
        ASSERT_TRUE(single) << single.error().message;
        std::vector<TokenId> prompt;
        for (TokenId t = 0; t < 20; ++t) prompt.push_back((t * 37 + 11) % static_cast<TokenId>(single->n_vocab()));
        const GreedyRun reference = run_greedy(*single, prompt, 6);
        const uint32_t n_layer = single->summary().n_layer;
        for (const SplitCase& c : kSmolSplits) {
            const uint32_t n = static_cast<uint32_t>(c.devices[4] - '0');
            SCOPED_TRACE(std::string(c.devices) + " " + split_mode_name(c.split));
            Result<Model> split = load(path, options_for(c.devices, c.split, 64));
            if (!split && c.split == SplitMode::tensor) {
                // Too few KV heads, or head groups that do not fall on the weights' blocks:
                // the planner says so before anything is loaded.
                EXPECT_EQ(split.error().code, ErrorCode::unsupported);
                EXPECT_NE(split.error().message.find("layer split"), std::string::npos) << split.error().message;
                continue;
            }
            ASSERT_TRUE(split) << split.error().message;
            if (c.split == SplitMode::tensor) ++tensor_runs;
            if (c.split == SplitMode::tensor && (name.rfind("phi3-", 0) == 0 || name.rfind("glm4-", 0) == 0)) {
                ++fused_tensor_runs;
            }
            const std::string& part = split->summary().devices.front().part;
            if (c.split == SplitMode::tensor && part.find("experts") != std::string::npos) ++expert_parallel_runs;
            // A layer split uses no more devices than there are layers.
            EXPECT_EQ(split->summary().devices.size(), c.split == SplitMode::layer ? std::min(n, n_layer) : n);
            const GreedyRun run = run_greedy(*split, prompt, 6);
            EXPECT_EQ(run.tokens, reference.tokens);
            // Measured for tensor split: F32 up to 2.2e-4 (summation order) in the 2-layer
            // models and 1.2e-3 in the 4-layer smollm3, F16 up to 7e-3 (smollm3), Q8_0 exactly
            // 0 (smollm3 too); layer split exactly 0.
            const bool f16 = name.find("-f16") != std::string::npos;
            const float tolerance = c.split == SplitMode::layer ? 1e-4f : f16 ? 1e-2f : 2e-3f;
            EXPECT_LE(max_diff(run, reference), tolerance);
        }
    }
    EXPECT_GE(tensor_runs, 15) << "the F32, F16 and Q8_0 models with two KV heads split by tensor";
    EXPECT_GE(fused_tensor_runs, 6) << "phi3 and glm4 in F32, F16 and Q8_0: each device's rows of attn_qkv (and of "
                                       "glm4's attn_qkv.bias) and ffn_up";
    EXPECT_GE(expert_parallel_runs, 6) << "mixtral and qwen3moe in F32, F16 and Q8_0, experts split over two devices";
}

// Experts in RAM (mixture of experts): the host runs the experts of the first layers for
// whichever device holds the rest of the layer. The same code on the same ISA: a single device
// and a layer split give the default run's logits bit for bit; an expert-parallel split sums
// in another order. The devices hold what they held less those experts, which the usage
// reports as RAM.
TEST(SplitModel, ExpertsInRamGiveTheSameLogitsAndLeaveTheDevices) {
    struct Case {
        const char* devices;
        SplitMode split;
        int32_t experts_in_ram;
    };
    const Case cases[] = {{"cpu", SplitMode::single, 1},
                          {"cpu", SplitMode::single, kExpertsInRamAll},
                          {"cpu:2", SplitMode::layer, 1},
                          {"cpu:2", SplitMode::tensor, kExpertsInRamAll}};
    for (const char* file : {"qwen3moe-q8_0.gguf", "mixtral-f32.gguf"}) {
        SCOPED_TRACE(file);
        const std::filesystem::path path = test::data_dir() / "arch" / file;
        Result<ModelShape> shape = read_model_shape(path);
        ASSERT_TRUE(shape) << shape.error().message;
        ASSERT_GT(shape->n_expert, 0u);
        Result<Model> plain = load(path, options_for("cpu", SplitMode::single, 64));
        ASSERT_TRUE(plain) << plain.error().message;
        std::vector<TokenId> prompt;
        for (TokenId t = 0; t < 20; ++t) prompt.push_back((t * 37 + 11) % static_cast<TokenId>(plain->n_vocab()));
        const GreedyRun reference = run_greedy(*plain, prompt, 6);
        const uint64_t plain_weights = plain->device_usage().front().weight_bytes;
        for (const Case& c : cases) {
            SCOPED_TRACE(std::string(c.devices) + " " + split_mode_name(c.split) + " " +
                         std::to_string(c.experts_in_ram));
            ModelOptions options = options_for(c.devices, c.split, 64);
            options.experts_in_ram = c.experts_in_ram;
            Result<Model> model = load(path, options);
            ASSERT_TRUE(model) << model.error().message;
            const GreedyRun run = run_greedy(*model, prompt, 6);
            EXPECT_EQ(run.tokens, reference.tokens);
            EXPECT_LE(max_diff(run, reference), c.split == SplitMode::tensor ? 1e-3f : 0.0f);
            const uint32_t layers = std::min<uint32_t>(static_cast<uint32_t>(c.experts_in_ram), shape->n_layer);
            uint64_t in_ram = 0;
            for (uint32_t l = 0; l < layers; ++l) in_ram += shape->layers[l].experts;
            uint64_t ram = 0, held = 0;
            for (const DeviceUsage& u : model->device_usage()) {
                ram += u.ram_weight_bytes;
                held += u.weight_bytes;
            }
            EXPECT_EQ(ram, in_ram);  // each device's share, once in all
            if (c.split == SplitMode::single) {
                EXPECT_EQ(held + ram, plain_weights);
            }
            EXPECT_NE(model->device_usage().front().part.find("in RAM"), std::string::npos)
                << model->device_usage().front().part;
        }
    }
}

// --- a device that fails ------------------------------------------------------------------

TEST(SplitModel, ADeviceThatFailsNamesItselfAndKeepsTheCache) {
    // SmolLM2 by layer and by tensor, and a mixture of experts split by experts.
    const std::filesystem::path moe = test::data_dir() / "arch" / "qwen3moe-q8_0.gguf";
    const struct {
        std::filesystem::path path;
        const char* devices;
        SplitMode mode;
    } cases[] = {{test::test_model_path(), "cpu:3", SplitMode::layer},
                 {test::test_model_path(), "cpu:3", SplitMode::tensor},
                 {moe, "cpu:2", SplitMode::tensor}};
    for (const auto& c : cases) {
        const SplitMode mode = c.mode;
        SCOPED_TRACE(c.path.filename().string() + " " + split_mode_name(mode));
        ModelOptions options = options_for(c.devices, mode, 64);
        options.fail_device = 1;
        options.fail_after = 2;  // the prompt and one token, then it stops answering
        Result<Model> model = load(c.path, options);
        ASSERT_TRUE(model) << model.error().message;
        const std::vector<TokenId> prompt = {1, 2, 3, 4, 5};
        ASSERT_TRUE(model->decode(prompt));
        const TokenId one[] = {6};
        ASSERT_TRUE(model->decode(one));
        const TokenId two[] = {7};
        Result<std::span<const float>> failed = model->decode(two);
        ASSERT_FALSE(failed);
        EXPECT_EQ(failed.error().code, ErrorCode::device_failed);
        EXPECT_EQ(failed.error().message.rfind("CPU 1: ", 0), 0u) << failed.error().message;
        EXPECT_EQ(model->n_past(), 6u) << "the positions before the failed step stay";
        EXPECT_FALSE(model->decode(two)) << "the device stays failed";
    }
}

bool is_final(const EngineEvent& e) {
    return std::holds_alternative<LoadedEvent>(e) || std::holds_alternative<UnloadedEvent>(e) ||
           std::holds_alternative<DoneEvent>(e) || std::holds_alternative<ErrorEvent>(e);
}

EngineEvent next_final(Engine& engine) {
    const auto deadline = std::chrono::steady_clock::now() + 300s;
    while (std::chrono::steady_clock::now() < deadline) {
        std::optional<EngineEvent> e = engine.wait_event(100ms);
        if (e && is_final(*e)) return *e;
    }
    ADD_FAILURE() << "no final event within 300 s";
    return ErrorEvent{};
}

TEST(SplitModel, TheEngineOutlivesAFailedDeviceAndTheConversationGoesOnWithoutIt) {
    const std::vector<ChatMessage> history = {{"user", "What is the capital of France?"}};
    const auto ask = [&](uint64_t id) {
        GenerateCommand c;
        c.request_id = id;
        c.messages = history;
        c.settings.max_tokens = 10;
        c.settings.sampling.temperature = 0;
        return c;
    };
    Engine engine;
    // The answer on one device, for reference.
    engine.submit(LoadCommand{test::test_model_path(), options_for("cpu", SplitMode::single, 512)});
    ASSERT_TRUE(std::holds_alternative<LoadedEvent>(next_final(engine)));
    engine.submit(ask(1));
    const EngineEvent reference = next_final(engine);
    ASSERT_TRUE(std::holds_alternative<DoneEvent>(reference));

    // Three devices; the third fails after the prompt and a few tokens. With the policy stop
    // the request ends with the error, and the caller re-plans (the engine's own recovery,
    // RecoveryPolicy::replan, is tested in recovery_test.cpp).
    ModelOptions failing = options_for("cpu:3", SplitMode::layer, 512);
    failing.fail_device = 2;
    failing.fail_after = 4;
    engine.submit(LoadCommand{test::test_model_path(), failing, RecoveryPolicy::stop});
    ASSERT_TRUE(std::holds_alternative<LoadedEvent>(next_final(engine)));
    engine.submit(ask(2));
    const EngineEvent failed = next_final(engine);
    const auto* error = std::get_if<ErrorEvent>(&failed);
    ASSERT_NE(error, nullptr);
    EXPECT_EQ(error->request_id, 2u);
    EXPECT_EQ(error->error.code, ErrorCode::device_failed);
    EXPECT_NE(error->error.message.find("CPU 2"), std::string::npos) << error->error.message;

    // Re-planned onto the two devices left, the same conversation gives the same answer.
    engine.submit(LoadCommand{test::test_model_path(), options_for("cpu:2", SplitMode::layer, 512)});
    const EngineEvent reloaded = next_final(engine);
    ASSERT_TRUE(std::holds_alternative<LoadedEvent>(reloaded));
    EXPECT_EQ(std::get<LoadedEvent>(reloaded).model.devices.size(), 2u);
    engine.submit(ask(3));
    const EngineEvent answer = next_final(engine);
    ASSERT_TRUE(std::holds_alternative<DoneEvent>(answer));
    EXPECT_EQ(std::get<DoneEvent>(answer).generated_ids, std::get<DoneEvent>(reference).generated_ids);
    EXPECT_EQ(std::get<DoneEvent>(answer).text, std::get<DoneEvent>(reference).text);
}

TEST(SplitModel, BadDeviceRequestsAreExplained) {
    Result<Model> bad = load(test::test_model_path(), options_for("gpu:2", SplitMode::layer));
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("cpu:N"), std::string::npos) << bad.error().message;
    Result<Model> zero = load(test::test_model_path(), options_for("cpu:0", SplitMode::layer));
    ASSERT_FALSE(zero);
    EXPECT_EQ(zero.error().code, ErrorCode::invalid_argument);
    // SmolLM2 has 3 KV heads: no tensor split over 4.
    Result<Model> four = load(test::test_model_path(), options_for("cpu:4", SplitMode::tensor));
    ASSERT_FALSE(four);
    EXPECT_NE(four.error().message.find("KV heads"), std::string::npos) << four.error().message;
}

}  // namespace
}  // namespace powerhouse
