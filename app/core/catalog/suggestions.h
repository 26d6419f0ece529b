// The models the welcome view suggests: a short list that ships with the app
// (resources/models/suggested.json, compiled in), each planned on this machine's devices
// before anything is downloaded. The planner needs only the model's shape, which synth's
// layout of the real model (a `--like` preset and a file type) gives exactly, so the fit
// ("fits on GPU 0", "split over 2 GPUs", "experts of 12 layers in RAM", "runs on the CPU")
// and the speed estimate from memory bandwidth are the planner's own answers.
//
// To change the list, edit the JSON file; scripts/update-suggested-models fills in each
// file's size and sha256 from the Hugging Face API.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/plan.h"
#include "powerhouse/result.h"

namespace powerhouse::catalog {

struct SuggestedFile {
    std::string path;                // in the repository
    std::optional<uint64_t> size;    // bytes, when the list knows it
    std::string sha256;              // lower-case hex, "" when the list does not know it
};

struct SuggestedModel {
    std::string name;          // "Qwen3 8B"
    std::string summary;       // one sentence
    std::string repo;          // "Qwen/Qwen3-8B-GGUF"
    std::vector<SuggestedFile> files;  // all parts of a split model, in order
    std::string quantization;  // "Q4_K_M"
    std::string like;          // synth preset with the real model's shape: "qwen3-8b"
    std::string type;          // synth file type: "q4_k_m"
};

// The list compiled into the program.
std::string_view builtin_suggested_models_json();

// Reads a list. Errors (ErrorCode::format) name the entry and the field.
Result<std::vector<SuggestedModel>> parse_suggested_models(std::string_view json);

// How a suggested model would run here.
enum class SuggestedPlacement {
    gpu,             // on one GPU
    split,           // over several GPUs
    gpu_and_ram,     // on the GPUs, with some layers' experts in system RAM
    cpu,             // on the CPU: no GPU, or it fits on none
    does_not_fit,
};

struct Suggestion {
    SuggestedModel model;
    uint64_t size_bytes = 0;   // the files' sizes when known, else the weights' (the header adds a few MB)
    SuggestedPlacement placement = SuggestedPlacement::does_not_fit;
    std::string where;         // "fits on GPU 0 (RTX 4090)", "split over 2 GPUs", ...; why not when it does not fit
    double tokens_per_second = 0;  // the planner's estimate from memory bandwidth
    bool recommended = false;  // fits and is fast enough to chat with (see suggest_models)
};

// Answers below this many tokens per second (the planner's estimate) are too slow to chat
// with comfortably: such models are listed but not recommended.
inline constexpr double kRecommendedTokensPerSecond = 8.0;

// Plans every model of `models` on `gpus` (options as given; automatic split), and on
// `cpu` (one device: the RAM available) when no GPU is given or the model fits on none.
// The result keeps the list's order (most capable first); `recommended` marks at most
// `max_recommended` models that fit at kRecommendedTokensPerSecond or more, models that
// run wholly on GPUs before the others. A model whose shape cannot be made is returned as
// does_not_fit with the reason.
std::vector<Suggestion> suggest_models(const std::vector<SuggestedModel>& models, const std::vector<DeviceDesc>& gpus,
                                       const std::optional<DeviceDesc>& cpu, const PlanOptions& options,
                                       size_t max_recommended = 4);

// The same with the models' shapes made already (suggested_model_shapes(), one per model,
// in order): laying out a real model's vocabulary takes about 0.1 s, planning
// microseconds, so a view that re-plans when the GPUs change makes the shapes once.
std::vector<Result<ModelShape>> suggested_model_shapes(const std::vector<SuggestedModel>& models);
std::vector<Suggestion> suggest_models(const std::vector<SuggestedModel>& models,
                                       const std::vector<Result<ModelShape>>& shapes,
                                       const std::vector<DeviceDesc>& gpus, const std::optional<DeviceDesc>& cpu,
                                       const PlanOptions& options, size_t max_recommended = 4);

}  // namespace powerhouse::catalog
