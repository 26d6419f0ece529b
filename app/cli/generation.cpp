#include "generation.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "format.h"
#include "powerhouse/chat_template.h"
#include "powerhouse/grammar.h"
#include "powerhouse/tool_calls.h"

namespace powerhouse::cli {

Result<std::filesystem::path> model_or_default(const std::string& model) {
    if (!model.empty()) return std::filesystem::path(model);
    const std::filesystem::path path = setup_model_path();
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
    add_device_options(command, choice.devices);
}

void add_device_options(CLI::App& command, DeviceChoice& choice) {
    command.add_option("--devices", choice.devices,
                       "Where to run: auto (the GPUs if any, else the CPU), cuda (every GPU), cuda:0,1 (those GPUs; "
                       "cuda:0,0: two shards of GPU 0), cpu, or cpu:N for N virtual CPU devices")
        ->capture_default_str();
    command.add_option("--split", choice.split, "How to split the model: auto, single, layer or tensor")
        ->check(CLI::IsMember({"auto", "single", "layer", "tensor"}))
        ->capture_default_str();
    command.add_option("--ratios", choice.ratios, "Share of each device, e.g. 3,1 (default: by free memory)")
        ->delimiter(',');
    command.add_option("--main-device", choice.main_device, "The device for a single split and the output layer")
        ->capture_default_str();
    command.add_option("--kv-type", choice.kv_type, "KV cache type: f16 or q8_0")
        ->check(CLI::IsMember({"f16", "q8_0"}))
        ->capture_default_str();
    add_experts_in_ram_option(command, choice.experts_in_ram);
}

void add_experts_in_ram_option(CLI::App& command, std::string& value) {
    command.add_option("--experts-in-ram", value,
                       "Mixture-of-experts models: keep the experts of the first N layers in system RAM, run by the "
                       "CPU (auto: as few as the GPUs need; all: every layer)")
        ->capture_default_str();
}

Result<void> apply_device_choice(const DeviceChoice& choice, ModelOptions& options) {
    Result<SplitMode> split = parse_split_mode(choice.split);
    if (!split) return split.error();
    options.devices = choice.devices;
    options.split = *split;
    options.ratios = choice.ratios;
    options.main_device = choice.main_device;
    options.kv_cache_type = choice.kv_type == "q8_0" ? KvCacheType::q8_0 : KvCacheType::f16;
    Result<int32_t> experts = parse_experts_in_ram(choice.experts_in_ram);
    if (!experts) return experts.error();
    options.experts_in_ram = *experts;
    // The commands run one conversation at a time: no room kept for more (bench --parallel
    // asks for its own).
    options.max_sequences = 1;
    return {};
}

void add_failure_options(CLI::App& command, FailureChoice& choice) {
    command
        .add_option("--on-device-failure", choice.policy,
                    "When a device fails mid-answer: replan (set it aside, load the model on the devices left, or "
                    "the CPU and RAM, and go on from the last token), retry (load it again on the same devices "
                    "and go on), or stop (end the answers with the error)")
        ->check(CLI::Validator(
            [](std::string& value) {
                Result<RecoveryPolicy> policy = parse_recovery_policy(value);
                return policy ? std::string() : policy.error().message;
            },
            "replan|retry|stop"))
        ->capture_default_str();
    command
        .add_option("--step-deadline", choice.step_deadline,
                    "Seconds one step of the model may take before the device that has not answered counts as "
                    "failed (0: 60 s on GPUs, none on the CPU)")
        ->check(CLI::Range(0.0, 86400.0));
    CLI::Option* device =
        command
            .add_option("--fail-device", choice.fail_device,
                        "For testing failure handling: device N of --devices (from 0) fails as a GPU that fell off "
                        "the bus would")
            ->check(CLI::Range(0, 1023));
    command
        .add_option("--fail-after", choice.fail_after,
                    "For testing failure handling: --fail-device fails after this many steps of its own")
        ->needs(device);
    command
        .add_flag("--fail-hangs", choice.fail_hangs,
                  "For testing failure handling: --fail-device never answers instead (see --step-deadline)")
        ->needs(device);
}

void add_chat_template_option(CLI::App& command, ModelChoice& choice) {
    command.add_option("--chat-template", choice.chat_template_file,
                       "Chat with this Jinja chat template (a file) instead of the model's own, for a model whose "
                       "template is missing, broken or wrong");
}

Result<RecoveryPolicy> parse_recovery_policy(const std::string& text) {
    for (RecoveryPolicy p : {RecoveryPolicy::replan, RecoveryPolicy::retry, RecoveryPolicy::stop}) {
        if (text == recovery_policy_name(p)) return p;
    }
    return make_error(ErrorCode::invalid_argument,
                      fmt::format("'{}' is not a policy: use replan (go on without the failed device), retry "
                                  "(load the model again on the same devices) or stop (end the answers with the "
                                  "error)",
                                  text));
}

namespace {

// The --chat-template file, checked against the model as the load will check it.
Result<std::string> read_chat_template(const std::string& path, const std::filesystem::path& model) {
    // read_file_text takes "-" for standard input, which chat and generate read for the
    // conversation and the prompt: the template would swallow them.
    if (path == "-") {
        return make_error(ErrorCode::invalid_argument,
                          "--chat-template - would read the template from standard input, which holds the "
                          "conversation: name a file");
    }
    Result<std::string> source = read_file_text(path);
    if (!source) return make_error(source.error().code, fmt::format("--chat-template: {}", source.error().message));
    if (source->find_first_not_of(" \t\r\n") == std::string::npos) {
        return make_error(
            ErrorCode::invalid_argument,
            fmt::format("--chat-template '{}' is empty: name a file that holds a Jinja chat template", path));
    }
    // The engine checks it again at load (one plain message rendered with the model's tokens);
    // checked here, the error names the file, which the engine's cannot, and comes before the
    // weights load. Only the file's header is read.
    Result<ModelTemplateInfo> info = read_model_template_info(model);
    if (!info) return info.error();
    if (Result<ResolvedTemplate> usable = resolve_given_template(*source, *info); !usable) {
        return make_error(usable.error().code, fmt::format("--chat-template {}: {}", path, usable.error().message));
    }
    return source;
}

}  // namespace

Result<ModelToLoad> resolve_model(const ModelChoice& choice) {
    Result<std::filesystem::path> path = model_or_default(choice.model);
    if (!path) return path.error();
    ModelOptions options = choice.options;
    if (!choice.chat_template_file.empty()) {
        Result<std::string> source = read_chat_template(choice.chat_template_file, *path);
        if (!source) return source.error();
        options.chat_template = std::move(source).value();
    }
    if (Result<void> r = apply_device_choice(choice.devices, options); !r) return r.error();
    const FailureChoice& failure = choice.failure;
    Result<RecoveryPolicy> recovery = parse_recovery_policy(failure.policy);
    if (!recovery) return recovery.error();
    options.step_deadline = std::chrono::milliseconds(static_cast<int64_t>(failure.step_deadline * 1000.0));
    options.fail_device = failure.fail_device;
    options.fail_after = failure.fail_after;
    options.fail_hangs = failure.fail_hangs;
    ModelToLoad load{std::move(path).value(), options, *recovery, {}, choice.draft_tokens};
    load.guesses = choice.guess_always ? GuessPolicy::always : GuessPolicy::when_they_pay;
    if (!choice.draft_model.empty()) {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(choice.draft_model, ec)) {
            return make_error(ErrorCode::io,
                              fmt::format("--draft-model {}: no such file; give a small .gguf model of the same "
                                          "family (the same vocabulary)",
                                          choice.draft_model));
        }
        load.draft_model = choice.draft_model;
    }
    return load;
}

void add_draft_options(CLI::App& command, ModelChoice& choice) {
    command.add_option("--draft-model", choice.draft_model,
                       "Speculative decoding by a draft model: a small model of the same family and vocabulary "
                       "(e.g. Qwen3-0.6B for Qwen3-32B) guesses the next tokens and the model checks them all in "
                       "one step; the answer is the model's, in fewer steps where decoding is memory-bound (GPUs)");
    command.add_option("--draft-tokens", choice.draft_tokens, "With --draft-model: tokens it guesses a step")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    command.add_flag("--guess-always", choice.guess_always,
                     "Make the guesses of --draft-model and --lookup-draft every step, as many as asked (fewer only "
                     "after a miss). By "
                     "default they are made only where this machine's step timings and the guesses kept so far "
                     "say they save time (for measuring what they cost)");
}

Result<LogitBias> parse_logit_bias(std::string_view text) {
    const auto refuse = [&text] {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("--logit-bias '{}' is not TOKEN_ID+BIAS, TOKEN_ID-BIAS or TOKEN_ID=BIAS "
                                      "(e.g. 15043+1, or 15043-inf to ban token 15043; `tokenize` gives the ids)",
                                      text));
    };
    const size_t sign = text.find_first_of("+-=");
    if (sign == 0 || sign == std::string_view::npos || sign + 1 == text.size()) return refuse();
    LogitBias out;
    const std::string_view id = text.substr(0, sign);
    const auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), out.id);
    if (ec != std::errc() || end != id.data() + id.size() || out.id < 0) return refuse();
    // strtof reads "inf" and "1e3" (from_chars for float needs GCC 11+ and is not in every libc++).
    const std::string number(text.substr(text[sign] == '=' ? sign + 1 : sign));
    char* number_end = nullptr;
    out.bias = std::strtof(number.c_str(), &number_end);
    if (number_end != number.c_str() + number.size() || number.front() == ' ' || std::isnan(out.bias)) return refuse();
    return out;
}

void add_thinking_options(CLI::App& command, ThinkingChoice& choice) {
    command.add_flag("--no-think", choice.no_think,
                     "Ask a reasoning model to answer without thinking: its chat template's enable_thinking set "
                     "to false (Qwen3, Qwen3.5, GLM-4.5, SmolLM3); with --remote, sent as chat_template_kwargs. "
                     "A model whose template has no such switch thinks as it always does (a note says so)");
    command
        .add_option("--reasoning-effort", choice.reasoning_effort,
                    "How much a reasoning model thinks: low, medium or high, its chat template's reasoning_effort "
                    "(gpt-oss); with --remote, sent as OpenAI's reasoning_effort")
        ->check(CLI::IsMember({"low", "medium", "high"}));
}

nlohmann::ordered_json template_variables(const ThinkingChoice& choice) {
    nlohmann::ordered_json variables;  // null: none
    if (choice.no_think) variables["enable_thinking"] = false;
    if (!choice.reasoning_effort.empty()) variables["reasoning_effort"] = choice.reasoning_effort;
    return variables;
}

void note_unread_switches(const ThinkingChoice& choice, const ModelSummary& summary) {
    if (choice.no_think && !summary.has_thinking_switch) {
        std::fputs(
            "note: this model's chat template has no switch for thinking (enable_thinking): --no-think "
            "changes nothing, and the model thinks or not as it always does\n",
            stderr);
    }
    if (!choice.reasoning_effort.empty() && !summary.has_reasoning_effort) {
        std::fputs(
            "note: this model's chat template reads no reasoning effort (reasoning_effort): "
            "--reasoning-effort changes nothing, and the model reasons as it always does\n",
            stderr);
    }
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
    command
        .add_option_function<std::vector<std::string>>(
            "--logit-bias",
            [&p](const std::vector<std::string>& values) {
                for (const std::string& v : values) p.logit_bias.push_back(*parse_logit_bias(v));
            },
            "Add BIAS to a token's logit: TOKEN_ID+BIAS or TOKEN_ID-BIAS, e.g. 15043-inf bans token 15043 "
            "(repeatable; `tokenize` gives the ids)")
        ->check(
            [](const std::string& v) {
                const Result<LogitBias> b = parse_logit_bias(v);
                return b ? std::string() : b.error().message;
            },
            "TOKEN_ID+BIAS");
    command.add_option("--seed", p.seed, "Random seed: the same seed gives the same output");
    command.add_option("--stop", choice.stop, "Stop when the text contains this string (repeatable)");
    add_lookup_option(command, choice.lookup);
}

// --tools FILE: an array of OpenAI tool objects, each a function with a name. The server
// checks the rest (the parameters' schema) as it reads them.
Result<nlohmann::ordered_json> read_tools(const std::string& path) {
    Result<std::string> text = read_file_text(path);
    if (!text) return text.error();
    const std::string shape =
        "an array of OpenAI tool objects: [{\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": "
        "{...}}}]";
    nlohmann::ordered_json tools = nlohmann::ordered_json::parse(*text, nullptr, false);
    if (tools.is_discarded()) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("--tools {}: the file is not JSON; it should hold {}", path, shape));
    }
    if (!tools.is_array() || tools.empty()) {
        return make_error(ErrorCode::invalid_argument, fmt::format("--tools {}: the file should hold {}{}", path, shape,
                                                                   tools.is_array() ? ", not an empty one" : ""));
    }
    for (size_t i = 0; i < tools.size(); ++i) {
        const nlohmann::ordered_json& tool = tools[i];
        const bool named = tool.is_object() && tool.value("type", "") == "function" && tool.contains("function") &&
                           tool["function"].is_object() && tool["function"].contains("name") &&
                           tool["function"]["name"].is_string() && !tool["function"]["name"].empty();
        if (!named) {
            return make_error(
                ErrorCode::invalid_argument,
                fmt::format("--tools {}: tool {} is not a function with a name: {}; each should be {{\"type\": "
                            "\"function\", \"function\": {{\"name\": ..., \"parameters\": {{...}}}}}}",
                            path, i + 1, json_text(tool).substr(0, 200)));
        }
    }
    return tools;
}

// --tool-choice: OpenAI's words as they are, or a tool's name as the object that forces it.
Result<nlohmann::ordered_json> tool_choice(const std::string& choice, const nlohmann::ordered_json& tools) {
    if (choice.empty()) return nlohmann::ordered_json();
    if (choice == "auto" || choice == "none" || choice == "required") return nlohmann::ordered_json(choice);
    std::vector<std::string> names;
    for (const nlohmann::ordered_json& tool : tools) {
        names.push_back(tool["function"]["name"].get<std::string>());
        if (names.back() == choice) {
            return nlohmann::ordered_json{{"type", "function"}, {"function", {{"name", choice}}}};
        }
    }
    return make_error(ErrorCode::invalid_argument,
                      fmt::format("--tool-choice {}: no tool of --tools has that name; give auto, none, required or "
                                  "one of: {}",
                                  choice, fmt::join(names, ", ")));
}

// The calls as OpenAI writes them in a message (generate --remote --json).
nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const ToolCall& call : calls) {
        out.push_back({{"id", call.id},
                       {"type", "function"},
                       {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    }
    return out;
}

Result<void> offer_tools(const std::string& tools_file, const std::string& choice, ToolCallFormat format,
                         GenerateCommand& command) {
    if (tools_file.empty()) return {};
    Result<nlohmann::ordered_json> tools = read_tools(tools_file);
    if (!tools) return tools.error();
    Result<nlohmann::ordered_json> forced = tool_choice(choice, *tools);
    if (!forced) return forced.error();
    if (*forced == "none") return {};  // not offered: the model answers in text
    command.tools = *tools;
    if (forced->is_null() || *forced == "auto") return {};
    // "required", or one tool by name: the answer is exactly one call, as the server makes it.
    const std::string only = forced->is_object() ? (*forced)["function"]["name"].get<std::string>() : std::string();
    Result<std::string> grammar_text = tool_call_grammar(format, *tools, only);
    if (!grammar_text) {
        return make_error(grammar_text.error().code,
                          fmt::format("--tool-choice {}: {}", choice, grammar_text.error().message));
    }
    Result<Grammar> grammar = Grammar::parse(*grammar_text);
    if (!grammar) return grammar.error();
    command.settings.grammar = std::move(grammar).value();
    return {};
}

nlohmann::ordered_json generation_stats_json(const GenerationStats& stats) {
    return {{"prompt_tokens", stats.prompt_tokens},
            {"reused_tokens", stats.reused_tokens},
            {"generated_tokens", stats.generated_tokens},
            {"prompt_tokens_per_second", stats.prompt_tokens_per_second()},
            {"tokens_per_second", stats.tokens_per_second()},
            {"drafted_tokens", stats.drafted_tokens},
            {"accepted_tokens", stats.accepted_tokens}};
}

void add_lookup_option(CLI::App& command, LookupSettings& lookup) {
    command
        .add_option("--lookup-draft", lookup.max_draft,
                    "Speculative decoding by prompt lookup: where the last tokens appeared before in the "
                    "conversation, guess that what followed them follows again, up to N tokens a step, and let "
                    "the model check the guesses with its next token (the answer is the same; it comes in fewer "
                    "steps when it repeats earlier text: code edits, quotes); 0: off")
        ->check(CLI::Range(0, 64));
}

}  // namespace powerhouse::cli
