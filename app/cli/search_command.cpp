// powerhouse-cli search QUERY [--limit N] [--json]
// powerhouse-cli search --files OWNER/NAME [--json]
//
// Finds GGUF models on the Hugging Face Hub (app/core/library/hf_search.h). With a query:
// the repositories whose id contains it and that are tagged gguf, most downloaded first
// (downloads as the Hub counts them, over the last 30 days), with likes and the date of the
// last change; gated ones are marked, as their files want HF_TOKEN and accepted terms.
// With --files: a repository's GGUF models by quantization, each with its size and parts (a
// model split into parts is one model), and the first file's URL for `pull`.
// HF_ENDPOINT replaces https://huggingface.co (mirrors, tests). The Hugging Face token
// (--hf-token-file FILE, else HF_TOKEN, as `pull` reads it) is sent to that host only, never
// printed; a gated or private repository that refuses the listing (401/403) says what to do.
// --json prints one JSON object instead of the table.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "format.h"

#ifdef POWERHOUSE_HAS_DOWNLOADS
#include "library/download.h"
#include "library/hf_search.h"
#include "library/hf_url.h"
#endif

namespace powerhouse::cli {
namespace {

struct SearchOptions {
    std::string query;
    std::string files;       // OWNER/NAME
    std::string token_file;  // --hf-token-file
    int limit = 20;
    bool json = false;
};

#ifdef POWERHOUSE_HAS_DOWNLOADS

Result<library::DownloadOptions> fetch_options(const SearchOptions& o) {
    library::DownloadOptions options;
    options.user_agent = "powerhouse-cli";
    // A few quick retries: a person is waiting for a list, not a multi-gigabyte file.
    options.max_attempts = 3;
    options.connect_timeout_seconds = 15;
    Result<std::string> token = read_hf_token(o.token_file);
    if (!token) return token.error();
    options.bearer_token = std::move(token).value();
    return options;
}

int search_repositories(const SearchOptions& o) {
    const std::string hub = library::hf_endpoint_from_environment();
    Result<library::DownloadOptions> options = fetch_options(o);
    if (!options) return report_error(options.error());
    Result<library::HfSearchResult> found = library::search_hf_models(o.query, o.limit, hub, *options);
    if (!found) return report_error(found.error());
    if (o.json) {
        nlohmann::ordered_json models = nlohmann::ordered_json::array();
        for (const library::HfModelSummary& m : found->models) {
            models.push_back({{"id", m.id},
                              {"downloads", m.downloads},
                              {"likes", m.likes},
                              {"updated", m.updated_date()},
                              {"last_modified", m.last_modified},
                              {"created_at", m.created_at},
                              {"gated", m.gated},
                              {"private", m.is_private},
                              {"pipeline_tag", m.pipeline_tag},
                              {"tags", m.tags}});
        }
        const nlohmann::ordered_json out = {{"query", o.query}, {"models", models}, {"more", found->more}};
        std::puts(json_text(out).c_str());
        return 0;
    }
    if (found->models.empty()) {
        std::fprintf(stderr, "no GGUF repository on %s matches \"%s\"\n", hub.c_str(), o.query.c_str());
        return 0;
    }
    std::vector<std::vector<std::string>> rows;
    bool notes = false;
    const library::HfModelSummary* gated = nullptr;
    for (const library::HfModelSummary& m : found->models) {
        std::string note;
        if (!m.gated.empty()) note = "gated";
        if (!m.gated.empty() && gated == nullptr) gated = &m;
        if (m.is_private) note += note.empty() ? "private" : ", private";
        notes = notes || !note.empty();
        rows.push_back({m.id, std::to_string(m.downloads), std::to_string(m.likes), m.updated_date(), note});
    }
    std::vector<std::string> header = {"repository", "downloads", "likes", "updated", ""};
    if (!notes) {
        header.pop_back();
        for (auto& row : rows) row.pop_back();
    }
    std::fputs(format_table(header, rows).c_str(), stdout);
    std::fflush(stdout);
    if (found->more) {
        std::fprintf(stderr, "\nthe first %zu shown; --limit shows more, a longer query fewer\n", found->models.size());
    }
    if (gated != nullptr && options->bearer_token.empty()) {
        std::fprintf(stderr, "\nGated repositories want a token: %s\n",
                     library::hf_access_message(gated->id, std::nullopt, false, library::HubClient::cli, hub).c_str());
    }
    std::fprintf(stderr, "\nA repository's GGUF files: powerhouse-cli search --files OWNER/NAME\n");
    return 0;
}

int list_repository(const SearchOptions& o) {
    const std::optional<library::HfRepo> repo = library::parse_hf_repo_id(o.files);
    if (!repo) {
        std::fprintf(stderr, "error: --files wants a repository as OWNER/NAME, not '%s'\n", o.files.c_str());
        return 2;
    }
    const std::string hub = library::hf_endpoint_from_environment();
    Result<library::DownloadOptions> options = fetch_options(o);
    if (!options) return report_error(options.error());
    Result<std::vector<library::HfFile>> files = library::list_hf_gguf_files(*repo, hub, *options);
    if (!files) {
        return report_error(library::explain_hf_refusal(files.error(), o.files, !options->bearer_token.empty(),
                                                        library::HubClient::cli, hub));
    }
    if (files->empty()) {
        return report_error(make_error(
            ErrorCode::invalid_argument,
            fmt::format("{} has no GGUF files: Powerhouse runs GGUF models (look for a repository named ...-GGUF)",
                        o.files)));
    }
    const std::vector<library::QuantizationGroup> groups = library::group_gguf_models(*files);
    if (o.json) {
        nlohmann::ordered_json models = nlohmann::ordered_json::array();
        for (const library::QuantizationGroup& group : groups) {
            for (const library::GgufModel& m : group.models) {
                nlohmann::ordered_json parts = nlohmann::ordered_json::array();
                for (const library::HfFile& f : m.parts) {
                    parts.push_back({{"path", f.path},
                                     {"size", f.size},
                                     {"sha256", f.sha256},
                                     {"url", library::hf_file_url(*repo, f.path, hub)}});
                }
                models.push_back({{"quantization", group.quantization},
                                  {"name", m.name},
                                  {"size", m.total_size},
                                  {"parts", m.expected_parts},
                                  {"complete", m.complete()},
                                  {"files", parts}});
            }
        }
        const nlohmann::ordered_json out = {{"repository", o.files}, {"revision", repo->revision}, {"models", models}};
        std::puts(json_text(out).c_str());
        return 0;
    }
    std::vector<std::vector<std::string>> rows;
    for (const library::QuantizationGroup& group : groups) {
        for (const library::GgufModel& m : group.models) {
            std::string parts = std::to_string(m.expected_parts);
            if (!m.complete()) parts = fmt::format("{} of {}: incomplete", m.parts.size(), m.expected_parts);
            rows.push_back({group.quantization.empty() ? "-" : group.quantization, format_bytes(m.total_size), parts,
                            m.parts.front().path});
        }
    }
    std::printf("%s: %zu GGUF model%s\n\n", o.files.c_str(), rows.size(), rows.size() == 1 ? "" : "s");
    std::fputs(format_table({"quantization", "size", "parts", "file"}, rows).c_str(), stdout);
    std::fflush(stdout);
    std::fprintf(stderr, "\nDownload one: powerhouse-cli pull %s (a model in parts: its first part brings all)\n",
                 (library::hf_file_url(*repo, "", hub) + "/<file>").c_str());
    return 0;
}

int run_search(const SearchOptions& o) {
    if (o.query.empty() == o.files.empty()) {
        std::fprintf(stderr, "error: give either a QUERY or --files OWNER/NAME\n");
        return 2;
    }
    return o.files.empty() ? search_repositories(o) : list_repository(o);
}

#else

int run_search(const SearchOptions&) {
    std::fprintf(stderr,
                 "error: this powerhouse-cli was built without downloads (libcurl and OpenSSL were not found)\n");
    return 1;
}

#endif

}  // namespace

Command add_search_command(CLI::App& app) {
    auto options = std::make_shared<SearchOptions>();
    CLI::App* sub = app.add_subcommand("search", "Find GGUF models on Hugging Face, or list a repository's files");
    sub->add_option("query", options->query, "Part of a repository's name or owner");
    sub->add_option("--files", options->files, "List this repository's GGUF models (OWNER/NAME) instead");
    sub->add_option("--limit", options->limit, "Repositories to show (default 20)")->check(CLI::Range(1, 1000));
    sub->add_flag("--json", options->json, "Print one JSON object");
    sub->add_option("--hf-token-file", options->token_file,
                    "Read the Hugging Face token from FILE (default: $HF_TOKEN), for gated and private repositories");
    return {sub, [options] { return run_search(*options); }};
}

}  // namespace powerhouse::cli
