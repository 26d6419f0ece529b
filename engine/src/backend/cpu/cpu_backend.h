// The CPU backend: executes a step program (arch/step_program.h) with the weights used in
// place from the memory-mapped model file, a KV cache in F16 or Q8_0, and the thread pool.
// Numerics follow llama.cpp's CPU backend where it matters for agreeing with it token for
// token: activations quantized to 8 bits for quantized weights, queries and attention
// probabilities rounded to F16 for the products with the F16 cache, RoPE angles computed
// the way ggml computes them, GELU looked up in a table of f16 inputs as ggml does.
//
// Thread-safety: as Backend.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "arch/hparams.h"
#include "arch/step_program.h"
#include "backend/backend.h"
#include "backend/communicator.h"
#include "backend/cpu/host_experts.h"
#include "backend/cpu/quant_dot.h"
#include "backend/device_stage.h"
#include "backend/stage_layout.h"
#include "gguf/gguf_model.h"
#include "powerhouse/device_types.h"

namespace powerhouse::cpu {

struct CpuBackendOptions {
    uint32_t n_ctx = 4096;
    int n_threads = 0;      // 0: all cores
    uint32_t n_batch = 64;  // tokens processed together
    KvCacheType kv_cache_type = KvCacheType::f16;
    // The KV cache: a pool of blocks of kv_block_size rows shared by the sequences
    // (backend/kv_blocks.h); kv_rows 0: n_ctx rows.
    uint32_t kv_rows = 0;
    uint32_t kv_block_size = 32;
    // Rows whose logits one head() call computes (the sequences of a batch).
    int max_head_rows = 1;
    // The kernels' instruction set (quant_dot.h); unset: best_isa(). Tests run the scalar
    // variant beside the chosen one; an ISA the processor lacks is refused.
    std::optional<KernelIsa> isa;
    // Copy the weights that have a faster interleaved layout for the ISA into it
    // (interleave.h; same results bit for bit). Off: every product reads the file's rows.
    bool interleave = true;
};

// What one CPU device of a plan holds (powerhouse/plan.h DeviceAssignment).
struct CpuShard {
    std::string name = "CPU";
    // Layers, KV heads and feed-forward columns (backend/stage_layout.h). Column ranges of
    // a row-parallel weight must start on a block of its format.
    ShardRanges ranges;
    bool embedding = true;
    bool output = true;
    // The tensor split's all-reduce partners (this device is `rank`); null: none.
    Communicator* comm = nullptr;
    int rank = 0;
    uint64_t planned_bytes = 0;  // for DeviceUsage
    // Tests of fault handling: every run_layers after the first fail_after ones fails (-1:
    // never), as a GPU that fell off the bus would; with fail_hangs it never answers instead,
    // until DeviceStage::interrupt() (a kernel or a collective that hangs).
    int64_t fail_after = -1;
    bool fail_hangs = false;
    // Runs the experts of the layers whose experts are in RAM (ranges.ram_expert_layers),
    // shared by the stages of a plan; needed when there are such layers.
    std::shared_ptr<HostExperts> host_experts;
};

// `model` must outlive the backend (weights are read from its mapping).
Result<std::unique_ptr<Backend>> create_cpu_backend(const GgufModel& model, const arch::Hparams& hparams,
                                                    const arch::StepProgram& program, const CpuBackendOptions& options);

// One device of a split model; options.n_threads are its own threads.
Result<std::unique_ptr<DeviceStage>> create_cpu_stage(const GgufModel& model, const arch::Hparams& hparams,
                                                      const arch::StepProgram& program,
                                                      const CpuBackendOptions& options, const CpuShard& shard);

}  // namespace powerhouse::cpu
