// powerhouse-cli conversations export [--format json|md] [--id N]... [-o FILE] [--utc]
//                                      [--no-stats] [--data-dir DIR]
// powerhouse-cli conversations import FILE [--data-dir DIR]
//
// The desktop app's conversations out and in, through app/core/store/transfer.h: export
// writes JSON (the format that import reads back: "powerhouse.conversations" version 1) or
// Markdown, of the conversations named by --id or all of them, to standard output or to
// FILE; import adds the conversations of a JSON file (ours, or an OpenAI-style message list)
// as new ones, all or nothing: the file is checked before the store is opened, and a database
// that did not exist is made under a temporary name and renamed when the import is stored, so
// a failed import leaves no file (nor folder) behind and never removes one. DIR is the app's
// data folder, by default the one the app uses: ${XDG_DATA_HOME:-~/.local/share}/powerhouse,
// holding powerhouse.db. The app may be running: the store is safe for several processes.
//
// -o FILE is written beside itself under a temporary name and renamed when complete, so a
// failed export leaves no half-written file (and an existing FILE stays as it was); a device
// or a pipe (/dev/stdout, a FIFO) is written to directly, never replaced. The line saying
// what was exported goes to standard output, or to standard error when FILE is standard
// output itself (so that it never lands in the data). Without --format, a FILE ending in
// .md or .markdown gets Markdown, anything else JSON.
//
// The GPU machine's profile has no SQLite (no powerhouse_core): there the command says so.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "format.h"

#ifdef POWERHOUSE_HAS_STORE
#include "store/store.h"
#include "store/transfer.h"
#endif

namespace powerhouse::cli {
namespace {

namespace fs = std::filesystem;

struct ExportCliOptions {
    std::string format;  // json, md or markdown; empty: from the output's extension
    std::vector<int64_t> ids;
    std::string output;
    bool utc = false;
    bool no_stats = false;
    std::string data_dir;
};

struct ImportCliOptions {
    std::string file;
    std::string data_dir;
};

#ifdef POWERHOUSE_HAS_STORE

// The desktop app's folder (QStandardPaths::GenericDataLocation + "/powerhouse").
fs::path default_data_dir() {
    const char* data = std::getenv("XDG_DATA_HOME");
    if (data != nullptr && data[0] == '/') return fs::path(data) / "powerhouse";
    const char* home = std::getenv("HOME");
    return fs::path(home != nullptr ? home : ".") / ".local" / "share" / "powerhouse";
}

fs::path database_path(const std::string& data_dir) {
    return (data_dir.empty() ? default_data_dir() : fs::path(data_dir)) / "powerhouse.db";
}

Error os_error(const std::string& what, const fs::path& path, int error) {
    return make_error(ErrorCode::io, fmt::format("cannot {} {}: {}", what, path.string(), std::strerror(error)));
}

// Writes all of `text` to `fd`.
Result<void> write_all(int fd, const fs::path& path, const std::string& text) {
    for (size_t done = 0; done < text.size();) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return os_error("write", path, errno);
        done += static_cast<size_t>(n);
    }
    return {};
}

// Writes `text` to `path` through a temporary file beside it, flushed to the disk and then
// renamed over it: readers see the old file or the whole new one, never a part. A device or
// a pipe (/dev/stdout, a link to /dev/null, a FIFO) is written to as it is: renaming onto it
// would replace it (as root, /dev/stdout itself) with a file.
Result<void> write_atomically(const fs::path& path, const std::string& text) {
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (fs::is_directory(status)) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("cannot write {}: it is a folder (-o names the file to write)", path.string()));
    }
    if (fs::exists(status) && !fs::is_regular_file(status)) {
        const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) return os_error("write", path, errno);
        Result<void> written = write_all(fd, path, text);
        if (::close(fd) != 0 && written) return os_error("write", path, errno);
        return written;
    }
    fs::path temporary = path;
    temporary += fmt::format(".tmp-{}", ::getpid());
    // Errors name the file asked for: the temporary name is ours, not the user's.
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) return os_error("write", path, errno);
    const auto fail = [&](const char* what) {
        const int error = errno;
        ::close(fd);
        ::unlink(temporary.c_str());
        return os_error(what, path, error);
    };
    if (Result<void> written = write_all(fd, path, text); !written) {
        ::close(fd);
        ::unlink(temporary.c_str());
        return written;
    }
    if (::fsync(fd) != 0) return fail("flush");
    if (::close(fd) != 0) {
        const int error = errno;
        ::unlink(temporary.c_str());
        return os_error("write", path, error);
    }
    if (::rename(temporary.c_str(), path.c_str()) != 0) {
        const int error = errno;
        ::unlink(temporary.c_str());
        return os_error("write", path, error);
    }
    return {};
}

// Whether `path` is the file that standard output writes to (the same inode).
bool is_standard_output(const fs::path& path) {
    struct stat out {};
    struct stat named {};
    if (::fstat(STDOUT_FILENO, &out) != 0 || ::stat(path.c_str(), &named) != 0) return false;
    return out.st_dev == named.st_dev && out.st_ino == named.st_ino;
}

// The whole file ("-": standard input), refused as soon as it is larger than import takes.
Result<std::string> read_import_file(const std::string& name) {
    if (name != "-") {
        std::error_code ec;
        const uintmax_t size = fs::file_size(name, ec);
        if (!ec) PH_TRY(store::check_import_size(size));
    }
    std::ifstream file;
    std::istream* in = &std::cin;
    if (name != "-") {
        file.open(name, std::ios::binary);
        if (!file) return os_error("open", name, errno);
        in = &file;
    }
    std::string text;
    std::vector<char> chunk(1 << 20);
    while (*in) {
        in->read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        text.append(chunk.data(), static_cast<size_t>(in->gcount()));
        PH_TRY(store::check_import_size(text.size()));
    }
    if (in->bad()) return make_error(ErrorCode::io, fmt::format("cannot read {}", name));
    return text;
}

void report_imported(const store::ImportReport& report, const fs::path& db) {
    std::printf("Imported %d conversation%s (%d message%s) into %s\n", report.conversations,
                report.conversations == 1 ? "" : "s", report.messages, report.messages == 1 ? "" : "s",
                db.string().c_str());
}

int run_export(const ExportCliOptions& options) {
    const fs::path db = database_path(options.data_dir);
    // Exporting from a folder with no data is a mistake worth naming; opening would create it.
    if (!fs::exists(db)) {
        return report_error(make_error(ErrorCode::invalid_argument,
                                       fmt::format("{} does not exist: no conversations to export (--data-dir names "
                                                   "the app's data folder)",
                                                   db.string())));
    }
    Result<store::Store> s = store::Store::open(db);
    if (!s) return report_error(s.error());
    std::string format = options.format;
    if (format.empty()) {
        const std::string ext = fs::path(options.output).extension().string();
        format = ext == ".md" || ext == ".markdown" ? "md" : "json";
    }
    store::ExportOptions how;
    how.utc = options.utc;
    how.stats = !options.no_stats;
    Result<std::string> text =
        format == "json" ? store::export_json(*s, options.ids, how) : store::export_markdown(*s, options.ids, how);
    if (!text) return report_error(text.error());
    if (options.output.empty() || options.output == "-") {
        if (std::fwrite(text->data(), 1, text->size(), stdout) != text->size() || std::fflush(stdout) != 0) {
            return report_error(make_error(ErrorCode::io, "cannot write to standard output"));
        }
        return 0;
    }
    // The line that says what was written goes where the data does not: to standard error
    // when FILE is standard output itself (/dev/stdout, /proc/self/fd/1, the file that
    // standard output is redirected to), decided before the file is replaced.
    std::FILE* status = is_standard_output(options.output) ? stderr : stdout;
    if (Result<void> written = write_atomically(options.output, *text); !written) return report_error(written.error());
    size_t count = options.ids.size();
    if (count == 0) {
        Result<std::vector<store::Conversation>> all = s->conversations();
        count = all ? all->size() : 0;
    }
    std::fprintf(status, "Exported %zu conversation%s to %s\n", count, count == 1 ? "" : "s", options.output.c_str());
    return 0;
}

// Removes `path` and the files SQLite keeps beside it, ignoring those that are not there.
void remove_database_files(const fs::path& path) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        fs::path file = path;
        file += suffix;
        ::unlink(file.c_str());
    }
}

// Gives `from` the name `to` unless `to` exists: false with errno EEXIST when it does.
bool rename_no_replace(const fs::path& from, const fs::path& to) {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
    if (errno != EINVAL && errno != ENOSYS) return false;
    // A file system without RENAME_NOREPLACE: a hard link fails in the same way.
    if (::link(from.c_str(), to.c_str()) != 0) return false;
    ::unlink(from.c_str());
    return true;
}

// What import_into_new_database did.
enum class NewDatabase { made, exists_now, failed };

// Stores `records` in a database that does not exist yet: made under a temporary name beside
// `db`, closed, and given its name only once the import is stored. A failed import leaves no
// file behind, and a database that another process (the app) makes meanwhile is neither
// replaced nor removed: then `exists_now`, and the caller imports into that one.
NewDatabase import_into_new_database(const fs::path& db, const std::vector<store::ConversationRecord>& records,
                                     Result<store::ImportReport>& report) {
    fs::path temporary = db;
    temporary += fmt::format(".import-{}", ::getpid());
    remove_database_files(temporary);  // left by a process of ours with this id that was killed
    // Errors name the file asked for: the temporary name is ours, not the user's.
    const auto named = [&](Error error) {
        for (size_t at; (at = error.message.find(temporary.string())) != std::string::npos;) {
            error.message.replace(at, temporary.string().size(), db.string());
        }
        return error;
    };
    {
        Result<store::Store> s = store::Store::open(temporary);
        if (s) {
            report = store::import_records(*s, records);
        } else {
            report = std::move(s).error();
        }
    }  // closed: SQLite folds its write-ahead log into the file and removes it
    if (!report) {
        report = named(std::move(report).error());
        remove_database_files(temporary);
        return NewDatabase::failed;
    }
    if (!rename_no_replace(temporary, db)) {
        const int error = errno;
        remove_database_files(temporary);
        if (error == EEXIST) return NewDatabase::exists_now;
        report = os_error("create", db, error);
        return NewDatabase::failed;
    }
    remove_database_files(temporary);  // a -shm that SQLite kept, if any
    return NewDatabase::made;
}

int run_import(const ImportCliOptions& options) {
    Result<std::string> text = read_import_file(options.file);
    if (!text) return report_error(make_error(text.error().code, options.file + ": " + text.error().message));
    // Everything is checked before the store is opened, which would make it.
    Result<std::vector<store::ConversationRecord>> records = store::read_import(*text);
    if (!records) return report_error(make_error(records.error().code, options.file + ": " + records.error().message));
    const fs::path db = database_path(options.data_dir);

    Result<store::ImportReport> report = make_error(ErrorCode::io, "not imported");
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(db, ec))) {
        // The folders that import makes for a new database, removed again if it fails.
        std::vector<fs::path> made;
        for (fs::path dir = db.parent_path(); !dir.empty() && !fs::exists(fs::symlink_status(dir, ec));
             dir = dir.parent_path()) {
            made.push_back(dir);
            if (dir == dir.parent_path()) break;
        }
        fs::create_directories(db.parent_path(), ec);
        if (ec) {
            for (const fs::path& dir : made) fs::remove(dir, ec);
            return report_error(make_error(ErrorCode::io, fmt::format("cannot create the data folder {}: {}",
                                                                      db.parent_path().string(), ec.message())));
        }
        const NewDatabase outcome = import_into_new_database(db, *records, report);
        if (outcome == NewDatabase::failed) {
            for (const fs::path& dir : made) fs::remove(dir, ec);  // only empty ones go
            return report_error(make_error(report.error().code, options.file + ": " + report.error().message));
        }
        if (outcome == NewDatabase::made) {
            report_imported(*report, db);
            return 0;
        }
    }
    Result<store::Store> s = store::Store::open(db);
    if (!s) return report_error(s.error());
    report = store::import_records(*s, *records);
    if (!report) return report_error(make_error(report.error().code, options.file + ": " + report.error().message));
    report_imported(*report, db);
    return 0;
}

#else

int not_built() {
    return report_error(make_error(ErrorCode::unsupported,
                                   "this powerhouse-cli was built without the conversation store (SQLite was not "
                                   "found): conversations export and import are not available in it"));
}

int run_export(const ExportCliOptions&) {
    return not_built();
}
int run_import(const ImportCliOptions&) {
    return not_built();
}

#endif

}  // namespace

Command add_conversations_command(CLI::App& app) {
    auto export_options = std::make_shared<ExportCliOptions>();
    auto import_options = std::make_shared<ImportCliOptions>();
    CLI::App* sub = app.add_subcommand("conversations", "Export or import the desktop app's conversations");
    sub->require_subcommand(1);
    const std::string data_help = "The app's data folder (default: ${XDG_DATA_HOME:-~/.local/share}/powerhouse)";

    CLI::App* out = sub->add_subcommand("export", "Write conversations as JSON (to import again) or Markdown");
    out->add_option("--format", export_options->format, "json or md (default: md for an -o FILE ending in .md)")
        ->check(CLI::IsMember({"json", "md", "markdown"}));
    out->add_option("--id", export_options->ids, "A conversation to export (repeat for more; default: all)");
    out->add_option("-o,--output", export_options->output, "The file to write (default: standard output)");
    out->add_flag("--utc", export_options->utc, "Markdown: dates in UTC instead of local time");
    out->add_flag("--no-stats", export_options->no_stats, "Markdown: leave out each answer's statistics");
    out->add_option("--data-dir", export_options->data_dir, data_help);

    CLI::App* in = sub->add_subcommand("import",
                                       "Add the conversations of a JSON file (ours, or OpenAI-style "
                                       "messages) as new ones");
    in->add_option("file", import_options->file, "The JSON file (- for standard input)")->required();
    in->add_option("--data-dir", import_options->data_dir, data_help);

    return {sub, [export_options, import_options, out] {
                return out->parsed() ? run_export(*export_options) : run_import(*import_options);
            }};
}

}  // namespace powerhouse::cli
