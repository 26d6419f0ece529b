#include "powerhouse/tokenizer.h"

#include <fmt/format.h>

#include "gguf/gguf_model.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"
#include "tokenizer/wpm.h"

namespace powerhouse {
namespace {

void encode_spm(const Vocab& vocab, std::string_view text, bool after_special, std::vector<TokenId>& out) {
    std::string escaped;
    escaped.reserve(text.size() + text.size() / 4 + 3);
    if (vocab.add_space_prefix && after_special) escaped += kSpmSpace;
    for (char c : text) {
        if (c == ' ') {
            escaped += kSpmSpace;
        } else {
            escaped += c;
        }
    }
    spm_tokenize(vocab, escaped, out);
}

void encode_bpe(const Vocab& vocab, const BpeModel& bpe, std::string_view text, std::vector<TokenId>& out) {
    // The reference splits code points, not bytes, and re-encodes them: invalid bytes reach
    // the merges as U+FFFD.
    std::vector<uint32_t> cpts;
    cpts.reserve(text.size());
    decode_utf8_lenient(text, cpts);
    std::vector<CodepointFlags> flags(cpts.size());
    for (size_t i = 0; i < cpts.size(); ++i) flags[i] = CodepointFlags::of(cpts[i]);

    BpeScratch scratch;
    std::string word_bytes;
    auto word = [&](size_t begin, size_t end) {
        word_bytes.clear();
        for (size_t i = begin; i < end; ++i) append_utf8(word_bytes, cpts[i]);
        bpe.encode_word(vocab, word_bytes, out, scratch);
    };
    pre_tokenize(vocab.pre.kind, SplitText{cpts, flags}, PieceSink(word));
}

}  // namespace

void TokenizerImpl::encode_text(std::string_view text, bool after_special, std::vector<TokenId>& out) const {
    if (vocab.is_wpm) {
        wpm_tokenize(vocab, text, out);
    } else if (vocab.is_spm) {
        encode_spm(vocab, text, after_special, out);
    } else {
        encode_bpe(vocab, *bpe, text, out);
    }
}

Result<Tokenizer> tokenizer_from_metadata(const GgufMetadata& metadata) {
    Result<Vocab> vocab = load_vocab(metadata);
    if (!vocab) return std::move(vocab).error();
    std::optional<BpeModel> bpe;
    if (!vocab->is_spm && !vocab->is_wpm) {
        Result<BpeModel> model = BpeModel::build(*vocab, metadata);
        if (!model) return std::move(model).error();
        bpe = std::move(model).value();
    }
    return Tokenizer(std::make_shared<const TokenizerImpl>(std::move(vocab).value(), std::move(bpe)));
}

Result<Tokenizer> Tokenizer::load(const std::filesystem::path& gguf_file) {
    Result<GgufModel> model = GgufModel::open(gguf_file);
    if (!model) return std::move(model).error();
    Result<Tokenizer> tokenizer = tokenizer_from_metadata(model->metadata());
    if (!tokenizer) {
        Error error = std::move(tokenizer).error();
        error.message = fmt::format("{}: {}", gguf_file.string(), error.message);
        return error;
    }
    return tokenizer;
}

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : impl_(std::move(impl)) {}

std::vector<TokenId> Tokenizer::tokenize(std::string_view text, bool add_special, bool parse_special) const {
    const TextSegment segment{text, parse_special};
    return tokenize(std::span<const TextSegment>(&segment, 1), add_special);
}

std::vector<TokenId> Tokenizer::tokenize(std::span<const TextSegment> segments, bool add_special) const {
    const Vocab& vocab = impl_->vocab;
    std::vector<TokenId> out;
    // WordPiece: a prompt is always [CLS] ... [SEP] (llama.cpp ignores add_bos/add_eos there).
    if (add_special && (vocab.add_bos || vocab.is_wpm) && vocab.bos) out.push_back(*vocab.bos);

    std::vector<Fragment> fragments;
    for (const TextSegment& segment : segments)
        impl_->specials.partition(segment.text, segment.parse_special, fragments);

    bool after_special = true;
    std::string joined;
    for (size_t i = 0; i < fragments.size();) {
        if (fragments[i].is_token()) {
            out.push_back(fragments[i].token);
            after_special = true;
            ++i;
            continue;
        }
        // Plain text from consecutive segments is one text: a word may span segments.
        size_t j = i + 1;
        while (j < fragments.size() && !fragments[j].is_token()) ++j;
        std::string_view text = fragments[i].text;
        if (j > i + 1) {
            joined.clear();
            for (size_t k = i; k < j; ++k) joined += fragments[k].text;
            text = joined;
        }
        impl_->encode_text(text, after_special, out);
        after_special = false;
        i = j;
    }

    if (add_special && vocab.is_wpm) {
        if (vocab.sep) out.push_back(*vocab.sep);
    } else if (add_special && vocab.add_eos && vocab.eos) {
        out.push_back(*vocab.eos);
    }
    return out;
}

std::string Tokenizer::detokenize(std::span<const TokenId> ids, bool render_special) const {
    // The same rules as StreamingDetokenizer (tests hold them equal), without a string per token.
    std::string text;
    Utf8Sanitizer sanitizer;
    LeadingSpaceRule rule;
    for (TokenId id : ids) {
        if (!is_valid(id)) continue;
        sanitizer.push(rule.apply(impl_->vocab, true, id, impl_->pieces.piece(id, render_special)), text);
    }
    sanitizer.finish(text);
    // WordPiece: llama.cpp's clean-up, which needs the text that follows each space (so
    // StreamingDetokenizer, which only embedding vocabularies would meet here, leaves it out).
    if (impl_->vocab.is_wpm) return wpm_clean_up_spaces(text);
    return text;
}

std::string Tokenizer::token_piece(TokenId id, bool render_special) const {
    if (!is_valid(id)) return {};
    return std::string(impl_->pieces.piece(id, render_special));
}

std::string_view Tokenizer::token_text(TokenId id) const {
    return is_valid(id) ? impl_->vocab.text(id) : std::string_view{};
}

int32_t Tokenizer::n_vocab() const {
    return impl_->vocab.n_tokens;
}
std::optional<TokenId> Tokenizer::bos() const {
    return impl_->vocab.bos;
}
std::optional<TokenId> Tokenizer::eos() const {
    return impl_->vocab.eos;
}
std::optional<TokenId> Tokenizer::eot() const {
    return impl_->vocab.eot;
}
std::optional<TokenId> Tokenizer::eom() const {
    return impl_->vocab.eom;
}
bool Tokenizer::is_eog(TokenId id) const {
    return impl_->vocab.eog.count(id) != 0;
}
bool Tokenizer::is_control(TokenId id) const {
    return is_valid(id) && impl_->vocab.has_attr(id, token_attr::control | token_attr::unknown);
}
bool Tokenizer::adds_bos() const {
    return impl_->vocab.add_bos;
}
bool Tokenizer::adds_eos() const {
    return impl_->vocab.add_eos;
}
bool Tokenizer::is_sentencepiece() const {
    return impl_->vocab.is_spm;
}
std::string_view Tokenizer::model_name() const {
    return impl_->vocab.model_name;
}
std::string_view Tokenizer::pre_tokenizer_name() const {
    return impl_->vocab.pre_name;
}

}  // namespace powerhouse
