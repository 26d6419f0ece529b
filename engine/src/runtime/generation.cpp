#include "powerhouse/generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <nlohmann/json.hpp>

#include "powerhouse/chat_template.h"
#include "powerhouse/scheduler.h"

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

std::vector<TokenId> raw_prompt(const Model& model, std::string_view text, bool parse_special) {
    return model.tokenizer().tokenize(text, true, parse_special);
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
    // One request through the scheduler: the same loop as under batching, alone.
    SchedulerOptions options;
    options.max_sequences = 1;
    Scheduler scheduler(model, options);
    std::optional<Result<GenerationResult>> done;
    Scheduler::TextCallback on_text;
    if (callbacks.on_text) on_text = [&](uint64_t, std::string_view text) { callbacks.on_text(text); };
    PH_TRY(scheduler.submit(1, std::vector<TokenId>(prompt.begin(), prompt.end()), settings, std::move(on_text),
                            [&](uint64_t, Result<GenerationResult> result) { done = std::move(result); }));
    while (!done) {
        // Polled before every step, as the scheduler checks its cancels.
        if (callbacks.cancelled && callbacks.cancelled()) scheduler.cancel(1);
        Result<void> stepped = scheduler.step();
        if (!stepped && !done) return stepped.error();
    }
    return std::move(*done);
}

}  // namespace powerhouse
