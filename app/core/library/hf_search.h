// Finding GGUF models on the Hugging Face Hub: the model search API and a repository's GGUF
// files across every page of its listing. The URL building and parsing are pure functions;
// search_hf_models() and list_hf_gguf_files() fetch through download.h's fetch_text (on the
// calling thread, with its retries), so the desktop calls them from a worker.
//
//   <endpoint>/api/models?search=<q>&filter=gguf&sort=downloads&direction=-1&limit=<n>
//       &expand=downloads&expand=likes&expand=lastModified&expand=createdAt&expand=gated
//       &expand=tags&expand=pipeline_tag&expand=private
//
// `search` matches a substring of the repository id (owner or name), `filter=gguf` keeps the
// repositories tagged gguf, `sort=downloads&direction=-1` puts the most downloaded first,
// `limit` caps one page (hub-docs "GET /api/models", huggingface_hub's HfApi.list_models).
// Without `expand` the Hub answers a default set of fields (id, downloads, likes, tags,
// pipeline_tag, createdAt, private, library_name...) that lacks lastModified and gated;
// with it, only the listed fields (and the id) come back, so the list names every field
// read here. The answer is a JSON array of objects; the fields relied on:
//   id            "owner/name" (required; the one field every answer has)
//   downloads     a count (the Hub counts the last 30 days)
//   likes         a count
//   lastModified  ISO 8601 date of the last commit
//   createdAt     ISO 8601 date the repository was made (2022-03-02T23:29:04.000Z for
//                 every repository older than the Hub's record of it)
//   gated         false, "auto" or "manual" (a gated repository wants the user to accept its
//                 terms, and a token, before its files download: HTTP 401/403)
//   tags, pipeline_tag, private
// Every field but `id` is optional: an answer without it still parses. More results than a
// page holds are named by a `Link: <url>; rel="next"` header, which is followed.
//
// Thread-safety: pure functions; the fetching ones share nothing between calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "library/download.h"
#include "library/hf_url.h"
#include "powerhouse/result.h"

namespace powerhouse::library {

// One repository of a search answer.
struct HfModelSummary {
    std::string id;  // "owner/name"
    uint64_t downloads = 0;
    uint64_t likes = 0;
    std::string last_modified;  // as the Hub writes it; "" when not sent
    std::string created_at;     // likewise
    std::string gated;          // "" (open), "auto" or "manual"
    bool is_private = false;
    std::string pipeline_tag;  // "text-generation", ...; "" when none
    std::vector<std::string> tags;

    // The date part of lastModified, else of createdAt: "2025-01-14"; "" when neither.
    std::string updated_date() const;
};

// Results per search: the Hub pages at most this many at once, and nobody reads more.
inline constexpr int kMaxHfSearchLimit = 1000;

// The query as one percent-encoded URL query value: unreserved characters (RFC 3986) kept,
// every other byte (space, '&', '=', '+', '#', UTF-8) as %XX.
std::string percent_encode_query_value(std::string_view value);

// The search URL above; `limit` is clamped to 1..kMaxHfSearchLimit.
std::string hf_search_url(std::string_view query, int limit, std::string_view endpoint = kHuggingFaceEndpoint);

// One page of the search answer. A malformed answer is an ErrorCode::format error that
// names what is wrong (and the Hub's own {"error": ...} message when it sent one).
Result<std::vector<HfModelSummary>> parse_hf_search(std::string_view json);

struct HfSearchResult {
    std::vector<HfModelSummary> models;  // at most the limit, in the Hub's order
    bool more = false;                   // the Hub has more than the limit
    int pages = 0;                       // requests made
};

// Searches, following the Link header until `limit` results or the last page (at most
// 100 pages). `options` gives the retries, timeouts, token and cancel flag.
Result<HfSearchResult> search_hf_models(std::string_view query, int limit, std::string_view endpoint,
                                        const DownloadOptions& options = {});

// "owner/name" -> the repository at revision "main"; nullopt for anything else (one
// segment, more than two, characters the Hub does not allow in names, "." or "..").
std::optional<HfRepo> parse_hf_repo_id(std::string_view id);

// Every .gguf file of a repository, from every page of the tree API (at most 100 pages of
// up to 1000 entries). Errors: fetch_text's (HTTP 404 for an unknown repository), and
// parse_hf_tree_gguf_files's.
Result<std::vector<HfFile>> list_hf_gguf_files(const HfRepo& repo, std::string_view endpoint,
                                               const DownloadOptions& options = {});

// Who shows a message about the Hub's token: where the user puts one differs.
enum class HubClient {
    app,  // Settings in the desktop app
    cli,  // HF_TOKEN or --hf-token-file
};

// What to tell a user about `repo_id` (on `endpoint`) when its files want a token: a gated
// repository (the search's `gated`: "auto", "manual") before anything was asked, or a 401 or
// 403 answer (`status`). Says what to do: accept the terms on the repository's page, then
// give a token, or, when `token_sent`, that the token was refused or lacks access.
std::string hf_access_message(std::string_view repo_id, std::optional<long> status, bool token_sent, HubClient client,
                              std::string_view endpoint = kHuggingFaceEndpoint);

// `error` of a request for `repo_id`'s files: a 401 or 403 reworded by hf_access_message
// (same code), anything else as it was.
Error explain_hf_refusal(Error error, std::string_view repo_id, bool token_sent, HubClient client,
                         std::string_view endpoint = kHuggingFaceEndpoint);

// The token the huggingface_hub tools read: $HF_TOKEN, else "" (whitespace trimmed).
std::string hf_token_from_environment();

}  // namespace powerhouse::library
