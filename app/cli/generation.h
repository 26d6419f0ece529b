// What the generate, chat and bench commands share: finding the model, building the
// prompt (raw or through the chat template), and the decode loop with sampling, stop
// tokens and streaming detokenization.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/model.h"
#include "powerhouse/sampler.h"
#include "powerhouse/result.h"

namespace powerhouse::cli {

// -m when given, else the default model that scripts/run sets up.
Result<std::filesystem::path> model_or_default(const std::string& model);

// The prompt as plain text, with the BOS/EOS the model asks for.
std::vector<TokenId> tokenize_raw_prompt(const Model& model, std::string_view text);
// A conversation (JSON array of {"role", "content"}) through the model's chat template,
// ending with the assistant's turn opened. Special tokens count only in the template's text.
Result<std::vector<TokenId>> chat_prompt(const Model& model, const nlohmann::ordered_json& messages);

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --presence-penalty,
// --frequency-penalty, --seed and --stop on a command. Defaults: llama.cpp's.
struct SamplingChoice {
    SamplingParams params;
    std::vector<std::string> stop;  // stop strings (not shown when hit)
};
void add_sampling_options(CLI::App& command, SamplingChoice& choice);

// Makes the model's KV cache ready for `prompt`, keeping what it already holds of it:
// `cached` lists the ids in the cache (updated here). Returns how many leading prompt
// tokens are already in the cache, so only the rest needs decoding (at least one token
// is always left, for its logits).
size_t reuse_cached_prefix(Model& model, std::vector<TokenId>& cached, std::span<const TokenId> prompt);

struct GenerationResult {
    std::vector<TokenId> ids;
    std::string text;
    std::string stop_reason;  // "eos" (an end-of-generation token), "stop" (a stop string), "length", "context"
    double prompt_seconds = 0;
    double generation_seconds = 0;
};

// Decodes the prompt after what the model's cache already holds, then generates up to
// n_predict tokens, passing each piece of text to on_text as soon as it is complete.
Result<GenerationResult> generate_text(Model& model, std::span<const TokenId> prompt, int n_predict,
                                       const SamplingChoice& sampling,
                                       const std::function<void(std::string_view)>& on_text);

}  // namespace powerhouse::cli
