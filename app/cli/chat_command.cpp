// powerhouse-cli chat [-m MODEL] [--system TEXT] [-n N] [sampling options] [--ctx N] [-t THREADS]
//                     [--on-device-failure replan|retry|stop] [--step-deadline SECONDS]
//                     [--chat-template FILE] [--no-think] [--reasoning-effort low|medium|high]
// powerhouse-cli chat --remote URL [-m NAME] [--api-key-file FILE] [--ca-file FILE] ...
//
// An interactive chat in the terminal, on the engine thread (powerhouse/engine.h): type a
// message and press Enter; the answer streams as it is generated, and Ctrl+C stops it (a
// second Ctrl+C, or one while no answer runs, quits). "/reset" starts a new conversation,
// "/exit" (or end of input) quits. Each turn sends the whole conversation; the engine's
// prompt cache processes only what is new. When the conversation outgrows the context, the
// engine drops the oldest turns and the chat says so. When a device fails mid-answer, the
// engine carries on as --on-device-failure says, and the chat prints its banner on stderr
// (engine_answer.h). A reasoning model's thinking is shown apart from its answer, between
// "<think>" and "</think>" lines (answer_printer.h), and only the answer stays in the
// conversation; --no-think and --reasoning-effort are the template's variables (a note when
// it reads neither). An answer cut by -n says so on stderr. With --remote, an
// OpenAI-compatible server answers instead (remote_cli.h), the same way.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "chat_loop.h"
#include "commands.h"
#include "engine_answer.h"
#include "format.h"
#include "generation.h"
#include "powerhouse/engine.h"
#include "remote_cli.h"

namespace powerhouse::cli {
namespace {

struct ChatOptions {
    ModelChoice model;
    std::string system;
    int n_predict = 1024;
    SamplingChoice sampling;
    ThinkingChoice thinking;
    RemoteChoice remote;
};

int run_chat(ChatOptions options) {
    Result<ModelToLoad> to_load = resolve_model(options.model);
    if (!to_load) return report_error(to_load.error());
    const bool interactive = isatty(STDIN_FILENO) != 0;
    Engine engine;
    engine.submit(to_load->load_command());
    ModelSummary summary;
    if (!wait_loaded(engine, interactive, summary)) return 1;
    note_unread_switches(options.thinking, summary);
    const nlohmann::ordered_json variables = template_variables(options.thinking);
    GenerateCommand offered;  // the tools of every turn, and a forced call's grammar
    if (Result<void> r =
            offer_tools(options.remote.tools_file, options.remote.tool_choice, summary.tool_format, offered);
        !r) {
        return report_error(r.error());
    }
    if (interactive) {
        std::fprintf(stderr, "Chatting with %s (context %u, %s). Ctrl+C stops an answer; /reset starts over, /exit quits.\n",
                     summary.name.c_str(), summary.n_ctx, summary.device.c_str());
    }

    return run_chat_loop(options.system, interactive, [&](const std::vector<ChatMessage>& messages, uint64_t turn) {
        GenerateCommand command;
        command.request_id = turn;
        command.messages = messages;
        command.settings.max_tokens = options.n_predict;
        command.settings.sampling = options.sampling.params;
        command.settings.sampling.seed += turn;
        command.settings.stop = options.sampling.stop;
        command.settings.lookup = options.sampling.lookup;
        command.tools = offered.tools;
        command.settings.grammar = offered.settings.grammar;
        command.overflow = ContextOverflow::drop_oldest;
        // A reasoning model's thinking comes apart from its answer: shown in a think block,
        // and never kept in the conversation (the templates want only the answers back).
        command.read_answer = true;
        command.template_variables = variables;

        InterruptGuard guard;
        AnswerPrinter printer;
        const EngineAnswer answer = answer_on_engine(engine, std::move(command), &printer, [] {
            const int presses = InterruptGuard::presses();  // a second Ctrl+C quits
            return presses > 1 ? Interrupt::quit : presses == 1 ? Interrupt::cancel : Interrupt::none;
        });
        if (answer.quit) return ChatReply::quit_chat();
        if (answer.error) {
            printer.end();  // the error's line after what was printed, and the next answer's too
            report_error(*answer.error);
            return ChatReply::failed_turn();  // the message that could not be answered is taken back
        }
        const GenerationStats& stats = answer.done->stats;
        // Ends the streamed text's line and any think block; an empty answer (the
        // end-of-generation token first, a Ctrl+C before the first token) printed nothing, so
        // it ends nothing.
        printer.end();
        printer.tool_calls(answer.done->tool_calls);
        std::fflush(stdout);
        const bool empty = answer.done->text.empty();  // thinking alone is no answer to keep
        if (stats.stop_reason == StopReason::cancelled) std::fputs("(stopped)\n", stderr);
        if (stats.stop_reason == StopReason::length) say_token_limit_in_chat(cut_while_reasoning(*answer.done));
        if (stats.stop_reason == StopReason::context) {
            std::fputs("(the context is full: the answer was cut; older turns will be dropped)\n", stderr);
        }
        if (stats.dropped_messages > 0) {
            std::fprintf(stderr, "(the conversation outgrew the context: dropped its %u oldest messages)\n",
                         stats.dropped_messages);
        }
        if (interactive) {
            std::fprintf(stderr, "[%u tokens, %.1f tokens/s, first token after %.2f s, prompt %u tokens (%u reused)]\n",
                         stats.generated_tokens, stats.tokens_per_second(), stats.time_to_first_token,
                         stats.prompt_tokens, stats.reused_tokens);
        }
        if (empty && !answer.done->tool_calls.empty()) {
            // Each call wants its result after it, which this chat cannot give: as in chat --remote.
            std::fputs("(the answer only called tools, which this chat cannot answer: your message is taken back)\n",
                       stderr);
        }
        if (empty) {
            // Nothing to keep: the user's message is taken back too (ChatReply), as in chat --remote.
            ChatReply reply = ChatReply::taken_back();
            reply.dropped_messages = stats.dropped_messages;
            return reply;
        }
        return ChatReply::answered(answer.done->text, stats.dropped_messages);
    });
}

}  // namespace

Command add_chat_command(CLI::App& app) {
    auto options = std::make_shared<ChatOptions>();
    CLI::App* sub = app.add_subcommand("chat", "Chat with a model in the terminal");
    add_model_options(*sub, options->model);
    add_failure_options(*sub, options->model.failure);
    add_chat_template_option(*sub, options->model);
    add_draft_options(*sub, options->model);
    add_thinking_options(*sub, options->thinking);
    sub->add_option("--system", options->system, "System prompt");
    sub->add_option("-n,--n-predict", options->n_predict, "Tokens per answer at most")->check(CLI::Range(1, 1 << 20));
    add_sampling_options(*sub, options->sampling);
    CLI::Option* remote = add_remote_options(
        *sub, options->remote, "--remote",
        "Chat with an OpenAI-compatible server at URL (vLLM, llama.cpp's server, powerhouse-cli serve, ...) "
        "instead of loading a model; -m then names the server's model (default: its only one)");
    exclude_with_remote(*sub, remote,
                        {"--ctx", "--threads", "--devices", "--split", "--ratios", "--main-device", "--kv-type",
                         "--experts-in-ram", "--on-device-failure", "--step-deadline", "--fail-device",
                         "--chat-template", "--lookup-draft", "--draft-model", "--draft-tokens", "--guess-always"});
    return {sub, [sub, options] {
                if (options->remote.given()) {
                    return run_remote_chat(
                        *sub, options->remote,
                        {options->model.model, options->system, options->n_predict, options->thinking},
                        options->sampling);
                }
                return run_chat(*options);
            }};
}

}  // namespace powerhouse::cli
