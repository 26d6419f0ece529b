// The public entry points of synth: the layout (layout.h) with weights streamed into it.
#include "powerhouse/synth.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <span>
#include <system_error>
#include <thread>

#include "synth/layout.h"
#include "tensor/dtype.h"
#include "synth/weights.h"

namespace powerhouse {

using synth::FileTypeSpec;
using synth::PlannedTensor;
using synth::PresetSpec;

std::vector<SynthPreset> synth_presets() {
    std::vector<SynthPreset> out;
    for (const PresetSpec& p : synth::preset_specs()) out.push_back(p.info);
    return out;
}

std::vector<SynthType> synth_types() {
    std::vector<SynthType> out;
    for (const FileTypeSpec& t : synth::file_type_specs()) {
        out.push_back(SynthType{std::string(t.name), t.llama_ftype, std::string(t.description)});
    }
    return out;
}

Result<SynthPlan> plan_synth_model(const SynthOptions& options) {
    Result<synth::Layout> layout = synth::lay_out(options);
    if (!layout) return std::move(layout).error();
    return synth::make_plan(*layout);
}

Result<ModelShape> synth_model_shape(const SynthPlan& plan) {
    const SynthPreset& p = plan.preset;
    ModelShape m;
    m.name = p.model_name;
    m.architecture = p.architecture;
    m.n_layer = p.n_layer;
    m.n_head = p.n_head;
    m.n_head_kv = p.n_head_kv;
    m.head_dim = p.head_dim;
    m.n_embd = p.n_embd;
    m.n_ff = p.n_ff;
    m.n_vocab = p.n_vocab;
    m.n_ctx_train = p.n_ctx_train;
    m.n_expert = p.n_expert;
    m.n_expert_used = p.n_expert_used;
    m.n_ff_expert = p.n_ff_expert;
    m.tied_output = p.tied_embeddings;
    m.layers.resize(m.n_layer);
    // glm4moe's prediction blocks after the decoder's are not loaded: add_tensor_to_shape
    // leaves them out, as read_model_shape does.
    if (const synth::PresetSpec* spec = synth::find_preset(p.name)) {
        m.n_layer_nextn = spec->glm4moe.nextn_layers;
        m.embedding_only = spec->bert;  // as ModelInfo::embedding_only says of the written file
    }
    for (const SynthTensor& t : plan.tensors) {
        const std::optional<GgmlType> type = type_from_name(t.type);
        if (!type) return make_error(ErrorCode::internal, fmt::format("synth: unknown tensor type {}", t.type));
        if (Result<void> added = add_tensor_to_shape(m, t.name, t.bytes, type_traits(*type).block_size); !added) {
            return std::move(added).error();
        }
    }
    return m;
}

Result<ModelShape> synth_model_shape(const SynthOptions& options) {
    Result<synth::ResolvedOptions> resolved = synth::resolve_options(options);
    if (!resolved) return std::move(resolved).error();
    SynthPlan plan;  // as make_plan() but without the GGUF writer, hence without the tokenizer
    plan.preset = resolved->preset.info;
    for (const PlannedTensor& t : synth::plan_tensors(resolved->preset, *resolved->type)) {
        plan.tensors.push_back(
            SynthTensor{t.spec.name, std::string(type_traits(t.spec.type).name), t.spec.dims, t.spec.n_bytes()});
    }
    return synth_model_shape(plan);
}

Result<SynthResult> synthesize_model(const SynthOptions& options, const SynthProgressFn& progress) {
    const auto start = std::chrono::steady_clock::now();
    if (options.output.empty()) return make_error(ErrorCode::invalid_argument, "no output file given");
    std::error_code ec;
    // The file is written beside the output and renamed onto it: over a folder that fails
    // only after the whole model is written, and over a device (/dev/null) it would replace
    // the device node with the model, so neither is overwritten, --force or not.
    const std::filesystem::file_status status = std::filesystem::status(options.output, ec);
    if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
        return make_error(
            ErrorCode::invalid_argument,
            fmt::format("{} is {}, not a file: name the model file to write", options.output.string(),
                        std::filesystem::is_directory(status) ? "a folder" : "a device or other special file"));
    }
    if (std::filesystem::exists(status) && !options.overwrite) {
        return make_error(
            ErrorCode::invalid_argument,
            fmt::format("{} already exists; choose another name or allow overwriting it", options.output.string()));
    }
    Result<synth::Layout> laid_out = synth::lay_out(options);
    if (!laid_out) return std::move(laid_out).error();
    const synth::Layout& layout = *laid_out;

    SynthResult result;
    result.plan = synth::make_plan(layout);
    result.path = options.output;

    // Where each tensor's data starts, for byte-accurate progress: the data section is
    // the tensors, each padded to the alignment, after the header.
    const uint64_t total = result.plan.file_bytes;
    auto padded = [](uint64_t n) {
        return (n + kGgufDefaultAlignment - 1) / kGgufDefaultAlignment * kGgufDefaultAlignment;
    };
    uint64_t data_bytes = 0;
    for (const PlannedTensor& t : layout.tensors) data_bytes += padded(t.spec.n_bytes());
    std::vector<uint64_t> offsets;
    uint64_t offset = total - data_bytes;
    for (const PlannedTensor& t : layout.tensors) {
        offsets.push_back(offset);
        offset += padded(t.spec.n_bytes());
    }

    synth::WeightOptions weights;
    weights.seed = options.seed;
    weights.threads = options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
    weights.pool_weights = options.pool_weights;
    weights.rope_freq_base = layout.resolved.preset.info.rope_freq_base;

    const size_t n_tensors = layout.tensors.size();
    auto fill = [&](size_t index, const GgufTensorSpec& spec, std::span<std::byte> out) -> Result<void> {
        const PlannedTensor& tensor = layout.tensors[index];
        const uint64_t stride = spec.n_bytes() / static_cast<uint64_t>(spec.n_elements() / spec.dims[0]);
        auto tick = [&](int64_t rows_done) {
            if (!progress) return true;
            return progress(SynthProgress{offsets[index] + static_cast<uint64_t>(rows_done) * stride, total, index,
                                          n_tensors, spec.name});
        };
        if (!tick(0)) return make_error(ErrorCode::cancelled, "cancelled");
        return synth::fill_tensor(tensor, out, weights, tick);
    };
    Result<void> written = layout.writer.write_file(options.output, fill);
    if (!written) {
        Error error = std::move(written).error();
        if (error.code == ErrorCode::cancelled) error.message = "cancelled; nothing was written";
        return error;
    }
    if (progress) progress(SynthProgress{total, total, n_tensors, n_tensors, {}});
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
}

}  // namespace powerhouse
