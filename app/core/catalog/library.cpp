#include "catalog/library.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>
#include <set>
#include <system_error>

#include "catalog/catalog.h"
#include "catalog/display_name.h"

namespace powerhouse::catalog {

namespace fs = std::filesystem;

namespace {

std::string folded(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}

LibraryEntry entry_of(store::ModelRecord record) {
    LibraryEntry e;
    e.name = record_display_name(record);
    const nlohmann::json j = nlohmann::json::parse(record.info_json, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) {
        if (j.contains("quantization") && j["quantization"].is_string()) e.quantization = j["quantization"].get<std::string>();
        if (j.contains("architecture") && j["architecture"].is_string()) e.architecture = j["architecture"].get<std::string>();
    }
    // A file that cannot be read may still say what it is in its name.
    if (e.quantization.empty()) e.quantization = quantization_from_file_name(fs::path(record.path).filename().string());
    e.record = std::move(record);
    return e;
}

// What one refresh has done so far: the files each folder claimed (a file reached from two
// folders belongs to the first) and the folders scanned (a folder reached twice, as a
// library folder and as an app's, is scanned once: the second scan would find all its files
// claimed and drop their records).
struct Claims {
    std::set<std::string> files;
    std::set<std::string> folders;
};

// Scans one folder's files into the store, leaving out those an earlier folder claimed.
Result<void> sync(store::Store& store, const std::string& key, std::vector<FoundModel> found, Claims& claims) {
    if (!claims.folders.insert(key).second) return {};
    std::set<std::string>& claimed = claims.files;
    std::erase_if(found, [&](const FoundModel& m) { return claimed.count(m.path.string()) != 0; });
    for (const FoundModel& m : found) claimed.insert(m.path.string());
    Result<ScanReport> report = sync_folder(store, key, found);
    if (!report) return report.error();
    return {};
}

// A folder of the library (its own, or one the user added): its files, or a note.
Result<void> sync_library_folder(store::Store& store, const fs::path& folder, Claims& claimed,
                                 std::vector<std::string>& notes) {
    Result<std::vector<fs::path>> files = find_model_files(folder);
    if (!files) {
        // Its records stay: a folder on a drive that is not mounted comes back.
        notes.push_back(files.error().message);
        return {};
    }
    std::vector<FoundModel> found;
    for (const fs::path& file : *files) found.push_back(FoundModel{file, "folder", {}});
    return sync(store, folder.string(), std::move(found), claimed);
}

}  // namespace

fs::path default_data_dir(const Environment& env) {
    const fs::path data = env.data_home();
    return data.empty() ? fs::path("powerhouse") : data / "powerhouse";
}

Result<Library> refresh_library(store::Store& store, const LibraryPlaces& places) {
    const auto stop = [&places]() -> std::optional<Error> {
        if (places.cancelled && places.cancelled()) {
            return make_error(ErrorCode::cancelled, "the refresh was cancelled");
        }
        return std::nullopt;
    };
    std::vector<std::string> notes;
    Claims claimed;
    std::error_code ec;
    fs::create_directories(places.library, ec);
    if (ec) notes.push_back(fmt::format("cannot make the library folder {}: {}", places.library.string(), ec.message()));
    if (Result<void> r = sync_library_folder(store, places.library, claimed, notes); !r) return r.error();
    Result<std::vector<std::string>> folders = store.model_folders();
    if (!folders) return folders.error();
    for (const std::string& folder : *folders) {
        if (auto e = stop()) return *e;
        if (Result<void> r = sync_library_folder(store, folder, claimed, notes); !r) return r.error();
    }

    // Other apps' downloads. A folder that cannot be read keeps its records (it may be
    // readable again later); the records of a folder that is gone go with it.
    std::set<std::string> app_folders;
    if (places.other_apps) {
        if (auto e = stop()) return *e;
        for (OtherAppSource& source : find_other_apps(places.environment)) {
            if (auto e = stop()) return *e;
            app_folders.insert(source.folder.string());
            if (!source.unreadable.empty()) {
                notes.push_back(fmt::format("{}'s folder was skipped: {}", source_title(source.app), source.unreadable));
                continue;
            }
            for (std::string& problem : source.problems) notes.push_back(std::move(problem));
            std::vector<FoundModel> found;
            for (OtherAppModel& m : source.models) found.push_back(FoundModel{m.path, source.app, std::move(m.name)});
            if (Result<void> r = sync(store, source.folder.string(), std::move(found), claimed); !r) return r.error();
        }
    }
    if (auto e = stop()) return *e;
    Result<std::vector<store::ModelRecord>> all = store.models();
    if (!all) return all.error();
    for (const store::ModelRecord& r : *all) {
        if (is_other_app(r.source) && app_folders.count(r.folder) == 0) {
            if (Result<void> removed = store.remove_model(r.path); !removed) return removed.error();
        } else if (r.folder.empty() && r.mtime_ns != mtime_ns(r.path)) {
            if (auto e = stop()) return *e;
            // Imported by itself: inspected again when the file changed, or when a migration
            // asked for it (a cleared time); a file that is gone is listed with the reason.
            store::ModelRecord again = inspect_file(r.path, r.folder, r.source.empty() ? "imported" : r.source,
                                                    r.source_name);
            again.sha256 = r.sha256;
            if (Result<store::ModelRecord> put = store.put_model(again); !put) return put.error();
        }
    }
    Result<Library> library = list_library(store);
    if (!library) return library;
    library->notes = std::move(notes);
    return library;
}

Result<Library> list_library(const store::Store& store) {
    Result<std::vector<store::ModelRecord>> records = store.models();
    if (!records) return records.error();
    Library library;
    for (store::ModelRecord& r : *records) library.models.push_back(entry_of(std::move(r)));
    std::stable_sort(library.models.begin(), library.models.end(), [](const LibraryEntry& a, const LibraryEntry& b) {
        const std::string fa = folded(a.name), fb = folded(b.name);
        return fa != fb ? fa < fb : a.record.path < b.record.path;
    });
    return library;
}

Result<void> forget_model(store::Store& store, const std::string& path) {
    Result<std::optional<store::ModelRecord>> known = store.model_by_path(path);
    if (!known) return known.error();
    if (*known && (*known)->folder.empty()) return store.remove_model(path);
    return store.hide_model(path);
}

std::string source_title(std::string_view source) {
    if (source == "downloaded") return "Downloaded";
    if (source == "imported") return "Imported";
    if (source == "folder") return "Folder";
    if (source == "lmstudio") return "LM Studio";
    if (source == "ollama") return "Ollama";
    if (source == "llama.cpp") return "llama.cpp";
    if (source == "gpt4all") return "GPT4All";
    if (source == "jan") return "Jan";
    return std::string(source);
}

std::string source_label(const store::ModelRecord& record) {
    std::string label = source_title(record.source);
    if (!record.source_name.empty()) label += (label.empty() ? "" : " · ") + record.source_name;
    return label;
}

}  // namespace powerhouse::catalog
