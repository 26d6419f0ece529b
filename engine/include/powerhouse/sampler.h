// The token sampler: picks the next token from the logits of one position.
//
// The chain is llama.cpp's default order:
//   logit biases (added to the named tokens' logits; -inf bans a token)
//   -> penalties (repeat, presence, frequency over the last repeat_last_n tokens)
//   -> top-k -> top-p -> min-p -> temperature -> softmax -> random draw.
// top-p and min-p judge probabilities at temperature 1 (before scaling), as llama.cpp does;
// top-p renormalizes over what top-k kept. temperature == 0 is greedy: the exact argmax of
// the penalized logits, ties to the lowest id; the filters and the random generator are not
// used (the filters always keep the argmax anyway).
//
// Reproducible: the random generator is std::mt19937_64 seeded with `seed` (its output is fixed
// by the C++ standard), turned into a double in [0, 1) from its top 53 bits; every sample()
// with temperature > 0 consumes exactly one output. Candidates are ordered by logit and then
// by id (a total order), so the same seed, parameters and logits give the same tokens with
// any standard library.
//
// Non-finite logits never crash: NaN counts as -inf (never picked); a +inf logit is certain
// (several: the lowest id); -inf is never picked. When no token is left (empty logits, or
// every logit NaN or -inf) sample() returns kNoToken; the caller should report an error.
//
// Cost per call: O(n_vocab) passes, plus O(n_vocab log k) heap selection for top-k; top-p
// without top-k finds its cut with a histogram and sorts only the tokens near the cut.
// Buffers sized to n_vocab are kept between calls: no allocation after the first call with a
// given vocabulary size.
//
// Stop strings are handled by StopStringMatcher (powerhouse/stop_strings.h).
//
// Thread-safety: SamplingParams is a plain value. A Sampler is per sequence and used by one
// thread at a time.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "powerhouse/result.h"
#include "powerhouse/tokenizer.h"

namespace powerhouse {

// What sample() returns when no token can be picked.
inline constexpr TokenId kNoToken = -1;

// A bias added to one token's logit before anything else (OpenAI's logit_bias, llama.cpp's
// --logit-bias). -inf bans the token; +inf makes it certain.
struct LogitBias {
    TokenId id = 0;
    float bias = 0.0f;
    bool operator==(const LogitBias&) const = default;
};

// A token still in the running while the sampler filters; `logit` becomes its weight at the end.
struct TokenCandidate {
    float logit = 0.0f;
    TokenId id = 0;
};

struct SamplingParams {
    float temperature = 0.8f;        // >= 0; 0 = greedy (argmax)
    int32_t top_k = 40;              // <= 0: off
    float top_p = 0.95f;             // in (0, 1]; 1: off. Keeps the smallest set reaching p.
    float min_p = 0.05f;             // in [0, 1]; 0: off. Drops p < min_p * max p.
    float repeat_penalty = 1.0f;     // > 0; 1: off. logit > 0 ? logit / penalty : logit * penalty
    int32_t repeat_last_n = 64;      // >= 0: the window of recent tokens for all three penalties
    float presence_penalty = 0.0f;   // OpenAI: logit -= presence_penalty if the token is in the window
    float frequency_penalty = 0.0f;  // OpenAI: logit -= frequency_penalty * times in the window
    uint64_t seed = 0;               // same seed + same logits => same tokens
    // Added to those tokens' logits first; ids outside the vocabulary change nothing. A token
    // named twice gets both biases. NaN is refused.
    std::vector<LogitBias> logit_bias;

    // An invalid_argument error naming the first field out of range and its value.
    Result<void> validate() const;
};

class Sampler {
public:
    // Validates the parameters first.
    static Result<Sampler> create(SamplingParams params);
    // Parameters should be valid (see validate()); a field out of range is replaced by its
    // "off" value (temperature by 0, i.e. greedy), so that a bad setting never crashes.
    explicit Sampler(SamplingParams params);

    // The next token from the logits of one position: n_vocab floats, used as scratch (their
    // values after the call are unspecified). kNoToken when no token can be picked.
    TokenId sample(std::span<float> logits);

    // Records a token of the sequence (each prompt token and each sampled token) for the
    // penalties. Ids outside the vocabulary are remembered but change nothing.
    void accept(TokenId id);

    // A new sequence: forgets the accepted tokens and reseeds the random generator.
    void reset();

    // The first steps of sample(): adds the logit biases, then applies the penalties of the
    // current window to `logits`.
    void apply_penalties(std::span<float> logits);

    const SamplingParams& params() const { return params_; }
    // Temperature 0 and no penalty: the next token is the argmax of the raw logits, which a
    // GPU can pick itself (Model::decode_argmax).
    bool plain_greedy() const {
        return params_.temperature == 0.0f && params_.repeat_penalty == 1.0f && params_.presence_penalty == 0.0f &&
               params_.frequency_penalty == 0.0f && params_.logit_bias.empty();
    }

private:
    SamplingParams params_;
    std::mt19937_64 rng_;
    std::vector<TokenId> window_;             // [<= repeat_last_n] ring of the last accepted tokens
    size_t window_next_ = 0;                  // where the next accepted token goes once the ring is full
    std::vector<int32_t> counts_;             // [n_vocab] scratch, all zero between calls
    std::vector<TokenCandidate> candidates_;  // [n_vocab] scratch, reused
};

}  // namespace powerhouse
