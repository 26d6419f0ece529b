// powerhouse-cli chat [-m MODEL] [--system TEXT] [-n N] [sampling options] [--ctx N] [-t THREADS]
//
// An interactive chat in the terminal: type a message and press Enter; the answer streams
// as it is generated. "/reset" starts a new conversation, "/exit" (or end of input) quits.
// Each turn re-renders the whole conversation with the model's chat template and reuses
// the KV cache for the part that has not changed, so only the new turn is processed. When
// the conversation outgrows the context, the oldest turns are dropped (with a note).
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>
#include <vector>

#include "commands.h"
#include "format.h"
#include "generation.h"
#include "powerhouse/model.h"

namespace powerhouse::cli {
namespace {

struct ChatOptions {
    std::string model;
    std::string system;
    int n_predict = 1024;
    SamplingChoice sampling;
    uint32_t n_ctx = 4096;
    int threads = 0;
};

int run_chat(ChatOptions options) {
    Result<std::filesystem::path> path = model_or_default(options.model);
    if (!path) return report_error(path.error());
    ModelOptions model_options;
    model_options.n_ctx = options.n_ctx;
    model_options.n_threads = options.threads;
    Result<Model> model = Model::load(*path, model_options);
    if (!model) return report_error(model.error());

    const bool interactive = isatty(STDIN_FILENO) != 0;
    if (interactive) {
        std::fprintf(stderr, "Chatting with %s (context %u). /reset starts over, /exit quits.\n",
                     path->filename().string().c_str(), model->n_ctx());
    }
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!options.system.empty()) messages.push_back({{"role", "system"}, {"content", options.system}});
    const size_t first_turn = messages.size();
    std::vector<TokenId> cached;
    std::string line;
    uint64_t turn = 0;
    for (;;) {
        if (interactive) std::fputs("\n> ", stdout);
        std::fflush(stdout);
        if (!std::getline(std::cin, line)) break;
        if (line == "/exit" || line == "/quit") break;
        if (line == "/reset") {
            messages.erase(messages.begin() + static_cast<std::ptrdiff_t>(first_turn), messages.end());
            std::fputs("(new conversation)\n", stderr);
            continue;
        }
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        messages.push_back({{"role", "user"}, {"content", line}});

        Result<std::vector<TokenId>> prompt = chat_prompt(*model, messages);
        // Too long for the context (with room to answer): drop the oldest exchange.
        while (prompt && prompt->size() + 16 > model->n_ctx() && messages.size() > first_turn + 1) {
            messages.erase(messages.begin() + static_cast<std::ptrdiff_t>(first_turn));
            std::fputs("(the conversation outgrew the context: dropped its oldest message)\n", stderr);
            prompt = chat_prompt(*model, messages);
        }
        if (!prompt) return report_error(prompt.error());
        if (prompt->size() + 16 > model->n_ctx()) {
            std::fprintf(stderr, "error: this message alone needs %zu tokens; the context holds %u (raise --ctx)\n",
                         prompt->size(), model->n_ctx());
            messages.erase(messages.end() - 1);
            continue;
        }
        const size_t reused = reuse_cached_prefix(*model, cached, *prompt);
        SamplingChoice sampling = options.sampling;
        sampling.params.seed += turn++;
        const int budget = std::min<int>(options.n_predict, static_cast<int>(model->n_ctx() - prompt->size()));
        Result<GenerationResult> answer =
            generate_text(*model, std::span<const TokenId>(*prompt).subspan(reused), budget, sampling,
                          [](std::string_view piece) {
                              std::fwrite(piece.data(), 1, piece.size(), stdout);
                              std::fflush(stdout);
                          });
        if (!answer) return report_error(answer.error());
        cached.insert(cached.end(), answer->ids.begin(), answer->ids.end());
        std::putchar('\n');
        if (interactive) {
            const double tps = answer->generation_seconds > 0
                                   ? static_cast<double>(answer->ids.size()) / answer->generation_seconds
                                   : 0.0;
            std::fprintf(stderr, "[%zu tokens, %.1f tokens/s, prompt %zu tokens (%zu reused) in %.2f s]\n",
                         answer->ids.size(), tps, prompt->size(), reused, answer->prompt_seconds);
        }
        messages.push_back({{"role", "assistant"}, {"content", answer->text}});
    }
    return 0;
}

}  // namespace

Command add_chat_command(CLI::App& app) {
    auto options = std::make_shared<ChatOptions>();
    CLI::App* sub = app.add_subcommand("chat", "Chat with a model in the terminal");
    sub->add_option("-m,--model", options->model, "Model file (.gguf); default: the model set up by scripts/run");
    sub->add_option("--system", options->system, "System prompt");
    sub->add_option("-n,--n-predict", options->n_predict, "Tokens per answer at most")->check(CLI::Range(1, 1 << 20));
    add_sampling_options(*sub, options->sampling);
    sub->add_option("--ctx", options->n_ctx, "Context length (KV cache positions)")->check(CLI::Range(64u, 1u << 20));
    sub->add_option("-t,--threads", options->threads, "CPU threads (default: all cores)")->check(CLI::Range(0, 1024));
    return {sub, [options] { return run_chat(*options); }};
}

}  // namespace powerhouse::cli
