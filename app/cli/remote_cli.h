// What generate, chat, models and gpus share to reach a remote server (app/core/remote):
// --remote URL (or --metrics URL), --api-key-file FILE and --ca-file FILE, and the remote
// versions of generate and chat.
//
// With --remote, -m/--model names the server's model (default: its only one), the sampling
// options the user gives are sent (others are left to the server's defaults), so are
// --no-think (chat_template_kwargs) and --reasoning-effort, and the options that only mean
// something for a local model (--ctx, --devices, --raw, --chat-template, ...) are refused.
// A plain-http URL to another machine gets a warning on stderr. generate and chat take
// --tools FILE (a JSON array of OpenAI tool objects offered to the model, the server's here,
// a local one through generation.h's offer_tools) and
// --tool-choice auto|none|required|NAME (NAME: a call of that tool is forced); the calls the
// answer makes are printed after its text, each between "<tool_call>" and "</tool_call>"
// lines (answer_printer.h).
//
// The build may lack libcurl (the GPU machine's profile): then powerhouse_remote is missing,
// the options still parse, and using them says that this build has no remote engines.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "generation.h"

#ifdef POWERHOUSE_HAS_REMOTE
#include "remote/remote_engine.h"
#endif

namespace powerhouse::cli {

struct RemoteChoice {
    std::string url;
    std::string api_key_file;
    std::string ca_file;
    std::string tools_file;   // --tools (generate and chat)
    std::string tool_choice;  // --tool-choice (generate and chat)
    bool given() const { return !url.empty(); }
};

// Adds `flag` (--remote or --metrics) with `help`, --api-key-file and --ca-file (which need
// it), and to generate's and chat's --remote, --tools and --tool-choice. Returns the URL's
// option.
CLI::Option* add_remote_options(CLI::App& command, RemoteChoice& choice, const std::string& flag,
                                const std::string& help);

// Makes each of `names` (options of `command` that exist) exclude `remote`.
void exclude_with_remote(CLI::App& command, CLI::Option* remote, const std::vector<std::string>& names);

// generate --remote: the prompt as one user message; the answer streams to stdout, a reasoning
// model's thinking (sent apart from the text) first, between "<think>" and "</think>" lines, as
// the local commands show it (answer_printer.h). --json prints {"model", "text",
// "stop_reason", "usage", "time_to_first_token", "tokens_per_second"} instead (and "reasoning"
// when the server sent some, "tool_calls" when the answer made calls, in OpenAI's form
// [{"id", "type", "function": {"name", "arguments"}}], "error" when the stream broke).
struct RemoteGenerateOptions {
    std::string model;
    std::string prompt;
    int n_predict = 256;
    bool json = false;
    ThinkingChoice thinking;  // sent as chat_template_kwargs and reasoning_effort
};
int run_remote_generate(const CLI::App& command, const RemoteChoice& remote, const RemoteGenerateOptions& options,
                        const SamplingChoice& sampling);

// chat --remote: the terminal chat of chat_command.cpp against the server, thinking shown as
// generate shows it; the conversation keeps only the answers' text (servers want no reasoning
// sent back, and a tool call without its result is refused: a turn that only called tools is
// taken back, as this chat cannot answer the calls).
struct RemoteChatOptions {
    std::string model;
    std::string system;
    int n_predict = 1024;
    ThinkingChoice thinking;
};
int run_remote_chat(const CLI::App& command, const RemoteChoice& remote, const RemoteChatOptions& options,
                    const SamplingChoice& sampling);

#ifdef POWERHOUSE_HAS_REMOTE
// The key (from its file, whitespace trimmed) and CA file; the plain-http warning for `url`
// is printed on stderr here.
Result<remote::ConnectionOptions> connection_options(const RemoteChoice& choice, const std::string& url);
#endif

}  // namespace powerhouse::cli
