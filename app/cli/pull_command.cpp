// powerhouse-cli pull URL [-o DIR] [--sha256 HEX]
//
// Downloads a model file into DIR (default: the models folder,
// ${XDG_DATA_HOME:-~/.local/share}/powerhouse/models) with app/core/library's downloads:
// resumable (run the same command again after a failure or Ctrl-C), verified against
// --sha256 or the server's hash (Hugging Face's X-Linked-Etag), and never leaving a partial
// or unverified file under the final name; a web page answered instead of the file (a code
// host's page about it) is removed and said. The name is the server's Content-Disposition,
// else the URL's last path segment.
//
// URLs: any http(s) URL; a Hugging Face file page (".../blob/<rev>/<path>") is downloaded
// from its ".../resolve/..." URL; a part of a multi-part model ("-00001-of-00003.gguf")
// brings all its parts. A Hugging Face model page lists the repository's GGUF files grouped
// by quantization, with sizes and URLs, and exits with status 2 so that the user picks one.
// HF_ENDPOINT replaces https://huggingface.co (mirrors, tests); the Hugging Face token
// (--hf-token-file FILE, else HF_TOKEN) is sent to that host only, never after a redirect to
// another (the CDN), never printed; a gated repository's 401/403 says what to do.
//
// Progress goes to stderr: a one-line bar on a terminal, a line every few seconds otherwise;
// a failed attempt that will be retried is said there at once, with the wait.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "format.h"

#ifdef POWERHOUSE_HAS_DOWNLOADS
#include "library/download.h"
#include "library/file_names.h"
#include "library/hf_search.h"
#include "library/hf_url.h"
#include "library/sha256.h"
#endif

namespace powerhouse::cli {
namespace {

namespace fs = std::filesystem;

struct PullOptions {
    std::string url;
    std::string output_dir;
    std::string sha256;
    std::string token_file;  // --hf-token-file
};

#ifdef POWERHOUSE_HAS_DOWNLOADS

fs::path default_models_dir() {
    const char* data = std::getenv("XDG_DATA_HOME");
    if (data != nullptr && data[0] == '/') return fs::path(data) / "powerhouse" / "models";
    const char* home = std::getenv("HOME");
    return fs::path(home != nullptr ? home : ".") / ".local" / "share" / "powerhouse" / "models";
}

std::string format_duration(double seconds) {
    const auto s = static_cast<long long>(seconds + 0.5);
    if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
    return fmt::format("{}:{:02}", s / 60, s % 60);
}

// Progress on stderr: a bar redrawn in place on a terminal, a plain line every 5 s for logs.
class ProgressPrinter {
public:
    explicit ProgressPrinter(std::string name)
        : name_(std::move(name)),
          terminal_(::isatty(STDERR_FILENO) == 1),
          last_line_(std::chrono::steady_clock::now()) {}
    ~ProgressPrinter() { finish(); }
    ProgressPrinter(const ProgressPrinter&) = delete;
    ProgressPrinter& operator=(const ProgressPrinter&) = delete;

    bool terminal() const { return terminal_; }

    void update(const library::DownloadProgress& p) {
        const auto now = std::chrono::steady_clock::now();
        if (!terminal_ && now - last_line_ < std::chrono::seconds(5)) return;
        last_line_ = now;
        std::string amount = format_bytes(p.bytes_done);
        if (p.total) amount += " / " + format_bytes(*p.total);
        const std::string speed =
            p.bytes_per_second > 0 ? format_bytes(static_cast<uint64_t>(p.bytes_per_second)) + "/s" : std::string("-");
        const std::string left = p.seconds_left ? format_duration(*p.seconds_left) + " left" : std::string();
        if (terminal_) {
            std::string bar;
            if (p.total && *p.total > 0) {
                const double share = static_cast<double>(p.bytes_done) / static_cast<double>(*p.total);
                const int filled = static_cast<int>(share * 30);
                bar = fmt::format("{:3.0f}% [{}{}] ", share * 100, std::string(static_cast<size_t>(filled), '#'),
                                  std::string(static_cast<size_t>(30 - filled), ' '));
            }
            const std::string line = fmt::format("{}{}  {}  {}", bar, amount, speed, left);
            std::fprintf(stderr, "\r%-78s", line.c_str());
            drawn_ = true;
        } else {
            const std::string share =
                p.total && *p.total > 0
                    ? fmt::format("{:.0f}% ", 100.0 * static_cast<double>(p.bytes_done) / static_cast<double>(*p.total))
                    : std::string();
            std::fprintf(stderr, "%s: %s%s, %s%s%s\n", name_.c_str(), share.c_str(), amount.c_str(), speed.c_str(),
                         left.empty() ? "" : ", ", left.c_str());
        }
        std::fflush(stderr);
    }

    void finish() {
        if (drawn_) std::fputc('\n', stderr);
        drawn_ = false;
    }

private:
    std::string name_;
    bool terminal_;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point last_line_;  // a log gets its first line after 5 s
};

// A failed attempt about to be retried: said at once, or the backoff (up to about two
// minutes in all) passes in silence.
void print_retry(const library::RetryNotice& notice) {
    const double seconds = std::chrono::duration<double>(notice.wait).count();
    std::fprintf(stderr, "%s: trying again in %.0f s (Ctrl-C to stop)\n", notice.reason.c_str(), seconds);
    std::fflush(stderr);
}

// "owner/name" of a URL on the Hub ("<endpoint>/owner/name/resolve/..."); "" for others.
std::string hub_repo_id(const std::string& url) {
    std::string hub = library::hf_endpoint_from_environment();
    while (!hub.empty() && hub.back() == '/') hub.pop_back();
    if (url.rfind(hub + "/", 0) != 0) return {};
    const std::string path = url.substr(hub.size() + 1);
    const size_t first = path.find('/');
    const size_t second = first == std::string::npos ? first : path.find('/', first + 1);
    return path.substr(0, second);
}

// Hugging Face answers 401 (no token) or 403 (terms not accepted) for gated repositories.
int report_download_error(const Error& error, bool on_hugging_face, const std::string& url,
                          const library::DownloadOptions& options) {
    if (on_hugging_face) {
        std::string repo = hub_repo_id(url);
        if (repo.empty()) repo = "this repository";
        return report_error(library::explain_hf_refusal(error, repo, !options.bearer_token.empty(),
                                                        library::HubClient::cli,
                                                        library::hf_endpoint_from_environment()));
    }
    return report_error(error);
}

// The URL of every part of a multi-part model, from the URL of any one part (only the
// "-0000i-of-0000n.gguf" end of the last path segment changes); the URL alone otherwise.
std::vector<std::string> all_part_urls(const std::string& url) {
    const size_t query = url.find_first_of("?#");
    const std::string path = url.substr(0, query);
    const std::string rest = query == std::string::npos ? std::string() : url.substr(query);
    const size_t slash = path.rfind('/');
    const auto split = library::parse_gguf_split_name(path.substr(slash + 1));
    if (!split) return {url};
    std::vector<std::string> urls;
    for (int i = 1; i <= split->count; ++i) {
        urls.push_back(path.substr(0, slash + 1) + library::gguf_split_file_name(*split, i) + rest);
    }
    return urls;
}

int list_model_page(const library::HfRepo& repo, const library::DownloadOptions& options) {
    Result<std::vector<library::HfFile>> listed =
        library::list_hf_gguf_files(repo, library::hf_endpoint_from_environment(), options);
    if (!listed) {
        return report_error(library::explain_hf_refusal(listed.error(), fmt::format("{}/{}", repo.org, repo.repo),
                                                        !options.bearer_token.empty(), library::HubClient::cli,
                                                        library::hf_endpoint_from_environment()));
    }
    const std::vector<library::HfFile>& files = *listed;
    const std::string name = fmt::format("{}/{}", repo.org, repo.repo);
    if (files.empty()) {
        return report_error(make_error(ErrorCode::invalid_argument,
                                       fmt::format("{} (revision {}) has no GGUF files", name, repo.revision)));
    }
    const auto groups = library::group_gguf_models(files);
    size_t models = 0;
    for (const auto& group : groups) models += group.models.size();
    std::printf("%s (revision %s): %zu GGUF model%s\n", name.c_str(), repo.revision.c_str(), models,
                models == 1 ? "" : "s");
    for (const auto& group : groups) {
        std::printf("\n%s\n",
                    group.quantization.empty() ? "(quantization not in the name)" : group.quantization.c_str());
        for (const auto& model : group.models) {
            std::string parts;
            if (model.expected_parts > 1) {
                parts = model.complete() ? fmt::format(" ({} parts)", model.expected_parts)
                                         : fmt::format(" ({} of {} parts present: incomplete)", model.parts.size(),
                                                       model.expected_parts);
            }
            std::printf("  %10s  %s%s\n", format_bytes(model.total_size).c_str(), model.name.c_str(), parts.c_str());
            std::printf(
                "  %10s  %s\n", "",
                library::hf_file_url(repo, model.parts.front().path, library::hf_endpoint_from_environment()).c_str());
        }
    }
    std::fflush(stdout);
    std::fprintf(stderr,
                 "\n%s is a model page: pick one file and run `powerhouse-cli pull <its URL>` (for a model in parts, "
                 "the first part's URL brings them all)\n",
                 name.c_str());
    return 2;
}

// One file into `folder`. Returns the process status.
int pull_one(const std::string& url, const fs::path& folder, library::DownloadOptions options, bool on_hugging_face) {
    Result<library::RemoteFile> remote = library::probe_remote_file(url, options);
    if (!remote) return report_download_error(remote.error(), on_hugging_face, url, options);
    std::string name = remote->file_name;
    if (name.empty()) name = library::safe_file_name(library::file_name_from_url(url));
    if (name.empty()) {
        return report_error(make_error(ErrorCode::invalid_argument,
                                       fmt::format("cannot tell a file name from {}: the URL should end in one", url)));
    }
    const fs::path target = folder / name;
    const std::string expected =
        !options.expected_sha256.empty() ? options.expected_sha256 : remote->sha256.value_or("");

    Result<bool> exists = library::target_file_exists(target);
    if (!exists) return report_error(exists.error());
    if (*exists) {
        if (expected.empty()) {
            std::printf("%s already exists; not downloaded again (no sha256 to check it against)\n", target.c_str());
            return 0;
        }
        Result<std::string> hash = library::sha256_file(target);
        if (!hash) return report_error(hash.error());
        if (*hash == *library::normalize_sha256(expected)) {
            std::printf("%s already exists and its sha256 matches\n", target.c_str());
            return 0;
        }
        return report_error(make_error(
            ErrorCode::io, fmt::format("{} already exists with other content (sha256 {}, expected {}): remove it or "
                                       "choose another folder with -o",
                                       target.string(), *hash, expected)));
    }

    ProgressPrinter printer(name);
    std::fprintf(stderr, "Downloading %s%s into %s\n", url.c_str(),
                 remote->size ? fmt::format(" ({})", format_bytes(*remote->size)).c_str() : "", folder.c_str());
    options.on_progress = [&printer](const library::DownloadProgress& p) {
        printer.update(p);
        return true;
    };
    options.progress_interval = std::chrono::milliseconds(printer.terminal() ? 100 : 500);
    options.on_retry = [&printer](const library::RetryNotice& notice) {
        printer.finish();  // the bar's line ends first
        print_retry(notice);
    };
    Result<library::DownloadResult> result = library::download_file(url, target, options);
    printer.finish();
    if (!result) return report_download_error(result.error(), on_hugging_face, url, options);
    if (result->verified) {
        std::printf("saved %s (%s), sha256 %s verified (%s)\n", target.c_str(), format_bytes(result->size).c_str(),
                    result->sha256.c_str(), library::hash_source_name(result->hash_source));
    } else {
        std::printf("saved %s (%s), sha256 %s NOT verified: neither --sha256 nor the server gave a hash\n",
                    target.c_str(), format_bytes(result->size).c_str(), result->sha256.c_str());
    }
    return 0;
}

int run_pull(const PullOptions& o) {
    const std::string hf = library::hf_endpoint_from_environment();
    library::DownloadOptions options;
    options.user_agent = "powerhouse-cli";
    options.expected_sha256 = o.sha256;
    options.on_retry = print_retry;
    const auto page = library::parse_hf_model_page(o.url, hf);
    const auto resolved = library::hf_resolve_url(o.url, hf);
    if (page || resolved) {
        Result<std::string> token = read_hf_token(o.token_file);
        if (!token) return report_error(token.error());
        options.bearer_token = std::move(token).value();
    }
    if (page) return list_model_page(*page, options);

    const std::string url = resolved.value_or(o.url);
    if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
        std::fprintf(stderr, "error: '%s' is not an http(s) URL\n", o.url.c_str());
        return 2;
    }
    if (!o.sha256.empty() && !library::normalize_sha256(o.sha256)) {
        std::fprintf(stderr, "error: --sha256 '%s' is not a sha256 (64 hex digits)\n", o.sha256.c_str());
        return 2;
    }
    const fs::path folder = o.output_dir.empty() ? default_models_dir() : fs::path(o.output_dir);
    std::error_code error;
    fs::create_directories(folder, error);
    if (error) {
        return report_error(
            make_error(ErrorCode::io, fmt::format("cannot create {}: {}", folder.string(), error.message())));
    }
    const std::vector<std::string> urls = all_part_urls(url);
    if (urls.size() > 1 && !o.sha256.empty()) {
        std::fprintf(stderr, "error: --sha256 names one file, and this model has %zu parts\n", urls.size());
        return 2;
    }
    for (size_t i = 0; i < urls.size(); ++i) {
        if (urls.size() > 1) std::fprintf(stderr, "Part %zu of %zu\n", i + 1, urls.size());
        const int status = pull_one(urls[i], folder, options, resolved.has_value());
        if (status != 0) return status;
    }
    return 0;
}

#else

int run_pull(const PullOptions&) {
    std::fprintf(stderr,
                 "error: this powerhouse-cli was built without downloads (libcurl and OpenSSL were not found)\n");
    return 1;
}

#endif

}  // namespace

Command add_pull_command(CLI::App& app) {
    auto options = std::make_shared<PullOptions>();
    CLI::App* sub = app.add_subcommand("pull", "Download a model file (resumable, sha256-verified)");
    sub->add_option("url", options->url, "http(s) URL, Hugging Face file or model page")->required();
    sub->add_option("-o,--output", options->output_dir,
                    "Folder to save into (default: ${XDG_DATA_HOME:-~/.local/share}/powerhouse/models)");
    sub->add_option("--sha256", options->sha256, "Expected sha256 of the file (64 hex digits)");
    sub->add_option("--hf-token-file", options->token_file,
                    "Read the Hugging Face token from FILE (default: $HF_TOKEN), for gated and private repositories");
    return {sub, [options] { return run_pull(*options); }};
}

}  // namespace powerhouse::cli
