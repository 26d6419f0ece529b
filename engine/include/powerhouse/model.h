// A model loaded for inference: the GGUF file mapped into memory, its tokenizer and chat
// template, and a backend that runs it with a KV cache for up to n_ctx positions.
//
// Supported today: the llama family (Llama 2/3, Mistral, SmolLM2, TinyLlama), Qwen 2,
// Qwen 3 and Gemma 3 (text), on the CPU or NVIDIA GPUs, with weights in F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, the
// K-quants and MXFP4. Anything else is refused at load with a message that says what is missing.
//
// Thread-safety: a Model is used by one thread at a time (the engine's); it may be moved
// between threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/chat_template.h"
#include "powerhouse/device_types.h"
#include "powerhouse/model_info.h"
#include "powerhouse/plan.h"
#include "powerhouse/result.h"
#include "powerhouse/sequences.h"
#include "powerhouse/tokenizer.h"

namespace powerhouse {

struct ModelOptions {
    uint32_t n_ctx = 4096;  // positions in the KV cache; capped at the model's training length
    int n_threads = 0;      // 0: all cores
    uint32_t n_batch = 64;  // prompt tokens processed together
    // Sequences that run at once (continuous batching, powerhouse/scheduler.h) and the KV
    // cache they share: kv_cache_tokens positions in all (0: n_ctx), handed out in blocks
    // of kv_block_size as sequences grow. Finished sequences stay cached, up to
    // max_cached_prefixes, until their blocks are needed, so that a prompt beginning the
    // same way reuses their keys and values. A GPU stage keeps one sequence for now.
    uint32_t max_sequences = 4;
    uint32_t kv_cache_tokens = 0;
    uint32_t kv_block_size = 32;
    uint32_t max_cached_prefixes = 16;
    // How the KV cache stores keys and values (model_info.h): F16, as llama.cpp's default,
    // or Q8_0, as llama.cpp's -ctk q8_0 -ctv q8_0: half the memory, logits within the
    // quantization noise. The CPU backend refuses F32.
    KvCacheType kv_cache_type = KvCacheType::f16;

    // Where the model runs, as a device plan (powerhouse/plan.h). "cpu" (or empty): one CPU
    // device. "cpu:N": N virtual CPU devices that run apart from each other, each with its
    // own threads (n_threads shared among them), memory accounting and KV cache, joined by
    // the in-process communicator, so that every split path runs without a GPU.
    // "cuda": every NVIDIA GPU; "cuda:0,2" or "cuda:GPU-<uuid>,...": those GPUs (the ratios
    // and main_device then follow that order); "cuda:0,0": two shards of GPU 0
    // (each with half its memory: the split paths on one GPU). "auto": the GPUs when one
    // can be used, else the CPU. A build without CUDA refuses "cuda".
    std::string devices;
    // CUDA: capture the decode step of an unsplit or layer-split stage as a CUDA graph.
    bool cuda_graphs = true;
    // CUDA: a norm or gate and the quantizing of its result for the next product, and a
    // product and the residual add after it, in one launch each (the same bits). false:
    // every op its own launches (bench --unfused, to measure what fusing saves).
    bool cuda_fused_ops = true;
    SplitMode split = SplitMode::automatic;
    std::vector<double> ratios;       // one per device; empty: by free memory
    uint32_t main_device = 0;
    uint64_t reserve_bytes = 0;       // kept free on every device
    // Mixture-of-experts models: the experts of the first N layers stay in system RAM and run
    // on the CPU (PlanOptions::experts_in_ram); kExpertsInRamAuto: as few as needed on GPUs.
    int32_t experts_in_ram = kExpertsInRamAuto;
    // A chat template (Jinja source) to chat with instead of the model's own, for a file whose
    // template is missing, broken or wrong (`--chat-template FILE`). One that cannot render a
    // plain message fails the load, saying why.
    std::optional<std::string> chat_template;

    // GPUs set aside (by UUID): a GPU that failed earlier in this session is not used again
    // (ARCHITECTURE.md section 7). "cuda" and "auto" leave them out; naming one is refused.
    std::vector<std::string> excluded_gpus;
    // How long one step of the model may take before the device that has not answered is
    // taken as failed (Model::fault()): its stages are interrupted, its collectives aborted.
    // 0: 60 s on GPUs, none on the CPU (whose steps cannot hang, and may take long).
    std::chrono::milliseconds step_deadline{0};

    // For tests of failure handling: device `fail_device` (of the plan, in the order the
    // devices were named) fails its (fail_after + 1)-th step and every one after, as a GPU
    // that has fallen off the bus would; with fail_hangs it never answers instead (a hung
    // kernel), until the step deadline interrupts it. -1: none. CPU devices and GPUs (a
    // GPU's hang stops its stream, which the stage must stop waiting for).
    int fail_device = -1;
    uint32_t fail_after = 0;
    bool fail_hangs = false;
};

// How Model::embed pools the rows of an input.
enum class EmbeddingPooling : uint8_t { mean, last, cls };
// The pooling a model's file names (ModelInfo::pooling), else mean.
EmbeddingPooling default_pooling(const ModelInfo& info);

// What a loaded model is, for display and for the engine's "loaded" event.
struct ModelSummary {
    std::string name;          // general.name, else the file name
    std::string architecture;  // general.architecture
    std::filesystem::path path;
    uint64_t file_bytes = 0;    // all parts of a split model
    uint64_t weight_bytes = 0;  // tensor data
    uint64_t kv_cache_bytes = 0;
    uint32_t n_layer = 0;
    uint32_t n_embd = 0;
    uint32_t n_vocab = 0;
    uint32_t n_ctx = 0;        // the context the cache was sized for
    uint32_t n_ctx_train = 0;  // the longest context the model was trained for
    std::string device;        // where it runs: "CPU (2 threads)", "2 CPU devices, layer split"
    SplitMode split = SplitMode::single;
    std::string plan_reason;   // why this split (the planner's explanation)
    double expected_tokens_per_second = 0;  // the planner's estimate from memory bandwidth
    std::vector<DeviceUsage> devices;
    bool has_chat_template = false;
    // Why chat prompts use another template than the model's own (a built-in one: no
    // template, or one that cannot be used; or the one given in ModelOptions::chat_template);
    // empty when the model's own is used.
    std::string template_note;
    // Switches the chat template reads (GenerateCommand::template_variables): enable_thinking
    // (false: Qwen3, Qwen3.5, GLM-4.5 and SmolLM3 answer without thinking) and
    // reasoning_effort (gpt-oss: low, medium, high).
    bool has_thinking_switch = false;
    bool has_reasoning_effort = false;
    // How the template teaches the model to write tool calls and reasoning
    // (powerhouse/tool_calls.h: detect_tool_call_format).
    ToolCallFormat tool_format = ToolCallFormat::generic;
    // What the file says about itself (inspect_model's answer, made from the header the load
    // read): its naming fields and file type give the name a person writes
    // (app/core/catalog's model_display_name) without reading the file again.
    ModelInfo info;
};

// Called during load with the share done so far (0..1, increasing) and what is happening.
// Returning false stops the load, which then fails with ErrorCode::cancelled.
using LoadProgress = std::function<bool(float fraction, std::string_view stage)>;

class Model {
public:
    // `progress`, when set, is called on the loading thread; reading the weights from disk is
    // most of the work (it is done here rather than during the first prompt).
    static Result<Model> load(const std::filesystem::path& path, const ModelOptions& options = {},
                              const LoadProgress& progress = {});

    Model(Model&&) noexcept;
    Model& operator=(Model&&) noexcept;
    ~Model();

    const Tokenizer& tokenizer() const;
    const ModelTemplateInfo& template_info() const;
    // The template chat prompts are rendered with: the model's own, or its family's built-in
    // one where the model has none or its own cannot be used (resolve_chat_template, run
    // once at load; the note says why).
    const ResolvedTemplate& chat_template() const;
    const std::string& architecture() const;
    uint32_t n_vocab() const;
    uint32_t n_ctx() const;
    uint32_t n_batch() const;  // prompt tokens processed together
    const ModelSummary& summary() const;

    // Runs `tokens` after the n_past() positions already in the cache and returns the
    // logits of the last one (valid until the next call). Fails, with nothing changed, when
    // the context would overflow or an id is out of range.
    Result<std::span<const float>> decode(std::span<const TokenId> tokens);
    // As decode, for greedy decoding: only the id of the largest logit (the first of equals;
    // -1, the sampler's kNoToken, when none is a number above -inf). A GPU picks it where the
    // logits are, so that only the id crosses to the host.
    Result<TokenId> decode_argmax(std::span<const TokenId> tokens);
    uint32_t n_past() const;
    // The token ids of the n_past() cached positions, in order.
    std::span<const TokenId> cached_tokens() const;
    // Forgets cached positions n and later, to reuse a common prompt prefix.
    void truncate(uint32_t n);
    // Bytes held by the KV cache (keys and values of every layer, n_ctx positions).
    size_t kv_cache_bytes() const;

    // Several sequences (powerhouse/sequences.h), for the scheduler. The calls above keep a
    // sequence of their own beside these.
    uint32_t max_sequences() const;  // live at once (1 on a GPU for now)
    Result<SeqId> open_sequence();
    // Ends a sequence; with keep_cached its keys and values stay for a later prompt that
    // begins the same way.
    void close_sequence(SeqId seq, bool keep_cached = true);
    // For a new sequence: takes the longest beginning of `prompt` that another sequence or a
    // cached prefix holds, short of its last token (whose logits are needed), and returns how
    // many positions that is.
    uint32_t adopt_prefix(SeqId seq, std::span<const TokenId> prompt);
    uint32_t sequence_length(SeqId seq) const;
    std::span<const TokenId> sequence_tokens(SeqId seq) const;
    void truncate_sequence(SeqId seq, uint32_t n);
    // Blocks that n more positions of `seq` take, and blocks the pool can hand out.
    uint32_t blocks_needed(SeqId seq, uint32_t n) const;
    uint32_t available_blocks() const;
    // Runs a batch mixing sequences (Backend::decode_batch): fails with out_of_memory, nothing
    // run, when the cache lacks blocks for it. Then batch_logits(i) / batch_argmax(i) are the
    // outputs of the i-th row that asked for one, valid until the next call.
    Result<void> decode_batch(std::span<const BatchRow> rows);
    std::span<const float> batch_logits(size_t i) const;
    TokenId batch_argmax(size_t i) const;
    std::span<const float> batch_hidden(size_t i) const;  // RowOutput::hidden: n_embd floats

    // The embedding of `tokens` (a retrieval client's /v1/embeddings): the last layer's
    // output after the final norm, pooled over the rows (mean: all; last: the last token's;
    // cls: the first's) and, with `normalize`, scaled to length 1. Runs on a sequence of its
    // own, which it closes without caching; fails as open_sequence() does when none can be
    // had now, and for an input past the context.
    Result<std::vector<float>> embed(std::span<const TokenId> tokens, EmbeddingPooling pooling, bool normalize = true);
    KvStats kv_stats() const;
    // Forgets every cached prefix (benchmarks start from an empty cache).
    void drop_cached_prefixes();
    // Each device's share and the time it has worked so far.
    std::vector<DeviceUsage> device_usage() const;
    // The device that failed, once one has (ErrorCode::device_failed from decode_batch, or
    // no answer within ModelOptions::step_deadline): the model then runs nothing more.
    std::optional<DeviceFault> fault() const;
    // The GPU with this UUID failed, as the driver reports (lost, or a fatal Xid): if the
    // model uses it, the model fails as if its stage had (the first of its stages, when it
    // holds several shards) and true is returned. A virtual CPU device, which has no UUID,
    // is named by its name ("CPU 1"), for tests. Between batches, on the model's thread.
    bool set_failed(const std::string& uuid, const std::string& cause, bool stopped_answering);
    // ModelOptions::devices for the same devices less the failed one, in the order they were
    // named ("cpu:3" less one: "cpu:2"; "cuda:0,1" less GPU 1: "cuda:GPU-<uuid of GPU 0>"),
    // and that device's index in that order. Empty when no device is left.
    struct DevicesLeft {
        std::string devices;
        int removed = -1;  // index among the named devices (ModelOptions::ratios, fail_device)
    };
    DevicesLeft devices_without(const DeviceFault& fault) const;

    struct Impl;

private:
    explicit Model(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Whether this build has the CUDA backend (ModelOptions::devices "cuda...").
bool has_cuda_backend();

// What the CUDA backend finds on this machine, in words for `--version` and bug reports.
// Each library line is the same search a model load makes (its loaders are run once here).
struct CudaReport {
    bool built = false;          // has_cuda_backend()
    std::string runtime;         // the CUDA runtime built in: "13.0"; empty without CUDA
    std::string driver;          // the newest CUDA the driver supports: "13.0"; empty: no driver
    std::string cublas;          // "13.0.2 loaded at run time (/usr/local/cuda/lib64/libcublas.so.13)",
                                 // or why not: "not found (...): prompts run on the fused kernels"
    std::string nccl;            // likewise
};
CudaReport cuda_report();

// The model the set-up fetches (scripts/run, scripts/test): $POWERHOUSE_TEST_MODEL, else
// ${XDG_CACHE_HOME:-~/.cache}/powerhouse/test-models/SmolLM2-135M-Instruct.Q4_1.gguf, as
// scripts/lib.sh places it. The path, whether or not the file is there (empty without HOME).
std::filesystem::path setup_model_path();

}  // namespace powerhouse
