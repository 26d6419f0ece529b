#include "powerhouse/model.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "arch/hparams.h"
#include "arch/step_program.h"
#include "backend/cpu/cpu_backend.h"
#include "gguf/gguf_model.h"

namespace powerhouse {

struct Model::Impl {
    GgufModel file;
    arch::Hparams hparams;
    Tokenizer tokenizer;
    ModelTemplateInfo template_info;
    std::unique_ptr<Backend> backend;  // reads `file`'s mapping: declared after it
    ModelSummary summary;
    uint32_t n_batch = 0;
    std::vector<TokenId> cached;  // ids of the positions in the backend's KV cache
};

namespace {

// Reads every page of the weights once, so that the file is in memory when the first prompt
// comes (a mapped file is otherwise read lazily, page fault by page fault, during it).
// False when `progress` asked to stop.
bool read_weights(const GgufModel& file, const LoadProgress& progress, float from, float to) {
    const uint64_t total = std::max<uint64_t>(1, file.total_tensor_bytes());
    const auto page = static_cast<uint64_t>(std::max(4096L, sysconf(_SC_PAGESIZE)));
    uint64_t done = 0;
    uint64_t reported = 0;
    volatile unsigned char sink = 0;
    for (const GgufTensorInfo& t : file.tensors()) {
        const auto* bytes = reinterpret_cast<const unsigned char*>(t.data);
        // Ask the kernel to read ahead; the loop below then mostly finds pages present.
        const auto start = reinterpret_cast<uintptr_t>(bytes) & ~(page - 1);
        madvise(reinterpret_cast<void*>(start), t.n_bytes + (reinterpret_cast<uintptr_t>(bytes) - start),
                MADV_WILLNEED);
        for (uint64_t at = 0; at < t.n_bytes; at += page) sink = static_cast<unsigned char>(sink + bytes[at]);
        done += t.n_bytes;
        if (progress && (done - reported > total / 100 || done == total)) {
            reported = done;
            const double share = static_cast<double>(done) / static_cast<double>(total);
            if (!progress(from + (to - from) * static_cast<float>(share), "reading the weights")) return false;
        }
    }
    return true;
}

}  // namespace

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Result<Model> Model::load(const std::filesystem::path& path, const ModelOptions& options,
                          const LoadProgress& progress) {
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
    if (!report(0.02f, "reading the tokenizer")) return stopped();
    Result<Tokenizer> tokenizer = Tokenizer::load(path);
    if (!tokenizer) return tokenizer.error();
    if (static_cast<uint32_t>(tokenizer->n_vocab()) > hparams->n_vocab) {
        return make_error(ErrorCode::format, fmt::format("{}: the vocabulary has {} tokens but the embedding only {}",
                                                         path.string(), tokenizer->n_vocab(), hparams->n_vocab));
    }
    Result<ModelTemplateInfo> template_info = read_model_template_info(path);
    if (!template_info) return template_info.error();

    auto impl = std::make_unique<Impl>(Impl{std::move(file).value(), std::move(hparams).value(),
                                            std::move(tokenizer).value(), std::move(template_info).value(), nullptr,
                                            {}, std::max<uint32_t>(1, options.n_batch), {}});
    cpu::CpuBackendOptions cpu_options;
    cpu_options.n_ctx = std::min(options.n_ctx, std::max<uint32_t>(impl->hparams.n_ctx_train, 1));
    cpu_options.n_threads = options.n_threads;
    cpu_options.n_batch = options.n_batch;
    cpu_options.kv_cache_type = options.kv_cache_type;
    Result<std::unique_ptr<Backend>> backend =
        cpu::create_cpu_backend(impl->file, impl->hparams, arch::build_step_program(impl->hparams), cpu_options);
    if (!backend) return make_error(backend.error().code, fmt::format("{}: {}", path.string(), backend.error().message));
    impl->backend = std::move(backend).value();
    if (!read_weights(impl->file, progress, 0.05f, 1.0f)) return stopped();

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
    summary.device = fmt::format("CPU ({} thread{})", threads, threads == 1 ? "" : "s");
    summary.has_chat_template = impl->template_info.chat_template.has_value();
    if (!report(1.0f, "ready")) return stopped();
    return Model(std::move(impl));
}

const Tokenizer& Model::tokenizer() const { return impl_->tokenizer; }
const ModelTemplateInfo& Model::template_info() const { return impl_->template_info; }
const std::string& Model::architecture() const { return impl_->hparams.architecture; }
uint32_t Model::n_vocab() const { return impl_->hparams.n_vocab; }
uint32_t Model::n_ctx() const { return impl_->backend->n_ctx(); }
uint32_t Model::n_batch() const { return impl_->n_batch; }
const ModelSummary& Model::summary() const { return impl_->summary; }

Result<std::span<const float>> Model::decode(std::span<const TokenId> tokens) {
    Result<std::span<const float>> logits = impl_->backend->decode(tokens);
    if (logits) impl_->cached.insert(impl_->cached.end(), tokens.begin(), tokens.end());
    return logits;
}

uint32_t Model::n_past() const { return impl_->backend->n_past(); }
std::span<const TokenId> Model::cached_tokens() const { return impl_->cached; }

void Model::truncate(uint32_t n) {
    impl_->backend->truncate(n);
    impl_->cached.resize(std::min<size_t>(impl_->cached.size(), impl_->backend->n_past()));
}
size_t Model::kv_cache_bytes() const { return impl_->backend->kv_cache_bytes(); }

}  // namespace powerhouse
