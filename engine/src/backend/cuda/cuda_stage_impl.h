// The CUDA stage (cuda_stage.h) as its source files share it: the class, the ops as the GPU
// runs them, pinned host arrays. Internal to engine/src/backend/cuda.
#pragma once

#include "backend/cuda/cuda_stage.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <powerhouse_kernels.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cpu/quant_dot.h"
#include "backend/cuda/cuda_libraries.h"
#include "backend/cuda/cuda_runtime.h"
#include "backend/cuda/dequantize_cuda.h"
#include "backend/cuda/fusion.h"
#include "plan/device_limits.h"
#include "tensor/dtype.h"

namespace powerhouse::cuda::detail {


using arch::Buffer;
using arch::Op;
using arch::OpKind;
using Clock = std::chrono::steady_clock;

// Prompts of at least this many tokens go through cuBLAS (plan/device_limits.h says why).
constexpr int kCublasMinTokens = static_cast<int>(kCudaCublasMinTokens);

inline std::string gib(uint64_t bytes) {
    return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
}

// An op as the GPU runs it: its weight (matmul rows, packed row_bytes apart, or F32 values)
// in device memory.
struct DeviceOp {
    const Op* op = nullptr;
    GgmlType type = GgmlType::f32;
    const void* weight = nullptr;
    int64_t in = 0;
    int64_t rows = 0;
    uint64_t row_bytes = 0;
    bool all_reduce = false;
    BoundWeight ram_experts;  // moe: the experts in RAM (host memory), run by HostExperts
    // moe with the experts on the GPU: gate, up and down of the stage's experts, each
    // expert's matrix expert_stride bytes after the previous one, and their biases.
    struct Matrix {
        GgmlType type = GgmlType::f32;
        const std::byte* data = nullptr;
        uint64_t expert_stride = 0;
        uint64_t row_bytes = 0;
        int64_t in = 0, rows = 0;
        const float* bias = nullptr;  // [experts][rows]; null: none
    };
    std::array<Matrix, 3> experts{};
    bool device_experts = false;
    uint32_t expert_begin = 0, expert_end = 0;
    // Fusions (fusion.h) this op takes part in where the batch takes the 8-bit products:
    // a norm or gate that quantizes its result for the product after it (of that weight
    // type and width), and a product that does the residual add after it.
    bool quantize_next = false;
    GgmlType quantize_type = GgmlType::f32;
    bool residual_next = false;
    // A product whose next op is a product of the same input and weight type: one launch
    // runs both (and a third after them).
    bool set_next = false;
    // A RoPE whose next op is the RoPE of another buffer (K after Q): one launch rotates
    // both.
    bool rope_pair_next = false;
    // moe: the selection bias of every expert ([n_expert]; null: none), and the shared
    // expert (one matrix each) where this stage runs it.
    const float* selection_bias = nullptr;
    std::array<Matrix, 3> shared{};
    bool has_shared = false;
};

// Pinned host memory, freed on destruction.
template <class T>
class PinnedArray {
public:
    PinnedArray() = default;
    ~PinnedArray() {
        if (data_ != nullptr) cudaFreeHost(data_);
    }
    PinnedArray(const PinnedArray&) = delete;
    PinnedArray& operator=(const PinnedArray&) = delete;
    int allocate(size_t n) {
        void* p = nullptr;
        const int status = cudaMallocHost(&p, std::max<size_t>(1, n) * sizeof(T));
        data_ = static_cast<T*>(p);
        return status;
    }
    T* data() { return data_; }

private:
    T* data_ = nullptr;
};

class CudaStage final : public DeviceStage {
public:
    CudaStage(arch::Hparams hp, arch::StepProgram program, CudaStageOptions options, CudaShard shard)
        : hp_(std::move(hp)), program_(std::move(program)), options_(std::move(options)), shard_(std::move(shard)) {}
    ~CudaStage() override;

    Result<void> init(const GgufModel& model);

    const std::string& name() const override { return shard_.name; }
    float* x() override { return buffer(Buffer::x); }
    Result<void> embed(std::span<const TokenId> tokens, std::span<const int32_t> positions) override;
    Result<void> run_layers(const StageBatch& batch) override;
    // One sequence: the cache by position (the pool's first blocks). Several: block tables.
    bool paged_kv() const override { return paged_; }
    int max_head_rows() const override { return head_rows_; }
    Result<void> copy_kv_blocks(std::span<const KvBlockCopy> copies) override;
    Result<std::span<const float>> head(std::span<const int> rows) override;
    Result<std::span<const float>> head_hidden(std::span<const int> rows) override;
    Result<void> head_argmax(std::span<const int> rows, std::span<TokenId> out) override;
    DeviceUsage usage() const override;
    Result<void> write_buffer(Buffer b, std::span<const float> values) override;
    Result<void> read_buffer(Buffer b, std::span<float> out) override;
    void interrupt() override { interrupted_.store(true, std::memory_order_relaxed); }
    bool destroyable_after_fault() const override { return false; }

private:
    float* buffer(Buffer b) { return static_cast<float*>(buffers_[static_cast<size_t>(b)].data()); }
    size_t width(Buffer b) const { return layout_.width(b); }
    Result<void> check(int status, std::string_view what);
    Result<void> select() { return check(cudaSetDevice(shard_.device), "selecting the GPU"); }
    // Waits for the stream, adding the GPU time since the start event of the first call
    // not waited for.
    Result<void> finish(std::string_view what);
    // Waits for the stream by asking it, so that interrupt() can end the wait: a kernel
    // that never ends then costs the step's deadline, not the engine's thread.
    Result<void> wait_stream(std::string_view what);
    Result<void> begin() {
        PH_TRY(select());
        if (pending_) return {};  // the start event of the work not waited for yet stands
        return check(cudaEventRecord(start_, stream_), "recording an event");
    }
    // The end of embed or run_layers. A stage that holds the whole model (no other device
    // reads its activations) leaves its work queued: the head's wait covers it, so that a
    // decode step waits for the GPU once, not three times. Errors then surface there.
    Result<void> complete(std::string_view what) {
        if (!whole_model_) return finish(what);
        pending_ = true;
        return {};
    }
    Result<void> set_position(uint32_t pos);
    // Paged: the batch's positions, sequences and block tables to the device.
    Result<void> set_rows(const StageBatch& batch);
    // Where the kernels find the batch's tokens in the cache.
    PhRows rows() const {
        if (!paged_) return PhRows{static_cast<const int32_t*>(pos_.data()), 0, nullptr, nullptr, 0, 1};
        const auto* base = static_cast<const int32_t*>(rows_.data());
        return PhRows{base, 1, base + rows_capacity_, base + 2 * rows_capacity_, table_stride_,
                      static_cast<int>(options_.kv_block_size)};
    }
    Result<DeviceOp> place(const BoundWeight& w);
    // A weight's bytes uploaded into an allocation of its own, counted and kept.
    Result<const void*> upload_weight(const void* data, uint64_t bytes);
    // The stage's experts of a moe op, uploaded: each of the three tensors' slice of experts
    // [expert_begin, expert_end) in one allocation, and the biases' slices; the selection
    // bias and the shared expert where there are.
    Result<DeviceOp> place_experts(const BoundWeight& w, DeviceOp d);
    // The moe op with the experts on the GPU: route on the device, group the tokens by
    // expert on the host, run each chosen expert over its tokens, sum the slots.
    Result<void> run_device_experts(const DeviceOp& op, int n);
    Result<void> enqueue_op(const DeviceOp& op, uint32_t layer, int n);
    // A layer's ops in order, each fusion taken where the batch allows it.
    Result<void> enqueue_ops(const std::vector<DeviceOp>& ops, uint32_t layer, int n);
    // Marks the ops of each layer that fuse (fusion.h, where the weights suit the 8-bit
    // products).
    void plan_layer_fusions();
    // Whether a dense product of n tokens goes to the 8-bit kernels rather than cuBLAS (for
    // a weight type that has them).
    bool batch_takes_q8(int n) const;
    // Whether a product of n tokens by this weight takes the 8-bit path (not cuBLAS, not
    // the f32 activations).
    bool quantized_path(GgmlType type, const void* w, uint64_t row_bytes, int n) const;
    // The 8-bit activations of x (n rows of `in`) for the weight type, in act_: quantized
    // now unless act_ holds them already.
    Result<void> quantize_input(GgmlType type, const float* x, int n, int64_t in, std::string_view what);
    // act_ now holds the activations of x for the weight type.
    void activations_hold(const float* x, GgmlType type, int n, int64_t in);
    // The product `op` and the residual add after it, in one launch.
    Result<void> enqueue_residual_product(const DeviceOp& op, const DeviceOp& add, int n);
    // The products ops[first] .. ops[first + count - 1] (one input, one weight type) in one
    // launch.
    Result<void> enqueue_product_set(const std::vector<DeviceOp>& ops, size_t first, int count, int n);
    // The RoPE op `d`, and `second`'s (another buffer's, same layer) in the same launch
    // where it is not null (enqueue_rotation); then the attention temperature of each op
    // that has one (Op::value).
    Result<void> enqueue_rope(const DeviceOp& d, const DeviceOp* second, uint32_t layer, int n);
    Result<void> enqueue_rotation(const DeviceOp& d, const DeviceOp* second, uint32_t layer, int n);
    // The norm or gate op `d` with its result quantized for the product after it.
    Result<void> enqueue_quantizing(const DeviceOp& d, int n);
    Result<void> enqueue_matmul(const DeviceOp& op, int n);
    // y = W x for n rows of x (rows of `in` floats): with 8-bit activations where the type
    // has that path (quantizing x once for the products that read it in a row), else f32.
    Result<void> product(GgmlType type, const void* w, uint64_t row_bytes, int64_t rows, int64_t in, const float* x,
                         int n, float* y, std::string_view what);
    // Some kernel may have written the buffer whose activations act_ holds.
    void activations_changed() { act_src_ = nullptr; }
    // The experts in RAM: the input and router scores to the host, the experts on the CPU,
    // the output back. Waits for the stream (so never inside a graph capture).
    Result<void> run_ram_experts(const DeviceOp& op, int n);
    Result<void> enqueue_layers(int n);
    Result<void> run_decode_graph(int n);
    // Turns graphs off for good after a failed capture, keeping the reason for usage().
    Result<void> graphs_failed(int status, std::string_view step, int n);
    // The final norm and output projection on the given rows of x, gathered into rows 0 ..
    // of their own buffer, which stands in for x meanwhile.
    // The head's ops on the given rows of x(): all, or (`hidden`) those before the output
    // projection, which it returns in `projection` (null when there is none).
    Result<void> enqueue_head(std::span<const int> rows, bool hidden = false, const Op** projection = nullptr);
    uint64_t bytes_needed(const std::vector<BoundWeight>& weights) const;

    arch::Hparams hp_;
    arch::StepProgram program_;
    CudaStageOptions options_;
    CudaShard shard_;
    StageLayout layout_;
    std::string gpu_;  // "GPU 0 (NVIDIA H200)"
    int multiprocessors_ = 1;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
    double bandwidth_gb_s_ = 0;
    uint64_t step_bytes_ = 0;
    double gpu_seconds_ = 0;
    bool whole_model_ = false;  // embedding, every layer and the head, no partners
    const GgufModel* model_ = nullptr;  // during init: the file whose RAM experts the host copies
    bool pending_ = false;      // work queued by embed/run_layers not waited for yet

    // Weights: one allocation per tensor slice; slices used twice (a tied embedding and
    // output) are uploaded once.
    std::vector<DeviceBuffer> weights_;
    std::map<std::tuple<const std::byte*, int64_t, int64_t>, const void*> uploaded_;
    std::vector<DeviceOp> input_;
    std::vector<std::vector<DeviceOp>> layers_;
    std::vector<DeviceOp> head_;
    const void* embedding_ = nullptr;
    GgmlType embedding_type_ = GgmlType::f32;
    uint64_t embedding_row_bytes_ = 0;
    const float* rope_freqs_ = nullptr;

    std::array<DeviceBuffer, arch::kBufferCount> buffers_;
    DeviceBuffer kv_k_, kv_v_;
    size_t kv_row_bytes_ = 0;
    int kv_type_ = PH_KV_F16;
    DeviceBuffer partial_;      // attention splits
    DeviceBuffer pos_;          // int32: position of the batch's first token (one sequence)
    // Paged: int32 [positions: rows_capacity_][sequences: rows_capacity_][tables: table_rows_ *
    // table_stride_], filled from host_rows_ before each run.
    bool paged_ = false;
    int head_rows_ = 1;
    uint32_t kv_rows_ = 0;  // cache rows of a layer
    DeviceBuffer rows_;
    PinnedArray<int32_t> host_rows_;
    int rows_capacity_ = 0;
    int table_rows_ = 0;
    int table_stride_ = 0;
    DeviceBuffer head_x_;  // the rows whose logits are asked for
    DeviceBuffer ids_;          // int32 token ids of a batch
    DeviceBuffer best_;         // int32: the argmax of each head row's logits
    DeviceBuffer f32_weights_;  // cuBLAS operand: one weight matrix decoded
    // 8-bit activations (ph_quantize_activations) of up to act_rows_ tokens, act_stride_
    // bytes each, and what they were made from: the products that read the same buffer
    // one after another (Q, K, V; gate, up) quantize it once.
    DeviceBuffer act_;
    size_t act_stride_ = 0;
    int act_rows_ = 0;
    const float* act_src_ = nullptr;
    bool act_per_256_ = false;
    int act_n_ = 0;
    int64_t act_in_ = 0;
    PinnedArray<int32_t> host_ids_, host_best_;
    PinnedArray<float> host_logits_;
    // Experts in RAM: the experts' input rows and router scores copied to the host, and
    // their output on its way back.
    PinnedArray<float> host_expert_in_, host_expert_scores_, host_expert_out_;
    uint64_t ram_weight_bytes_ = 0;
    // Experts on the GPU: the routing, the (token, slot) pairs grouped by expert, one
    // expert's rows through its products, and the weighted slots.
    bool has_device_experts_ = false;
    DeviceBuffer moe_ids_, moe_weights_, moe_pairs_, moe_in_, moe_gate_, moe_up_, moe_out_, moe_slots_;
    PinnedArray<int32_t> host_moe_ids_, host_moe_pairs_;
    std::vector<int32_t> moe_offsets_;  // per expert of the stage: where its pairs start
    int decode_splits_ = 1;

    std::unique_ptr<CublasLibrary> cublas_library_;  // before the handle, which borrows it
    CublasHandle cublas_;
    std::atomic<bool> interrupted_{false};  // interrupt(): no more waiting for this GPU
    int64_t injected_steps_ = 0;            // run_layers calls, for CudaShard::fail_after
    bool have_cublas_ = false;
    std::string cublas_note_;

    std::map<int, cudaGraphExec_t> graphs_by_n_;  // the decode step of n sequences
    std::map<int, uint64_t> graph_fused_launches_;  // the launches fusing saved in each graph
    bool graphs_ = true;
    std::string graphs_note_;  // why graphs are off
    uint64_t graph_replays_ = 0;
    uint64_t cublas_gemms_ = 0;
    uint64_t fused_launches_ = 0;  // launches saved by fusing ops
    uint64_t weight_bytes_ = 0, kv_bytes_ = 0, scratch_bytes_ = 0;
    double busy_seconds_ = 0;
};

}  // namespace powerhouse::cuda::detail
