// powerhouse-cli list [--json] [--data-dir DIR]
//
// The model library as the desktop app's Models page shows it: the library folder
// (DIR/models), the folders added in the app, and what other apps (LM Studio, Ollama,
// llama.cpp's cache, GPT4All, Jan) already downloaded, used in place. Listing refreshes the
// library in DIR/powerhouse.db first, with the same function as the app
// (catalog/library.h), so both list the same models under the same names; other apps'
// folders are only read.
//
// DIR defaults to the app's data folder: $XDG_DATA_HOME/powerhouse, else
// ~/.local/share/powerhouse. HOME, the XDG variables, OLLAMA_MODELS and LLAMA_CACHE say
// where to look, as they do for the apps themselves.
//
// Output: a table (name, size, quantization, source, and "usable" or why not), then on
// stderr what was passed over and why (a folder that cannot be read, a malformed Ollama
// manifest). --json prints an array of {name, path, size_bytes, quantization,
// architecture, source, source_name, usable, problem}.
//
// It needs the app's store (SQLite), which the GPU machine's profile lacks; there the
// command says it is not built.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "format.h"

#ifdef POWERHOUSE_HAS_STORE
#include "catalog/library.h"
#include "store/store.h"
#endif

namespace powerhouse::cli {
namespace {

struct ListOptions {
    bool json = false;
    std::string data_dir;
};

#ifdef POWERHOUSE_HAS_STORE

// Columns on a terminal: UTF-8 characters, not bytes ("·" is two bytes, one column).
size_t columns(const std::string& s) {
    size_t n = 0;
    for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
    return n;
}

std::string table(const std::vector<std::vector<std::string>>& rows) {
    std::vector<size_t> width;
    for (const auto& row : rows) {
        width.resize(std::max(width.size(), row.size()), 0);
        for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], columns(row[c]));
    }
    std::string out;
    for (const auto& row : rows) {
        std::string line;
        for (size_t c = 0; c < row.size(); ++c) {
            if (c > 0) line += "  ";
            line += row[c];
            if (c + 1 < row.size()) line += std::string(width[c] - columns(row[c]), ' ');
        }
        out += line + "\n";
    }
    return out;
}

int run_list(const ListOptions& options) {
    const catalog::Environment env = catalog::Environment::from_process();
    const std::filesystem::path data =
        options.data_dir.empty() ? catalog::default_data_dir(env) : std::filesystem::path(options.data_dir);
    Result<store::Store> store = store::Store::open(data / "powerhouse.db");
    if (!store) return report_error(store.error());
    catalog::LibraryPlaces places;
    places.library = data / "models";
    places.environment = env;
    Result<catalog::Library> library = catalog::refresh_library(*store, places);
    if (!library) return report_error(library.error());
    for (const std::string& note : library->notes) std::fprintf(stderr, "note: %s\n", note.c_str());

    if (options.json) {
        nlohmann::ordered_json out = nlohmann::ordered_json::array();
        for (const catalog::LibraryEntry& e : library->models) {
            out.push_back({{"name", e.name},
                           {"path", e.record.path},
                           {"size_bytes", e.record.file_size},
                           {"quantization", e.quantization},
                           {"architecture", e.architecture},
                           {"source", e.record.source},
                           {"source_name", e.record.source_name},
                           {"usable", e.record.ok},
                           {"problem", e.record.problem}});
        }
        std::puts(json_text(out, 2).c_str());
        return 0;
    }
    if (library->models.empty()) {
        std::printf("No models yet: none in %s, and none that other apps downloaded.\n",
                    places.library.string().c_str());
        return 0;
    }
    std::vector<std::vector<std::string>> rows = {{"NAME", "SIZE", "QUANT", "SOURCE", "STATUS"}};
    for (const catalog::LibraryEntry& e : library->models) {
        rows.push_back({e.name, format_bytes(static_cast<uint64_t>(e.record.file_size)),
                        e.quantization.empty() ? "-" : e.quantization, catalog::source_label(e.record),
                        e.record.ok ? "usable" : e.record.problem});
    }
    std::fputs(table(rows).c_str(), stdout);
    return 0;
}

#else

int run_list(const ListOptions&) {
    std::fputs("error: this powerhouse-cli was built without the app's store (SQLite), so it has no model "
               "library to list; use a build with the desktop app's libraries\n",
               stderr);
    return 1;
}

#endif

}  // namespace

Command add_list_command(CLI::App& app) {
    auto options = std::make_shared<ListOptions>();
    CLI::App* sub = app.add_subcommand(
        "list", "List the model library: the library folder, added folders and other apps' downloads");
    sub->add_flag("--json", options->json, "Print a JSON array instead of a table");
    sub->add_option("--data-dir", options->data_dir,
                    "The app's data folder (default: $XDG_DATA_HOME/powerhouse, else ~/.local/share/powerhouse)");
    return Command{sub, [options] { return run_list(*options); }};
}

}  // namespace powerhouse::cli
