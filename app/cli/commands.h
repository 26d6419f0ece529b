// The subcommands of powerhouse-cli. Each registers its options on the CLI11 app and
// returns the process exit status when run: 0 on success, 1 on a failure (reported on
// stderr), 2 on bad usage.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace powerhouse::cli {

struct Command {
    CLI::App* subcommand = nullptr;
    std::function<int()> run;
};

Command add_info_command(CLI::App& app);
Command add_synth_command(CLI::App& app);
Command add_template_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
Command add_detokenize_command(CLI::App& app);
Command add_generate_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_chat_command(CLI::App& app);
Command add_conversations_command(CLI::App& app);
Command add_gpus_command(CLI::App& app);
Command add_power_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
Command add_list_command(CLI::App& app);
Command add_pull_command(CLI::App& app);
Command add_search_command(CLI::App& app);
Command add_serve_command(CLI::App& app);
Command add_models_command(CLI::App& app);
Command add_perplexity_command(CLI::App& app);
Command add_embed_command(CLI::App& app);

}  // namespace powerhouse::cli
