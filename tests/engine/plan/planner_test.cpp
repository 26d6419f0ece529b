// The planner: the shape read from a real file, the choice of auto, layer balance by bytes
// and ratios, heterogeneous devices, tensor split by KV-head groups and FFN blocks, the
// reserve, "does not fit" messages whose advice really fits, bad options, and a property
// test over random models and devices that no plan exceeds a device's budget.
#include "powerhouse/plan.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "support/test_support.h"

namespace powerhouse {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;

// A model with uniform layers, Llama-like proportions.
ModelShape uniform_model(uint32_t n_layer, uint64_t layer_bytes, uint32_t n_head = 32, uint32_t n_head_kv = 8,
                         uint32_t n_ff = 14336) {
    ModelShape m;
    m.name = "test model";
    m.architecture = "llama";
    m.n_layer = n_layer;
    m.n_head = n_head;
    m.n_head_kv = n_head_kv;
    m.head_dim = 128;
    m.n_embd = n_head * 128;
    m.n_ff = n_ff;
    m.n_vocab = 128256;
    LayerWeights w;
    w.q = layer_bytes / 8;
    w.k = w.v = layer_bytes / 32;
    w.o = layer_bytes / 8;
    w.gate = w.up = w.down = (layer_bytes - w.q - w.k - w.v - w.o) / 3;
    w.replicated = layer_bytes - w.q - w.k - w.v - w.o - w.gate - w.up - w.down;
    w.ff_block = 256;
    m.layers.assign(n_layer, w);
    m.embedding_bytes = 280 * kMiB;
    m.output_bytes = 400 * kMiB;
    return m;
}

std::vector<DeviceDesc> gpus(std::initializer_list<double> gib) {
    std::vector<DeviceDesc> out;
    for (double g : gib) {
        DeviceDesc d;
        d.name = g >= 80 ? "A100" : "RTX 4090";
        d.total_bytes = d.free_bytes = static_cast<uint64_t>(g * kGiB);
        out.push_back(d);
    }
    return out;
}

void expect_within_budgets(const DevicePlan& plan) {
    for (const DeviceAssignment& a : plan.devices) {
        EXPECT_LE(a.total_bytes(), a.budget_bytes) << "device " << a.device;
    }
}

TEST(Planner, ReadsTheShapeOfTheTestModel) {
    Result<ModelShape> m = read_model_shape(test::test_model_path());
    ASSERT_TRUE(m) << m.error().message;
    Result<ModelInfo> info = inspect_model(test::test_model_path());
    ASSERT_TRUE(info);
    EXPECT_EQ(m->n_layer, 30u);
    EXPECT_EQ(m->n_head, 9u);
    EXPECT_EQ(m->n_head_kv, 3u);
    EXPECT_EQ(m->head_dim, 64u);
    EXPECT_EQ(m->n_ff, 1536u);
    EXPECT_TRUE(m->tied_output);
    EXPECT_EQ(m->weight_bytes(), info->weight_bytes);  // every tensor counted once
    for (const LayerWeights& w : m->layers) {
        EXPECT_GT(w.q, 0u);
        EXPECT_GT(w.down, 0u);
        EXPECT_GT(w.replicated, 0u);  // the norms
        EXPECT_EQ(w.ff_block, 32u);
    }
}

TEST(Planner, APredictionBlocksTensorsAreLeftOutOfTheShape) {
    // GLM-4.5: two decoder layers, then one multi-token prediction block, which never loads.
    ModelShape m;
    m.n_head = m.n_head_kv = 1;
    m.layers.resize(2);
    m.n_layer_nextn = 1;
    ASSERT_TRUE(add_tensor_to_shape(m, "blk.1.ffn_down.weight", 100, 32).ok());
    ASSERT_TRUE(add_tensor_to_shape(m, "blk.2.ffn_down.weight", 1000, 32).ok());
    ASSERT_TRUE(add_tensor_to_shape(m, "blk.2.nextn.eh_proj.weight", 1000, 32).ok());
    EXPECT_EQ(m.weight_bytes(), 100u);
    const Result<void> past = add_tensor_to_shape(m, "blk.3.ffn_down.weight", 10, 32);
    ASSERT_FALSE(past.ok());
    EXPECT_NE(past.error().message.find("blk.3.ffn_down.weight"), std::string::npos) << past.error().message;
    m.n_layer_nextn = 0;
    EXPECT_FALSE(add_tensor_to_shape(m, "blk.2.ffn_down.weight", 1000, 32).ok()) << "without it, a layer too many";
}

TEST(Planner, AutoUsesOneDeviceWhenTheModelFits) {
    const ModelShape m = uniform_model(32, 135 * kMiB);  // ~5 GiB
    PlanOptions o;
    Result<DevicePlan> plan = plan_devices(m, gpus({24, 24}), o);
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_EQ(plan->mode, SplitMode::single);
    ASSERT_EQ(plan->devices.size(), 1u);
    EXPECT_EQ(plan->devices[0].n_layers, 32u);
    EXPECT_NE(plan->reason.find("fits on device 0"), std::string::npos) << plan->reason;
    EXPECT_GT(plan->tokens_per_second, 0.0);
    EXPECT_EQ(plan->transfers_per_token, 0u);
}

TEST(Planner, AutoSplitsByLayerWhenOneDeviceIsTooSmall) {
    const ModelShape m = uniform_model(80, 480 * kMiB);  // ~38 GiB
    Result<DevicePlan> plan = plan_devices(m, gpus({24, 24}), PlanOptions{});
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_EQ(plan->mode, SplitMode::layer);
    ASSERT_EQ(plan->devices.size(), 2u);
    EXPECT_EQ(plan->devices[0].first_layer, 0u);
    EXPECT_EQ(plan->devices[1].first_layer, plan->devices[0].n_layers);
    EXPECT_EQ(plan->devices[0].n_layers + plan->devices[1].n_layers, 80u);
    EXPECT_TRUE(plan->devices[0].embedding);
    EXPECT_TRUE(plan->devices[1].output);
    EXPECT_EQ(plan->transfers_per_token, 1u);
    EXPECT_NE(plan->reason.find("layer split across 2 devices"), std::string::npos) << plan->reason;
    expect_within_budgets(*plan);
}

TEST(Planner, LayerSplitBalancesBytesByRatio) {
    const ModelShape m = uniform_model(40, 200 * kMiB);
    PlanOptions o;
    o.mode = SplitMode::layer;
    o.ratios = {3, 1};
    Result<DevicePlan> plan = plan_devices(m, gpus({48, 48}), o);
    ASSERT_TRUE(plan) << plan.error().message;
    const double a = static_cast<double>(plan->devices[0].weight_bytes + plan->devices[0].kv_cache_bytes);
    const double b = static_cast<double>(plan->devices[1].weight_bytes + plan->devices[1].kv_cache_bytes);
    EXPECT_NEAR(a / (a + b), 0.75, 0.02);
    // Bytes, not layer counts: 40 layers of 216 MiB (weights and KV cache), the 280 MiB
    // embedding on the first device and the 400 MiB output layer on the second make the
    // closest 3:1 cut 31 + 9 layers (6976 MiB : 2344 MiB), not 30 + 10.
    EXPECT_EQ(plan->devices[0].n_layers, 31u);
}

TEST(Planner, HeterogeneousDevicesShareByTheirMemory) {
    const ModelShape m = uniform_model(60, 900 * kMiB);  // ~54 GiB
    PlanOptions o;
    o.mode = SplitMode::layer;
    Result<DevicePlan> plan = plan_devices(m, gpus({24, 48}), o);
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_NEAR(static_cast<double>(plan->devices[1].n_layers) / plan->devices[0].n_layers, 2.0, 0.2);
    expect_within_budgets(*plan);
}

TEST(Planner, TensorSplitDividesKvHeadGroupsAndFeedForwardBlocks) {
    const ModelShape m = uniform_model(32, 200 * kMiB);  // 8 KV heads, n_ff 14336 = 56 blocks of 256
    PlanOptions o;
    o.mode = SplitMode::tensor;
    o.main_device = 1;
    Result<DevicePlan> plan = plan_devices(m, gpus({24, 24, 24}), o);
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_EQ(plan->devices.size(), 3u);
    uint32_t heads = 0, ff = 0;
    for (size_t i = 0; i < 3; ++i) {
        const DeviceAssignment& a = plan->devices[i];
        EXPECT_EQ(a.kv_head_begin, heads);
        EXPECT_EQ(a.ff_begin, ff);
        EXPECT_EQ((a.ff_end - a.ff_begin) % 256, 0u);
        heads = a.kv_head_end;
        ff = a.ff_end;
        EXPECT_EQ(a.n_layers, 32u);
        EXPECT_EQ(a.output, a.device == 1);
    }
    EXPECT_EQ(heads, 8u);
    EXPECT_EQ(ff, 14336u);
    EXPECT_EQ(plan->devices[0].kv_head_end - plan->devices[0].kv_head_begin, 3u);  // 3, 3, 2
    EXPECT_EQ(plan->devices[2].kv_head_end - plan->devices[2].kv_head_begin, 2u);
    EXPECT_EQ(plan->allreduces_per_token, 64u);
    EXPECT_EQ(plan->allreduce_bytes_per_token, 64u * 4096 * 4);
    // Shards add up to the model, plus the replicated norms on every device.
    uint64_t total = 0;
    for (const DeviceAssignment& a : plan->devices) total += a.weight_bytes;
    const uint64_t replicated = m.layers[0].replicated * 32;
    EXPECT_NEAR(static_cast<double>(total), static_cast<double>(m.weight_bytes() + 2 * replicated), 64.0 * 32);
}

TEST(Planner, TensorSplitWithUnevenRatios) {
    const ModelShape m = uniform_model(16, 100 * kMiB, 32, 8);
    PlanOptions o;
    o.mode = SplitMode::tensor;
    o.ratios = {3, 1};
    Result<DevicePlan> plan = plan_devices(m, gpus({24, 24}), o);
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_EQ(plan->devices[0].kv_head_end, 6u);
    EXPECT_EQ(plan->devices[1].kv_head_end - plan->devices[1].kv_head_begin, 2u);
    EXPECT_EQ(plan->devices[0].ff_end, 42u * 256);
}

TEST(Planner, TensorSplitSaysWhyItCannotSplit) {
    ModelShape m = uniform_model(16, 100 * kMiB, 16, 2);
    PlanOptions o;
    o.mode = SplitMode::tensor;
    Result<DevicePlan> plan = plan_devices(m, gpus({24, 24, 24}), o);
    ASSERT_FALSE(plan);
    EXPECT_EQ(plan.error().code, ErrorCode::unsupported);
    EXPECT_NE(plan.error().message.find("needs at least 3 KV heads, and test model has 2"), std::string::npos)
        << plan.error().message;
    m = uniform_model(16, 100 * kMiB, 32, 8, 14000);  // not whole 256-blocks
    plan = plan_devices(m, gpus({24, 24}), o);
    ASSERT_FALSE(plan);
    EXPECT_NE(plan.error().message.find("feed-forward width 14000"), std::string::npos) << plan.error().message;
}

TEST(Planner, DoesNotFitNamesTheDeviceAndAFixThatWorks) {
    const ModelShape m = uniform_model(32, 135 * kMiB);  // ~5 GiB of weights
    std::vector<DeviceDesc> devices = gpus({8, 24});
    devices[0].name = "RTX 4060";
    PlanOptions o;
    o.mode = SplitMode::single;
    o.use = {0};
    o.n_ctx = 32768;  // 4 GiB of F16 KV cache
    Result<DevicePlan> plan = plan_devices(m, devices, o);
    ASSERT_FALSE(plan);
    EXPECT_EQ(plan.error().code, ErrorCode::out_of_memory);
    const std::string& msg = plan.error().message;
    EXPECT_NE(msg.find("device 0 (RTX 4060): needs 9."), std::string::npos) << msg;
    EXPECT_NE(msg.find("has 7.5 GiB free (keeping 0.5 GiB free)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("add device 1 (RTX 4090)"), std::string::npos) << msg;
    std::smatch match;
    ASSERT_TRUE(std::regex_search(msg, match, std::regex("lower the context to ([0-9]+)"))) << msg;
    o.n_ctx = static_cast<uint32_t>(std::stoul(match[1]));
    EXPECT_TRUE(plan_devices(m, devices, o)) << "the advised context " << o.n_ctx << " does not fit";
    o.n_ctx += 1024;
    EXPECT_FALSE(plan_devices(m, devices, o));
}

// A KV cache sized for several sequences apart from the context: the advice is about it, and
// following it fits.
TEST(Planner, ASharedKvCacheTooLargeIsAdvisedSmaller) {
    const ModelShape m = uniform_model(32, 135 * kMiB);
    PlanOptions o;
    o.mode = SplitMode::single;
    o.n_ctx = 4096;
    o.kv_tokens = 4 * 8192;  // four conversations of 8192 positions: 4 GiB of F16 cache
    Result<DevicePlan> plan = plan_devices(m, gpus({8}), o);
    ASSERT_FALSE(plan);
    const std::string& msg = plan.error().message;
    std::smatch match;
    ASSERT_TRUE(std::regex_search(msg, match, std::regex("make the KV cache hold ([0-9]+) tokens"))) << msg;
    EXPECT_EQ(msg.find("lower the context"), std::string::npos) << msg;
    o.kv_tokens = static_cast<uint32_t>(std::stoul(match[1]));
    ASSERT_TRUE(plan_devices(m, gpus({8}), o)) << "the advised cache " << o.kv_tokens << " does not fit";
    const uint64_t per_position = plan_devices(m, gpus({8}), o)->devices[0].kv_cache_bytes / o.kv_tokens;
    EXPECT_GT(per_position, 0u);
}

TEST(Planner, TheReserveIsKeptFree) {
    const ModelShape m = uniform_model(32, 135 * kMiB);
    PlanOptions o;
    o.mode = SplitMode::single;
    o.reserve_bytes = 0;
    Result<DevicePlan> plan = plan_devices(m, gpus({8}), o);
    ASSERT_TRUE(plan);
    const uint64_t need = plan->devices[0].total_bytes();
    o.reserve_bytes = 8 * kGiB - need + 1;
    EXPECT_FALSE(plan_devices(m, gpus({8}), o));
    o.reserve_bytes = 8 * kGiB - need;
    EXPECT_TRUE(plan_devices(m, gpus({8}), o));
}

// A CUDA device's prompts go through cuBLAS, which reads the largest matrix but the head
// decoded to f32: the CUDA stage allocates that buffer when its batch reaches 32 tokens, and
// the plan counts it (Llama 3 8B's gate, up and down: 14336 x 4096 floats, 224 MiB).
TEST(Planner, ACudaDeviceCountsTheF32MatrixOfItsPrompts) {
    const ModelShape m = uniform_model(32, 135 * kMiB);  // n_embd 4096, n_ff 14336
    const uint64_t operand = uint64_t{14336} * 4096 * 4;
    std::vector<DeviceDesc> cpu = gpus({24});
    cpu[0].kind = DeviceKind::cpu;
    PlanOptions o;
    o.mode = SplitMode::single;
    const auto scratch = [&](const std::vector<DeviceDesc>& devices, uint32_t n_batch, size_t device = 0) {
        PlanOptions with = o;
        with.n_batch = n_batch;
        Result<DevicePlan> plan = plan_devices(m, devices, with);
        EXPECT_TRUE(plan) << plan.error().message;
        return plan ? plan->devices.at(device).scratch_bytes : 0;
    };
    EXPECT_EQ(scratch(gpus({24}), 512) - scratch(cpu, 512), operand);
    EXPECT_EQ(scratch(gpus({24}), 32) - scratch(cpu, 32), operand);
    EXPECT_EQ(scratch(gpus({24}), 31), scratch(cpu, 31)) << "below 32 tokens the fused kernels take prompts";

    // Tensor split: each device decodes its share of the columns.
    o.mode = SplitMode::tensor;
    std::vector<DeviceDesc> two_cpus = gpus({24, 24});
    for (DeviceDesc& d : two_cpus) d.kind = DeviceKind::cpu;
    EXPECT_EQ(scratch(gpus({24, 24}), 512, 1) - scratch(two_cpus, 512, 1), operand / 2);

    // The buffer counts towards the fit: a GPU with 100 MiB more than the plan on a CPU needs.
    o.mode = SplitMode::single;
    o.n_batch = 512;
    Result<DevicePlan> on_cpu = plan_devices(m, cpu, o);
    ASSERT_TRUE(on_cpu) << on_cpu.error().message;
    std::vector<DeviceDesc> tight = gpus({24});
    tight[0].free_bytes = on_cpu->devices[0].total_bytes() + o.reserve_bytes + 100 * kMiB;
    Result<DevicePlan> on_gpu = plan_devices(m, tight, o);
    ASSERT_FALSE(on_gpu);
    EXPECT_EQ(on_gpu.error().code, ErrorCode::out_of_memory);
    tight[0].free_bytes += operand;
    EXPECT_TRUE(plan_devices(m, tight, o));
}

TEST(Planner, BadOptionsAreExplained) {
    const ModelShape m = uniform_model(8, 100 * kMiB);
    const auto message = [&](PlanOptions o) {
        Result<DevicePlan> p = plan_devices(m, gpus({24, 24}), o);
        return p ? std::string("(planned)") : p.error().message;
    };
    PlanOptions o;
    o.ratios = {1, 2, 3};
    EXPECT_EQ(message(o), "3 split ratios given for 2 devices");
    o.ratios = {1, 0};
    EXPECT_NE(message(o).find("split ratio 0 is not a positive number"), std::string::npos);
    o = {};
    o.use = {0, 5};
    EXPECT_EQ(message(o), "device 5 does not exist (there are 2)");
    o.use = {1};
    EXPECT_EQ(message(o), "the main device 0 is not among the devices used");
    EXPECT_FALSE(plan_devices(m, {}, PlanOptions{}));
    EXPECT_FALSE(parse_split_mode("pipeline"));
    EXPECT_EQ(parse_split_mode("auto").value(), SplitMode::automatic);
    EXPECT_FALSE(parse_device_spec("RTX 4090"));
    EXPECT_FALSE(parse_device_spec("RTX 4090:-3"));
    for (const char* zero : {"RTX 4090:0", "x:-1"}) {  // the size is what is wrong: say so
        const Result<std::vector<DeviceDesc>> refused = parse_device_spec(zero);
        ASSERT_FALSE(refused) << zero;
        EXPECT_NE(refused.error().message.find("GiB a size above 0"), std::string::npos) << refused.error().message;
    }
    Result<std::vector<DeviceDesc>> spec = parse_device_spec("RTX 4090:24;A100:80");
    ASSERT_TRUE(spec);
    EXPECT_EQ(spec->at(1).total_bytes, 80 * kGiB);
    EXPECT_DOUBLE_EQ(spec->at(1).bandwidth_gb_s, 2039.0);
}

// Random models and devices: whatever succeeds respects every budget and covers the model
// exactly once; whatever fails says which device or why.
TEST(Planner, NoPlanExceedsABudget) {
    std::mt19937 rng(7);
    const auto pick = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
    int planned = 0, refused = 0;
    for (int i = 0; i < 3000; ++i) {
        const uint32_t kv = 1u << pick(0, 3);
        ModelShape m = uniform_model(pick(1, 96), pick(10, 1200) * kMiB, kv * pick(1, 8), kv, 256 * pick(4, 112));
        for (LayerWeights& w : m.layers) w.down += pick(0, 64) * kMiB;  // uneven layers
        std::vector<DeviceDesc> devices;
        for (uint32_t d = 0, n = pick(1, 5); d < n; ++d) {
            DeviceDesc dev;
            dev.name = "GPU";
            dev.total_bytes = uint64_t{pick(4, 96)} * kGiB;
            dev.free_bytes = dev.total_bytes - pick(0, 3) * kGiB / 2;
            devices.push_back(dev);
        }
        PlanOptions o;
        o.mode = static_cast<SplitMode>(pick(0, 3));
        o.n_ctx = 512 * pick(1, 64);
        o.kv_type = pick(0, 1) ? KvCacheType::q8_0 : KvCacheType::f16;
        if (pick(0, 1)) {
            for (size_t d = 0; d < devices.size(); ++d) o.ratios.push_back(pick(1, 5));
        }
        Result<DevicePlan> plan = plan_devices(m, devices, o);
        if (!plan) {
            ++refused;
            EXPECT_FALSE(plan.error().message.empty());
            continue;
        }
        ++planned;
        expect_within_budgets(*plan);
        if (plan->mode == SplitMode::tensor) {
            EXPECT_EQ(plan->devices.back().kv_head_end, m.n_head_kv);
            EXPECT_EQ(plan->devices.back().ff_end, m.n_ff);
        } else {
            uint32_t next = 0;
            for (const DeviceAssignment& a : plan->devices) {
                EXPECT_EQ(a.first_layer, next);
                EXPECT_GE(a.n_layers, 1u);
                next += a.n_layers;
            }
            EXPECT_EQ(next, m.n_layer);
        }
        EXPECT_GT(plan->tokens_per_second, 0.0);
    }
    EXPECT_GT(planned, 300);
    EXPECT_GT(refused, 300);
}

// --- mixture of experts ---------------------------------------------------------------------

// Shaped like Qwen3-30B-A3B in Q4_K_M: 48 layers of attention (about 11 MiB) and 128 experts
// of which 8 are used (about 360 MiB per layer), 17 GiB of experts in all.
ModelShape moe_model() {
    ModelShape m = uniform_model(48, 0, 32, 4, 6144);
    m.name = "moe model";
    m.architecture = "qwen3moe";
    m.n_embd = 2048;
    m.n_expert = 128;
    m.n_expert_used = 8;
    m.n_ff_expert = 768;
    m.n_vocab = 151936;
    for (LayerWeights& w : m.layers) {
        w = LayerWeights{};
        w.q = w.o = 4700 * 1024;
        w.k = 600 * 1024;
        w.v = 860 * 1024;
        w.experts = 360 * kMiB;
        w.replicated = 1 * kMiB;  // the F32 router and the norms
        w.ff_block = 256;
    }
    m.embedding_bytes = 170 * kMiB;
    m.output_bytes = 250 * kMiB;
    return m;
}

std::vector<DeviceDesc> cpus(int n, double gib_each) {
    std::vector<DeviceDesc> out = gpus({});
    for (int i = 0; i < n; ++i) {
        DeviceDesc d;
        d.name = "CPU";
        d.kind = DeviceKind::cpu;
        d.total_bytes = d.free_bytes = static_cast<uint64_t>(gib_each * kGiB);
        out.push_back(d);
    }
    return out;
}

uint64_t expert_bytes(const ModelShape& m, uint32_t layers) {
    uint64_t total = 0;
    for (uint32_t l = 0; l < layers; ++l) total += m.layers[l].experts;
    return total;
}

// Auto on GPUs: none in RAM when the model fits; else the experts of as few layers as make the
// rest fit, the first layers' first, and the plan says so.
TEST(PlannerMoe, AutoKeepsTheFewestLayersExpertsInRamThatMakeTheRestFit) {
    const ModelShape m = moe_model();  // about 17.9 GiB in all, 16.9 GiB of it experts
    PlanOptions o;
    o.ram_bytes = 64 * kGiB;
    Result<DevicePlan> fits = plan_devices(m, gpus({24}), o);
    ASSERT_TRUE(fits) << fits.error().message;
    EXPECT_EQ(fits->experts_in_ram_layers, 0u);
    EXPECT_EQ(fits->ram_expert_bytes, 0u);

    Result<DevicePlan> plan = plan_devices(m, gpus({12}), o);
    ASSERT_TRUE(plan) << plan.error().message;
    const uint32_t n = plan->experts_in_ram_layers;
    ASSERT_GT(n, 0u);
    ASSERT_LT(n, 48u);
    EXPECT_EQ(plan->ram_expert_bytes, expert_bytes(m, n));
    EXPECT_EQ(plan->devices.front().weight_bytes, m.weight_bytes() - expert_bytes(m, n));
    EXPECT_NE(plan->reason.find(std::to_string(n) + " layers in RAM"), std::string::npos) << plan->reason;
    expect_within_budgets(*plan);
    // One layer fewer does not fit: n is the fewest.
    o.experts_in_ram = static_cast<int32_t>(n - 1);
    Result<DevicePlan> fewer = plan_devices(m, gpus({12}), o);
    ASSERT_FALSE(fewer);
    EXPECT_EQ(fewer.error().code, ErrorCode::out_of_memory);

    // Two GPUs hold it all by layer before any expert goes to RAM.
    o.experts_in_ram = kExpertsInRamAuto;
    Result<DevicePlan> two = plan_devices(m, gpus({12, 12}), o);
    ASSERT_TRUE(two) << two.error().message;
    EXPECT_EQ(two->mode, SplitMode::layer);
    EXPECT_EQ(two->experts_in_ram_layers, 0u);

    // Not enough RAM for the experts that must leave the GPU: said, with the amounts.
    o.ram_bytes = 2 * kGiB;
    Result<DevicePlan> short_ram = plan_devices(m, gpus({12}), o);
    ASSERT_FALSE(short_ram);
    EXPECT_EQ(short_ram.error().code, ErrorCode::out_of_memory);
    EXPECT_NE(short_ram.error().message.find("system memory"), std::string::npos) << short_ram.error().message;
    EXPECT_NE(short_ram.error().message.find("2.0 GiB is free"), std::string::npos) << short_ram.error().message;

    // Far too small even with every expert in RAM: the device's shortfall is what is said.
    o.ram_bytes = 64 * kGiB;
    Result<DevicePlan> tiny = plan_devices(m, gpus({1}), o);
    ASSERT_FALSE(tiny);
    EXPECT_EQ(tiny.error().code, ErrorCode::out_of_memory);
    EXPECT_NE(tiny.error().message.find("device 0"), std::string::npos) << tiny.error().message;
}

TEST(PlannerMoe, ExpertsOfTheFirstLayersInRamLeaveTheDevicesAndCountOnce) {
    const ModelShape m = moe_model();
    for (SplitMode mode : {SplitMode::single, SplitMode::layer, SplitMode::tensor}) {
        SCOPED_TRACE(split_mode_name(mode));
        PlanOptions o;
        o.mode = mode;
        o.experts_in_ram = 12;
        Result<DevicePlan> plan = plan_devices(m, cpus(mode == SplitMode::single ? 1 : 2, 40), o);
        ASSERT_TRUE(plan) << plan.error().message;
        EXPECT_EQ(plan->experts_in_ram_layers, 12u);
        EXPECT_EQ(plan->ram_expert_bytes, expert_bytes(m, 12));
        uint64_t on_devices = 0;
        for (const DeviceAssignment& a : plan->devices) on_devices += a.weight_bytes;
        // Every byte once, but that a tensor split gives each device the router and the norms
        // (and shares the heads by bytes, rounding).
        const uint64_t replicated = mode == SplitMode::tensor ? 48 * m.layers[0].replicated : 0;
        EXPECT_NEAR(static_cast<double>(on_devices + plan->ram_expert_bytes),
                    static_cast<double>(m.weight_bytes() + replicated),
                    mode == SplitMode::tensor ? 1e-6 * static_cast<double>(m.weight_bytes()) : 0.0);
    }
    // Fewer layers' experts in RAM: more bytes on the devices, and a slower estimate of the
    // more experts read from RAM (at system memory bandwidth).
    PlanOptions few, many;
    few.experts_in_ram = 4;
    many.experts_in_ram = 40;
    Result<DevicePlan> a = plan_devices(m, cpus(1, 40), few);
    Result<DevicePlan> b = plan_devices(m, cpus(1, 40), many);
    ASSERT_TRUE(a && b);
    EXPECT_GT(a->devices.front().weight_bytes, b->devices.front().weight_bytes);
    EXPECT_EQ(a->devices.front().weight_bytes - b->devices.front().weight_bytes, expert_bytes(m, 36));
}

TEST(PlannerMoe, ExpertParallelSplitsWholeExpertsByRatio) {
    const ModelShape m = moe_model();
    PlanOptions o;
    o.mode = SplitMode::tensor;
    o.ratios = {3, 1};
    Result<DevicePlan> plan = plan_devices(m, cpus(2, 40), o);
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_EQ(plan->devices.size(), 2u);
    EXPECT_EQ(plan->devices[0].expert_begin, 0u);
    EXPECT_EQ(plan->devices[0].expert_end, 96u);
    EXPECT_EQ(plan->devices[1].expert_begin, 96u);
    EXPECT_EQ(plan->devices[1].expert_end, 128u);
    for (const DeviceAssignment& a : plan->devices) {
        EXPECT_EQ(a.ff_begin, 0u);  // no dense columns to split
        EXPECT_EQ(a.ff_end, m.n_ff);
    }
    // The experts' bytes follow the experts: three quarters on the first device.
    const double first = static_cast<double>(plan->devices[0].weight_bytes - m.embedding_bytes - m.output_bytes);
    const double second = static_cast<double>(plan->devices[1].weight_bytes);
    EXPECT_NEAR(first / (first + second), 0.75, 0.01);
    // More devices than experts cannot split them.
    ModelShape few = m;
    few.n_expert = 1;
    few.n_expert_used = 1;
    Result<DevicePlan> refused = plan_devices(few, cpus(2, 40), o);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("at least 2 experts"), std::string::npos) << refused.error().message;
}

TEST(PlannerMoe, TheEstimateReadsOnlyTheExpertsATokenUses) {
    ModelShape sparse = moe_model();
    ModelShape dense = sparse;
    dense.n_expert_used = dense.n_expert;  // every expert, every token
    PlanOptions o;
    o.experts_in_ram = 0;
    Result<DevicePlan> a = plan_devices(sparse, cpus(1, 40), o);
    Result<DevicePlan> b = plan_devices(dense, cpus(1, 40), o);
    ASSERT_TRUE(a && b);
    // 8 of 128 experts: about 1.4 GiB read per token instead of about 17.6 GiB.
    EXPECT_GT(a->tokens_per_second, 8 * b->tokens_per_second);
}

TEST(PlannerMoe, ExpertsInRamOptionsAreChecked) {
    EXPECT_EQ(*parse_experts_in_ram("auto"), kExpertsInRamAuto);
    EXPECT_EQ(*parse_experts_in_ram("all"), kExpertsInRamAll);
    EXPECT_EQ(*parse_experts_in_ram("12"), 12);
    for (const char* bad : {"-1", "x", "12 ", ""}) {
        Result<int32_t> r = parse_experts_in_ram(bad);
        ASSERT_FALSE(r) << bad;
        EXPECT_NE(r.error().message.find("auto, all or a number of layers"), std::string::npos);
    }
    PlanOptions o;
    o.experts_in_ram = 49;
    Result<DevicePlan> plan = plan_devices(moe_model(), cpus(1, 40), o);
    ASSERT_FALSE(plan);
    EXPECT_EQ(plan.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(plan.error().message.find("the model has 48"), std::string::npos) << plan.error().message;
    // A dense model ignores the option.
    EXPECT_TRUE(plan_devices(uniform_model(32, 200 * kMiB), cpus(1, 40), o));
}

}  // namespace
}  // namespace powerhouse

// --- The shape from a header alone (a model not yet downloaded) ---------------------------

namespace powerhouse {
namespace {

TEST(ShapeFromHeader, EqualsTheFileOnDiskFromTheFirstBytesAlone) {
    for (const char* name : {"qwen3-f16.gguf", "gemma3-q4_k.gguf", "qwen3moe-f16.gguf"}) {
        SCOPED_TRACE(name);
        const auto path = test::data_dir() / "arch" / name;
        const std::string file = test::read_file(path);
        auto local = read_model_shape(path);
        ASSERT_TRUE(local) << local.error().message;
        const auto prefix = [&](size_t n) {
            return GgufPrefix{name, std::as_bytes(std::span(file.data(), n)), file.size()};
        };
        // A few bytes: the header goes on; the whole file: its length.
        auto few = gguf_header_length(prefix(64));
        ASSERT_TRUE(few) << few.error().message;
        EXPECT_FALSE(*few);
        auto whole = gguf_header_length(prefix(file.size()));
        ASSERT_TRUE(whole && *whole) << (whole ? "incomplete" : whole.error().message);
        const size_t length = static_cast<size_t>(**whole);
        ASSERT_LT(length, file.size());
        auto short_by_one = gguf_header_length(prefix(length - 1));
        ASSERT_TRUE(short_by_one);
        // The last bytes before the data may be the alignment's padding, which is not read.
        auto exact = gguf_header_length(prefix(length));
        ASSERT_TRUE(exact && *exact);
        auto remote = read_model_shape(std::vector<GgufPrefix>{prefix(length)});
        ASSERT_TRUE(remote) << remote.error().message;
        EXPECT_EQ(remote->architecture, local->architecture);
        EXPECT_EQ(remote->n_layer, local->n_layer);
        EXPECT_EQ(remote->n_head_kv, local->n_head_kv);
        EXPECT_EQ(remote->n_expert, local->n_expert);
        EXPECT_EQ(remote->weight_bytes(), local->weight_bytes());
        EXPECT_EQ(remote->tied_output, local->tied_output);
        ASSERT_EQ(remote->layers.size(), local->layers.size());
        for (size_t i = 0; i < local->layers.size(); ++i) {
            EXPECT_EQ(remote->layers[i].total(), local->layers[i].total());
            EXPECT_EQ(remote->layers[i].experts, local->layers[i].experts);
        }
        // Too few bytes for read_model_shape: said, not guessed.
        auto cut = read_model_shape(std::vector<GgufPrefix>{prefix(64)});
        ASSERT_FALSE(cut);
        EXPECT_NE(cut.error().message.find("continues past the first 64 bytes"), std::string::npos)
            << cut.error().message;
        // A file said to be shorter than its tensors: malformed, as on disk.
        GgufPrefix truncated = prefix(length);
        truncated.file_size = length + 1;
        auto bad = gguf_header_length(truncated);
        ASSERT_FALSE(bad);
        EXPECT_EQ(bad.error().code, ErrorCode::format);
    }
    const std::string junk = "GGUX and then some bytes that are not a GGUF header at all";
    auto refused = gguf_header_length({"junk", std::as_bytes(std::span(junk.data(), junk.size())), 1000000});
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("not a GGUF model file"), std::string::npos) << refused.error().message;
}

}  // namespace
}  // namespace powerhouse
