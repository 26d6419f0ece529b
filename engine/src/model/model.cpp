#include "powerhouse/model.h"

#include <fmt/format.h>

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
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Result<Model> Model::load(const std::filesystem::path& path, const ModelOptions& options) {
    Result<GgufModel> file = GgufModel::open(path);
    if (!file) return file.error();
    Result<arch::Hparams> hparams = arch::read_hparams(*file);
    if (!hparams) return make_error(hparams.error().code, fmt::format("{}: {}", path.string(), hparams.error().message));
    Result<Tokenizer> tokenizer = Tokenizer::load(path);
    if (!tokenizer) return tokenizer.error();
    if (static_cast<uint32_t>(tokenizer->n_vocab()) > hparams->n_vocab) {
        return make_error(ErrorCode::format, fmt::format("{}: the vocabulary has {} tokens but the embedding only {}",
                                                         path.string(), tokenizer->n_vocab(), hparams->n_vocab));
    }
    Result<ModelTemplateInfo> template_info = read_model_template_info(path);
    if (!template_info) return template_info.error();

    auto impl = std::make_unique<Impl>(Impl{std::move(file).value(), std::move(hparams).value(),
                                            std::move(tokenizer).value(), std::move(template_info).value(), nullptr});
    cpu::CpuBackendOptions cpu_options;
    cpu_options.n_ctx = std::min(options.n_ctx, std::max<uint32_t>(impl->hparams.n_ctx_train, 1));
    cpu_options.n_threads = options.n_threads;
    cpu_options.n_batch = options.n_batch;
    cpu_options.kv_cache_type = options.kv_cache_type;
    Result<std::unique_ptr<Backend>> backend =
        cpu::create_cpu_backend(impl->file, impl->hparams, arch::build_step_program(impl->hparams), cpu_options);
    if (!backend) return make_error(backend.error().code, fmt::format("{}: {}", path.string(), backend.error().message));
    impl->backend = std::move(backend).value();
    return Model(std::move(impl));
}

const Tokenizer& Model::tokenizer() const { return impl_->tokenizer; }
const ModelTemplateInfo& Model::template_info() const { return impl_->template_info; }
const std::string& Model::architecture() const { return impl_->hparams.architecture; }
uint32_t Model::n_vocab() const { return impl_->hparams.n_vocab; }
uint32_t Model::n_ctx() const { return impl_->backend->n_ctx(); }
Result<std::span<const float>> Model::decode(std::span<const TokenId> tokens) { return impl_->backend->decode(tokens); }
uint32_t Model::n_past() const { return impl_->backend->n_past(); }
void Model::truncate(uint32_t n) { impl_->backend->truncate(n); }
size_t Model::kv_cache_bytes() const { return impl_->backend->kv_cache_bytes(); }

}  // namespace powerhouse
