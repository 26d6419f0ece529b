// powerhouse-cli models --remote URL [--api-key-file FILE] [--ca-file FILE] [--json]
//
// The models an OpenAI-compatible server serves (GET /v1/models), one id per line: the
// names that generate and chat take as -m with --remote (control characters in an id are
// shown escaped). --json prints {"base_url": ..., "models": [...]}, the ids as they are.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "format.h"
#include "remote_cli.h"

#ifdef POWERHOUSE_HAS_REMOTE
#include "remote/http_client.h"
#include "remote/remote_url.h"
#endif

namespace powerhouse::cli {
namespace {

struct ModelsOptions {
    RemoteChoice remote;
    bool json = false;
};

int run_models(const ModelsOptions& options) {
#ifdef POWERHOUSE_HAS_REMOTE
    Result<std::string> base = remote::normalize_base_url(options.remote.url);
    if (!base) return report_error(base.error());
    Result<remote::ConnectionOptions> connection = connection_options(options.remote, *base);
    if (!connection) return report_error(connection.error());
    Result<remote::RemoteEngine> engine = remote::RemoteEngine::create(*base, std::move(connection).value());
    if (!engine) return report_error(engine.error());
    Result<std::vector<std::string>> models = engine->list_models();
    if (!models) return report_error(models.error());
    if (options.json) {
        const nlohmann::ordered_json out = {{"base_url", engine->base_url()}, {"models", *models}};
        std::puts(json_text(out).c_str());
    } else {
        // One id per line, as a terminal should show it: a server's id with a control character
        // in it (a line break, an escape sequence) is written escaped; --json has it as it is.
        for (const std::string& id : *models) std::puts(remote::detail::printable(id, std::string::npos).c_str());
        if (models->empty()) std::fprintf(stderr, "(the server at %s lists no models)\n", engine->base_url().c_str());
    }
    return 0;
#else
    (void)options;
    return report_error(make_error(
        ErrorCode::unsupported, "this build of powerhouse-cli has no remote engines (it was built without libcurl)"));
#endif
}

}  // namespace

Command add_models_command(CLI::App& app) {
    auto options = std::make_shared<ModelsOptions>();
    CLI::App* sub = app.add_subcommand("models", "List the models of a remote OpenAI-compatible server");
    add_remote_options(
        *sub, options->remote, "--remote",
        "The server's URL (http://host:8000 or .../v1): vLLM, llama.cpp's server, powerhouse-cli serve, ...")
        ->required();
    sub->add_flag("--json", options->json, "Print one JSON object");
    return {sub, [options] { return run_models(*options); }};
}

}  // namespace powerhouse::cli
