#include "powerhouse/model.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <vector>

#include "arch/hparams.h"
#include "arch/step_program.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/split_backend.h"
#include "gguf/gguf_model.h"
#include "model/model_devices.h"
#include "model/model_info_internal.h"
#include "powerhouse/tool_calls.h"

#ifdef POWERHOUSE_HAS_CUDA
#include "backend/cuda/cuda_communicator.h"
#include "backend/cuda/cuda_stage.h"
#endif

namespace powerhouse {

struct Model::Impl {
    GgufModel file;
    arch::Hparams hparams;
    Tokenizer tokenizer;
    ModelTemplateInfo template_info;
    ResolvedTemplate chat_template;    // resolved from template_info once, at load
    std::unique_ptr<Backend> backend;  // reads `file`'s mapping: declared after it
    ModelSummary summary;
    uint32_t n_batch = 0;
    ModelDevices devices;  // what the options named
    DevicePlan plan;       // their order in it is the stages' order
};

namespace {

// Each device's usage with the UUID of the GPU it runs on, which the stages do not keep: what
// telemetry (NVML) identifies a GPU by, whatever order CUDA numbers them in.
std::vector<DeviceUsage> with_uuids(std::vector<DeviceUsage> usage, const ModelDevices& devices,
                                    const DevicePlan& plan) {
    for (size_t i = 0; i < usage.size() && i < plan.devices.size(); ++i) {
        const uint32_t desc = plan.devices[i].device;
        if (desc < devices.descs.size()) usage[i].uuid = devices.descs[desc].uuid;
    }
    return usage;
}

// Reads the model's files once into the page cache (pread, 8 MiB at a time, into a buffer
// that is thrown away), so that neither the CPU stages' copying nor the first prompt waits on
// the disk page by page. Nothing is mapped into the process here: the stages map (prefault)
// only what they use in place, and what they copy interleaved costs its copy alone
// (backend/cpu/interleave.h). (readahead(2) instead, which copies nothing, measured no
// better: a cold load of 4.8 s against 3.8 to 5.3 s with pread, on a disk that varies that
// much from run to run.) False when `progress` asked to stop; a part that cannot be read is
// left to the page faults.
bool cache_files(const GgufModel& file, const LoadProgress& progress, float from, float to) {
    const uint64_t total = std::max<uint64_t>(1, file.total_file_size());
    constexpr size_t kChunk = size_t{8} << 20;
    std::vector<char> buffer(kChunk);
    uint64_t done = 0, reported = 0;
    for (const GgufFile& part : file.parts()) {
        if (part.mapping().data() == nullptr) continue;  // parsed from memory
        const int fd = ::open(part.path().c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        for (uint64_t at = 0;;) {
            const ssize_t got = ::pread(fd, buffer.data(), kChunk, static_cast<off_t>(at));
            if (got <= 0) break;
            at += static_cast<uint64_t>(got);
            done += static_cast<uint64_t>(got);
            if (progress && (done - reported > total / 100 || done >= total)) {
                reported = done;
                const double share = std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
                if (!progress(from + (to - from) * static_cast<float>(share), "reading the weights")) {
                    ::close(fd);
                    return false;
                }
            }
        }
        ::close(fd);
    }
    return true;
}

// The device plan for the options' devices (model_devices.h).
Result<DevicePlan> plan_model(const std::filesystem::path& path, const ModelOptions& options, uint32_t n_ctx,
                              const ModelDevices& devices) {
    Result<ModelShape> shape = read_model_shape(path);
    if (!shape) return shape.error();
    PlanOptions p;
    p.mode = options.split;
    p.ratios = options.ratios;
    p.reserve_bytes = options.reserve_bytes;
    p.main_device = options.main_device;
    p.n_ctx = n_ctx;
    // The cache is whole blocks, but a GPU's for one sequence holds n_ctx positions by position.
    const uint32_t bs = std::max<uint32_t>(1, options.kv_block_size);
    const uint32_t kv_tokens = options.kv_cache_tokens != 0 ? options.kv_cache_tokens : n_ctx;
    p.kv_tokens = devices.cuda && options.max_sequences <= 1 ? n_ctx : (kv_tokens + bs - 1) / bs * bs;
    p.max_sequences = std::max<uint32_t>(1, options.max_sequences);
    p.kv_type = options.kv_cache_type;
    p.n_batch = std::max<uint32_t>(1, options.n_batch);
    p.experts_in_ram = options.experts_in_ram;
    if (shape->n_expert > 0) {
        // Experts in RAM are read in place from the file: what the system has available.
        if (Result<std::vector<DeviceDesc>> ram = cpu_devices("cpu"); ram && !ram->empty()) {
            p.ram_bytes = ram->front().free_bytes;
        }
    }
    Result<DevicePlan> plan = plan_devices(*shape, devices.descs, p);
    if (!plan) return make_error(plan.error().code, fmt::format("{}: {}", path.string(), plan.error().message));
    return plan;
}

// What device i of the plan holds, into a CPU or CUDA shard (the same fields on both): its
// layers, its heads and columns and all-reduce partners under a tensor split, whether it
// embeds or computes the logits, and the planner's prediction of its memory.
template <class Shard>
void assign_shard(Shard& shard, const DevicePlan& plan, uint32_t i, Communicator* comm) {
    const DeviceAssignment& a = plan.devices[i];
    shard.ranges.first_layer = a.first_layer;
    shard.ranges.n_layers = a.n_layers;
    shard.ranges.ram_expert_layers = plan.experts_in_ram_layers;
    if (plan.mode == SplitMode::tensor && plan.devices.size() > 1) {
        shard.ranges.kv_head_begin = a.kv_head_begin;
        shard.ranges.kv_head_end = a.kv_head_end;
        shard.ranges.ff_begin = a.ff_begin;
        shard.ranges.ff_end = a.ff_end;
        shard.ranges.expert_begin = a.expert_begin;
        shard.ranges.expert_end = a.expert_end;
        shard.comm = comm;
        shard.rank = static_cast<int>(i);
    }
    shard.embedding = a.embedding;
    shard.output = a.output;
    shard.planned_bytes = a.total_bytes();
}

#ifdef POWERHOUSE_HAS_CUDA
// One CUDA stage per device of the plan, joined by the CUDA communicator; the upload of
// the weights is the load's progress.
Result<std::unique_ptr<Backend>> build_cuda_backend(const Model::Impl& impl, const DevicePlan& plan,
                                                    const ModelDevices& devices, const ModelOptions& options,
                                                    uint32_t n_ctx, const LoadProgress& progress,
                                                    const arch::StepProgram& program, SplitShape shape,
                                                    const std::shared_ptr<cpu::HostExperts>& host_experts) {
    const auto n = static_cast<uint32_t>(plan.devices.size());
    std::vector<int> gpus;
    for (const DeviceAssignment& a : plan.devices) gpus.push_back(devices.cuda_index[a.device]);
    std::unique_ptr<Communicator> comm;
    if (n > 1) {
        // NCCL only where there are all-reduces: a layer split only copies.
        Result<std::unique_ptr<Communicator>> c = cuda::make_cuda_communicator(gpus, plan.mode == SplitMode::tensor);
        if (!c) return c.error();
        comm = std::move(c).value();
    } else {
        comm = make_host_communicator(1);
    }
    const uint64_t total = std::max<uint64_t>(1, impl.file.total_tensor_bytes());
    uint64_t before = 0;  // bytes uploaded by the stages already made
    std::vector<std::unique_ptr<DeviceStage>> stages;
    for (uint32_t i = 0; i < n; ++i) {
        const DeviceAssignment& a = plan.devices[i];
        cuda::CudaStageOptions o;
        o.n_ctx = n_ctx;
        o.n_batch = shape.n_batch;
        o.kv_cache_type = options.kv_cache_type;
        o.max_sequences = shape.max_sequences;
        o.kv_rows = shape.kv_blocks * shape.kv_block_size;
        o.kv_block_size = shape.kv_block_size;
        o.use_graphs = options.cuda_graphs;
        o.fuse_ops = options.cuda_fused_ops;
        uint64_t mine = 0;
        o.upload_progress = [&](uint64_t done, uint64_t) {
            mine = done;
            const double share = std::min(1.0, static_cast<double>(before + done) / static_cast<double>(total));
            return !progress || progress(0.05f + 0.95f * static_cast<float>(share), "uploading the weights to the GPU");
        };
        cuda::CudaShard shard;
        shard.device = gpus[i];
        shard.name = fmt::format("GPU {}", gpus[i]);
        if (std::count(gpus.begin(), gpus.end(), gpus[i]) > 1) shard.name += fmt::format(" shard {}", i);
        assign_shard(shard, plan, i, comm.get());
        shard.host_experts = host_experts;
        if (options.fail_device >= 0 && static_cast<uint32_t>(options.fail_device) == a.device) {
            shard.fail_after = options.fail_after;
            shard.fail_hangs = options.fail_hangs;
        }
        Result<std::unique_ptr<DeviceStage>> stage = cuda::create_cuda_stage(impl.file, impl.hparams, program, o, shard);
        if (!stage) return make_error(stage.error().code, fmt::format("{}: {}", shard.name, stage.error().message));
        before += mine;
        if (a.embedding) shape.embedding_stage = i;
        if (a.output) shape.output_stage = i;
        stages.push_back(std::move(stage).value());
    }
    return make_split_backend(std::move(stages), std::move(comm), shape);
}
#endif

// One stage per device of the plan: CUDA stages on GPUs; on the CPU, stages with their
// share of the threads, joined by the in-process communicator.
Result<std::unique_ptr<Backend>> build_backend(const Model::Impl& impl, const DevicePlan& plan,
                                               const ModelDevices& devices, const ModelOptions& options,
                                               uint32_t n_ctx, const LoadProgress& progress) {
    const auto n = static_cast<uint32_t>(plan.devices.size());
    const int threads = options.n_threads > 0 ? options.n_threads
                                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const arch::StepProgram program = arch::build_step_program(impl.hparams);
    SplitShape shape;
    shape.mode = plan.mode;
    shape.n_ctx = n_ctx;
    shape.n_vocab = impl.hparams.n_vocab;
    shape.n_embd = impl.hparams.n_embd;
    // A layer split pipelines a batch as one micro-batch per device (not an encoder's, which
    // must see its whole input at once).
    shape.n_batch = std::max<uint32_t>(1, options.n_batch);
    if (plan.mode == SplitMode::layer && n > 1 && impl.hparams.causal) shape.n_batch = (shape.n_batch + n - 1) / n;
    shape.kv_block_size = std::max<uint32_t>(1, options.kv_block_size);
    const uint32_t kv_tokens = std::max(options.kv_cache_tokens != 0 ? options.kv_cache_tokens : n_ctx, 1u);
    shape.kv_blocks = (kv_tokens + shape.kv_block_size - 1) / shape.kv_block_size;
    shape.max_sequences = std::max<uint32_t>(1, options.max_sequences);
    shape.max_cached = options.max_cached_prefixes;
    // GPUs get a deadline by default: a kernel or a collective can hang there.
    shape.step_deadline = options.step_deadline.count() > 0 ? options.step_deadline
                          : devices.cuda                     ? std::chrono::milliseconds(60'000)
                                                             : std::chrono::milliseconds(0);
    // The experts kept in RAM run on all the CPU's threads, for whichever device asks.
    std::shared_ptr<cpu::HostExperts> host_experts;
    if (plan.experts_in_ram_layers > 0 && impl.hparams.is_moe()) {
        host_experts = std::make_shared<cpu::HostExperts>(threads, cpu::best_isa());
    }
#ifdef POWERHOUSE_HAS_CUDA
    if (devices.cuda) {
        return build_cuda_backend(impl, plan, devices, options, n_ctx, progress, program, shape, host_experts);
    }
#else
    (void)devices;
    (void)progress;
#endif
    std::unique_ptr<Communicator> comm = make_host_communicator(static_cast<int>(n));
    std::vector<std::unique_ptr<DeviceStage>> stages;
    for (uint32_t i = 0; i < n; ++i) {
        const DeviceAssignment& a = plan.devices[i];
        cpu::CpuBackendOptions cpu_options;
        cpu_options.n_ctx = n_ctx;
        cpu_options.n_threads = std::max(1, threads / static_cast<int>(n));
        cpu_options.n_batch = shape.n_batch;
        cpu_options.kv_cache_type = options.kv_cache_type;
        cpu_options.kv_block_size = shape.kv_block_size;
        cpu_options.kv_rows = shape.kv_blocks * shape.kv_block_size;
        cpu_options.max_head_rows = static_cast<int>(shape.max_sequences);
        cpu::CpuShard shard;
        shard.name = n == 1 ? "CPU" : fmt::format("CPU {}", a.device);
        assign_shard(shard, plan, i, comm.get());
        shard.host_experts = host_experts;
        if (options.fail_device >= 0 && static_cast<uint32_t>(options.fail_device) == a.device) {
            shard.fail_after = options.fail_after;
            shard.fail_hangs = options.fail_hangs;
        }
        Result<std::unique_ptr<DeviceStage>> stage =
            cpu::create_cpu_stage(impl.file, impl.hparams, program, cpu_options, shard);
        if (!stage) return make_error(stage.error().code, fmt::format("{}: {}", shard.name, stage.error().message));
        if (a.embedding) shape.embedding_stage = i;
        if (a.output) shape.output_stage = i;
        stages.push_back(std::move(stage).value());
    }
    return make_split_backend(std::move(stages), std::move(comm), shape);
}

}  // namespace

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Result<Model> Model::load(const std::filesystem::path& path, const ModelOptions& given, const LoadProgress& progress) {
    const auto report = [&](float fraction, std::string_view stage) {
        return !progress || progress(fraction, stage);
    };
    const auto stopped = [&] {
        return make_error(ErrorCode::cancelled, fmt::format("{}: loading was cancelled", path.string()));
    };
    if (!report(0.0f, "opening the file")) return stopped();
    Result<GgufModel> file = GgufModel::open(path);
    if (!file) return file.error();
    Result<arch::Hparams> hparams = arch::read_hparams(*file);
    if (!hparams) return make_error(hparams.error().code, fmt::format("{}: {}", path.string(), hparams.error().message));
    // An encoder's attention is not causal: it takes each input in one batch, as long as its
    // context.
    ModelOptions options = given;
    if (!hparams->causal) {
        options.n_batch =
            std::max(options.n_batch, std::min(options.n_ctx, std::max<uint32_t>(hparams->n_ctx_train, 1)));
    }
    // Encoders run on the CPU for now (cuda_stage_supports refuses them): "auto" means the CPU
    // for them; naming a GPU gets the planner's reason.
    if (hparams->embedding_only && options.devices == "auto") options.devices = "cpu";
    if (!report(0.02f, "reading the tokenizer")) return stopped();
    Result<Tokenizer> tokenizer = Tokenizer::load(path);
    if (!tokenizer) return tokenizer.error();
    if (static_cast<uint32_t>(tokenizer->n_vocab()) > hparams->n_vocab) {
        return make_error(ErrorCode::format, fmt::format("{}: the vocabulary has {} tokens but the embedding only {}",
                                                         path.string(), tokenizer->n_vocab(), hparams->n_vocab));
    }
    Result<ModelTemplateInfo> template_info = read_model_template_info(path);
    if (!template_info) return template_info.error();
    Result<ResolvedTemplate> chat_template = options.chat_template
                                                 ? resolve_given_template(*options.chat_template, *template_info)
                                                 : Result<ResolvedTemplate>(resolve_chat_template(*template_info));
    if (!chat_template) return chat_template.error();

    auto impl = std::make_unique<Impl>(Impl{std::move(file).value(),
                                            std::move(hparams).value(),
                                            std::move(tokenizer).value(),
                                            std::move(template_info).value(),
                                            std::move(chat_template).value(),
                                            nullptr,
                                            {},
                                            std::max<uint32_t>(1, options.n_batch),
                                            {},
                                            {}});
    const uint32_t n_ctx = std::min(options.n_ctx, std::max<uint32_t>(impl->hparams.n_ctx_train, 1));
    arch::use_context_length(impl->hparams, n_ctx);
    Result<ModelDevices> devices = model_devices(options.devices, options.excluded_gpus);
    if (!devices) return devices.error();
    Result<DevicePlan> plan = plan_model(path, options, n_ctx, *devices);
    if (!plan) return plan.error();
    Result<std::unique_ptr<Backend>> backend = make_error(ErrorCode::internal, "no backend was built");
    if (devices->cuda) {
        backend = build_backend(*impl, *plan, *devices, options, n_ctx, progress);  // a GPU reads its copy itself
    } else {
        // The CPU stages copy their interleaved weights and prefault the rest while this thread
        // reads the files into the page cache beside them: a cold load takes about the reading's
        // time rather than reading and copying one after the other. (The CPU path reports no
        // progress of its own; only this thread calls `progress`.)
        std::thread builder([&] { backend = build_backend(*impl, *plan, *devices, options, n_ctx, {}); });
        const bool read = cache_files(impl->file, progress, 0.05f, 0.9f);
        const bool go_on = read && report(0.9f, "arranging the weights for the CPU");
        builder.join();
        if (!go_on) return stopped();
    }
    if (!backend) {
        if (backend.error().code == ErrorCode::cancelled) return stopped();
        return make_error(backend.error().code, fmt::format("{}: {}", path.string(), backend.error().message));
    }
    impl->backend = std::move(backend).value();
    impl->devices = *devices;
    impl->plan = *plan;

    const arch::Hparams& hp = impl->hparams;
    ModelSummary& summary = impl->summary;
    const std::optional<std::string_view> name = impl->file.metadata().get_string("general.name");
    summary.name = name && !name->empty() ? std::string(*name) : path.filename().string();
    summary.architecture = hp.architecture;
    summary.path = path;
    summary.file_bytes = impl->file.total_file_size();
    summary.weight_bytes = impl->file.total_tensor_bytes();
    summary.n_layer = hp.n_layer;
    summary.n_embd = hp.n_embd;
    summary.n_vocab = hp.n_vocab;
    summary.n_ctx = impl->backend->n_ctx();
    summary.n_ctx_train = hp.n_ctx_train;
    summary.kv_cache_bytes = impl->backend->kv_cache_bytes();
    const unsigned threads = options.n_threads > 0 ? static_cast<unsigned>(options.n_threads)
                                                   : std::max(1u, std::thread::hardware_concurrency());
    const auto n_devices = static_cast<unsigned>(plan->devices.size());
    if (devices->cuda) {
        const DeviceAssignment& first = plan->devices.front();
        const int gpu = devices->cuda_index[first.device];
        if (n_devices == 1) {
            summary.device = fmt::format("GPU {} ({})", gpu, devices->descs[first.device].name);
        } else {
            const bool one_gpu = std::all_of(plan->devices.begin(), plan->devices.end(), [&](const DeviceAssignment& a) {
                return devices->cuda_index[a.device] == gpu;
            });
            summary.device = one_gpu ? fmt::format("{} shards of GPU {}, {} split", n_devices, gpu,
                                                   split_mode_name(plan->mode))
                                     : fmt::format("{} GPUs, {} split", n_devices, split_mode_name(plan->mode));
        }
    } else if (n_devices == 1) {
        summary.device = fmt::format("CPU ({} thread{})", threads, threads == 1 ? "" : "s");
    } else {
        const unsigned each = std::max(1u, threads / n_devices);
        summary.device = fmt::format("{} CPU devices, {} split ({} thread{} each)", n_devices,
                                     split_mode_name(plan->mode), each, each == 1 ? "" : "s");
    }
    summary.split = plan->mode;
    summary.plan_reason = plan->reason;
    summary.expected_tokens_per_second = plan->tokens_per_second;
    summary.devices = with_uuids(impl->backend->devices(), impl->devices, impl->plan);
    summary.has_chat_template = impl->template_info.chat_template.has_value();
    // An embedding model never chats: the stand-in template would be no news to anyone.
    if (!impl->hparams.embedding_only) summary.template_note = impl->chat_template.note;
    const std::string_view source = impl->chat_template.chat_template.source();
    summary.has_thinking_switch = template_uses_variable(source, "enable_thinking");
    summary.has_reasoning_effort = template_uses_variable(source, "reasoning_effort");
    summary.tool_format = detect_tool_call_format(source);
    if (Result<ModelInfo> info = inspect_gguf(impl->file, path); info) summary.info = std::move(*info);
    if (!report(1.0f, "ready")) return stopped();
    return Model(std::move(impl));
}

const Tokenizer& Model::tokenizer() const { return impl_->tokenizer; }
const ModelTemplateInfo& Model::template_info() const { return impl_->template_info; }
const ResolvedTemplate& Model::chat_template() const {
    return impl_->chat_template;
}
const std::string& Model::architecture() const { return impl_->hparams.architecture; }
uint32_t Model::n_vocab() const { return impl_->hparams.n_vocab; }
uint32_t Model::n_ctx() const { return impl_->backend->n_ctx(); }
uint32_t Model::n_batch() const { return impl_->n_batch; }
const ModelSummary& Model::summary() const { return impl_->summary; }

Result<std::span<const float>> Model::decode(std::span<const TokenId> tokens) {
    return impl_->backend->decode(tokens);
}

Result<TokenId> Model::decode_argmax(std::span<const TokenId> tokens) { return impl_->backend->decode_argmax(tokens); }

uint32_t Model::n_past() const { return impl_->backend->n_past(); }
std::span<const TokenId> Model::cached_tokens() const { return impl_->backend->cached_tokens(); }
void Model::truncate(uint32_t n) { impl_->backend->truncate(n); }

uint32_t Model::max_sequences() const { return impl_->backend->kv().options().max_sequences; }
Result<SeqId> Model::open_sequence() { return impl_->backend->open_sequence(); }
void Model::close_sequence(SeqId seq, bool keep_cached) { impl_->backend->kv().close(seq, keep_cached); }
uint32_t Model::adopt_prefix(SeqId seq, std::span<const TokenId> prompt) {
    if (prompt.empty() || !impl_->backend->kv().contains(seq)) return 0;
    return impl_->backend->kv().adopt_prefix(seq, prompt, static_cast<uint32_t>(prompt.size() - 1));
}
uint32_t Model::sequence_length(SeqId seq) const {
    return impl_->backend->kv().contains(seq) ? impl_->backend->kv().length(seq) : 0;
}
std::span<const TokenId> Model::sequence_tokens(SeqId seq) const {
    if (!impl_->backend->kv().contains(seq)) return {};
    return impl_->backend->kv().tokens(seq);
}
void Model::truncate_sequence(SeqId seq, uint32_t n) {
    if (impl_->backend->kv().contains(seq)) impl_->backend->kv().truncate(seq, n);
}
uint32_t Model::blocks_needed(SeqId seq, uint32_t n) const {
    return impl_->backend->kv().contains(seq) ? impl_->backend->kv().blocks_needed(seq, n) : 0;
}
uint32_t Model::available_blocks() const { return impl_->backend->kv().available_blocks(); }
Result<void> Model::decode_batch(std::span<const BatchRow> rows) { return impl_->backend->decode_batch(rows); }
std::span<const float> Model::batch_logits(size_t i) const { return impl_->backend->output(i).logits; }
TokenId Model::batch_argmax(size_t i) const { return impl_->backend->output(i).argmax; }
std::span<const float> Model::batch_hidden(size_t i) const {
    return impl_->backend->output(i).hidden;
}

EmbeddingPooling default_pooling(const ModelInfo& info) {
    return info.pooling == "last"  ? EmbeddingPooling::last
           : info.pooling == "cls" ? EmbeddingPooling::cls
                                   : EmbeddingPooling::mean;
}

Result<std::vector<float>> Model::embed(std::span<const TokenId> tokens, EmbeddingPooling pooling, bool normalize) {
    if (tokens.empty()) return make_error(ErrorCode::invalid_argument, "nothing to embed: the input is empty");
    // An encoder sees its whole input at once, in one batch (load makes the batch as long as
    // the context, which its training length caps).
    const bool encoder = !impl_->hparams.causal;
    if (encoder && tokens.size() > std::min(n_ctx(), n_batch())) {
        const uint32_t limit = std::min(n_ctx(), n_batch());
        return make_error(
            ErrorCode::context_full,
            fmt::format("the input is {} tokens long but {} takes at most {} tokens at once: shorten it "
                        "or embed it in parts of up to {} tokens",
                        tokens.size(), summary().name.empty() ? "this model" : summary().name, limit, limit));
    }
    if (tokens.size() > n_ctx()) {
        return make_error(ErrorCode::context_full,
                          fmt::format("the input is {} tokens long but the context holds {}: shorten it or load the "
                                      "model with a longer context",
                                      tokens.size(), n_ctx()));
    }
    Result<SeqId> seq = open_sequence();
    if (!seq) return seq.error();
    const uint32_t n_embd = summary().n_embd;
    std::vector<double> sum(n_embd, 0.0);
    const size_t chunk = std::max<uint32_t>(1, n_batch());
    const size_t wanted_from = pooling == EmbeddingPooling::mean   ? 0
                               : pooling == EmbeddingPooling::last ? tokens.size() - 1
                                                                   : 0;
    const size_t wanted_to = pooling == EmbeddingPooling::cls ? 1 : tokens.size();
    std::vector<BatchRow> rows;
    for (size_t at = 0; at < tokens.size(); at += chunk) {
        const size_t end = std::min(tokens.size(), at + chunk);
        rows.clear();
        for (size_t i = at; i < end; ++i) {
            const bool wanted = i >= wanted_from && i < wanted_to;
            rows.push_back({*seq, tokens[i], wanted ? RowOutput::hidden : RowOutput::none});
        }
        if (Result<void> ran = decode_batch(rows); !ran) {
            close_sequence(*seq, false);
            return ran.error();
        }
        size_t output = 0;
        for (size_t i = at; i < end; ++i) {
            if (i < wanted_from || i >= wanted_to) continue;
            const std::span<const float> h = batch_hidden(output++);
            for (uint32_t d = 0; d < n_embd; ++d) sum[d] += h[d];
        }
    }
    close_sequence(*seq, false);
    const double count = static_cast<double>(wanted_to - wanted_from);
    double norm = 0;
    for (double& v : sum) {
        v /= count;
        norm += v * v;
    }
    norm = std::sqrt(norm);
    std::vector<float> out(n_embd);
    for (uint32_t d = 0; d < n_embd; ++d) {
        out[d] = static_cast<float>(normalize && norm > 0 ? sum[d] / norm : sum[d]);
    }
    return out;
}
void Model::drop_cached_prefixes() { impl_->backend->kv().drop_cached(); }
KvStats Model::kv_stats() const {
    KvStats st = impl_->backend->kv().stats();
    st.block_bytes = impl_->backend->kv_block_bytes();
    return st;
}
size_t Model::kv_cache_bytes() const { return impl_->backend->kv_cache_bytes(); }
std::vector<DeviceUsage> Model::device_usage() const {
    return with_uuids(impl_->backend->devices(), impl_->devices, impl_->plan);
}

std::optional<DeviceFault> Model::fault() const {
    std::optional<DeviceFault> f = impl_->backend->fault();
    if (f && f->device >= 0 && static_cast<size_t>(f->device) < impl_->plan.devices.size()) {
        const uint32_t desc = impl_->plan.devices[static_cast<size_t>(f->device)].device;
        if (desc < impl_->devices.descs.size()) f->uuid = impl_->devices.descs[desc].uuid;
    }
    return f;
}

bool Model::set_failed(const std::string& uuid, const std::string& cause, bool stopped_answering) {
    if (uuid.empty()) return false;
    for (size_t i = 0; i < impl_->plan.devices.size(); ++i) {
        const uint32_t desc = impl_->plan.devices[i].device;
        if (desc >= impl_->devices.descs.size()) continue;
        const std::string& own = impl_->devices.descs[desc].uuid;
        const std::string name = impl_->summary.devices.size() > i ? impl_->summary.devices[i].name : std::string();
        if (own.empty() ? name != uuid : own != uuid) continue;
        DeviceFault f;
        f.device = static_cast<int>(i);
        f.name = name;
        f.uuid = own;
        f.stopped_answering = stopped_answering;
        f.cause = cause;
        impl_->backend->set_fault(f);
        return true;
    }
    return false;
}

Model::DevicesLeft Model::devices_without(const DeviceFault& fault) const {
    DevicesLeft out;
    if (fault.device < 0 || static_cast<size_t>(fault.device) >= impl_->plan.devices.size()) return out;
    out.removed = static_cast<int>(impl_->plan.devices[static_cast<size_t>(fault.device)].device);
    out.devices = devices_spec_without(impl_->devices, static_cast<size_t>(out.removed));
    return out;
}

std::filesystem::path setup_model_path() {
    if (const char* env = std::getenv("POWERHOUSE_TEST_MODEL"); env != nullptr && *env != '\0') return env;
    std::filesystem::path cache;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
        cache = xdg;
    } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
        cache = std::filesystem::path(home) / ".cache";
    } else {
        return {};
    }
    return cache / "powerhouse" / "test-models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace powerhouse
