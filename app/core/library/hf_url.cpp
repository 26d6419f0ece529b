#include "library/hf_url.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <map>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "library/sha256.h"

namespace powerhouse::library {
namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string upper(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

bool ends_with_icase(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && lower(s.substr(s.size() - suffix.size())) == lower(suffix);
}

struct UrlParts {
    std::string scheme;     // lower case
    std::string host;       // lower case, with ":port" when given
    std::string_view path;  // from the first '/', without query and fragment
};

std::optional<UrlParts> split_url(std::string_view url) {
    const size_t scheme_end = url.find("://");
    if (scheme_end == std::string_view::npos) return std::nullopt;
    UrlParts parts;
    parts.scheme = lower(url.substr(0, scheme_end));
    if (parts.scheme != "http" && parts.scheme != "https") return std::nullopt;
    std::string_view rest = url.substr(scheme_end + 3);
    const size_t cut = rest.find_first_of("?#");
    if (cut != std::string_view::npos) rest = rest.substr(0, cut);
    const size_t slash = rest.find('/');
    parts.host = lower(rest.substr(0, slash));
    parts.path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    if (parts.host.empty() || parts.host.find('@') != std::string::npos) return std::nullopt;
    return parts;
}

// The path segments of `url` when it is on the endpoint's host; nullopt otherwise.
std::optional<std::vector<std::string>> endpoint_segments(std::string_view url, std::string_view endpoint) {
    const auto u = split_url(url);
    const auto e = split_url(endpoint);
    if (!u || !e) return std::nullopt;
    bool same_host = u->host == e->host;
    if (!same_host && e->host == "huggingface.co") same_host = u->host == "hf.co" || u->host == "www.huggingface.co";
    if (!same_host) return std::nullopt;
    std::vector<std::string> segments;
    std::string_view path = u->path;
    while (!path.empty()) {
        path.remove_prefix(1);  // the '/'
        const size_t next = path.find('/');
        const std::string_view segment = path.substr(0, next);
        if (!segment.empty()) segments.emplace_back(segment);
        if (next == std::string_view::npos) break;
        path = path.substr(next);
    }
    return segments;
}

// First path segments that are the site's own pages, never an organisation.
bool is_reserved(std::string_view first) {
    static constexpr std::array<std::string_view, 18> kReserved = {
        "api",    "datasets", "spaces", "docs",    "models", "organizations", "settings", "blog",  "collections",
        "papers", "login",    "join",   "pricing", "tasks",  "learn",         "chat",     "posts", "new"};
    return std::find(kReserved.begin(), kReserved.end(), first) != kReserved.end();
}


std::string_view file_name_of(std::string_view path) {
    const size_t slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool all_digits(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::optional<std::string> hf_resolve_url(std::string_view url, std::string_view endpoint) {
    const auto segments = endpoint_segments(url, endpoint);
    if (!segments || segments->size() < 5 || is_reserved((*segments)[0])) return std::nullopt;
    const std::string& kind = (*segments)[2];
    if (kind != "blob" && kind != "resolve") return std::nullopt;
    std::string out = trim_endpoint(endpoint) + "/" + (*segments)[0] + "/" + (*segments)[1] + "/resolve";
    for (size_t i = 3; i < segments->size(); ++i) out += "/" + (*segments)[i];
    return out;
}

std::optional<HfRepo> parse_hf_model_page(std::string_view url, std::string_view endpoint) {
    const auto segments = endpoint_segments(url, endpoint);
    if (!segments || segments->size() < 2 || is_reserved((*segments)[0])) return std::nullopt;
    HfRepo repo{(*segments)[0], (*segments)[1], "main"};
    if (segments->size() == 2) return repo;
    if ((*segments)[2] != "tree" || segments->size() < 4) return std::nullopt;
    repo.revision = (*segments)[3];
    return repo;
}

std::string hf_tree_api_url(const HfRepo& repo, std::string_view endpoint) {
    return fmt::format("{}/api/models/{}/{}/tree/{}?recursive=true", trim_endpoint(endpoint), repo.org, repo.repo,
                       repo.revision);
}

std::string percent_encode(std::string_view text) {
    std::string out;
    for (const char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~') {
            out += c;
        } else {
            out += fmt::format("%{:02X}", u);
        }
    }
    return out;
}

std::string hf_file_url(const HfRepo& repo, std::string_view path, std::string_view endpoint) {
    std::string out = fmt::format("{}/{}/{}/resolve/{}", trim_endpoint(endpoint), repo.org, repo.repo, repo.revision);
    size_t start = 0;
    while (start <= path.size()) {
        const size_t slash = path.find('/', start);
        const std::string_view segment =
            path.substr(start, slash == std::string_view::npos ? path.npos : slash - start);
        if (!segment.empty()) out += "/" + percent_encode(segment);
        if (slash == std::string_view::npos) break;
        start = slash + 1;
    }
    return out;
}

std::optional<std::string> next_page_url(std::string_view link_header) {
    // `<url>; rel="next", <url>; rel="prev"`: URLs are in angle brackets, so commas inside
    // them do not separate entries.
    size_t position = 0;
    while (true) {
        const size_t open = link_header.find('<', position);
        if (open == std::string_view::npos) return std::nullopt;
        const size_t close = link_header.find('>', open);
        if (close == std::string_view::npos) return std::nullopt;
        const size_t next_entry = link_header.find('<', close);
        const std::string params = lower(link_header.substr(
            close + 1, next_entry == std::string_view::npos ? std::string_view::npos : next_entry - close - 1));
        if (params.find("rel=\"next\"") != std::string::npos || params.find("rel=next") != std::string::npos) {
            return std::string(link_header.substr(open + 1, close - open - 1));
        }
        position = close + 1;
    }
}

Result<std::vector<HfFile>> parse_hf_tree_gguf_files(std::string_view text) {
    const nlohmann::json json = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded()) {
        return make_error(ErrorCode::format, "the Hugging Face API's answer is not JSON");
    }
    if (json.is_object() && json.contains("error") && json["error"].is_string()) {
        return make_error(ErrorCode::format,
                          fmt::format("the Hugging Face API answered: {}", json["error"].get<std::string>()));
    }
    if (!json.is_array()) return make_error(ErrorCode::format, "the Hugging Face API's answer is not a list of files");
    std::vector<HfFile> files;
    for (size_t i = 0; i < json.size(); ++i) {
        const nlohmann::json& entry = json[i];
        if (!entry.is_object()) return make_error(ErrorCode::format, fmt::format("entry {} is not an object", i));
        if (entry.contains("type") && entry["type"] != "file") continue;  // directories
        if (!entry.contains("path") || !entry["path"].is_string()) {
            return make_error(ErrorCode::format, fmt::format("entry {} has no path", i));
        }
        HfFile file;
        file.path = entry["path"].get<std::string>();
        if (!ends_with_icase(file.path, ".gguf")) continue;
        const nlohmann::json* size = entry.contains("size") ? &entry["size"] : nullptr;
        if (entry.contains("lfs") && entry["lfs"].is_object()) {
            const nlohmann::json& lfs = entry["lfs"];
            if (lfs.contains("size")) size = &lfs["size"];
            if (lfs.contains("oid") && lfs["oid"].is_string()) {
                const auto sha = normalize_sha256(lfs["oid"].get<std::string>());
                if (!sha) {
                    return make_error(ErrorCode::format, fmt::format("{}: the LFS oid '{}' is not a sha256", file.path,
                                                                     lfs["oid"].get<std::string>()));
                }
                file.sha256 = *sha;
            }
        }
        if (size == nullptr || !size->is_number_unsigned()) {
            return make_error(ErrorCode::format, fmt::format("{}: no size", file.path));
        }
        file.size = size->get<uint64_t>();
        files.push_back(std::move(file));
    }
    return files;
}

std::string gguf_quantization(std::string_view file_name) {
    // The name without the split suffix and the extension, upper case, in tokens between
    // '-', '.' and '/'. Quantization names have their own '_' inside ("Q4_K_M"), so a
    // token matches when it, or its end after a '_' ("MODEL_Q4_K_M"), is one whole name.
    std::string name(file_name);
    if (auto split = parse_gguf_split_name(name)) {
        name = split->base;
    } else if (ends_with_icase(name, ".gguf")) {
        name.resize(name.size() - 5);
    }
    name = upper(name);
    static const std::regex kName("I?Q[1-8](_(K|0|1|NL|XXS|XS|S|M|L|XL|4|8))*|TQ[12]_0|BF16|F16|F32|MXFP4");
    std::string found;
    std::string previous;
    size_t start = 0;
    while (start <= name.size()) {
        const size_t end = std::min(name.find_first_of("-./", start), name.size());
        const std::string token = name.substr(start, end - start);
        for (size_t p = 0; p < token.size(); ++p) {
            if (p > 0 && token[p - 1] != '_') continue;
            if (std::regex_match(token.begin() + static_cast<std::ptrdiff_t>(p), token.end(), kName)) {
                // Unsloth's "dynamic" quantizations: "UD-Q4_K_XL".
                found = (p == 0 && previous == "UD" ? "UD-" : "") + token.substr(p);
                break;
            }
        }
        previous = token;
        start = end + 1;
    }
    return found;
}

std::optional<GgufSplitName> parse_gguf_split_name(std::string_view file_name) {
    // "-00001-of-00003.gguf" is 20 characters.
    if (!ends_with_icase(file_name, ".gguf") || file_name.size() < 21) return std::nullopt;
    const std::string_view stem = file_name.substr(0, file_name.size() - 5);
    const std::string_view suffix = stem.substr(stem.size() - 15);  // "-00001-of-00003"
    if (suffix[0] != '-' || suffix.substr(6, 4) != "-of-") return std::nullopt;
    const std::string_view index = suffix.substr(1, 5);
    const std::string_view count = suffix.substr(10, 5);
    if (!all_digits(index) || !all_digits(count)) return std::nullopt;
    GgufSplitName split;
    split.base = std::string(stem.substr(0, stem.size() - 15));
    split.index = std::stoi(std::string(index));
    split.count = std::stoi(std::string(count));
    if (split.count < 1 || split.index < 1 || split.index > split.count) return std::nullopt;
    return split;
}

std::string gguf_split_file_name(const GgufSplitName& split, int index) {
    return fmt::format("{}-{:05d}-of-{:05d}.gguf", split.base, index, split.count);
}

std::vector<QuantizationGroup> group_gguf_models(const std::vector<HfFile>& files) {
    std::map<std::string, GgufModel> models;  // by name and part count
    for (const HfFile& file : files) {
        std::string name;
        int count = 1;
        if (auto split = parse_gguf_split_name(file.path)) {
            name = split->base;
            count = split->count;
        } else {
            name = file.path.substr(0, file.path.size() - 5);
        }
        GgufModel& model = models[name + "\n" + std::to_string(count)];
        model.name = name;
        model.expected_parts = count;
        model.quantization = gguf_quantization(file.path);
        model.parts.push_back(file);
        model.total_size += file.size;
    }
    std::map<std::string, QuantizationGroup> groups;
    for (auto& [key, model] : models) {
        std::sort(model.parts.begin(), model.parts.end(), [](const HfFile& a, const HfFile& b) {
            const auto sa = parse_gguf_split_name(file_name_of(a.path));
            const auto sb = parse_gguf_split_name(file_name_of(b.path));
            return (sa ? sa->index : 0) < (sb ? sb->index : 0);
        });
        QuantizationGroup& group = groups[model.quantization];
        group.quantization = model.quantization;
        group.models.push_back(std::move(model));
    }
    std::vector<QuantizationGroup> out;
    for (auto& [key, group] : groups) {
        std::sort(group.models.begin(), group.models.end(), [](const GgufModel& a, const GgufModel& b) {
            return a.total_size != b.total_size ? a.total_size < b.total_size : a.name < b.name;
        });
        out.push_back(std::move(group));
    }
    std::sort(out.begin(), out.end(), [](const QuantizationGroup& a, const QuantizationGroup& b) {
        const uint64_t sa = a.models.front().total_size;
        const uint64_t sb = b.models.front().total_size;
        return sa != sb ? sa < sb : a.quantization < b.quantization;
    });
    return out;
}

std::string hf_endpoint_from_environment() {
    const char* e = std::getenv("HF_ENDPOINT");
    return e != nullptr && e[0] != '\0' ? std::string(e) : std::string(kHuggingFaceEndpoint);
}

std::string trim_endpoint(std::string_view endpoint) {
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.remove_suffix(1);
    return std::string(endpoint);
}

}  // namespace powerhouse::library
