#include "engine/backend/op_conformance_support.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <span>

#include "backend/cpu/cpu_backend.h"
#include "gguf/gguf_writer.h"
#include "plan/device_limits.h"
#include "tensor/dequantize.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"

#if defined(POWERHOUSE_HAS_CUDA)
#include "backend/cuda/cuda_runtime.h"
#include "backend/cuda/cuda_stage.h"
#endif

namespace powerhouse::test {

using arch::Buffer;

arch::StepProgram OpCase::program() const {
    arch::StepProgram p;
    p.layer = {op};
    p.layers = hp.layers;
    p.causal = hp.causal;
    return p;
}

uint32_t OpCase::n_batch() const {
    int most = 1;
    for (const Step& s : steps) most = std::max(most, s.n);
    return static_cast<uint32_t>(most);
}

Result<void> OpCase::cuda_supported() const {
    return cuda_stage_supports(
        StageShape{hp.head_dim, kv, n_batch(), hp.n_embd, hp.n_ff, hp.n_head, hp.embedding_only || !hp.causal});
}

arch::Hparams tiny_hparams(uint32_t n_embd, uint32_t n_head, uint32_t n_head_kv, uint32_t head_dim, uint32_t n_ff) {
    arch::Hparams hp;
    hp.architecture = "llama";
    hp.n_layer = 1;
    hp.n_embd = n_embd;
    hp.n_head = n_head;
    hp.n_head_kv = n_head_kv;
    hp.head_dim = head_dim;
    hp.n_ff = n_ff;
    hp.n_vocab = 8;
    hp.n_ctx_train = 4096;
    hp.rms_eps = 1e-5f;
    hp.rope_dims = head_dim;
    hp.layers = {arch::LayerAttention{}};
    return hp;
}

std::vector<float> TensorData::values(int64_t n) const {
    std::mt19937 rng(seed);
    return uniform(static_cast<size_t>(n), lo, hi, rng);
}

Result<GgufModel> write_model(const std::filesystem::path& path, const std::vector<TensorData>& tensors) {
    GgufWriter writer;
    writer.metadata().set_string("general.architecture", "llama");
    for (const TensorData& t : tensors) PH_TRY(writer.add_tensor({t.name, t.type, t.dims}));
    PH_TRY(writer.write_file(path, [&](size_t index, const GgufTensorSpec& spec, std::span<std::byte> out) {
        const std::vector<float> values = tensors[index].values(spec.n_elements());
        const int64_t width = spec.dims[0];
        const uint64_t row = row_bytes(type_traits(spec.type), static_cast<uint64_t>(width));
        for (int64_t r = 0; r < spec.n_elements() / width; ++r) {
            quantize_row(spec.type, values.data() + r * width, out.data() + static_cast<uint64_t>(r) * row, width);
        }
        return Result<void>{};
    }));
    return GgufModel::open(path);
}

size_t buffer_width(const arch::Hparams& hp, Buffer b) {
    switch (b) {
        case Buffer::x:
        case Buffer::norm:
        case Buffer::tmp:
            return hp.n_embd;
        case Buffer::q:
        case Buffer::attn:
            return size_t{hp.n_head} * hp.head_dim;
        case Buffer::k:
        case Buffer::v:
            return size_t{hp.n_head_kv} * hp.head_dim;
        case Buffer::gate:
        case Buffer::up:
            return hp.n_ff;
        case Buffer::logits:
            return hp.n_vocab;
        case Buffer::router:
            return hp.experts.count;
    }
    return 0;
}

Result<std::unique_ptr<DeviceStage>> make_cpu_stage(const GgufModel& model, const OpCase& c,
                                                    std::optional<cpu::KernelIsa> isa) {
    cpu::CpuBackendOptions options;
    options.n_ctx = c.n_ctx;
    options.n_threads = 2;  // several threads, so that the work is split as in the engine
    options.n_batch = c.n_batch();
    options.kv_cache_type = c.kv;
    options.isa = isa;
    cpu::CpuShard shard;
    shard.name = std::string("CPU ") + cpu::isa_name(isa.value_or(cpu::best_isa()));
    shard.embedding = false;
    shard.output = false;
    return cpu::create_cpu_stage(model, c.hp, c.program(), options, shard);
}

Result<std::unique_ptr<DeviceStage>> make_cuda_stage(const GgufModel& model, const OpCase& c, bool use_cublas) {
#if defined(POWERHOUSE_HAS_CUDA)
    cuda::CudaStageOptions options;
    options.n_ctx = c.n_ctx;
    options.n_batch = c.n_batch();
    options.kv_cache_type = c.kv;
    options.use_cublas = use_cublas;
    cuda::CudaShard shard;
    shard.name = use_cublas ? "GPU 0" : "GPU 0 (fused kernels only)";
    shard.embedding = false;
    shard.output = false;
    return cuda::create_cuda_stage(model, c.hp, c.program(), options, shard);
#else
    (void)model;
    (void)c;
    (void)use_cublas;
    return make_error(ErrorCode::unsupported, "this build has no CUDA backend (POWERHOUSE_CUDA=OFF)");
#endif
}

std::optional<std::string> cuda_unavailable() {
#if defined(POWERHOUSE_HAS_CUDA)
    Result<void> available = cuda::cuda_available();
    if (available) return std::nullopt;
    return available.error().message;
#else
    return std::string("this build has no CUDA backend (POWERHOUSE_CUDA=OFF)");
#endif
}

bool gpu_required() {
    const char* value = std::getenv("POWERHOUSE_REQUIRE_GPU");
    return value != nullptr && *value != '\0' && std::string(value) != "0";
}

::testing::AssertionResult run_step(DeviceStage& stage, const OpCase& c, const BufferValues& inputs, const Step& step,
                                    std::vector<float>& out) {
    for (const auto& [b, values] : inputs) {
        if (Result<void> w = stage.write_buffer(b, values); !w) {
            return ::testing::AssertionFailure() << stage.name() << ": " << w.error().message;
        }
    }
    const ContiguousBatch rows(step.n, step.pos);
    if (Result<void> r = stage.run_layers(rows.batch()); !r) {
        return ::testing::AssertionFailure() << stage.name() << ": " << r.error().message;
    }
    out.assign(buffer_width(c.hp, c.op.dst) * static_cast<size_t>(step.n), 0.0f);
    if (Result<void> r = stage.read_buffer(c.op.dst, out); !r) {
        return ::testing::AssertionFailure() << stage.name() << ": " << r.error().message;
    }
    return ::testing::AssertionSuccess();
}

std::vector<float> uniform(size_t n, float lo, float hi, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

std::vector<float> decode_tensor(const GgufModel& model, const std::string& name) {
    const GgufTensorInfo* t = model.find_tensor(name);
    if (t == nullptr) {
        ADD_FAILURE() << "no tensor " << name;
        return {};
    }
    const int64_t width = t->ne[0];
    const uint64_t row = row_bytes(type_traits(t->type), static_cast<uint64_t>(width));
    std::vector<float> values(static_cast<size_t>(t->n_elements));
    for (int64_t r = 0; r < t->n_rows(); ++r) {
        dequantize_row(t->type, t->data + static_cast<uint64_t>(r) * row, values.data() + r * width, width);
    }
    return values;
}

std::vector<float> cpu_activations(GgmlType weight_type, const std::vector<float>& x, int64_t in, int n) {
    const GgmlType act = cpu::activation_type(weight_type);
    std::vector<std::byte> bytes(cpu::activation_bytes(weight_type, in));
    std::vector<float> decoded(x.size());
    for (int t = 0; t < n; ++t) {
        const float* src = x.data() + static_cast<size_t>(t) * static_cast<size_t>(in);
        float* dst = decoded.data() + static_cast<size_t>(t) * static_cast<size_t>(in);
        cpu::quantize_activations(cpu::KernelIsa::scalar, weight_type, src, bytes.data(), in);
        switch (act) {
            case GgmlType::q8_0:
                dequantize_row(GgmlType::q8_0, bytes.data(), dst, in);
                break;
            case GgmlType::q8_1:
                for (int64_t b = 0; b < in / kQK; ++b) {
                    cpu::BlockQ8_1 block;
                    std::memcpy(&block, bytes.data() + static_cast<size_t>(b) * sizeof block, sizeof block);
                    for (int i = 0; i < kQK; ++i) dst[b * kQK + i] = f16_to_f32(block.d) * block.qs[i];
                }
                break;
            case GgmlType::q8_k:
                for (int64_t b = 0; b < in / QK_K; ++b) {
                    cpu::BlockQ8_K block;
                    std::memcpy(&block, bytes.data() + static_cast<size_t>(b) * sizeof block, sizeof block);
                    for (int i = 0; i < QK_K; ++i) dst[b * QK_K + i] = block.d * block.qs[i];
                }
                break;
            case GgmlType::f16:
            case GgmlType::bf16:
                for (int64_t i = 0; i < in; ++i) {
                    uint16_t h;
                    std::memcpy(&h, bytes.data() + 2 * i, 2);
                    dst[i] = act == GgmlType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
                }
                break;
            default:
                std::copy_n(src, in, dst);
        }
    }
    return decoded;
}

}  // namespace powerhouse::test
