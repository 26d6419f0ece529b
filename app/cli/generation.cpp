#include "generation.h"

#include <fmt/format.h>

#include <cstdlib>

namespace powerhouse::cli {

Result<std::filesystem::path> model_or_default(const std::string& model) {
    if (!model.empty()) return std::filesystem::path(model);
    std::filesystem::path path;
    if (const char* env = std::getenv("POWERHOUSE_TEST_MODEL"); env != nullptr && *env != '\0') {
        path = env;
    } else if (const char* home = std::getenv("HOME"); home != nullptr) {
        path = std::filesystem::path(home) / ".cache/powerhouse/test-models/SmolLM2-135M-Instruct.Q4_1.gguf";
    }
    std::error_code ec;
    if (path.empty() || !std::filesystem::exists(path, ec)) {
        return make_error(ErrorCode::invalid_argument,
                          "no model given (-m MODEL) and the default model is not set up: run scripts/run once");
    }
    return path;
}

void add_model_options(CLI::App& command, ModelChoice& choice) {
    command.add_option("-m,--model", choice.model, "Model file (.gguf); default: the model set up by scripts/run");
    command.add_option("--ctx", choice.options.n_ctx, "Context length (KV cache positions)")
        ->check(CLI::Range(16u, 1u << 20))
        ->capture_default_str();
    command.add_option("-t,--threads", choice.options.n_threads, "CPU threads (default: all cores)")
        ->check(CLI::Range(0, 1024));
}

Result<ModelToLoad> resolve_model(const ModelChoice& choice) {
    Result<std::filesystem::path> path = model_or_default(choice.model);
    if (!path) return path.error();
    return ModelToLoad{std::move(path).value(), choice.options};
}

void add_sampling_options(CLI::App& command, SamplingChoice& choice) {
    SamplingParams& p = choice.params;
    command.add_option("--temp", p.temperature, "Sampling temperature; 0: greedy")->capture_default_str();
    command.add_option("--top-k", p.top_k, "Keep the k most likely tokens; 0: off")->capture_default_str();
    command.add_option("--top-p", p.top_p, "Keep the most likely tokens up to this probability; 1: off")
        ->capture_default_str();
    command.add_option("--min-p", p.min_p, "Drop tokens less likely than this times the top one; 0: off")
        ->capture_default_str();
    command.add_option("--repeat-penalty", p.repeat_penalty, "Penalty for repeating recent tokens; 1: off")
        ->capture_default_str();
    command.add_option("--presence-penalty", p.presence_penalty, "OpenAI presence penalty; 0: off");
    command.add_option("--frequency-penalty", p.frequency_penalty, "OpenAI frequency penalty; 0: off");
    command.add_option("--seed", p.seed, "Random seed: the same seed gives the same output");
    command.add_option("--stop", choice.stop, "Stop when the text contains this string (repeatable)");
}

}  // namespace powerhouse::cli
