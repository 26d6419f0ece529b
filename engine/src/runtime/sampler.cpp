// SamplingParams::validate and the Sampler: the chain of powerhouse/sampler.h over the steps
// of runtime/sampling_steps.h.
#include "powerhouse/sampler.h"

#include <fmt/format.h>

#include <cmath>

#include "runtime/sampling_steps.h"

namespace powerhouse {
namespace {

bool valid_temperature(float t) {
    return std::isfinite(t) && t >= 0.0f;
}
bool valid_top_p(float p) {
    return p > 0.0f && p <= 1.0f;  // false for NaN
}
bool valid_min_p(float p) {
    return p >= 0.0f && p <= 1.0f;
}
bool valid_repeat_penalty(float penalty) {
    return std::isfinite(penalty) && penalty > 0.0f;
}

Error out_of_range(std::string_view field, std::string_view rule, auto value) {
    return make_error(ErrorCode::invalid_argument,
                      fmt::format("sampling parameter {} must be {}, got {}", field, rule, value));
}

}  // namespace

Result<void> SamplingParams::validate() const {
    if (!valid_temperature(temperature)) {
        return out_of_range("temperature", "a finite number >= 0 (0 = greedy)", temperature);
    }
    if (!valid_top_p(top_p)) return out_of_range("top_p", "in (0, 1] (1 = off)", top_p);
    if (!valid_min_p(min_p)) return out_of_range("min_p", "in [0, 1] (0 = off)", min_p);
    if (!valid_repeat_penalty(repeat_penalty)) {
        return out_of_range("repeat_penalty", "a finite number > 0 (1 = off)", repeat_penalty);
    }
    if (repeat_last_n < 0) {
        return out_of_range("repeat_last_n", ">= 0 (0 = no penalties; for the whole context pass its length)",
                            repeat_last_n);
    }
    if (!std::isfinite(presence_penalty)) {
        return out_of_range("presence_penalty", "a finite number (0 = off)", presence_penalty);
    }
    if (!std::isfinite(frequency_penalty)) {
        return out_of_range("frequency_penalty", "a finite number (0 = off)", frequency_penalty);
    }
    for (const LogitBias& b : logit_bias) {
        if (b.id < 0) return out_of_range("logit_bias", "for token ids >= 0", fmt::format("token {}", b.id));
        if (std::isnan(b.bias)) {
            return out_of_range("logit_bias", "a number (-inf bans a token)", fmt::format("NaN for token {}", b.id));
        }
    }
    return {};
}

Result<Sampler> Sampler::create(SamplingParams params) {
    PH_TRY(params.validate());
    return Sampler(params);
}

Sampler::Sampler(SamplingParams params) : params_(params), rng_(params.seed) {
    // Out-of-range fields fall back to "off" so that sampling stays well defined.
    if (!valid_temperature(params_.temperature)) params_.temperature = 0.0f;
    if (!valid_top_p(params_.top_p)) params_.top_p = 1.0f;
    if (!valid_min_p(params_.min_p)) params_.min_p = 0.0f;
    if (!valid_repeat_penalty(params_.repeat_penalty)) params_.repeat_penalty = 1.0f;
    if (params_.repeat_last_n < 0) params_.repeat_last_n = 0;
    if (!std::isfinite(params_.presence_penalty)) params_.presence_penalty = 0.0f;
    if (!std::isfinite(params_.frequency_penalty)) params_.frequency_penalty = 0.0f;
    std::erase_if(params_.logit_bias, [](const LogitBias& b) { return b.id < 0 || std::isnan(b.bias); });
}

void Sampler::accept(TokenId id) {
    const auto capacity = static_cast<size_t>(params_.repeat_last_n);
    if (capacity == 0) return;
    // The ring grows with the sequence (no allocation up front for a large window).
    if (window_.size() < capacity) {
        window_.push_back(id);
        return;
    }
    window_[window_next_] = id;
    window_next_ = (window_next_ + 1) % capacity;
}

void Sampler::reset() {
    window_.clear();
    window_next_ = 0;
    rng_.seed(params_.seed);
}

void Sampler::apply_penalties(std::span<float> logits) {
    for (const LogitBias& b : params_.logit_bias) {
        if (static_cast<size_t>(b.id) < logits.size()) logits[static_cast<size_t>(b.id)] += b.bias;
    }
    const bool off =
        params_.repeat_penalty == 1.0f && params_.presence_penalty == 0.0f && params_.frequency_penalty == 0.0f;
    if (off || window_.empty()) return;
    if (counts_.size() < logits.size()) counts_.resize(logits.size(), 0);
    sampling::apply_penalties(logits, window_, params_, counts_);
}

TokenId Sampler::sample(std::span<float> logits) {
    if (logits.empty()) return kNoToken;
    apply_penalties(logits);
    if (params_.temperature == 0.0f) return sampling::argmax(logits);

    const double u = sampling::unit_interval(rng_());

    // Candidates in id order. NaN and -inf can never be drawn: leave them out. A +inf logit
    // would make every weight NaN: it is certain instead (several: the lowest id).
    if (candidates_.size() < logits.size()) candidates_.resize(logits.size());
    size_t n = 0;
    float max_logit = -INFINITY;
    for (size_t i = 0; i < logits.size(); ++i) {
        const float logit = logits[i];
        if (!(logit > -INFINITY)) continue;  // NaN or -inf
        if (logit == INFINITY) return static_cast<TokenId>(i);
        candidates_[n++] = TokenCandidate{logit, static_cast<TokenId>(i)};
        if (logit > max_logit) max_logit = logit;
    }
    if (n == 0) return kNoToken;

    std::span<TokenCandidate> kept(candidates_.data(), n);
    bool sorted = false;
    if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < kept.size()) {
        kept = kept.first(sampling::keep_top_k(kept, params_.top_k));
        sorted = true;
    }
    if (params_.top_p < 1.0f) kept = kept.first(sampling::keep_top_p(kept, params_.top_p, sorted));
    kept = kept.first(sampling::keep_min_p(kept, params_.min_p, max_logit));

    // Every filter keeps the best candidate, so max_logit is still the largest logit here.
    const double sum = sampling::to_weights(kept, params_.temperature, max_logit);
    return kept[sampling::draw(kept, sum, u)].id;
}

}  // namespace powerhouse
