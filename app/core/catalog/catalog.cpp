#include "catalog/catalog.h"

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

int64_t mtime_ns(const fs::path& p) {
    std::error_code ec;
    const auto t = fs::last_write_time(p, ec);
    if (ec) return 0;
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

int64_t size_of(const fs::path& p) {
    std::error_code ec;
    const auto n = fs::file_size(p, ec);
    return ec ? 0 : static_cast<int64_t>(n);
}

}  // namespace

std::string model_summary_json(const ModelInfo& info) {
    nlohmann::json j = {{"name", info.name},
                        {"architecture", info.architecture},
                        {"file_type", info.file_type},
                        {"n_params", info.n_params},
                        {"n_layer", info.n_layer},
                        {"n_ctx_train", info.n_ctx_train},
                        {"has_chat_template", info.has_chat_template},
                        {"parts", info.files.size()},
                        {"weight_bytes", info.weight_bytes}};
    return j.dump();
}

store::ModelRecord inspect_file(const fs::path& file, const std::string& folder) {
    store::ModelRecord r;
    r.path = file.string();
    r.folder = folder;
    r.file_size = size_of(file);
    r.mtime_ns = mtime_ns(file);
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
    r.info_json = model_summary_json(*info);
    if (Result<void> runnable = check_runnable(file); !runnable) {
        r.problem = runnable.error().message;
        return r;
    }
    r.ok = true;
    return r;
}

Result<ScanReport> scan_folder(store::Store& store, const fs::path& folder) {
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) {
        return make_error(ErrorCode::io, fmt::format("{} is not a folder (or cannot be read)", folder.string()));
    }
    const std::string key = folder.string();
    ScanReport report;
    std::set<std::string> found;
    fs::recursive_directory_iterator it(folder, fs::directory_options::skip_permission_denied, ec);
    if (ec) return make_error(ErrorCode::io, fmt::format("cannot read {}: {}", key, ec.message()));
    for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
        if (ec) {
            ec.clear();
            continue;  // an unreadable entry: skip it, go on with the rest
        }
        std::error_code type_ec;
        if (!it->is_regular_file(type_ec) || !is_gguf(it->path())) continue;
        const auto part = split_part(it->path());
        // Later parts of a split model belong to its first part, when that is there.
        if (part && part->index != 1) {
            const std::string first = std::regex_replace(it->path().string(), std::regex(R"(-\d{5}-of-)"),
                                                         fmt::format("-00001-of-"));
            if (fs::exists(first, type_ec)) continue;
        }
        const fs::path path = it->path();
        found.insert(path.string());
        Result<std::optional<store::ModelRecord>> known = store.model_by_path(path.string());
        if (!known) return known.error();
        // A file whose modification time is the one recorded keeps its record (a split
        // model: its first part's time).
        if (*known && (*known)->mtime_ns == mtime_ns(path) && (*known)->folder == key) {
            ++report.unchanged;
            if (!(*known)->ok) ++report.unusable;
            continue;
        }
        store::ModelRecord record = inspect_file(path, key);
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
    store::ModelRecord record = inspect_file(target, mode == ImportMode::in_place ? std::string() : library.string());
    return store.put_model(record);
}

}  // namespace powerhouse::catalog
