// StreamingDetokenizer (declared in powerhouse/tokenizer.h): token pieces in, complete
// UTF-8 characters out.
#include "powerhouse/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace powerhouse {

StreamingDetokenizer::StreamingDetokenizer(Tokenizer tokenizer, DetokenizeOptions options)
    : tokenizer_(std::move(tokenizer)), options_(options) {}

std::string StreamingDetokenizer::feed(TokenId id) {
    if (!tokenizer_.is_valid(id)) return {};
    const TokenizerImpl& impl = tokenizer_.impl();
    LeadingSpaceRule rule{strip_pending_, n_fed_};
    const std::string_view piece =
        rule.apply(impl.vocab, options_.strip_leading_space, id, impl.pieces.piece(id, options_.render_special));
    strip_pending_ = rule.pending;
    n_fed_ = rule.n_seen;

    std::string out;
    Utf8Sanitizer sanitizer;
    sanitizer.push(pending_, out);  // restores the held bytes; emits nothing
    sanitizer.push(piece, out);
    pending_ = std::string(sanitizer.pending_bytes());
    return out;
}

std::string StreamingDetokenizer::flush() {
    std::string out;
    if (!pending_.empty()) {
        Utf8Sanitizer sanitizer;
        sanitizer.push(pending_, out);
        sanitizer.finish(out);
    }
    pending_.clear();
    n_fed_ = 0;
    strip_pending_ = true;
    return out;
}

bool StreamingDetokenizer::has_pending() const {
    return !pending_.empty();
}

}  // namespace powerhouse
