// The CUDA backend: one device's part of a model (a DeviceStage, backend/device_stage.h) on
// one NVIDIA GPU, executing the same step program as the CPU backend (arch/step_program.h)
// with the kernels of kernels/powerhouse_kernels.h:
//   - the device's share of the weights uploaded from the memory-mapped file once, in their
//     file format (quantized blocks stay quantized: the products decode them on the fly);
//   - activations in f32, a KV cache in F16 or Q8_0, flash-decoding attention;
//   - prompts: weights decoded to F16 and multiplied by cuBLAS on the tensor cores when
//     cuBLAS is installed (loaded at run time), else by the fused kernels 8 tokens at a time;
//   - the decode step of a stage without all-reduce partners captured once as a CUDA graph
//     and replayed for every token (positions live in device memory, so the graph holds);
//   - every CUDA error becomes an error value naming the GPU, never an abort.
// A plan over several GPUs, or over several shards of one GPU, joins the stages with the
// communicator of make_cuda_communicator (cuda_communicator.h).
//
// Thread-safety: as DeviceStage. Each call selects the stage's GPU on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "arch/hparams.h"
#include "arch/step_program.h"
#include "backend/communicator.h"
#include "backend/cpu/host_experts.h"
#include "backend/device_stage.h"
#include "backend/stage_layout.h"
#include "gguf/gguf_model.h"
#include "powerhouse/device_types.h"

namespace powerhouse::cuda {

struct CudaStageOptions {
    uint32_t n_ctx = 4096;
    uint32_t n_batch = 64;  // tokens per call
    KvCacheType kv_cache_type = KvCacheType::f16;
    // Sequences at once. 1: the cache holds one sequence by position (n_ctx rows). More: the
    // cache is a pool of kv_rows rows in blocks of kv_block_size shared by the sequences
    // (backend/kv_blocks.h), read through block tables, and a head takes a row per sequence.
    uint32_t max_sequences = 1;
    uint32_t kv_rows = 0;
    uint32_t kv_block_size = 32;
    bool use_graphs = true;  // capture the decode step as a CUDA graph
    bool use_cublas = true;  // prompts through cuBLAS when it can be loaded
    // Run a norm or gate and the quantizing of its result, and a product and the residual
    // add after it, as one launch each (fusion.h); false: every op its own launches.
    bool fuse_ops = true;
    // Called while the weights upload with the bytes done and the total; false stops.
    std::function<bool(uint64_t done, uint64_t total)> upload_progress;
};

struct CudaShard {
    std::string name = "GPU 0";
    int device = 0;  // CUDA runtime device index
    ShardRanges ranges;
    // Runs the experts of the layers whose experts are in RAM (ranges.ram_expert_layers).
    std::shared_ptr<cpu::HostExperts> host_experts;
    bool embedding = true;
    bool output = true;
    Communicator* comm = nullptr;  // a tensor split's all-reduce partners; null: none
    int rank = 0;
    uint64_t planned_bytes = 0;  // the planner's prediction, for DeviceUsage
    // Tests of fault handling (ModelOptions::fail_device): every run_layers after the first
    // fail_after ones fails (-1: never); with fail_hangs its stream stops instead (a host
    // function that waits for DeviceStage::interrupt), as a hung kernel would.
    int64_t fail_after = -1;
    bool fail_hangs = false;
};

// `model` must outlive the stage only during creation: the weights are copied to the GPU.
// Fails with what is missing ("no NVIDIA driver found", "out of memory on GPU 0 (NVIDIA
// H200): 3.2 GiB more needed ...", an unsupported weight type) before or during upload,
// freeing whatever it had allocated.
Result<std::unique_ptr<DeviceStage>> create_cuda_stage(const GgufModel& model, const arch::Hparams& hparams,
                                                       const arch::StepProgram& program,
                                                       const CudaStageOptions& options, const CudaShard& shard);

// How many attention splits a call of n_tokens tokens uses (the flash-decoding chunks),
// given the stage's heads, the context and the GPU's multiprocessors: enough thread blocks
// to fill the GPU, never more than n_ctx / 128 (each chunk at least 128 positions), and
// for one token always the same number, so that the captured graph fits every position.
int attention_splits(int n_tokens, int n_head, uint32_t n_ctx, int multiprocessors);

}  // namespace powerhouse::cuda
