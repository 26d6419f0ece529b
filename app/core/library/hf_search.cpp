#include "library/hf_search.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace powerhouse::library {
namespace {

// A listing or a search that is still going after this many pages is not one a person
// reads; stopping bounds what a misbehaving server can make us fetch.
constexpr int kMaxPages = 100;

// A count the Hub sends as a JSON integer; some encoders write 12.0, which is taken too.
Result<uint64_t> read_count(const nlohmann::json& entry, const char* field, const std::string& id) {
    if (!entry.contains(field) || entry[field].is_null()) return uint64_t{0};
    const nlohmann::json& value = entry[field];
    if (value.is_number_unsigned()) return value.get<uint64_t>();
    if (value.is_number_float() && value.get<double>() >= 0 && value.get<double>() < 1.8e19) {
        return static_cast<uint64_t>(value.get<double>());
    }
    return make_error(ErrorCode::format,
                      fmt::format("model '{}': {} is not a count (it is {})", id, field, value.dump()));
}

Result<std::string> read_string(const nlohmann::json& entry, const char* field, const std::string& id) {
    if (!entry.contains(field) || entry[field].is_null()) return std::string();
    if (!entry[field].is_string()) {
        return make_error(ErrorCode::format,
                          fmt::format("model '{}': {} is not a string (it is {})", id, field, entry[field].dump()));
    }
    return entry[field].get<std::string>();
}

bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
}

bool valid_name(std::string_view name) {
    return !name.empty() && name.size() <= 96 && name.front() != '.' && name.front() != '-' &&
           std::all_of(name.begin(), name.end(), is_name_char);
}

}  // namespace

std::string HfModelSummary::updated_date() const {
    const std::string& date = last_modified.empty() ? created_at : last_modified;
    return date.substr(0, std::min<size_t>(date.size(), 10));
}

std::string percent_encode_query_value(std::string_view value) { return percent_encode(value); }

std::string hf_search_url(std::string_view query, int limit, std::string_view endpoint) {
    limit = std::clamp(limit, 1, kMaxHfSearchLimit);
    std::string url = fmt::format("{}/api/models?search={}&filter=gguf&sort=downloads&direction=-1&limit={}",
                                  trim_endpoint(endpoint), percent_encode_query_value(query), limit);
    for (const char* field :
         {"downloads", "likes", "lastModified", "createdAt", "gated", "tags", "pipeline_tag", "private"}) {
        url += "&expand=";
        url += field;
    }
    return url;
}

Result<std::vector<HfModelSummary>> parse_hf_search(std::string_view text) {
    const nlohmann::json json = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded()) return make_error(ErrorCode::format, "the Hugging Face search's answer is not JSON");
    if (json.is_object() && json.contains("error") && json["error"].is_string()) {
        return make_error(ErrorCode::format,
                          fmt::format("the Hugging Face search answered: {}", json["error"].get<std::string>()));
    }
    if (!json.is_array()) {
        return make_error(ErrorCode::format, "the Hugging Face search's answer is not a list of models");
    }
    std::vector<HfModelSummary> models;
    for (size_t i = 0; i < json.size(); ++i) {
        const nlohmann::json& entry = json[i];
        if (!entry.is_object()) {
            return make_error(ErrorCode::format, fmt::format("search result {} is not an object", i));
        }
        if (!entry.contains("id") || !entry["id"].is_string() || entry["id"].get<std::string>().empty()) {
            return make_error(ErrorCode::format, fmt::format("search result {} has no id", i));
        }
        HfModelSummary model;
        model.id = entry["id"].get<std::string>();
        auto downloads = read_count(entry, "downloads", model.id);
        if (!downloads) return std::move(downloads).error();
        model.downloads = *downloads;
        auto likes = read_count(entry, "likes", model.id);
        if (!likes) return std::move(likes).error();
        model.likes = *likes;
        for (auto [field, target] : {std::pair{"lastModified", &model.last_modified},
                                     std::pair{"createdAt", &model.created_at},
                                     std::pair{"pipeline_tag", &model.pipeline_tag}}) {
            auto value = read_string(entry, field, model.id);
            if (!value) return std::move(value).error();
            *target = std::move(value).value();
        }
        // gated: false for open repositories, else how access is granted ("auto", "manual").
        if (entry.contains("gated") && !entry["gated"].is_null()) {
            const nlohmann::json& gated = entry["gated"];
            if (gated.is_string()) {
                model.gated = gated.get<std::string>();
            } else if (gated.is_boolean()) {
                model.gated = gated.get<bool>() ? "yes" : "";
            } else {
                return make_error(ErrorCode::format,
                                  fmt::format("model '{}': gated is neither false nor a kind of gate (it is {})",
                                              model.id, gated.dump()));
            }
        }
        if (entry.contains("private") && entry["private"].is_boolean()) model.is_private = entry["private"].get<bool>();
        if (entry.contains("tags") && !entry["tags"].is_null()) {
            if (!entry["tags"].is_array()) {
                return make_error(ErrorCode::format, fmt::format("model '{}': tags is not a list", model.id));
            }
            for (const nlohmann::json& tag : entry["tags"]) {
                if (!tag.is_string()) {
                    return make_error(ErrorCode::format,
                                      fmt::format("model '{}': a tag is not a string (it is {})", model.id, tag.dump()));
                }
                model.tags.push_back(tag.get<std::string>());
            }
        }
        models.push_back(std::move(model));
    }
    return models;
}

Result<HfSearchResult> search_hf_models(std::string_view query, int limit, std::string_view endpoint,
                                        const DownloadOptions& options) {
    limit = std::clamp(limit, 1, kMaxHfSearchLimit);
    HfSearchResult result;
    std::optional<std::string> page = hf_search_url(query, limit, endpoint);
    while (page && static_cast<int>(result.models.size()) < limit) {
        if (result.pages == kMaxPages) {
            result.more = true;
            break;
        }
        Result<TextResponse> answer = fetch_text(*page, options);
        if (!answer) return std::move(answer).error();
        ++result.pages;
        Result<std::vector<HfModelSummary>> models = parse_hf_search(answer->body);
        if (!models) return std::move(models).error();
        for (HfModelSummary& model : *models) {
            if (static_cast<int>(result.models.size()) == limit) {
                result.more = true;
                break;
            }
            result.models.push_back(std::move(model));
        }
        page = next_page_url(answer->link_header);
        // A page without results that names a next one would go round for ever.
        if (models->empty()) break;
    }
    if (page && static_cast<int>(result.models.size()) >= limit) result.more = true;
    return result;
}

std::optional<HfRepo> parse_hf_repo_id(std::string_view id) {
    const size_t slash = id.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    const std::string_view owner = id.substr(0, slash);
    const std::string_view name = id.substr(slash + 1);
    if (!valid_name(owner) || !valid_name(name)) return std::nullopt;
    return HfRepo{std::string(owner), std::string(name), "main"};
}

Result<std::vector<HfFile>> list_hf_gguf_files(const HfRepo& repo, std::string_view endpoint,
                                               const DownloadOptions& options) {
    std::vector<HfFile> files;
    std::optional<std::string> page = hf_tree_api_url(repo, endpoint);
    for (int pages = 0; page; ++pages) {
        if (pages == kMaxPages) {
            return make_error(ErrorCode::format, fmt::format("{}/{} lists more than {} pages of files; stopped there",
                                                             repo.org, repo.repo, kMaxPages));
        }
        Result<TextResponse> answer = fetch_text(*page, options);
        if (!answer) return std::move(answer).error();
        Result<std::vector<HfFile>> listed = parse_hf_tree_gguf_files(answer->body);
        if (!listed) return std::move(listed).error();
        files.insert(files.end(), std::make_move_iterator(listed->begin()), std::make_move_iterator(listed->end()));
        page = next_page_url(answer->link_header);
    }
    return files;
}

std::string hf_access_message(std::string_view repo_id, std::optional<long> status, bool token_sent, HubClient client,
                              std::string_view endpoint) {
    const std::string page = fmt::format("{}/{}", trim_endpoint(endpoint), repo_id);
    const bool app = client == HubClient::app;
    if (token_sent && status == 401) {
        return fmt::format("The Hugging Face token was refused (HTTP 401) for {}: make a new one at {}/settings/tokens "
                           "and {}",
                           repo_id, trim_endpoint(endpoint),
                           app ? "save it in Settings" : "set HF_TOKEN (or --hf-token-file FILE) to it");
    }
    if (token_sent) {
        return fmt::format("Your Hugging Face token has no access to {}{}: accept its terms at {} (a repository gated "
                           "by hand also waits for its authors' approval), and check that the token may read gated "
                           "repositories",
                           repo_id, status ? fmt::format(" (HTTP {})", *status) : std::string(), page);
    }
    const std::string then = app ? "then add your Hugging Face token in Settings"
                                 : "then set HF_TOKEN (or --hf-token-file FILE) to your Hugging Face token";
    if (status) {
        return fmt::format("{} needs a Hugging Face token (HTTP {}: it is gated or private): accept its terms at {}, {}",
                           repo_id, *status, page, then);
    }
    return fmt::format("{} is gated: accept its terms at {}, {}", repo_id, page, then);
}

Error explain_hf_refusal(Error error, std::string_view repo_id, bool token_sent, HubClient client,
                         std::string_view endpoint) {
    const std::optional<long> status = http_status_of(error);
    if (status != 401 && status != 403) return error;
    return Error{error.code, hf_access_message(repo_id, status, token_sent, client, endpoint)};
}

std::string hf_token_from_environment() {
    const char* value = std::getenv("HF_TOKEN");
    std::string_view token = value != nullptr ? value : "";
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front()))) token.remove_prefix(1);
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.remove_suffix(1);
    return std::string(token);
}

}  // namespace powerhouse::library
