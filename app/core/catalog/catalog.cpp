#include "catalog/catalog.h"

#include "catalog/display_name.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <regex>
#include <set>
#include <system_error>

namespace powerhouse::catalog {

namespace fs = std::filesystem;

namespace {

bool is_gguf(const fs::path& p) {
    std::string ext = p.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    return ext == ".gguf";
}

// "NAME-00002-of-00003.gguf" -> part 2 of 3 (llama.cpp's gguf-split naming).
struct SplitPart {
    int index = 0, count = 0;
};
std::optional<SplitPart> split_part(const fs::path& p) {
    static const std::regex pattern(R"(^.*-(\d{5})-of-(\d{5})\.gguf$)", std::regex::icase);
    std::smatch m;
    const std::string name = p.filename().string();
    if (!std::regex_match(name, m, pattern)) return std::nullopt;
    return SplitPart{std::stoi(m[1].str()), std::stoi(m[2].str())};
}

int64_t size_of(const fs::path& p) {
    std::error_code ec;
    const auto n = fs::file_size(p, ec);
    return ec ? 0 : static_cast<int64_t>(n);
}

// The quantization to show: the file's type, unless the file names none we know.
std::string quantization_of(const ModelInfo& info) {
    if (!info.file_type.empty() && info.file_type.rfind("type ", 0) != 0) return info.file_type;
    return quantization_from_file_name(info.path.filename().string());
}

}  // namespace

std::string model_display_name(const ModelInfo& info, const std::string& other_name) {
    NameFacts facts;
    facts.basename = info.basename;
    facts.size_label = info.size_label;
    facts.finetune = info.finetune;
    facts.general_name = info.name;
    facts.quantization = quantization_of(info);
    facts.file_name = info.path.filename().string();
    facts.other_name = other_name;
    return display_name(facts);
}

std::string model_summary_json(const ModelInfo& info, const std::string& other_name) {
    nlohmann::json j = {{"name", info.name},
                        {"display_name", model_display_name(info, other_name)},
                        {"basename", info.basename},
                        {"size_label", info.size_label},
                        {"finetune", info.finetune},
                        {"quantization", quantization_of(info)},
                        {"architecture", info.architecture},
                        {"file_type", info.file_type},
                        {"n_params", info.n_params},
                        {"n_layer", info.n_layer},
                        {"n_ctx_train", info.n_ctx_train},
                        {"has_chat_template", info.has_chat_template},
                        {"parts", info.files.size()},
                        {"weight_bytes", info.weight_bytes}};
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // metadata may not be UTF-8
}

store::ModelRecord inspect_file(const fs::path& file, const std::string& folder, const std::string& source,
                                const std::string& source_name) {
    store::ModelRecord r;
    r.path = file.string();
    r.folder = folder;
    r.source = source;
    r.source_name = source_name;
    r.file_size = size_of(file);
    r.mtime_ns = mtime_ns(file);
    // Even a file that cannot be read is listed under a name a person can read.
    NameFacts facts;
    facts.file_name = file.filename().string();
    facts.other_name = source_name;
    r.info_json = nlohmann::json{{"display_name", display_name(facts)}}.dump(-1, ' ', false,
                                                                             nlohmann::json::error_handler_t::replace);
    if (const auto part = split_part(file); part && part->index != 1) {
        r.problem = fmt::format("part {} of {} of a split model: open its first part ({})", part->index, part->count,
                                fmt::format("-00001-of-{:05}.gguf", part->count));
        return r;
    }
    Result<ModelInfo> info = inspect_model(file);
    if (!info) {
        r.problem = info.error().message;
        return r;
    }
    r.file_size = static_cast<int64_t>(info->file_size);
    r.info_json = model_summary_json(*info, source_name);
    if (Result<void> runnable = check_runnable(file); !runnable) {
        r.problem = runnable.error().message;
        return r;
    }
    r.ok = true;
    return r;
}

std::string record_display_name(const store::ModelRecord& record) {
    try {
        const nlohmann::json j = nlohmann::json::parse(record.info_json);
        if (j.is_object() && j.contains("display_name") && j["display_name"].is_string()) {
            std::string name = j["display_name"].get<std::string>();
            if (!name.empty()) return name;
        }
    } catch (const nlohmann::json::exception&) {
        // a record written by hand or damaged: fall back to the file name
    }
    return fs::path(record.path).filename().string();
}

Result<std::vector<fs::path>> find_model_files(const fs::path& folder, bool recursive) {
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) {
        return make_error(ErrorCode::io, fmt::format("{} is not a folder (or cannot be read)", folder.string()));
    }
    std::vector<fs::path> files;
    const auto consider = [&](const fs::directory_entry& entry) {
        std::error_code type_ec;
        if (!entry.is_regular_file(type_ec) || !is_gguf(entry.path())) return;
        // Later parts of a split model belong to its first part, when that is there.
        if (const auto part = split_part(entry.path()); part && part->index != 1) {
            const std::string first = std::regex_replace(entry.path().string(), std::regex(R"(-\d{5}-of-)"),
                                                         std::string("-00001-of-"));
            if (fs::exists(first, type_ec)) return;
        }
        files.push_back(entry.path());
    };
    if (recursive) {
        fs::recursive_directory_iterator it(folder, fs::directory_options::skip_permission_denied, ec);
        if (ec) return make_error(ErrorCode::io, fmt::format("cannot read {}: {}", folder.string(), ec.message()));
        for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
            if (ec) {
                ec.clear();
                continue;  // an unreadable entry: skip it, go on with the rest
            }
            consider(*it);
        }
    } else {
        fs::directory_iterator it(folder, ec);
        if (ec) return make_error(ErrorCode::io, fmt::format("cannot read {}: {}", folder.string(), ec.message()));
        for (const fs::directory_iterator end; it != end; it.increment(ec)) {
            if (ec) break;
            consider(*it);
        }
    }
    std::sort(files.begin(), files.end());
    return files;
}

Result<ScanReport> sync_folder(store::Store& store, const std::string& key, const std::vector<FoundModel>& found_models) {
    Result<std::vector<std::string>> hidden_list = store.hidden_models();
    if (!hidden_list) return hidden_list.error();
    const std::set<std::string> hidden(hidden_list->begin(), hidden_list->end());
    ScanReport report;
    std::set<std::string> found;
    for (const FoundModel& model : found_models) {
        const std::string path = model.path.string();
        if (hidden.count(path) != 0 || !found.insert(path).second) continue;
        Result<std::optional<store::ModelRecord>> known = store.model_by_path(path);
        if (!known) return known.error();
        // What a record was made as stays: a verified download, and an import while it
        // stays in its folder; anything else is named by the scan that finds it.
        std::string source = model.source;
        if (*known && ((*known)->source == "downloaded" || ((*known)->source == "imported" && (*known)->folder == key))) {
            source = (*known)->source;
        }
        // A file whose modification time is the one recorded keeps its record (a split
        // model: its first part's time).
        if (*known && (*known)->mtime_ns == mtime_ns(model.path) && (*known)->folder == key) {
            ++report.unchanged;
            if (!(*known)->ok) ++report.unusable;
            if ((*known)->source != source || (*known)->source_name != model.source_name) {
                store::ModelRecord renamed = **known;
                renamed.source = source;
                renamed.source_name = model.source_name;
                if (Result<store::ModelRecord> put = store.put_model(renamed); !put) return put.error();
            }
            continue;
        }
        store::ModelRecord record = inspect_file(model.path, key, source, model.source_name);
        if (*known) record.sha256 = (*known)->sha256;
        if (Result<store::ModelRecord> put = store.put_model(record); !put) return put.error();
        ++(*known ? report.updated : report.added);
        if (!record.ok) ++report.unusable;
    }
    Result<std::vector<store::ModelRecord>> all = store.models();
    if (!all) return all.error();
    for (const store::ModelRecord& r : *all) {
        if (r.folder == key && found.count(r.path) == 0) {
            if (Result<void> removed = store.remove_model(r.path); !removed) return removed.error();
            ++report.removed;
        }
    }
    return report;
}

Result<ScanReport> scan_folder(store::Store& store, const fs::path& folder) {
    Result<std::vector<fs::path>> files = find_model_files(folder);
    if (!files) return files.error();
    std::vector<FoundModel> found;
    for (const fs::path& file : *files) found.push_back(FoundModel{file, "folder", {}});
    return sync_folder(store, folder.string(), found);
}

namespace {

// Copies `from` to `to` through a temporary name, so that `to` is whole or absent.
Result<void> copy_whole(const fs::path& from, const fs::path& to) {
    const fs::path tmp = to.string() + ".copying";
    std::error_code ec;
    fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
    if (ec) {
        fs::remove(tmp, ec);
        return make_error(ErrorCode::io, fmt::format("cannot copy {} to {}: {}", from.string(), to.string(), ec.message()));
    }
    fs::rename(tmp, to, ec);
    if (ec) {
        fs::remove(tmp, ec);
        return make_error(ErrorCode::io, fmt::format("cannot rename {}: {}", tmp.string(), ec.message()));
    }
    return {};
}

}  // namespace

Result<store::ModelRecord> import_model(store::Store& store, const fs::path& file, ImportMode mode,
                                        const fs::path& library) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
        return make_error(ErrorCode::invalid_argument, fmt::format("{} is not a file", file.string()));
    }
    if (!is_gguf(file)) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("{} is not a GGUF model (a .gguf file); models for Powerhouse are GGUF files, "
                                      "as on Hugging Face under \"GGUF\"",
                                      file.filename().string()));
    }
    fs::path target = fs::absolute(file, ec);
    if (mode != ImportMode::in_place) {
        // Every part of a split model goes along.
        std::vector<fs::path> parts = {file};
        if (Result<ModelInfo> info = inspect_model(file); info && info->files.size() > 1) parts = info->files;
        fs::create_directories(library, ec);
        if (ec) return make_error(ErrorCode::io, fmt::format("cannot create {}: {}", library.string(), ec.message()));
        for (const fs::path& part : parts) {
            const fs::path to = library / part.filename();
            if (fs::exists(to, ec)) {
                if (fs::equivalent(part, to, ec)) continue;
                return make_error(ErrorCode::invalid_argument,
                                  fmt::format("the library already has a file named {}", to.filename().string()));
            }
            if (mode == ImportMode::move) {
                fs::rename(part, to, ec);
                if (!ec) continue;  // else another file system: copy, then remove the original
            }
            if (Result<void> copied = copy_whole(part, to); !copied) return copied.error();
            if (mode == ImportMode::move) fs::remove(part, ec);
        }
        target = library / file.filename();
    }
    // An explicit import brings back a file the user had forgotten.
    if (Result<void> shown = store.unhide_model(target.string()); !shown) return shown.error();
    store::ModelRecord record =
        inspect_file(target, mode == ImportMode::in_place ? std::string() : library.string(), "imported");
    return store.put_model(record);
}

int64_t mtime_ns(const fs::path& p) {
    std::error_code ec;
    const auto t = fs::last_write_time(p, ec);
    if (ec) return 0;
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace powerhouse::catalog
