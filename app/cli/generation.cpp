#include "generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
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

std::vector<TokenId> tokenize_raw_prompt(const Model& model, std::string_view text) {
    return model.tokenizer().tokenize(text, true, false);
}

Result<std::vector<TokenId>> chat_prompt(const Model& model, const nlohmann::ordered_json& messages) {
    nlohmann::ordered_json context = {{"messages", messages}, {"add_generation_prompt", true}};
    add_default_tokens(context, model.template_info());
    const ResolvedTemplate resolved = resolve_chat_template(model.template_info());
    Result<RenderedPrompt> prompt = resolved.chat_template.render_prompt(context);
    if (!prompt) return make_error(prompt.error().code, "the chat template failed: " + prompt.error().message);
    const Tokenizer& tokenizer = model.tokenizer();
    std::vector<TokenId> ids = tokenizer.tokenize(prompt->segments(), false);
    // Templates usually write the BOS token themselves; add it only when they do not.
    if (tokenizer.adds_bos() && tokenizer.bos() && (ids.empty() || ids.front() != *tokenizer.bos())) {
        ids.insert(ids.begin(), *tokenizer.bos());
    }
    return ids;
}

void add_sampling_options(CLI::App& command, SamplingChoice& choice) {
    command.add_option("--temp", choice.temperature, "Sampling temperature (0: greedy)")->check(CLI::Range(0.0f, 10.0f));
    command.add_option("--seed", choice.seed, "Random seed: the same seed gives the same output");
}

namespace {

TokenId argmax(std::span<const float> logits) {
    return static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace

Result<GenerationResult> generate_text(Model& model, std::span<const TokenId> prompt, int n_predict,
                                       const SamplingChoice& sampling,
                                       const std::function<void(std::string_view)>& on_text) {
    using Clock = std::chrono::steady_clock;
    if (sampling.temperature != 0.0f) {
        return make_error(ErrorCode::unsupported, "only greedy sampling (--temp 0) is available yet");
    }
    GenerationResult result;
    const Tokenizer& tokenizer = model.tokenizer();
    DetokenizeOptions detok;
    detok.strip_leading_space = false;  // the answer continues the prompt
    StreamingDetokenizer stream(tokenizer, detok);

    const auto start = Clock::now();
    Result<std::span<const float>> logits = model.decode(prompt);
    if (!logits) return logits.error();
    result.prompt_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const auto gen_start = Clock::now();
    result.stop_reason = "length";
    for (int i = 0; i < n_predict; ++i) {
        const TokenId next = argmax(*logits);
        result.ids.push_back(next);
        if (tokenizer.is_eog(next)) {
            result.stop_reason = "eos";
            break;
        }
        const std::string piece = stream.feed(next);
        result.text += piece;
        if (!piece.empty()) on_text(piece);
        if (i + 1 == n_predict) break;
        const TokenId one[] = {next};
        logits = model.decode(one);
        if (!logits) {
            if (logits.error().code == ErrorCode::out_of_memory) {
                result.stop_reason = "context";
                break;
            }
            return logits.error();
        }
    }
    const std::string rest = stream.flush();
    result.text += rest;
    if (!rest.empty()) on_text(rest);
    result.generation_seconds = std::chrono::duration<double>(Clock::now() - gen_start).count();
    return result;
}

}  // namespace powerhouse::cli
