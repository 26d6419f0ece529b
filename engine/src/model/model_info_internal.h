// inspect_model() over a GGUF model already opened, or parsed from headers alone
// (read_model_shape from fetched headers, plan.h).
//
// Thread-safety: a pure function of the model.
#pragma once

#include <filesystem>

#include "gguf/gguf_model.h"
#include "powerhouse/model_info.h"
#include "powerhouse/result.h"

namespace powerhouse {

// `path` is what the info names the model by (info.path).
Result<ModelInfo> inspect_gguf(const GgufModel& model, const std::filesystem::path& path);

}  // namespace powerhouse
