#include "remote_cli.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "answer_printer.h"
#include "chat_loop.h"
#include "format.h"

#ifdef POWERHOUSE_HAS_REMOTE
#include "remote/http_client.h"
#include "remote/remote_url.h"
#endif

namespace powerhouse::cli {

CLI::Option* add_remote_options(CLI::App& command, RemoteChoice& choice, const std::string& flag,
                                const std::string& help) {
    CLI::Option* url = command.add_option(flag, choice.url, help);
    command
        .add_option("--api-key-file", choice.api_key_file,
                    "File holding the server's API key (sent as a bearer token, never shown)")
        ->needs(url);
    command
        .add_option("--ca-file", choice.ca_file,
                    "PEM certificates to trust for https:// (a private CA, or the server's self-signed certificate)")
        ->needs(url);
    // Not remote only: a local model is offered them too (GenerateCommand::tools).
    if (flag == "--remote" && (command.get_name() == "generate" || command.get_name() == "chat")) {
        CLI::Option* tools =
            command.add_option("--tools", choice.tools_file,
                               "A JSON file holding an array of OpenAI tool objects ({\"type\": \"function\", "
                               "\"function\": {\"name\", \"description\", \"parameters\"}}) offered to the model, "
                               "local or --remote; the calls it makes are printed after its answer between <tool_call> "
                               "and </tool_call> lines");
        command
            .add_option("--tool-choice", choice.tool_choice,
                        "With --tools: auto (the model decides), none, required (some call), or a tool's name (a "
                        "call of that tool)")
            ->needs(tools);
    }
    return url;
}

void exclude_with_remote(CLI::App& command, CLI::Option* remote, const std::vector<std::string>& names) {
    for (const std::string& name : names) {
        if (CLI::Option* option = command.get_option_no_throw(name)) option->excludes(remote);
    }
}

#ifndef POWERHOUSE_HAS_REMOTE

namespace {
int no_remote() {
    return report_error(make_error(
        ErrorCode::unsupported, "this build of powerhouse-cli has no remote engines (it was built without libcurl)"));
}
}  // namespace

int run_remote_generate(const CLI::App&, const RemoteChoice&, const RemoteGenerateOptions&, const SamplingChoice&) {
    return no_remote();
}
int run_remote_chat(const CLI::App&, const RemoteChoice&, const RemoteChatOptions&, const SamplingChoice&) {
    return no_remote();
}

#else

namespace {

bool given(const CLI::App& command, const char* name) {
    const CLI::Option* option = command.get_option_no_throw(name);
    return option != nullptr && option->count() > 0;
}

// The sampling options the user wrote, and no others: the server's defaults (a model's
// generation config on vLLM) beat this program's, which were chosen for local models.
void apply_sampling(const CLI::App& command, const SamplingChoice& sampling, remote::ChatRequest& request) {
    const SamplingParams& p = sampling.params;
    if (given(command, "--temp")) request.temperature = p.temperature;
    if (given(command, "--top-p")) request.top_p = p.top_p;
    if (given(command, "--presence-penalty")) request.presence_penalty = p.presence_penalty;
    if (given(command, "--frequency-penalty")) request.frequency_penalty = p.frequency_penalty;
    if (given(command, "--seed")) request.seed = p.seed;
    if (given(command, "--top-k")) request.top_k = p.top_k;
    if (given(command, "--min-p")) request.min_p = p.min_p;
    if (given(command, "--repeat-penalty")) request.repeat_penalty = p.repeat_penalty;
    request.stop = sampling.stop;
}

// --no-think and --reasoning-effort as the servers read them: the template's variable in
// chat_template_kwargs (vLLM, SGLang, llama.cpp's server, `serve`), the effort in OpenAI's own
// field (which `serve` and vLLM pass to gpt-oss's template).
void apply_thinking(const ThinkingChoice& thinking, remote::ChatRequest& request) {
    if (thinking.no_think) request.chat_template_kwargs = {{"enable_thinking", false}};
    if (!thinking.reasoning_effort.empty()) request.reasoning_effort = thinking.reasoning_effort;
}

// Token ids are the local model's: a remote server's vocabulary is its own.
Result<void> local_only(const SamplingChoice& sampling) {
    if (sampling.params.logit_bias.empty()) return {};
    return make_error(ErrorCode::invalid_argument,
                      "--logit-bias names token ids of a local model's vocabulary: it is not sent with --remote");
}

// --tools and --tool-choice into the request.
Result<void> apply_tools(const RemoteChoice& choice, remote::ChatRequest& request) {
    if (choice.tools_file.empty()) return {};
    Result<nlohmann::ordered_json> tools = read_tools(choice.tools_file);
    if (!tools) return tools.error();
    Result<nlohmann::ordered_json> forced = tool_choice(choice.tool_choice, *tools);
    if (!forced) return forced.error();
    request.tools = std::move(tools).value();
    request.tool_choice = std::move(forced).value();
    return {};
}

// -m when given, else the server's only model.
Result<std::string> choose_model(const remote::RemoteEngine& engine, const std::string& model) {
    if (!model.empty()) return model;
    Result<std::vector<std::string> > models = engine.list_models();
    if (!models) return models.error();
    if (models->size() == 1) return models->front();
    if (models->empty()) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("the server at {} lists no models: name one with -m/--model", engine.base_url()));
    }
    std::vector<std::string> shown;  // a server's ids: control characters escaped
    for (const std::string& id : *models) {
        shown.push_back(remote::detail::quoted(id, engine.options().api_key, std::string::npos));
    }
    return make_error(ErrorCode::invalid_argument,
                      fmt::format("the server at {} has several models: {}; choose one with -m/--model",
                                  engine.base_url(), fmt::join(shown, ", ")));
}

Result<remote::RemoteEngine> make_engine(const RemoteChoice& choice) {
    Result<std::string> base = remote::normalize_base_url(choice.url);
    if (!base) return base.error();
    Result<remote::ConnectionOptions> connection = connection_options(choice, *base);
    if (!connection) return connection.error();
    return remote::RemoteEngine::create(*base, std::move(connection).value());
}

std::string stats_line(const remote::ChatResult& r) {
    if (r.usage) {
        return fmt::format("[{} tokens, {:.1f} tokens/s, first token after {:.2f} s, prompt {} tokens]",
                           r.usage->completion_tokens, r.tokens_per_second(), r.time_to_first_token,
                           r.usage->prompt_tokens);
    }
    return fmt::format("[{} chunks (the server sent no token counts), {:.1f} chunks/s, first token after {:.2f} s]",
                       r.completion_tokens(), r.tokens_per_second(), r.time_to_first_token);
}

}  // namespace

Result<remote::ConnectionOptions> connection_options(const RemoteChoice& choice, const std::string& url) {
    remote::ConnectionOptions options;
    if (!choice.api_key_file.empty()) {
        Result<std::string> key = read_api_key_file(choice.api_key_file);
        if (!key) return key.error();
        options.api_key = std::move(key).value();
    }
    if (!choice.ca_file.empty()) options.ca_file = choice.ca_file;
    if (std::optional<std::string> warning = remote::plain_http_warning(url)) {
        std::fprintf(stderr, "warning: %s\n", warning->c_str());
    }
    return options;
}

int run_remote_generate(const CLI::App& command, const RemoteChoice& choice, const RemoteGenerateOptions& options,
                        const SamplingChoice& sampling) {
    if (Result<void> r = local_only(sampling); !r) return report_error(r.error());
    Result<remote::RemoteEngine> engine = make_engine(choice);
    if (!engine) return report_error(engine.error());
    Result<std::string> model = choose_model(*engine, options.model);
    if (!model) return report_error(model.error());

    remote::ChatRequest request;
    request.model = *model;
    request.messages.push_back({"user", options.prompt});
    request.max_tokens = options.n_predict;
    apply_sampling(command, sampling, request);
    apply_thinking(options.thinking, request);
    if (Result<void> r = apply_tools(choice, request); !r) return report_error(r.error());
    remote::ChatCallbacks callbacks;
    AnswerPrinter printer;
    if (!options.json) {
        callbacks.on_text = [&printer](std::string_view piece) { printer.text(piece); };
        callbacks.on_reasoning = [&printer](std::string_view piece) { printer.reasoning(piece); };
    }
    Result<remote::ChatResult> result = engine->chat(request, callbacks);
    if (!result) return report_error(result.error());
    if (options.json) {
        nlohmann::ordered_json out = {{"model", result->model.empty() ? *model : result->model},
                                      {"text", result->text},
                                      {"stop_reason", result->finish_reason}};
        if (!result->reasoning.empty()) out["reasoning"] = result->reasoning;
        if (!result->tool_calls.empty()) out["tool_calls"] = tool_calls_json(result->tool_calls);
        out["usage"] = result->usage ? nlohmann::ordered_json{{"prompt_tokens", result->usage->prompt_tokens},
                                                              {"completion_tokens", result->usage->completion_tokens}}
                                     : nlohmann::ordered_json(nullptr);
        out["time_to_first_token"] = result->time_to_first_token;
        out["tokens_per_second"] = result->tokens_per_second();
        if (result->interruption) out["error"] = result->interruption->message;
        std::puts(json_text(out).c_str());
    } else {
        printer.end();
        printer.tool_calls(result->tool_calls);
    }
    std::fflush(stdout);
    if (result->cut_while_reasoning()) say_cut_while_reasoning(false);
    if (result->interruption) {
        report_error(result->interruption.value());
        std::fputs("(the answer above is incomplete)\n", stderr);
        return 1;
    }
    return 0;
}

int run_remote_chat(const CLI::App& command, const RemoteChoice& choice, const RemoteChatOptions& options,
                    const SamplingChoice& sampling) {
    if (Result<void> r = local_only(sampling); !r) return report_error(r.error());
    Result<remote::RemoteEngine> engine = make_engine(choice);
    if (!engine) return report_error(engine.error());
    Result<std::string> model = choose_model(*engine, options.model);
    if (!model) return report_error(model.error());
    const bool interactive = isatty(STDIN_FILENO) != 0;
    if (interactive) {
        std::fprintf(stderr, "Chatting with %s at %s. Ctrl+C stops an answer; /reset starts over, /exit quits.\n",
                     model->c_str(), engine->base_url().c_str());
    }

    remote::ChatRequest base;
    base.model = *model;
    base.max_tokens = options.n_predict;
    apply_sampling(command, sampling, base);
    apply_thinking(options.thinking, base);
    if (Result<void> r = apply_tools(choice, base); !r) return report_error(r.error());
    return run_chat_loop(options.system, interactive, [&](const std::vector<ChatMessage>& messages, uint64_t turn) {
        remote::ChatRequest request = base;
        request.messages = messages;
        if (request.seed) *request.seed += turn;
        remote::ChatCallbacks callbacks;
        AnswerPrinter printer;
        callbacks.on_text = [&printer](std::string_view piece) { printer.text(piece); };
        callbacks.on_reasoning = [&printer](std::string_view piece) { printer.reasoning(piece); };
        callbacks.cancelled = [] { return InterruptGuard::presses() > 0; };
        Result<remote::ChatResult> result = [&] {
            InterruptGuard guard;
            return engine->chat(request, callbacks);
        }();
        if (InterruptGuard::presses() > 1) return ChatReply::quit_chat();  // a second Ctrl+C: quit
        if (!result) {
            report_error(result.error());
            return ChatReply::failed_turn();  // the message that could not be answered is taken back
        }
        // Ends the streamed text's line and any think block; a turn that printed nothing (only
        // a tool call, an empty answer, a failure before anything came) ends nothing.
        printer.end();
        printer.tool_calls(result->tool_calls);
        std::fflush(stdout);
        if (result->cancelled()) std::fputs("(stopped)\n", stderr);
        if (result->finish_reason == "length") say_token_limit_in_chat(result->cut_while_reasoning());
        if (result->interruption) {
            report_error(result->interruption.value());
            std::fputs(result->text.empty()
                           ? "(the answer was interrupted before any text came: your message is taken back)\n"
                           : "(the answer was interrupted; what arrived stays in the conversation)\n",
                       stderr);
        }
        if (interactive) std::fprintf(stderr, "%s\n", stats_line(*result).c_str());
        // A broken answer is a failed turn, as a failure before the answer is: a chat whose
        // lines are piped in then ends with exit status 1, as generate --remote does.
        if (result->text.empty() && !result->tool_calls.empty()) {
            // The server wants each call's result after it, which this chat cannot give: the
            // turn is taken back (the next message would be refused after unanswered calls).
            std::fputs("(the answer only called tools, which this chat cannot answer: your message is taken back)\n",
                       stderr);
            return ChatReply::taken_back();
        }
        if (result->text.empty()) {
            // Nothing was answered: the turn is taken back.
            return result->interruption ? ChatReply::failed_turn() : ChatReply::taken_back();
        }
        ChatReply reply = ChatReply::answered(std::move(result->text));  // what arrived is kept
        reply.failed = result->interruption.has_value();
        return reply;
    });
}

#endif

}  // namespace powerhouse::cli
