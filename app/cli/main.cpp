// powerhouse-cli: inspect, create and (as the engine grows) run GGUF models from a terminal.
#include <cstdio>
#include <vector>

#include "commands.h"
#include "version_report.h"

int main(int argc, char** argv) {
    CLI::App app{"Powerhouse: local LLM inference for multi-GPU workstations", "powerhouse-cli"};
    app.require_subcommand(0, 1);
    // A callback, so that the run-time versions are looked up only when asked for.
    app.set_version_flag("--version", [] {
        std::string report = powerhouse::version_report("powerhouse-cli");
        report.pop_back();  // CLI11 ends the line itself
        return report;
    });

    // One command a line.
    // clang-format off
    const std::vector<powerhouse::cli::Command> commands = {
        powerhouse::cli::add_info_command(app),
        powerhouse::cli::add_synth_command(app),
        powerhouse::cli::add_template_command(app),
        powerhouse::cli::add_tokenize_command(app),
        powerhouse::cli::add_detokenize_command(app),
        powerhouse::cli::add_generate_command(app),
        powerhouse::cli::add_bench_command(app),
        powerhouse::cli::add_chat_command(app),
        powerhouse::cli::add_conversations_command(app),
        powerhouse::cli::add_gpus_command(app),
        powerhouse::cli::add_power_command(app),
        powerhouse::cli::add_plan_command(app),
        powerhouse::cli::add_list_command(app),
        powerhouse::cli::add_pull_command(app),
        powerhouse::cli::add_search_command(app),
        powerhouse::cli::add_serve_command(app),
        powerhouse::cli::add_models_command(app),
        powerhouse::cli::add_perplexity_command(app),
        powerhouse::cli::add_embed_command(app),
    };
    // clang-format on

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int status = app.exit(e);  // prints help, the version, or what was wrong
        return status == 0 ? 0 : 2;
    }
    for (const auto& command : commands) {
        if (command.subcommand->parsed()) return command.run();
    }
    std::fputs(app.help().c_str(), stdout);
    return 0;
}
