#include "generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "powerhouse/stop_strings.h"

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

size_t reuse_cached_prefix(Model& model, std::vector<TokenId>& cached, std::span<const TokenId> prompt) {
    size_t common = 0;
    const size_t limit = std::min({cached.size(), prompt.size(), static_cast<size_t>(model.n_past())});
    while (common < limit && cached[common] == prompt[common]) ++common;
    if (common == prompt.size() && common > 0) --common;  // decode the last token again for its logits
    model.truncate(static_cast<uint32_t>(common));
    cached.assign(prompt.begin(), prompt.end());
    return common;
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

Result<GenerationResult> generate_text(Model& model, std::span<const TokenId> prompt, int n_predict,
                                       const SamplingChoice& sampling,
                                       const std::function<void(std::string_view)>& on_text) {
    using Clock = std::chrono::steady_clock;
    Result<Sampler> created = Sampler::create(sampling.params);
    if (!created) return created.error();
    Sampler sampler = std::move(created).value();
    for (TokenId id : prompt) sampler.accept(id);
    StopStringMatcher stops(sampling.stop);

    GenerationResult result;
    const Tokenizer& tokenizer = model.tokenizer();
    DetokenizeOptions detok;
    detok.strip_leading_space = false;  // the answer continues the prompt
    StreamingDetokenizer stream(tokenizer, detok);
    const auto emit = [&](const std::string& piece) {
        const StopStringOutput out = stops.feed(piece);
        result.text += out.text_to_emit;
        if (!out.text_to_emit.empty()) on_text(out.text_to_emit);
        return out.stopped;
    };

    const auto start = Clock::now();
    Result<std::span<const float>> logits = model.decode(prompt);
    if (!logits) return logits.error();
    result.prompt_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const auto gen_start = Clock::now();
    std::vector<float> scratch;
    result.stop_reason = "length";
    for (int i = 0; i < n_predict; ++i) {
        scratch.assign(logits->begin(), logits->end());
        const TokenId next = sampler.sample(scratch);
        if (next == kNoToken) return make_error(ErrorCode::internal, "the model produced no usable logits (NaN)");
        sampler.accept(next);
        result.ids.push_back(next);
        if (tokenizer.is_eog(next)) {
            result.stop_reason = "eos";
            break;
        }
        if (emit(stream.feed(next))) {
            result.stop_reason = "stop";
            break;
        }
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
    if (result.stop_reason != "stop" && !emit(stream.flush())) {
        const std::string rest = stops.flush();
        result.text += rest;
        if (!rest.empty()) on_text(rest);
    }
    result.generation_seconds = std::chrono::duration<double>(Clock::now() - gen_start).count();
    return result;
}

}  // namespace powerhouse::cli
