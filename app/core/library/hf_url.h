// Hugging Face URLs and file listings, as pure functions (no network here: the caller
// fetches with download.h's fetch_text, these only build URLs and read answers).
//
//   https://huggingface.co/<org>/<repo>/blob/<rev>/<path>     a file's web page
//   https://huggingface.co/<org>/<repo>/resolve/<rev>/<path>  the file's bytes (redirects
//                                                             to a CDN; sends X-Linked-Etag)
//   https://huggingface.co/<org>/<repo>[/tree/<rev>[/<dir>]]  the model's page
//   https://huggingface.co/api/models/<org>/<repo>/tree/<rev>?recursive=true
//       the repository's files as JSON: [{"type": "file", "path", "size",
//       "lfs": {"oid": <sha256>, "size", "pointerSize"}}, ...], in pages of up to 1000
//       entries, the next page named by a `Link: <url>; rel="next"` header.
//
// The endpoint ("https://huggingface.co") is a parameter, like huggingface_hub's
// HF_ENDPOINT, so that mirrors and a local test server work too; "hf.co" and
// "www.huggingface.co" are accepted for the default endpoint.
//
// GGUF files of a repository are grouped into models: a multi-part file
// ("<name>-00001-of-00003.gguf", llama.cpp's gguf-split naming) is one model, and models
// are grouped by the quantization named in the file name ("Q4_K_M", "IQ4_XS", "F16", ...).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/result.h"

namespace powerhouse::library {

inline constexpr std::string_view kHuggingFaceEndpoint = "https://huggingface.co";

// HF_ENDPOINT when it is set and not empty (a mirror, a test server), as huggingface_hub
// reads it; else kHuggingFaceEndpoint.
std::string hf_endpoint_from_environment();
// `endpoint` without its trailing slashes.
std::string trim_endpoint(std::string_view endpoint);

struct HfRepo {
    std::string org;
    std::string repo;
    std::string revision = "main";  // as written in the URL (percent-encoded, e.g. refs%2Fpr%2F1)
};

// A file page (".../blob/<rev>/<path>") becomes its download URL (".../resolve/<rev>/<path>");
// a download URL is returned as it is. Query and fragment are dropped. Anything else on the
// endpoint's host, or another host: nullopt.
std::optional<std::string> hf_resolve_url(std::string_view url, std::string_view endpoint = kHuggingFaceEndpoint);

// A model page ("<endpoint>/<org>/<repo>", optionally "/tree/<rev>[/<dir>]"): the repository.
// Not for file URLs, datasets, spaces or the site's own pages.
std::optional<HfRepo> parse_hf_model_page(std::string_view url, std::string_view endpoint = kHuggingFaceEndpoint);

// "<endpoint>/api/models/<org>/<repo>/tree/<rev>?recursive=true"
std::string hf_tree_api_url(const HfRepo& repo, std::string_view endpoint = kHuggingFaceEndpoint);

// `text` percent-encoded: every byte but RFC 3986's unreserved characters (letters, digits,
// '-', '.', '_', '~') as %XX. A path segment, or a query value.
std::string percent_encode(std::string_view text);

// "<endpoint>/<org>/<repo>/resolve/<rev>/<path>", the path percent-encoded per segment.
std::string hf_file_url(const HfRepo& repo, std::string_view path, std::string_view endpoint = kHuggingFaceEndpoint);

// The next page of a paginated API answer, from its Link header; nullopt on the last page.
std::optional<std::string> next_page_url(std::string_view link_header);

struct HfFile {
    std::string path;  // in the repository, e.g. "Q4_K_M/model-Q4_K_M-00001-of-00002.gguf"
    uint64_t size = 0;
    std::string sha256;  // the LFS object id; "" for files not in LFS
};

// The .gguf files of one page of the tree API's answer. A malformed answer is an
// ErrorCode::format error naming what is wrong.
Result<std::vector<HfFile>> parse_hf_tree_gguf_files(std::string_view json);

// The quantization a GGUF file name names, upper case: "Q4_K_M", "IQ4_XS", "Q8_0", "F16",
// "BF16", "UD-Q4_K_XL", "TQ1_0", "MXFP4"...; "" when none. The last one in the name wins
// ("model-F16-Q4_K_M.gguf" is Q4_K_M).
std::string gguf_quantization(std::string_view file_name);

// "<base>-00002-of-00005.gguf" -> {base, 2, 5}; nullopt for a file in one part.
struct GgufSplitName {
    std::string base;  // without the suffix and without ".gguf"
    int index = 0;     // 1-based
    int count = 0;
};
std::optional<GgufSplitName> parse_gguf_split_name(std::string_view file_name);
// The name of part `index` (1-based) of a split: "<base>-0000i-of-0000n.gguf".
std::string gguf_split_file_name(const GgufSplitName& split, int index);

struct GgufModel {
    std::string name;           // the path without ".gguf" and without a split suffix
    std::string quantization;   // gguf_quantization() of it; "" when it names none
    std::vector<HfFile> parts;  // in order; one entry for a single-file model
    int expected_parts = 1;     // from the split suffix
    uint64_t total_size = 0;
    bool complete() const { return static_cast<int>(parts.size()) == expected_parts; }
};

struct QuantizationGroup {
    std::string quantization;  // "" for models whose name names none
    std::vector<GgufModel> models;
};

// Joins split parts into models, and groups the models by quantization: groups ordered
// by their smallest model's size (small quantizations first), models by size then name.
std::vector<QuantizationGroup> group_gguf_models(const std::vector<HfFile>& files);

}  // namespace powerhouse::library
