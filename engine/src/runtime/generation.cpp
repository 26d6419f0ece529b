#include "powerhouse/generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "powerhouse/chat_template.h"
#include "powerhouse/stop_strings.h"

namespace powerhouse {

const char* stop_reason_name(StopReason reason) {
    switch (reason) {
        case StopReason::eos: return "eos";
        case StopReason::stop: return "stop";
        case StopReason::length: return "length";
        case StopReason::context: return "context";
        case StopReason::cancelled: return "cancelled";
    }
    return "unknown";
}

double GenerationStats::prompt_tokens_per_second() const {
    const uint32_t processed = prompt_tokens - reused_tokens;
    return prompt_seconds > 0 ? processed / prompt_seconds : 0.0;
}

double GenerationStats::tokens_per_second() const {
    return generation_seconds > 0 && generated_tokens > 1 ? (generated_tokens - 1) / generation_seconds : 0.0;
}

std::vector<TokenId> raw_prompt(const Model& model, std::string_view text) {
    return model.tokenizer().tokenize(text, true, false);
}

Result<std::vector<TokenId>> chat_prompt(const Model& model, std::span<const ChatMessage> messages) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
    nlohmann::ordered_json context = {{"messages", std::move(list)}, {"add_generation_prompt", true}};
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

namespace {

std::string longer_context_hint(const Model& model) {
    const ModelSummary& s = model.summary();
    if (s.n_ctx_train > s.n_ctx) {
        return fmt::format("load the model with a longer context (it was trained for up to {} tokens)", s.n_ctx_train);
    }
    return "use a model with a longer context";
}

}  // namespace

Result<std::vector<TokenId>> fit_chat_prompt(const Model& model, std::span<const ChatMessage> messages,
                                             ContextOverflow policy, uint32_t reserve, uint32_t& dropped) {
    dropped = 0;
    std::vector<ChatMessage> kept(messages.begin(), messages.end());
    const size_t first = !kept.empty() && kept.front().role == "system" ? 1 : 0;
    const uint32_t n_ctx = model.n_ctx();
    for (;;) {
        Result<std::vector<TokenId>> prompt = chat_prompt(model, kept);
        if (!prompt) return prompt;
        if (prompt->size() + reserve <= n_ctx) return prompt;
        if (policy == ContextOverflow::fail) {
            return make_error(ErrorCode::context_full,
                              fmt::format("the conversation is {} tokens long and {} more are kept for the answer, but "
                                          "the context holds {}: start a new conversation, allow dropping the oldest "
                                          "messages, or {}",
                                          prompt->size(), reserve, n_ctx, longer_context_hint(model)));
        }
        if (kept.size() <= first + 1) {
            return make_error(ErrorCode::context_full,
                              fmt::format("the last message alone makes a prompt of {} tokens, and {} more are kept for "
                                          "the answer, but the context holds {}: shorten the message or {}",
                                          prompt->size(), reserve, n_ctx, longer_context_hint(model)));
        }
        // Drop the oldest message, and the answers that followed it, so that what is left
        // still starts with a user's message.
        kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(first));
        ++dropped;
        while (kept.size() > first + 1 && kept[first].role == "assistant") {
            kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(first));
            ++dropped;
        }
    }
}

Result<GenerationResult> generate(Model& model, std::span<const TokenId> prompt, const GenerationSettings& settings,
                                  const GenerationCallbacks& callbacks) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto seconds_since = [](Clock::time_point t) {
        return std::chrono::duration<double>(Clock::now() - t).count();
    };
    if (prompt.empty()) return make_error(ErrorCode::invalid_argument, "the prompt is empty");
    if (settings.max_tokens < 0) {
        return make_error(ErrorCode::invalid_argument, fmt::format("max_tokens = {} is negative", settings.max_tokens));
    }
    if (prompt.size() > model.n_ctx()) {
        return make_error(ErrorCode::context_full,
                          fmt::format("the prompt is {} tokens long but the context holds {}: shorten it or {}",
                                      prompt.size(), model.n_ctx(), longer_context_hint(model)));
    }
    Result<Sampler> created = Sampler::create(settings.sampling);
    if (!created) return created.error();
    Sampler sampler = std::move(created).value();
    for (TokenId id : prompt) sampler.accept(id);

    GenerationResult result;
    GenerationStats& stats = result.stats;
    stats.prompt_tokens = static_cast<uint32_t>(prompt.size());

    // The prompt cache: keep what the cache holds of this prompt, but always decode at least
    // its last token, for the logits.
    const std::span<const TokenId> cached = model.cached_tokens();
    const size_t limit = std::min(cached.size(), prompt.size() - 1);
    size_t common = 0;
    while (common < limit && cached[common] == prompt[common]) ++common;
    model.truncate(static_cast<uint32_t>(common));
    stats.reused_tokens = static_cast<uint32_t>(common);

    const auto cancelled = [&] { return callbacks.cancelled && callbacks.cancelled(); };
    const auto finish = [&](StopReason reason) {
        stats.stop_reason = reason;
        stats.generated_tokens = static_cast<uint32_t>(result.ids.size());
        return result;
    };

    // Greedy without penalties: the model picks each token itself (on a GPU, only its id
    // leaves the device). Otherwise the sampler works on the logits.
    const bool greedy = sampler.plain_greedy();
    std::span<const float> logits;
    TokenId picked = kNoToken;
    const auto step = [&](std::span<const TokenId> tokens) -> Result<void> {
        if (greedy) {
            Result<TokenId> best = model.decode_argmax(tokens);
            if (!best) return best.error();
            picked = *best;
        } else {
            Result<std::span<const float>> out = model.decode(tokens);
            if (!out) return out.error();
            logits = *out;
        }
        return {};
    };

    // Prefill, a batch at a time, so that a cancel is seen between batches.
    const size_t batch = model.n_batch();
    for (size_t at = common; at < prompt.size(); at += batch) {
        if (cancelled()) {
            stats.prompt_seconds = seconds_since(start);
            return finish(StopReason::cancelled);
        }
        PH_TRY(step(prompt.subspan(at, std::min(batch, prompt.size() - at))));
    }
    stats.prompt_seconds = seconds_since(start);

    StopStringMatcher stops(settings.stop);
    DetokenizeOptions detok;
    detok.strip_leading_space = false;  // the answer continues the prompt
    StreamingDetokenizer stream(model.tokenizer(), detok);
    const auto emit = [&](const std::string& piece) {
        const StopStringOutput out = stops.feed(piece);
        result.text += out.text_to_emit;
        if (!out.text_to_emit.empty() && callbacks.on_text) callbacks.on_text(out.text_to_emit);
        return out.stopped;
    };

    std::vector<float> scratch;
    Clock::time_point first_token{};
    StopReason reason = StopReason::length;
    for (int32_t i = 0; i < settings.max_tokens; ++i) {
        TokenId next = picked;
        if (!greedy) {
            scratch.assign(logits.begin(), logits.end());
            next = sampler.sample(scratch);
        }
        if (next == kNoToken) return make_error(ErrorCode::internal, "the model produced no usable logits (NaN)");
        if (i == 0) {
            first_token = Clock::now();
            stats.time_to_first_token = std::chrono::duration<double>(first_token - start).count();
        }
        sampler.accept(next);
        result.ids.push_back(next);
        if (model.tokenizer().is_eog(next) && !settings.ignore_eos) {
            reason = StopReason::eos;
            break;
        }
        if (emit(stream.feed(next))) {
            reason = StopReason::stop;
            break;
        }
        if (i + 1 == settings.max_tokens) break;
        if (model.n_past() >= model.n_ctx()) {
            reason = StopReason::context;
            break;
        }
        if (cancelled()) {
            reason = StopReason::cancelled;
            break;
        }
        const TokenId one[] = {next};
        PH_TRY(step(one));
    }
    if (reason != StopReason::stop && !emit(stream.flush())) {
        const std::string rest = stops.flush();
        result.text += rest;
        if (!rest.empty() && callbacks.on_text) callbacks.on_text(rest);
    }
    if (!result.ids.empty()) stats.generation_seconds = seconds_since(first_token);
    return finish(reason);
}

}  // namespace powerhouse
