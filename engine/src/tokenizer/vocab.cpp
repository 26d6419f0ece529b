#include "tokenizer/vocab.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "tokenizer/byte_level.h"
#include "tokenizer/special_tokens.h"

namespace powerhouse {

namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kPreKey = "tokenizer.ggml.pre";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";
constexpr std::string_view kAddSpacePrefixKey = "tokenizer.ggml.add_space_prefix";
// llama.cpp's spelling.
constexpr std::string_view kSeparatorKey = "tokenizer.ggml.seperator_token_id";
constexpr std::string_view kLowercaseKey = "tokenizer.ggml.normalizer.lowercase";
constexpr std::string_view kStripAccentsKey = "tokenizer.ggml.normalizer.strip_accents";

uint16_t attr_of_type(int32_t type) {
    switch (static_cast<GgufTokenType>(type)) {
        case GgufTokenType::normal:
            return token_attr::normal;
        case GgufTokenType::unknown:
            return token_attr::unknown;
        case GgufTokenType::control:
            return token_attr::control;
        case GgufTokenType::user_defined:
            return token_attr::user_defined;
        case GgufTokenType::unused:
            return token_attr::unused;
        case GgufTokenType::byte:
            return token_attr::byte;
        case GgufTokenType::undefined:
            return token_attr::undefined;
    }
    return token_attr::undefined;
}

Error format_error(std::string message) {
    return make_error(ErrorCode::format, std::move(message));
}

Result<void> read_tokens(const GgufMetadata& m, Vocab& v) {
    const GgufArray* tokens = m.get_array(kTokensKey);
    if (tokens == nullptr) {
        return format_error(m.contains(kTokensKey)
                                ? fmt::format("{} is not an array", kTokensKey)
                                : fmt::format("the file has no vocabulary ({} is missing)", kTokensKey));
    }
    if (tokens->element_type != GgufValueType::string) {
        return format_error(fmt::format("{} must be an array of strings, not of {}", kTokensKey,
                                        gguf_value_type_name(tokens->element_type)));
    }
    if (tokens->strings.empty()) return format_error(fmt::format("{} is empty", kTokensKey));
    if (tokens->strings.size() > static_cast<size_t>(std::numeric_limits<TokenId>::max())) {
        return format_error(
            fmt::format("{} has {} entries, more than token ids can number", kTokensKey, tokens->strings.size()));
    }
    const size_t n = tokens->strings.size();
    v.n_tokens = static_cast<int32_t>(n);

    const GgufArray* scores = m.get_array(kScoresKey);
    if (m.contains(kScoresKey)) {
        if (scores == nullptr ||
            (scores->element_type != GgufValueType::f32 && scores->element_type != GgufValueType::i32)) {
            return format_error(fmt::format("{} must be an array of float32 (or int32)", kScoresKey));
        }
        if (scores->count < n) {
            return format_error(fmt::format("{} has {} entries for {} tokens", kScoresKey, scores->count, n));
        }
    }
    const GgufArray* types = m.get_array(kTypesKey);
    if (m.contains(kTypesKey)) {
        if (types == nullptr || types->element_type != GgufValueType::i32) {
            return format_error(fmt::format("{} must be an array of int32", kTypesKey));
        }
        if (types->count < n) {
            return format_error(fmt::format("{} has {} entries for {} tokens", kTypesKey, types->count, n));
        }
    }

    size_t total = 0;
    for (std::string_view s : tokens->strings) total += s.size();
    if (total > std::numeric_limits<uint32_t>::max()) {
        return format_error(fmt::format("{}: token texts total {} bytes, too many", kTokensKey, total));
    }
    v.text_storage.reserve(total);
    v.text_offsets.reserve(n + 1);
    v.attrs.resize(n, token_attr::normal);
    v.scores.resize(n, 0.0f);
    v.text_offsets.push_back(0);
    for (size_t i = 0; i < n; ++i) {
        const std::string_view s = tokens->strings[i];
        v.text_storage.insert(v.text_storage.end(), s.begin(), s.end());
        v.text_offsets.push_back(static_cast<uint32_t>(v.text_storage.size()));
        v.max_token_bytes = std::max(v.max_token_bytes, s.size());
        if (scores != nullptr) {
            v.scores[i] = scores->element_type == GgufValueType::f32 ? scores->at<float>(i)
                                                                     : static_cast<float>(scores->at<int32_t>(i));
        }
        if (types != nullptr) v.attrs[i] = attr_of_type(types->at<int32_t>(i));
    }
    // Only now that the storage no longer moves may views point into it.
    v.token_to_id.build(v.n_tokens, [&v](TokenId id) { return v.text(id); });
    return {};
}

void find_byte_tokens(Vocab& v) {
    for (int b = 0; b < 256; ++b) {
        std::optional<TokenId> id;
        if (v.is_wpm) {
            // WordPiece has no byte tokens: what it cannot spell is unknown.
        } else if (v.is_spm) {
            id = v.find(fmt::format("<0x{:02X}>", b));
            if (!id) id = v.find(std::string(1, static_cast<char>(b)));
        } else {
            id = v.find(gpt2_byte_text(static_cast<uint8_t>(b)));
        }
        v.byte_token[static_cast<size_t>(b)] = id.value_or(-1);
    }
}

// BERT's conventional ids ([UNK] 100, [CLS] 101, [SEP] 102, [PAD] 0) unless the file names
// others (tokenizer.ggml.bos_token_id is [CLS]); the normalizer's switches.
void read_wpm_settings(const GgufMetadata& m, Vocab& v) {
    const auto in_range = [&v](TokenId id) { return v.valid(id) ? std::optional<TokenId>(id) : std::nullopt; };
    v.bos = in_range(101);
    v.unk = in_range(100);
    v.pad = in_range(0);
    v.sep = in_range(102);
    if (const auto id = m.get_uint(kSeparatorKey); id && *id < static_cast<uint64_t>(v.n_tokens)) {
        v.sep = static_cast<TokenId>(*id);
    }
    v.wpm_lowercase = m.get_bool(kLowercaseKey).value_or(true);
    v.wpm_strip_accents = m.get_bool(kStripAccentsKey).value_or(v.wpm_lowercase);
}

}  // namespace

Result<Vocab> load_vocab(const GgufMetadata& m) {
    Vocab v;
    const std::optional<std::string_view> model = m.get_string(kModelKey);
    if (!model) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("the file has no tokenizer ({} is missing or not a string)", kModelKey));
    }
    v.model_name = std::string(*model);
    if (*model == "llama") {
        v.is_spm = true;
    } else if (*model == "gpt2") {
        v.is_spm = false;
    } else if (*model == "bert") {
        v.is_wpm = true;
    } else {
        return make_error(ErrorCode::unsupported,
                          fmt::format("{} '{}' is not supported (supported: 'llama' = SentencePiece, 'gpt2' = "
                                      "byte-level BPE, 'bert' = WordPiece)",
                                      kModelKey, *model));
    }
    if (const auto pre = m.get_string(kPreKey)) v.pre_name = std::string(*pre);

    if (v.is_wpm) {
        // WordPiece has one pre-tokenizer, whatever tokenizer.ggml.pre says ("bert-bge",
        // "jina-v2-en", ...); a prompt is [CLS] text [SEP].
        v.add_bos = true;
        v.add_space_prefix = false;
    } else if (!v.is_spm) {
        if (v.pre_name.empty()) {
            return make_error(ErrorCode::unsupported,
                              fmt::format("{} is missing: the byte-level BPE vocabulary does not say which "
                                          "pre-tokenizer splits its text (supported: {})",
                                          kPreKey, supported_pre_tokenizer_names()));
        }
        const std::optional<PreTokenizerSpec> spec = pre_tokenizer_for_name(v.pre_name);
        if (!spec) {
            return make_error(ErrorCode::unsupported, fmt::format("{} '{}' is not supported (supported: {})", kPreKey,
                                                                  v.pre_name, supported_pre_tokenizer_names()));
        }
        v.pre = *spec;
        v.add_bos = spec->add_bos_default;
        v.add_space_prefix = false;
    } else {
        v.add_bos = true;
        v.add_space_prefix = true;
    }
    if (const auto prefix = m.get_bool(kAddSpacePrefixKey)) v.add_space_prefix = *prefix;

    PH_TRY(read_tokens(m, v));
    find_byte_tokens(v);
    if (v.is_wpm) read_wpm_settings(m, v);
    resolve_special_tokens(m, v);
    return v;
}

}  // namespace powerhouse
