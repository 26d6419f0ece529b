// The glue of the op conformance tests (op_conformance_test.cpp): one op of the step
// program as a whole model (a tiny GGUF holding exactly the op's weights, written with the
// project's GgufWriter and quantized with the engine's own quantizers), the stages that run
// it (the CPU stage per kernel ISA, the CUDA stage where one is built and a GPU is there),
// one step through a stage by its activation buffers, the float references, and the
// comparisons that name the worst element.
//
// Thread-safety: as GoogleTest tests; nothing here is shared between threads.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "arch/hparams.h"
#include "arch/step_program.h"
#include "backend/cpu/quant_dot.h"
#include "backend/device_stage.h"
#include "gguf/gguf_model.h"
#include "powerhouse/device_types.h"
#include "powerhouse/result.h"
#include "support/float_compare.h"
#include "tensor/dtype.h"

namespace powerhouse::test {

// A weight of the one-op model, written in `type` from f32 values drawn uniformly from
// [lo, hi) by std::mt19937(seed). They are drawn when the model is written, not when the case
// is made: every start of the program makes all the cases (to list them, and each ctest case
// is a start of its own), and drawing the matrices' values then took 4 s a start under
// AddressSanitizer.
struct TensorData {
    std::string name;
    GgmlType type = GgmlType::f32;
    std::vector<int64_t> dims;  // dims[0]: the row length
    float lo = -1.0f;
    float hi = 1.0f;
    uint32_t seed = 1;

    // The first n values (n: the product of dims, as the writer counts them), f32 before
    // quantization.
    std::vector<float> values(int64_t n) const;
};

// One call of the stage's layer: n tokens at positions pos .. pos + n - 1.
struct Step {
    int n = 1;
    uint32_t pos = 0;
};

// One op as a one-layer model: the test's parameter.
struct OpCase {
    std::string name;  // the test's name: "Q4_K_in_256_rows_7_tokens_3"
    arch::Hparams hp;  // n_layer 1, hp.layers = {layer}
    arch::Op op;
    std::vector<TensorData> tensors;
    KvCacheType kv = KvCacheType::f16;
    uint32_t n_ctx = 64;
    std::vector<Step> steps;
    uint32_t seed = 1;
    // A width the GPU takes (a multiple of 8, not of 32) added for the GPU's sake: the CPU
    // skips it, as its odd widths beside it test its tails better (and cost CI time).
    bool gpu_shape = false;

    arch::StepProgram program() const;  // layer = {op}, layers = hp.layers
    uint32_t n_batch() const;           // the largest step
    // Whether the CUDA stage takes this one-op model (cuda_stage_supports, as the planner
    // asks before any load), or why not.
    Result<void> cuda_supported() const;
};

// Hyper-parameters of a one-layer model of the given widths: n_head * head_dim query
// values, n_head_kv * head_dim keys and values, RoPE over the whole head.
arch::Hparams tiny_hparams(uint32_t n_embd, uint32_t n_head, uint32_t n_head_kv, uint32_t head_dim, uint32_t n_ff);

// Writes the tensors as a GGUF file at `path` and opens it.
Result<GgufModel> write_model(const std::filesystem::path& path, const std::vector<TensorData>& tensors);

// The stage's width of buffer b (the whole width: these stages hold every head and column).
size_t buffer_width(const arch::Hparams& hp, arch::Buffer b);

// A stage of the one-op model: the CPU stage with its kernels forced to `isa`, or with the
// ISA chosen at run time (best_isa()) when unset.
Result<std::unique_ptr<DeviceStage>> make_cpu_stage(const GgufModel& model, const OpCase& c,
                                                    std::optional<cpu::KernelIsa> isa);
// The CUDA stage on GPU 0; `use_cublas` false keeps prompts on the fused kernels. An error
// in a build without CUDA (POWERHOUSE_HAS_CUDA unset), so that the tests compile the same
// in both.
Result<std::unique_ptr<DeviceStage>> make_cuda_stage(const GgufModel& model, const OpCase& c, bool use_cublas);

// Why the CUDA half cannot run here ("built without CUDA", "no NVIDIA driver found"), or
// nothing when it can. POWERHOUSE_REQUIRE_GPU (tests/kernels/gpu_test.h) turns the skip
// into a failure.
std::optional<std::string> cuda_unavailable();
bool gpu_required();

// The values written into buffer b for one step: [n][width] f32.
using BufferValues = std::vector<std::pair<arch::Buffer, std::vector<float>>>;

// Writes the inputs, runs the stage's layer over step.n tokens at step.pos and reads the
// op's destination back ([n][width of dst] into `out`).
::testing::AssertionResult run_step(DeviceStage& stage, const OpCase& c, const BufferValues& inputs, const Step& step,
                                    std::vector<float>& out);

std::vector<float> uniform(size_t n, float lo, float hi, std::mt19937& rng);

// The weight of a tensor of the opened model decoded to f32 ([rows][ne0]) with the engine's
// reference dequantizer.
std::vector<float> decode_tensor(const GgufModel& model, const std::string& name);

// The activations x ([n][in] f32) as the CPU multiplies them by weights of `weight_type`:
// converted to the activation format of quant_dot.h (Q8_0, Q8_1, Q8_K, F16, BF16 or F32)
// and decoded back to f32.
std::vector<float> cpu_activations(GgmlType weight_type, const std::vector<float>& x, int64_t in, int n);

// f32's unit roundoff, 2^-24: the largest relative error of one rounded f32 operation.
// Float tolerances are counts of it times the magnitude they bound.
inline constexpr double kRound = 1.0 / 16777216.0;

}  // namespace powerhouse::test
