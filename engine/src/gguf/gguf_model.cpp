#include "gguf/gguf_model.h"

#include <fmt/format.h>

#include <charconv>
#include <regex>

namespace powerhouse {

std::optional<SplitName> parse_split_name(const std::filesystem::path& path) {
    static const std::regex pattern(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
    const std::string name = path.filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, pattern)) return std::nullopt;
    SplitName split;
    split.prefix = path.parent_path() / m[1].str();
    split.index = std::stoi(m[2].str());
    split.count = std::stoi(m[3].str());
    if (split.index < 1 || split.count < 1 || split.index > split.count) return std::nullopt;
    return split;
}

std::filesystem::path split_path(const std::filesystem::path& prefix, int index, int count) {
    std::filesystem::path path = prefix;
    path += fmt::format("-{:05d}-of-{:05d}.gguf", index, count);
    return path;
}

namespace {

// split.count of a part: 1 when the keys are absent (a single file).
Result<int> declared_split_count(const GgufFile& file) {
    if (!file.metadata().contains(kSplitCountKey)) return 1;
    const auto count = file.metadata().get_uint(kSplitCountKey);
    if (!count || *count == 0 || *count > 99999) {
        return make_error(ErrorCode::format, fmt::format("{}: {} must be an integer from 1 to 99999", file.name(),
                                                         kSplitCountKey));
    }
    return static_cast<int>(*count);
}

}  // namespace

Result<GgufModel> GgufModel::open(const std::filesystem::path& path) {
    Result<GgufFile> first = GgufFile::open(path);
    if (!first) return std::move(first).error();
    Result<int> count = declared_split_count(*first);
    if (!count) return std::move(count).error();
    if (*count == 1) {
        std::vector<GgufFile> parts;
        parts.push_back(std::move(first).value());
        return from_parts(std::move(parts));
    }

    const std::optional<SplitName> split = parse_split_name(path);
    if (!split || split->count != *count) {
        return make_error(ErrorCode::format,
                          fmt::format("{} is part of a model split into {} files, but its name does not follow the "
                                      "NAME-00001-of-{:05d}.gguf pattern, so the other parts cannot be found; restore "
                                      "the original file names",
                                      path.filename().string(), *count, *count));
    }
    std::vector<GgufFile> parts;
    for (int i = 1; i <= *count; ++i) {
        if (i == split->index) {
            parts.push_back(std::move(first).value());
            continue;
        }
        const std::filesystem::path part_path = split_path(split->prefix, i, *count);
        std::error_code ec;
        if (!std::filesystem::exists(part_path, ec)) {
            return make_error(ErrorCode::io, fmt::format("part {} of {} of this split model is missing: {} does not "
                                                         "exist; all parts must be in the same folder",
                                                         i, *count, part_path.string()));
        }
        Result<GgufFile> part = GgufFile::open(part_path);
        if (!part) return std::move(part).error();
        parts.push_back(std::move(part).value());
    }
    return from_parts(std::move(parts));
}

Result<GgufModel> GgufModel::from_parts(std::vector<GgufFile> parts) {
    if (parts.empty()) return make_error(ErrorCode::invalid_argument, "a model needs at least one file");
    GgufModel model;
    model.parts_ = std::move(parts);
    const int count = static_cast<int>(model.parts_.size());
    for (int i = 0; i < count; ++i) {
        GgufFile& part = model.parts_[static_cast<size_t>(i)];
        if (count > 1) {
            Result<int> declared = declared_split_count(part);
            if (!declared) return std::move(declared).error();
            const auto no = part.metadata().get_uint(kSplitNoKey);
            if (*declared != count || !no || *no != static_cast<uint64_t>(i)) {
                return make_error(ErrorCode::format,
                                  fmt::format("{}: expected part {} of {} ({}={}, {}={}), found {}={}, {}={}; the parts "
                                              "belong to different models or were renamed",
                                              part.name(), i + 1, count, kSplitNoKey, i, kSplitCountKey, count,
                                              kSplitNoKey, no ? fmt::format("{}", *no) : "absent", kSplitCountKey,
                                              *declared));
            }
        }
        for (GgufTensorInfo t : part.tensors()) {
            t.file_index = static_cast<uint32_t>(i);
            if (!model.by_name_.emplace(t.name, model.tensors_.size()).second) {
                return make_error(ErrorCode::format, fmt::format("{}: tensor '{}' also appears in an earlier part of "
                                                                 "the split model",
                                                                 part.name(), t.name));
            }
            model.tensors_.push_back(t);
        }
    }
    if (count > 1) {
        const auto expected = model.parts_.front().metadata().get_uint(kSplitTensorsCountKey);
        if (expected && *expected != model.tensors_.size()) {
            return make_error(ErrorCode::format,
                              fmt::format("{}: {} says the model has {} tensors but its {} parts hold {}",
                                          model.parts_.front().name(), kSplitTensorsCountKey, *expected, count,
                                          model.tensors_.size()));
        }
    }
    return model;
}

const GgufTensorInfo* GgufModel::find_tensor(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

uint64_t GgufModel::total_file_size() const {
    uint64_t total = 0;
    for (const GgufFile& part : parts_) total += part.file_size();
    return total;
}

uint64_t GgufModel::total_tensor_bytes() const {
    uint64_t total = 0;
    for (const GgufTensorInfo& t : tensors_) total += t.n_bytes;
    return total;
}

void GgufModel::release_pages(const std::byte* p, uint64_t n) const {
    for (const GgufFile& part : parts_) {
        if (part.mapping().contains(p, n)) return part.mapping().release_pages(p, n);
    }
}

}  // namespace powerhouse
