// Everything about a synthetic file but its weights: the options resolved to a preset and
// a file type, the GGUF metadata (hyper-parameters under the keys real conversions use,
// tokenizer, chat template) and the tensor list. synthesize_model streams weights into
// this layout; tests read the metadata of large presets here without writing gigabytes.
//
// Thread-safety: pure functions over value types.
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/gguf_writer.h"
#include "powerhouse/synth.h"
#include "synth/presets.h"
#include "synth/tensor_plan.h"

namespace powerhouse::synth {

struct ResolvedOptions {
    PresetSpec preset;  // with the --layers / --ctx overrides applied
    const FileTypeSpec* type = nullptr;
    uint32_t real_n_layer = 0;
};

// Checks the options (preset, architecture, type, ranges); errors are invalid_argument.
Result<ResolvedOptions> resolve_options(const SynthOptions& options);

// The general.* and {arch}.* keys: everything but the tokenizer.
void write_model_metadata(GgufMetadata& metadata, const ResolvedOptions& resolved, const SynthOptions& options);

struct Layout {
    ResolvedOptions resolved;
    std::vector<PlannedTensor> tensors;  // in file order, as added to `writer`
    GgufWriter writer;                   // metadata and tensor infos; no data yet
};

Result<Layout> lay_out(const SynthOptions& options);

SynthPlan make_plan(const Layout& layout);

}  // namespace powerhouse::synth
