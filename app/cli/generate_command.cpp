// powerhouse-cli generate [-m MODEL] (--prompt TEXT | --prompt-file FILE) [-n N] [--raw]
//                         [--no-special] [--temp T] [--seed S] [--ctx N] [-t THREADS]
//                         [--ignore-eos] [--json] [--on-device-failure replan|retry|stop]
//                         [--step-deadline SECONDS] [--chat-template FILE] [--no-think]
//                         [--reasoning-effort low|medium|high]
// powerhouse-cli generate --remote URL [-m NAME] [--api-key-file FILE] [--ca-file FILE] ...
//
// Without --raw the prompt is one user message put through the model's chat template (its
// own, the built-in one of its family, or --chat-template's), with --no-think and
// --reasoning-effort as the template's variables (a note when it reads neither); with --raw it is tokenized as it is,
// special tokens written in it (a template written by hand) becoming their ids unless --no-special. The answer streams
// to stdout as it is generated, a reasoning model's thinking (read apart from the answer in the model's own format; not
// with --raw) first, between "<think>" and
// "</think>" lines (answer_printer.h). --json prints instead one JSON object: {"prompt_ids",
// "generated_ids", "text", "stop_reason"}, and "reasoning" when the model reasoned. The model
// runs on the engine thread (powerhouse/engine.h), so a device that fails mid-answer is
// handled as --on-device-failure says, its banner on stderr (engine_answer.h).
// Without -m, the default model set up by scripts/run (SmolLM2-135M-Instruct) is used.
// With --remote, an OpenAI-compatible server answers instead (remote_cli.h): -m names its
// model, and the output is the same streamed text (--json: see run_remote_generate).
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "engine_answer.h"
#include "format.h"
#include "generation.h"
#include "powerhouse/engine.h"
#include "powerhouse/generation.h"
#include "remote_cli.h"

namespace powerhouse::cli {
namespace {

struct GenerateOptions {
    ModelChoice model;
    std::string prompt;
    std::string prompt_file;
    int n_predict = 256;
    bool raw = false;
    bool no_special = false;  // --raw: special tokens written in the prompt stay text
    bool json = false;
    bool ignore_eos = false;
    SamplingChoice sampling;
    ThinkingChoice thinking;
    RemoteChoice remote;
};

int run_generate(const CLI::App& command, const GenerateOptions& options) {
    Result<std::string> prompt = options.prompt_file.empty() ? Result<std::string>(options.prompt)
                                                             : read_file_text(options.prompt_file);
    if (!prompt) return report_error(prompt.error());
    if (options.remote.given()) {
        return run_remote_generate(command, options.remote,
                                   {options.model.model, *prompt, options.n_predict, options.json, options.thinking},
                                   options.sampling);
    }
    Result<ModelToLoad> to_load = resolve_model(options.model);
    if (!to_load) return report_error(to_load.error());
    // On the engine thread, as chat and serve, so that a device that fails mid-answer costs
    // the answer nothing but time (--on-device-failure).
    Engine engine;
    engine.submit(to_load->load_command());
    ModelSummary summary;
    if (!wait_loaded(engine, false, summary)) return 1;
    note_unread_switches(options.thinking, summary);

    GenerateCommand request;
    request.request_id = 1;
    if (options.raw) {
        request.raw_prompt = *prompt;
        request.parse_special = !options.no_special;
    } else {
        request.messages = {ChatMessage{"user", *prompt}};
        // In the model's own format a reasoning model's thinking comes apart from its answer.
        // A raw prompt has no format to read: its continuation is the text as it came.
        request.read_answer = true;
        request.template_variables = template_variables(options.thinking);
    }
    request.settings.max_tokens = options.n_predict;
    request.settings.sampling = options.sampling.params;
    request.settings.stop = options.sampling.stop;
    request.settings.ignore_eos = options.ignore_eos;
    request.settings.lookup = options.sampling.lookup;
    if (Result<void> offered =
            offer_tools(options.remote.tools_file, options.remote.tool_choice, summary.tool_format, request);
        !offered) {
        return report_error(offered.error());
    }
    AnswerPrinter printer;
    const EngineAnswer answer = answer_on_engine(engine, std::move(request), options.json ? nullptr : &printer);
    if (answer.error) {
        printer.end();  // the error's line after the text so far
        return report_error(*answer.error);
    }
    const DoneEvent& done = *answer.done;
    if (options.json) {
        nlohmann::ordered_json out = {{"prompt_ids", done.prompt_ids},
                                      {"generated_ids", done.generated_ids},
                                      {"text", done.text},
                                      {"stop_reason", stop_reason_name(done.stats.stop_reason)},
                                      {"stats", generation_stats_json(done.stats)}};
        if (!done.reasoning.empty()) out["reasoning"] = done.reasoning;  // as generate --remote
        if (!done.tool_calls.empty()) out["tool_calls"] = tool_calls_json(done.tool_calls);
        std::puts(json_text(out).c_str());
    } else {
        printer.end();
        printer.tool_calls(done.tool_calls);
    }
    std::fflush(stdout);
    if (cut_while_reasoning(done)) say_cut_while_reasoning(false);
    return 0;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
    auto options = std::make_shared<GenerateOptions>();
    CLI::App* sub = app.add_subcommand("generate", "Generate text from a prompt");
    add_model_options(*sub, options->model);
    add_failure_options(*sub, options->model.failure);
    add_chat_template_option(*sub, options->model);
    add_draft_options(*sub, options->model);
    add_thinking_options(*sub, options->thinking);
    auto* text = sub->add_option("-p,--prompt", options->prompt, "The prompt (a user message unless --raw)");
    auto* file = sub->add_option("--prompt-file", options->prompt_file, "Read the prompt from a file");
    text->excludes(file);
    sub->add_option("-n,--n-predict", options->n_predict, "Tokens to generate at most")->check(CLI::Range(1, 1 << 20));
    auto* raw = sub->add_flag("--raw", options->raw,
                              "Use the prompt as it is, without the chat template; special tokens written in it "
                              "(<|im_start|>, <|eot_id|>) become their ids");
    sub->add_flag("--no-special", options->no_special, "With --raw: special tokens written in the prompt stay text")
        ->needs(raw);
    // A raw prompt goes through no template: what would change it means nothing there.
    exclude_with_remote(*sub, raw, {"--chat-template", "--no-think", "--reasoning-effort"});
    sub->add_flag("--json", options->json, "Print prompt ids, generated ids and text as one JSON object");
    sub->add_flag("--ignore-eos", options->ignore_eos, "Keep generating after the model ends its answer");
    add_sampling_options(*sub, options->sampling);
    CLI::Option* remote = add_remote_options(
        *sub, options->remote, "--remote",
        "Ask an OpenAI-compatible server at URL (vLLM, llama.cpp's server, powerhouse-cli serve, ...) instead of "
        "loading a model; -m then names the server's model (default: its only one). Sampling options not given "
        "are left to the server");
    exclude_with_remote(
        *sub, remote,
        {"--raw", "--no-special", "--ignore-eos", "--ctx", "--threads", "--devices", "--split", "--ratios",
         "--main-device", "--kv-type", "--experts-in-ram", "--on-device-failure", "--step-deadline", "--fail-device",
         "--chat-template", "--lookup-draft", "--draft-model", "--draft-tokens", "--guess-always"});
    exclude_with_remote(*sub, raw, {"--tools"});  // a raw prompt has no place for them
    sub->callback([sub, options] {
        if (options->prompt.empty() && options->prompt_file.empty()) {
            throw CLI::RequiredError(sub->get_name() + ": --prompt or --prompt-file");
        }
    });
    return {sub, [sub, options] { return run_generate(*sub, *options); }};
}

}  // namespace powerhouse::cli
