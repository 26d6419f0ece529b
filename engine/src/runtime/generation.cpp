#include "powerhouse/generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>

#include "powerhouse/chat_template.h"
#include "powerhouse/scheduler.h"
#include "powerhouse/tool_calls.h"
#include "runtime/hints.h"

namespace powerhouse {

const char* stop_reason_name(StopReason reason) {
    switch (reason) {
        case StopReason::eos:
            return "eos";
        case StopReason::stop:
            return "stop";
        case StopReason::length:
            return "length";
        case StopReason::context:
            return "context";
        case StopReason::cancelled:
            return "cancelled";
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

namespace {

// A call's arguments as the template sees them: parsed, as transformers expects (templates
// print them with `tojson` or iterate them); text that is not JSON stays text.
nlohmann::ordered_json call_arguments(const std::string& text) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) return nlohmann::ordered_json::object();
    nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(text, nullptr, false);
    return parsed.is_discarded() ? nlohmann::ordered_json(text) : parsed;
}

bool uses_tools(std::span<const ChatMessage> messages, const nlohmann::ordered_json& tools) {
    if (has_tools(tools)) return true;
    return std::any_of(messages.begin(), messages.end(),
                       [](const ChatMessage& m) { return m.role == "tool" || !m.tool_calls.empty(); });
}

}  // namespace

nlohmann::ordered_json chat_context(std::span<const ChatMessage> messages, const nlohmann::ordered_json& tools) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const ChatMessage& m : messages) {
        nlohmann::ordered_json message = nlohmann::ordered_json::object();
        message["role"] = m.role;
        // A message that only calls tools has no content (gpt-oss's template fails on a null
        // one, Qwen's skips a missing one).
        if (!m.content.empty() || m.tool_calls.empty()) message["content"] = m.content;
        if (!m.tool_calls.empty()) {
            nlohmann::ordered_json calls = nlohmann::ordered_json::array();
            for (const ToolCall& call : m.tool_calls) {
                nlohmann::ordered_json entry = nlohmann::ordered_json::object();
                if (!call.id.empty()) entry["id"] = call.id;
                entry["type"] = "function";
                entry["function"] = {{"name", call.name}, {"arguments", call_arguments(call.arguments)}};
                calls.push_back(std::move(entry));
            }
            message["tool_calls"] = std::move(calls);
        }
        if (!m.tool_call_id.empty()) message["tool_call_id"] = m.tool_call_id;
        if (!m.name.empty()) message["name"] = m.name;
        list.push_back(std::move(message));
    }
    nlohmann::ordered_json context = nlohmann::ordered_json::object();
    context["messages"] = std::move(list);
    if (has_tools(tools)) context["tools"] = tools;
    context["add_generation_prompt"] = true;
    return context;
}

Result<void> check_template_variables(const nlohmann::ordered_json& variables) {
    if (variables.is_null()) return {};
    if (!variables.is_object()) {
        return make_error(ErrorCode::invalid_argument,
                          "the chat template's variables must be an object, such as {\"enable_thinking\": false}");
    }
    for (const auto& [name, value] : variables.items()) {
        for (const char* reserved : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}) {
            if (name == reserved) {
                return make_error(ErrorCode::invalid_argument,
                                  fmt::format("the chat template's variable '{}' is set by Powerhouse itself and "
                                              "cannot be given",
                                              name));
            }
        }
    }
    return {};
}

namespace {

// chat_prompt() with the variables checked already.
Result<std::vector<TokenId>> render_chat_prompt(const Model& model, std::span<const ChatMessage> messages,
                                                const nlohmann::ordered_json& tools,
                                                const nlohmann::ordered_json& variables) {
    const ResolvedTemplate& resolved = model.chat_template();
    nlohmann::ordered_json context;
    if (uses_tools(messages, tools) && !template_mentions_tools(resolved.chat_template.source())) {
        // The template would drop the tools (and print calls as empty turns): the
        // conversation carries them itself, in the generic format.
        context = chat_context(add_tool_instructions(messages, tools));
    } else {
        context = chat_context(messages, tools);
    }
    if (variables.is_object()) {
        for (const auto& [name, value] : variables.items()) context[name] = value;
    }
    add_default_tokens(context, model.template_info());
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

}  // namespace

Result<std::vector<TokenId>> chat_prompt(const Model& model, std::span<const ChatMessage> messages,
                                         const nlohmann::ordered_json& tools, const nlohmann::ordered_json& variables) {
    PH_TRY(check_template_variables(variables));
    return render_chat_prompt(model, messages, tools, variables);
}

std::string longer_context_hint(const Model& model) {
    const ModelSummary& s = model.summary();
    if (s.n_ctx_train > s.n_ctx) {
        return fmt::format("load the model with a longer context (it was trained for up to {} tokens)", s.n_ctx_train);
    }
    return "use a model with a longer context";
}

Result<std::vector<TokenId>> fit_chat_prompt(const Model& model, std::span<const ChatMessage> messages,
                                             ContextOverflow policy, uint32_t reserve, uint32_t& dropped,
                                             const nlohmann::ordered_json& tools,
                                             const nlohmann::ordered_json& variables) {
    dropped = 0;
    std::vector<ChatMessage> kept(messages.begin(), messages.end());
    const size_t first = !kept.empty() && kept.front().role == "system" ? 1 : 0;
    const uint32_t n_ctx = model.n_ctx();
    PH_TRY(check_template_variables(variables));
    for (;;) {
        Result<std::vector<TokenId>> prompt = render_chat_prompt(model, kept, tools, variables);
        if (!prompt) return prompt;
        if (prompt->size() + reserve <= n_ctx) return prompt;
        if (policy == ContextOverflow::fail) {
            return make_error(ErrorCode::context_full,
                              fmt::format("the conversation is {} tokens long and {} more are kept for the answer, but "
                                          "the context holds {}: send fewer or shorter messages, ask for a shorter "
                                          "answer, or {}",
                                          prompt->size(), reserve, n_ctx, longer_context_hint(model)));
        }
        if (kept.size() <= first + 1) {
            // With a system prompt, it is kept too, and may be what is too long.
            return make_error(
                ErrorCode::context_full,
                fmt::format(
                    "{} a prompt of {} tokens, and {} more are kept for the answer, but the "
                    "context holds {}: {} or {}",
                    first == 1 ? "the system prompt and the last message alone make" : "the last message alone makes",
                    prompt->size(), reserve, n_ctx, first == 1 ? "shorten them" : "shorten the message",
                    longer_context_hint(model)));
        }
        // Drop the oldest message, and the answers that followed it (tool calls and their
        // results with them), so that what is left still starts with a user's message.
        kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(first));
        ++dropped;
        while (kept.size() > first + 1 && (kept[first].role == "assistant" || kept[first].role == "tool")) {
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
    if (callbacks.on_text) {
        on_text = [&](uint64_t, std::string_view text, std::span<const TokenLogprob>) { callbacks.on_text(text); };
    }
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
