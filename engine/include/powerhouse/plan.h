// The planner: where every part of a model goes on the devices, decided before anything is
// allocated (DESIGN.md section 3). Pure functions over value types: the model's shape (read
// from the GGUF tensor index), the devices (memory, bandwidth) and the user's options give a
// DevicePlan, or an error that names the device that is short and by how much, with what
// would make it fit.
//
//   single  the whole model on one device (the main one);
//   layer   consecutive layers per device, balanced by bytes (weights and KV cache), not by
//           layer count, in proportion to the ratios (default: each device's usable memory);
//           activations cross once per device boundary per token;
//   tensor  every layer on every device: attention by KV-head groups (a device holds whole
//           groups: its KV heads and their query heads), the feed-forward by columns in
//           blocks of the weight format; Q/K/V and gate/up are column-parallel, the output and
//           down projections row-parallel and summed by two all-reduces per layer. A
//           mixture-of-experts model's feed-forward is split by whole experts instead (expert
//           parallel): each device runs the tokens routed to its experts, and the outputs are
//           summed by the second all-reduce;
//   auto    one device when the model fits on the main one (no interconnect cost), else layer.
// The embedding table stays on the first device of the plan, the output layer on the last
// (layer) or the main device (single, tensor).
//
// Thread-safety: free functions over value types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/model_info.h"
#include "powerhouse/result.h"

namespace powerhouse {

// The bytes of one decoder layer's weights, by what the tensor split does with them.
struct LayerWeights {
    uint64_t q = 0, k = 0, v = 0, o = 0;  // attention projections (with their biases)
    uint64_t gate = 0, up = 0, down = 0;  // feed-forward
    uint64_t experts = 0;                 // mixture of experts: every expert's gate, up and down
    uint64_t replicated = 0;              // norms, the router and anything else every shard keeps whole
    uint32_t ff_block = 32;               // ffn_down column split unit: its block, at least 32
    uint32_t o_block = 1;                 // elements per block of attn_output's rows
    uint64_t total() const { return q + k + v + o + gate + up + down + experts + replicated; }
};

struct ModelShape {
    std::string name;
    std::string architecture;
    uint32_t n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_embd = 0, n_ff = 0, n_vocab = 0;
    uint32_t n_ctx_train = 0;
    uint32_t n_expert = 0, n_expert_used = 0, n_ff_expert = 0;  // mixture of experts (0: dense)
    // Multi-token prediction blocks after the decoder's (ModelInfo::n_layer_nextn: GLM-4.5),
    // not loaded: add_tensor_to_shape leaves their tensors out.
    uint32_t n_layer_nextn = 0;
    std::vector<LayerWeights> layers;
    uint64_t embedding_bytes = 0;  // token_embd
    uint64_t output_bytes = 0;     // output.weight, output_norm (without a tied embedding)
    bool tied_output = false;      // the embedding is the output matrix too
    bool embedding_only = false;   // an encoder (ModelInfo::embedding_only): CPU devices only for now
    uint64_t weight_bytes() const;
};

// The shape from a GGUF file's tensor index (no weights read).
Result<ModelShape> read_model_shape(const std::filesystem::path& path);

// The first bytes of a GGUF file not at hand (fetched over HTTP before a download), and the
// whole file's size, against which its tensors' places are checked. The caller keeps
// `bytes` alive during the call.
struct GgufPrefix {
    std::string name;  // the file's name, for messages
    std::span<const std::byte> bytes;
    uint64_t file_size = 0;
};
// The length of the file's header (metadata and tensor index, up to its data section) once
// `prefix` holds all of it; nullopt while `prefix` ends inside it (fetch more). A malformed
// header is a format error, as for a file on disk.
Result<std::optional<uint64_t>> gguf_header_length(const GgufPrefix& prefix);
// The shape from the headers alone of a model's files (one file, or every part of a split
// model in order): equal to read_model_shape() of the same files on disk.
Result<ModelShape> read_model_shape(const std::vector<GgufPrefix>& parts);

// Adds one tensor, by its GGUF name, to the part of `shape` it belongs to (`shape.layers`
// sized already); `block_size` is its type's elements per block. read_model_shape() does
// this for every tensor of a file; synth_model_shape() for a model not yet downloaded.
// A tensor of a prediction block (shape.n_layer_nextn) is left out. Error: a layer the shape
// does not have.
Result<void> add_tensor_to_shape(ModelShape& shape, std::string_view name, uint64_t n_bytes, uint64_t block_size);

// Which backend runs a device's part: the planner checks the model against its limits.
enum class DeviceKind { cpu, cuda };

struct DeviceDesc {
    std::string name;  // "RTX 4090", "CPU"
    DeviceKind kind = DeviceKind::cuda;  // cpu_devices() makes CPU devices; the rest are GPUs
    std::string uuid;  // empty for virtual devices
    uint64_t total_bytes = 0;
    uint64_t free_bytes = 0;
    double bandwidth_gb_s = 0;  // memory bandwidth; 0: guessed from the name
};

// Memory bandwidth of well-known GPUs by name (GB/s), else a conservative default.
double guess_bandwidth_gb_s(const std::string& device_name);

// Devices from a spec "RTX 4090:24;RTX 4090:24;A100:80" (name:GiB total, all free), as
// `powerhouse-cli plan --devices` and POWERHOUSE_SIMULATE_GPUS write them.
Result<std::vector<DeviceDesc>> parse_device_spec(const std::string& spec);

// Virtual CPU devices from "cpu" (one) or "cpu:N" (N, at most 64): the memory available
// now (MemAvailable) divided among them. The one function here that reads the system.
Result<std::vector<DeviceDesc>> cpu_devices(const std::string& spec);

enum class SplitMode { single, layer, tensor, automatic };
const char* split_mode_name(SplitMode mode);  // "single", "layer", "tensor", "auto"
Result<SplitMode> parse_split_mode(const std::string& text);
// "auto", "all" or a layer count, as --experts-in-ram takes it.
Result<int32_t> parse_experts_in_ram(const std::string& text);

// PlanOptions::experts_in_ram: as few layers as the model needs to fit; every layer.
inline constexpr int32_t kExpertsInRamAuto = -1;
inline constexpr int32_t kExpertsInRamAll = INT32_MAX;

struct PlanOptions {
    SplitMode mode = SplitMode::automatic;
    std::vector<uint32_t> use;       // indices into the devices; empty: all of them
    std::vector<double> ratios;      // one per used device; empty: their usable memory
    uint64_t reserve_bytes = uint64_t{512} << 20;  // kept free on every device
    uint32_t main_device = 0;        // index into the devices (must be used)
    uint32_t n_ctx = 4096;
    // Positions the KV cache holds for all sequences together (ModelOptions::kv_cache_tokens);
    // 0: n_ctx.
    uint32_t kv_tokens = 0;
    uint32_t max_sequences = 1;  // sequences run together (their logits are kept at once)
    KvCacheType kv_type = KvCacheType::f16;
    uint32_t n_batch = 512;
    // Mixture-of-experts models: the experts of the first N layers stay in system RAM and run
    // on the CPU, while attention, the router, the other weights and the KV cache stay on the
    // devices; only the experts' inputs and outputs cross (llama.cpp's --n-cpu-moe N).
    // kExpertsInRamAuto: on GPUs, the fewest layers for the model to fit (none when it fits);
    // on CPU devices, none. kExpertsInRamAll: every layer. Ignored for dense models.
    int32_t experts_in_ram = kExpertsInRamAuto;
    uint64_t ram_bytes = 0;  // system memory free for experts in RAM; 0: not checked
};

struct DeviceAssignment {
    uint32_t device = 0;  // index into the devices
    // Layer split: layers first_layer .. first_layer + n_layers - 1 (all of them otherwise).
    uint32_t first_layer = 0, n_layers = 0;
    // Tensor split: KV heads [kv_head_begin, kv_head_end) with their query heads, and the
    // feed-forward columns [ff_begin, ff_end) (everything otherwise).
    uint32_t kv_head_begin = 0, kv_head_end = 0;
    uint32_t ff_begin = 0, ff_end = 0;
    // Mixture of experts, tensor split (expert parallel): the experts [expert_begin,
    // expert_end) of every layer, whole (all of them otherwise).
    uint32_t expert_begin = 0, expert_end = 0;
    bool embedding = false;
    bool output = false;
    uint64_t weight_bytes = 0;
    uint64_t kv_cache_bytes = 0;
    uint64_t scratch_bytes = 0;  // activations of a batch, logits
    uint64_t comm_bytes = 0;     // buffers for transfers and all-reduces
    uint64_t budget_bytes = 0;   // free memory less the reserve
    uint64_t total_bytes() const { return weight_bytes + kv_cache_bytes + scratch_bytes + comm_bytes; }
};

struct DevicePlan {
    SplitMode mode = SplitMode::single;  // never automatic: what auto chose
    // Mixture of experts: the experts of layers [0, experts_in_ram_layers) are in system RAM
    // (ram_expert_bytes of them, read in place from the file) and run on the CPU; the devices'
    // weight_bytes leave them out.
    uint32_t experts_in_ram_layers = 0;
    uint64_t ram_expert_bytes = 0;
    uint64_t ram_budget_bytes = 0;  // PlanOptions::ram_bytes
    std::string reason;                  // why this mode (auto), or what the user asked
    std::vector<DeviceAssignment> devices;  // in pipeline order for layer split
    uint32_t n_ctx = 0;
    KvCacheType kv_type = KvCacheType::f16;
    uint32_t transfers_per_token = 0;      // activations crossing devices (layer split)
    uint64_t transfer_bytes_per_token = 0;
    uint32_t allreduces_per_token = 0;     // tensor split: two per layer
    uint64_t allreduce_bytes_per_token = 0;
    double tokens_per_second = 0;  // estimate from bandwidth: every weight read once per token
};

// Plans the model on the devices. Errors (ErrorCode::out_of_memory for what does not fit,
// invalid_argument / unsupported for impossible requests, such as a head size that the
// device's backend cannot take) say which device, how much is needed and free, and what to
// change.
Result<DevicePlan> plan_devices(const ModelShape& model, const std::vector<DeviceDesc>& devices,
                                const PlanOptions& options);

}  // namespace powerhouse
