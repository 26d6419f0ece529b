// What the generate, chat, serve and bench commands share: the model options (-m, --ctx,
// -t) and finding the default model, what to do when a device fails, and the sampling
// options. The generation itself is the engine's (powerhouse/generation.h,
// powerhouse/engine.h).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "powerhouse/engine.h"
#include "powerhouse/model.h"
#include "powerhouse/result.h"
#include "powerhouse/sampler.h"

namespace powerhouse::cli {

// -m when given, else the default model that scripts/run sets up.
Result<std::filesystem::path> model_or_default(const std::string& model);

// --devices, --split, --ratios, --main-device, --kv-type and --experts-in-ram: where the
// model runs.
struct DeviceChoice {
    std::string devices = "auto";
    std::string split = "auto";
    std::vector<double> ratios;
    uint32_t main_device = 0;
    std::string kv_type = "f16";
    std::string experts_in_ram = "auto";
};
void add_device_options(CLI::App& command, DeviceChoice& choice);
// --experts-in-ram VALUE (auto, all or a layer count).
void add_experts_in_ram_option(CLI::App& command, std::string& value);
// Sets the options' devices, split, ratios, main device and KV-cache type.
Result<void> apply_device_choice(const DeviceChoice& choice, ModelOptions& options);

// --on-device-failure, --step-deadline, and for tests of failure handling --fail-device,
// --fail-after and --fail-hangs (ARCHITECTURE.md section 7): for the commands that run the
// model on the engine thread, whose RecoveryPolicy applies.
struct FailureChoice {
    std::string policy = "replan";  // RecoveryPolicy: replan, retry or stop
    double step_deadline = 0;       // seconds; 0: the engine's (60 s on GPUs, none on the CPU)
    int fail_device = -1;           // ModelOptions::fail_device
    uint32_t fail_after = 0;
    bool fail_hangs = false;
};
void add_failure_options(CLI::App& command, FailureChoice& choice);
// "replan", "retry" or "stop"; anything else is an error that lists them.
Result<RecoveryPolicy> parse_recovery_policy(const std::string& text);

// -m/--model, --ctx, -t/--threads and the device options (the failure options and
// --chat-template when a command adds them).
struct ModelChoice {
    std::string model;
    ModelOptions options;
    DeviceChoice devices;
    FailureChoice failure;
    std::string chat_template_file;  // --chat-template; empty: the model's own template
    std::string draft_model;         // --draft-model; empty: none
    uint32_t draft_tokens = 8;       // --draft-tokens
    bool guess_always = false;       // --guess-always
};
void add_model_options(CLI::App& command, ModelChoice& choice);
// --chat-template FILE, for the commands that chat (chat, generate, serve): a Jinja chat
// template used instead of the model's own (ModelOptions::chat_template), for a file whose
// template is missing, broken or wrong.
void add_chat_template_option(CLI::App& command, ModelChoice& choice);
// --draft-model FILE and --draft-tokens N (chat, generate, serve): speculative decoding by a
// small model of the same vocabulary (LoadCommand::draft_model), local models only; and
// --guess-always, its guesses and --lookup-draft's made even where they do not pay.
void add_draft_options(CLI::App& command, ModelChoice& choice);
// The model file (model_or_default) and its options; the --chat-template file read and
// checked here, so that a template that cannot be used is named before any weights load.
struct ModelToLoad {
    std::filesystem::path path;
    ModelOptions options;
    RecoveryPolicy recovery = RecoveryPolicy::replan;
    std::filesystem::path draft_model;
    uint32_t draft_tokens = 8;
    GuessPolicy guesses = GuessPolicy::when_they_pay;

    LoadCommand load_command() const {
        LoadCommand command{path, options, recovery};
        command.draft_model = draft_model;
        command.draft_tokens = draft_tokens;
        command.guesses = guesses;
        return command;
    }
};
Result<ModelToLoad> resolve_model(const ModelChoice& choice);

// --no-think and --reasoning-effort (chat and generate, local and --remote): the switches a
// reasoning model's chat template reads. Locally they are the template's variables
// (template_variables); a remote server gets chat_template_kwargs and OpenAI's
// reasoning_effort (remote_cli.cpp).
struct ThinkingChoice {
    bool no_think = false;         // enable_thinking false: Qwen3, Qwen3.5, GLM-4.5, SmolLM3
    std::string reasoning_effort;  // "", low, medium or high: gpt-oss
};
void add_thinking_options(CLI::App& command, ThinkingChoice& choice);
// The choice as GenerateCommand::template_variables; null when nothing was asked.
nlohmann::ordered_json template_variables(const ThinkingChoice& choice);
// A note on stderr for each switch asked for that the loaded model's template does not read:
// the model then thinks as it always does, and the user should know the option did nothing.
void note_unread_switches(const ThinkingChoice& choice, const ModelSummary& summary);

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --presence-penalty,
// --frequency-penalty, --seed and --stop on a command (defaults: llama.cpp's), and
// --lookup-draft (speculative decoding by prompt lookup; local models only).
struct SamplingChoice {
    SamplingParams params;
    std::vector<std::string> stop;  // stop strings (not shown when hit)
    LookupSettings lookup;
};
void add_sampling_options(CLI::App& command, SamplingChoice& choice);
// --tools FILE (generate and chat, local or --remote): an array of OpenAI tool objects, each a
// function with a name (the parameters' schemas are checked where they are used).
Result<nlohmann::ordered_json> read_tools(const std::string& path);
// --tool-choice: OpenAI's words as they are, or a tool's name as the object that forces it;
// null when not given.
Result<nlohmann::ordered_json> tool_choice(const std::string& choice, const nlohmann::ordered_json& tools);
// The calls as OpenAI writes them in a message (generate --json).
nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls);
// For a local model: the tools offered in the command (none with --tool-choice none), and for
// "required" or a tool's name the grammar that makes the answer such a call, in the model's
// own format (ModelSummary::tool_format).
Result<void> offer_tools(const std::string& tools_file, const std::string& choice, ToolCallFormat format,
                         GenerateCommand& command);

// A generation's figures for --json: token counts, speeds, and the guesses of --lookup-draft.
nlohmann::ordered_json generation_stats_json(const GenerationStats& stats);
// --lookup-draft N alone (serve takes no sampling options: each request brings its own).
void add_lookup_option(CLI::App& command, LookupSettings& lookup);
// One --logit-bias value: TOKEN_ID+BIAS, TOKEN_ID-BIAS (llama.cpp's form) or TOKEN_ID=BIAS;
// BIAS may be inf ("-inf" bans the token).
Result<LogitBias> parse_logit_bias(std::string_view text);

}  // namespace powerhouse::cli
