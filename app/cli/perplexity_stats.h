// The arithmetic of `powerhouse-cli perplexity`: negative log-likelihoods, perplexity and its
// uncertainty, and the comparison of two token distributions (KL divergence, top-token
// agreement, the change in the probability of the right token), as llama.cpp's
// tools/perplexity/perplexity.cpp computes them. Pure functions and accumulators: no model.
//
// Thread-safety: plain values; an accumulator is used by one thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "powerhouse/tokenizer.h"

namespace powerhouse::cli {

// The log-sum-exp of a row of logits and its argmax (the first of equals), as llama.cpp's
// log_softmax: the largest logit as a float, the sum of expf(logit - max) in double.
struct LogitsSummary {
    double log_sum_exp = 0;
    TokenId argmax = 0;
};
LogitsSummary summarize_logits(std::span<const float> logits);

// out[i] = logits[i] - log_sum_exp: the log-probabilities, the values a logits file stores.
void to_log_probs(std::span<const float> logits, double log_sum_exp, std::vector<float>& out);
// The argmax of a row (first of equals), for log-probabilities read back from a file.
TokenId argmax_of(std::span<const float> values);

// A mean and the standard error of the mean: sqrt((<x^2> - <x>^2) / (n - 1)), as llama.cpp's
// mean_and_uncertainty (0 when there are too few values or the variance rounds below 0).
struct MeanError {
    double mean = 0;
    double error = 0;
};
MeanError mean_and_error(double sum, double sum2, uint64_t count);

// Negative log-likelihoods of the scored tokens. Perplexity = exp(mean NLL); its uncertainty
// is the standard error of the mean NLL carried through exp: ppl * error (first order).
struct NllSums {
    double sum = 0;
    double sum2 = 0;
    uint64_t count = 0;
    void add(double nll) {
        sum += nll;
        sum2 += nll * nll;
        ++count;
    }
    MeanError mean() const { return mean_and_error(sum, sum2, count); }
    double ppl() const;
    double ppl_error() const;
};

// The model (Q) against a base at each scored position, llama.cpp's kl_divergence_result
// plus the log-probability differences over the whole vocabulary.
struct KlSums {
    NllSums model;
    NllSums base;
    double sum_nll_nll_base = 0;
    double sum_kld = 0, sum_kld2 = 0;
    double sum_p_diff = 0, sum_p_diff2 = 0, sum_p_diff4 = 0;
    uint64_t same_top = 0;
    uint64_t count = 0;
    double max_abs_log_prob_diff = 0;
    double sum_abs_log_prob_diff = 0;
    uint64_t log_prob_values = 0;
    std::vector<float> kld_values;     // per position, for the percentiles
    std::vector<float> p_diff_values;  // p(right token | model) - p(right token | base)

    // One position: both distributions as log-probabilities, the NLLs of the right token
    // (-log_probs[target], passed apart so that one computed from logits keeps its double
    // precision) and the argmaxes.
    void add(std::span<const float> model_log_probs, std::span<const float> base_log_probs, double model_nll,
             double base_nll, TokenId model_top, TokenId base_top);
};

// KL(base || Q) of one position: sum over the vocabulary of p_base * (log p_base - log p_Q), in
// double, every token counted (llama.cpp skips those with log p_base <= -16, which its 16-bit
// base format cannot hold; the difference is below 1e-6 for a peaked distribution).
double kl_divergence(std::span<const float> base_log_probs, std::span<const float> model_log_probs);

// The summary llama.cpp prints from KlSums.
struct KlReport {
    MeanError ppl_model, ppl_base;        // the perplexities and their uncertainties
    double ppl_correlation = 0;           // Cor(ln PPL(Q), ln PPL(base))
    MeanError ln_ppl_ratio;               // ln(PPL(Q)/PPL(base))
    MeanError ppl_ratio, ppl_diff;        // PPL(Q)/PPL(base), PPL(Q)-PPL(base)
    MeanError kld;
    float kld_max = 0, kld_99_9 = 0, kld_99 = 0, kld_95 = 0, kld_90 = 0, kld_median = 0, kld_10 = 0, kld_5 = 0,
          kld_1 = 0, kld_0_1 = 0, kld_min = 0;
    MeanError p_diff;                     // mean Δp
    MeanError p_diff_rms;
    float p_diff_max = 0, p_diff_99 = 0, p_diff_median = 0, p_diff_1 = 0, p_diff_min = 0;
    MeanError same_top;                   // share of positions whose argmax agrees
    double max_abs_log_prob_diff = 0;     // over every token of every scored position
    double mean_abs_log_prob_diff = 0;
};
KlReport kl_report(const KlSums& sums);

// llama.cpp's percentile: linear between the two nearest of the sorted values.
float percentile(const std::vector<float>& sorted, float fraction);
float median(const std::vector<float>& sorted);

}  // namespace powerhouse::cli
