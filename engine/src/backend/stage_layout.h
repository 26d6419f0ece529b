// What one device of a plan computes, independent of the kind of device: the width of
// each activation buffer it holds (its share of the heads and feed-forward columns under a
// tensor split), and for each op of the step program the part of the op's weight it
// multiplies by. The CPU and CUDA stages both start from this, and bind their programs with
// bind_program, so that a shard means the same rows and columns on every backend and a
// model that one backend refuses gets the same message from the other.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "arch/hparams.h"
#include "arch/step_program.h"
#include "gguf/gguf_model.h"
#include "powerhouse/result.h"

namespace powerhouse {

// The device's part of the model (powerhouse/plan.h DeviceAssignment).
struct ShardRanges {
    uint32_t first_layer = 0;
    uint32_t n_layers = UINT32_MAX;  // UINT32_MAX: all from first_layer
    // Tensor split: these KV heads (with their query heads) and feed-forward columns of
    // every layer; equal begin and end: all of them.
    uint32_t kv_head_begin = 0, kv_head_end = 0;
    uint32_t ff_begin = 0, ff_end = 0;
    // Expert parallel: these experts of every layer (mixture-of-experts models); equal begin
    // and end: all of them.
    uint32_t expert_begin = 0, expert_end = 0;
    // Mixture of experts: the experts of layers [0, ram_expert_layers) stay in system RAM
    // and run on the CPU (HostExperts), whatever the device (DevicePlan::experts_in_ram_layers).
    uint32_t ram_expert_layers = 0;
};

struct StageLayout {
    uint32_t first_layer = 0;
    uint32_t last_layer = 0;             // one past the stage's last layer
    uint32_t n_head = 0, n_head_kv = 0;  // the stage's heads
    size_t kv_width = 0;                 // n_head_kv * head_dim
    uint32_t expert_begin = 0, expert_end = 0;  // the stage's experts (none for a dense model)
    uint32_t ram_expert_layers = 0;             // ShardRanges::ram_expert_layers
    // Per buffer: the width this device computes, the full width, and where its part starts.
    std::array<size_t, arch::kBufferCount> widths{};
    std::array<size_t, arch::kBufferCount> full{};
    std::array<size_t, arch::kBufferCount> offsets{};

    size_t width(arch::Buffer b) const { return widths[static_cast<size_t>(b)]; }
    size_t full_width(arch::Buffer b) const { return full[static_cast<size_t>(b)]; }
    size_t offset(arch::Buffer b) const { return offsets[static_cast<size_t>(b)]; }
    // Whether the stage holds a share of the heads or columns rather than all of them.
    bool is_tensor_shard(const arch::Hparams& hp) const {
        return n_head_kv != hp.n_head_kv || width(arch::Buffer::gate) != hp.n_ff || is_expert_shard(hp);
    }
    bool is_expert_shard(const arch::Hparams& hp) const { return expert_end - expert_begin != hp.experts.count; }
};

// Checks the ranges against the model and the step program.
Result<StageLayout> make_stage_layout(const arch::Hparams& hp, const arch::StepProgram& program,
                                      const ShardRanges& ranges);

// One 3-D expert tensor of a moe op ([n_expert][rows][in]), cut to the stage's experts.
struct BoundExperts {
    const GgufTensorInfo* tensor = nullptr;
    GgmlType type = GgmlType::f32;
    const std::byte* data = nullptr;  // the stage's first expert
    uint64_t expert_stride = 0;       // bytes from one expert to the next
    int64_t in = 0, rows = 0;
    uint64_t row_stride = 0;        // bytes of one row
    const float* bias = nullptr;    // [experts][rows] from the stage's first expert; null: none
    bool interleaved = false;       // CPU: data is a copy in backend/cpu/interleave.h's layout
    uint64_t bytes(uint32_t n_experts) const;
};

// An op with its weight found in the file, cut to the device's share.
struct BoundWeight {
    const arch::Op* op = nullptr;
    const GgufTensorInfo* tensor = nullptr;  // null: the op has no weight
    // matmul: `rows` rows of `in` elements, the first at `data`, rows `row_stride` bytes apart
    // in the file (the full row): rows for a column-parallel product (full input, split
    // output), columns for a row-parallel one (split input, full output), whose partial
    // results are then all-reduced. add_row: its whole table (`rows` rows of `in` elements),
    // in any type the backend reads.
    GgmlType type = GgmlType::f32;
    const std::byte* data = nullptr;
    int64_t in = 0;
    int64_t rows = 0;
    uint64_t row_stride = 0;
    uint64_t row_bytes = 0;  // bytes of one row's `in` elements
    bool all_reduce = false;
    // Norms and biases (F32): this device's part.
    const float* values = nullptr;
    size_t n_values = 0;
    // moe: gate, up and down of the stage's experts [expert_begin, expert_end).
    std::array<BoundExperts, 3> experts{};
    // moe: the selection bias of every expert ([n_expert], MoeSpec::selection_bias; null:
    // none), and the shared expert's gate, up and down (each one "expert"; their tensor
    // null when the spec has none or another stage runs it).
    const float* selection_bias = nullptr;
    std::array<BoundExperts, 3> shared{};
    uint32_t expert_begin = 0, expert_end = 0;
    bool expert_all_reduce = false;  // other devices hold the other experts: sum the outputs
    bool experts_in_ram = false;     // the layer's experts stay in system RAM (HostExperts)
    uint64_t bytes() const;  // what the device holds of the weight
};

// Finds the op's weight, checks its shape against the buffers the op reads and writes and
// cuts out the layout's share. `can_run(type)` says whether the backend (named `backend`
// in messages) multiplies by that type; `column_block(type)` is the granularity a
// row-parallel split must respect (the type's block, or the backend's activation block).
// `split_reduce`: the stage has all-reduce partners.
Result<BoundWeight> bind_weight(const GgufModel& model, const arch::Hparams& hp, const StageLayout& layout,
                                const arch::Op& op, uint32_t layer, bool split_reduce, std::string_view backend,
                                const std::function<bool(GgmlType)>& can_run,
                                const std::function<int64_t(GgmlType)>& column_block);

// Every weight a stage of the step program reads, found, checked and cut to its share.
struct BoundProgram {
    std::vector<BoundWeight> input;                // program.input; only with the embedding
    std::vector<std::vector<BoundWeight>> layers;  // [last_layer - first_layer][program.layer_ops(l)]
    std::vector<BoundWeight> head;                 // program.head; only with the output layer
    // [n_vocab][n_embd] the token table, in a type the backend reads; only with the embedding.
    const GgufTensorInfo* embedding = nullptr;
    // [rope_dims / 2] f32 rope_freqs.weight, when the model has it and the stage has layers.
    const GgufTensorInfo* rope_freqs = nullptr;
};

// bind_weight for every op of the program the stage runs (the input ops and the embedding
// table with `embedding`, the layers of `layout`, the head with `output`), and the checks
// of the embedding table and of rope_freqs.weight: the part of binding that every backend
// shares, with the same messages. The ops' pointers refer into `program`, which must
// outlive the result.
Result<BoundProgram> bind_program(const GgufModel& model, const arch::Hparams& hp, const arch::StepProgram& program,
                                  const StageLayout& layout, bool embedding, bool output, bool split_reduce,
                                  std::string_view backend, const std::function<bool(GgmlType)>& can_run,
                                  const std::function<int64_t(GgmlType)>& column_block);

// The name of an activation buffer ("q"), for messages.
std::string_view buffer_name(arch::Buffer b);

// DeviceStage::write_buffer and read_buffer: how many rows `count` values are of the
// stage's share of buffer `b`, given that the stage holds `capacity` values of it. Fails
// for a part of a row or more rows than the buffer holds.
Result<size_t> buffer_rows(const StageLayout& layout, arch::Buffer b, size_t count, size_t capacity,
                           std::string_view stage);

// "layers 0-14, KV heads 0-1, FFN columns 0-767 + embedding + output", for DeviceUsage.
std::string describe_stage(const arch::Hparams& hp, const StageLayout& layout, bool embedding, bool output);

}  // namespace powerhouse
