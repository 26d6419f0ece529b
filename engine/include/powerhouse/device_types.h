// Value types that the device backends (engine/src/backend) report and take, and that the
// public API hands on: how a KV cache stores keys and values, and what one device of a
// loaded model holds and has done. They live in a header of their own, with nothing but the
// standard library, so that the backends depend on these types and not on the Model class
// (powerhouse/model.h) that sits above them.
//
// Thread-safety: value types.
#pragma once

#include <cstdint>
#include <string>

namespace powerhouse {

enum class KvCacheType { f16, q8_0, f32 };
const char* kv_cache_type_name(KvCacheType type);  // "f16", "q8_0", "f32"

// One device's share of a loaded model.
struct DeviceUsage {
    std::string name;           // "CPU 1"
    std::string uuid;           // the GPU's UUID, as NVML names it (telemetry.h); empty on the CPU
    std::string part;           // "layers 0-14 + embedding", "KV heads 0-1, FFN columns 0-767 + output"
    uint64_t weight_bytes = 0;  // the weights the device holds (read in place for the CPU)
    // Mixture of experts: the experts of the device's layers kept in system RAM and run by
    // the CPU (PlanOptions::experts_in_ram); not in weight_bytes.
    uint64_t ram_weight_bytes = 0;
    uint64_t kv_cache_bytes = 0;
    uint64_t scratch_bytes = 0;  // activations, logits
    uint64_t planned_bytes = 0;  // what the planner predicted for it, all included
    double busy_seconds = 0;     // in the device's work, communication included
    double comm_seconds = 0;     // in transfers and all-reduces
    // GPUs: the time the GPU itself spent on the device's work (CUDA events), its peak
    // memory bandwidth, and the weight bytes one decode step reads there: the roofline of
    // a decode step is step_bytes / bandwidth. 0 on the CPU.
    double gpu_seconds = 0;
    double bandwidth_gb_s = 0;
    uint64_t step_bytes = 0;
    // GPUs: which fast paths are on, and how often they ran. `cuda_graphs`: the decode step
    // is replayed as a CUDA graph (false when graphs are off, or a capture failed and the
    // stage fell back to plain launches, with the reason in `graphs_note`). `cublas`: prompt
    // batches go through cuBLAS (false when it could not be loaded: `cublas_note` says why).
    bool cuda_graphs = false;
    uint64_t graph_replays = 0;
    std::string graphs_note;
    bool cublas = false;
    uint64_t cublas_gemms = 0;
    std::string cublas_note;
    // GPUs: launches saved by fusing ops (a norm or gate with the next product's quantizing,
    // a product with the residual add, products of one input in one launch); 0 with
    // ModelOptions::cuda_fused_ops off.
    uint64_t fused_launches = 0;
};

// A device that failed while the model ran (Model::fault(), ARCHITECTURE.md section 7).
struct DeviceFault {
    // Which of the model's devices (the order of ModelSummary::devices); -1 when the step
    // failed without one to blame (a collective that never completed).
    int device = -1;
    std::string name;  // "GPU 1", "CPU 2"; empty when not known
    std::string uuid;  // the GPU's UUID, as NVML and the settings name it; empty on the CPU
    bool timed_out = false;  // it did not answer within the step's deadline
    // It stopped answering (timed out, or the driver reports the GPU lost), rather than
    // answering with an error: for the words of a banner.
    bool stopped_answering = false;
    std::string cause;  // what happened, in words, without the device's name
};

}  // namespace powerhouse
