#include "perplexity_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace powerhouse::cli {

LogitsSummary summarize_logits(std::span<const float> logits) {
    LogitsSummary s;
    if (logits.empty()) return s;
    float max_logit = logits[0];
    size_t imax = 0;
    for (size_t i = 1; i < logits.size(); ++i) {
        if (logits[i] > max_logit) {
            max_logit = logits[i];
            imax = i;
        }
    }
    double sum_exp = 0;
    for (float l : logits) sum_exp += std::exp(l - max_logit);
    s.log_sum_exp = static_cast<double>(max_logit) + std::log(sum_exp);
    s.argmax = static_cast<TokenId>(imax);
    return s;
}

void to_log_probs(std::span<const float> logits, double log_sum_exp, std::vector<float>& out) {
    out.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<float>(logits[i] - log_sum_exp);
}

TokenId argmax_of(std::span<const float> values) {
    if (values.empty()) return 0;
    return static_cast<TokenId>(std::max_element(values.begin(), values.end()) - values.begin());
}

MeanError mean_and_error(double sum, double sum2, uint64_t count) {
    MeanError m;
    if (count == 0) return m;
    const auto n = static_cast<double>(count);
    m.mean = sum / n;
    const double variance = sum2 / n - m.mean * m.mean;
    m.error = variance > 0 && count > 1 ? std::sqrt(variance / (n - 1)) : 0.0;
    return m;
}

double NllSums::ppl() const { return std::exp(mean().mean); }
double NllSums::ppl_error() const { return ppl() * mean().error; }

double kl_divergence(std::span<const float> base_log_probs, std::span<const float> model_log_probs) {
    double sum = 0;
    const size_t n = std::min(base_log_probs.size(), model_log_probs.size());
    for (size_t i = 0; i < n; ++i) {
        const float lb = base_log_probs[i];
        if (lb == -std::numeric_limits<float>::infinity()) continue;  // p = 0 adds nothing
        sum += std::exp(static_cast<double>(lb)) * (static_cast<double>(lb) - model_log_probs[i]);
    }
    return sum;
}

void KlSums::add(std::span<const float> model_log_probs, std::span<const float> base_log_probs, double model_nll,
                 double base_nll, TokenId model_top, TokenId base_top) {
    model.add(model_nll);
    base.add(base_nll);
    sum_nll_nll_base += model_nll * base_nll;
    const double kld = kl_divergence(base_log_probs, model_log_probs);
    sum_kld += kld;
    sum_kld2 += kld * kld;
    const double p_diff = std::exp(-model_nll) - std::exp(-base_nll);
    sum_p_diff += p_diff;
    sum_p_diff2 += p_diff * p_diff;
    sum_p_diff4 += p_diff * p_diff * p_diff * p_diff;
    if (model_top == base_top) ++same_top;
    ++count;
    kld_values.push_back(static_cast<float>(kld));
    p_diff_values.push_back(static_cast<float>(p_diff));
    const size_t n = std::min(model_log_probs.size(), base_log_probs.size());
    for (size_t i = 0; i < n; ++i) {
        const double d = std::fabs(static_cast<double>(model_log_probs[i]) - base_log_probs[i]);
        if (!std::isfinite(d)) continue;
        max_abs_log_prob_diff = std::max(max_abs_log_prob_diff, d);
        sum_abs_log_prob_diff += d;
        ++log_prob_values;
    }
}

float percentile(const std::vector<float>& sorted, float fraction) {
    if (sorted.empty()) return 0;
    if (fraction <= 0) return sorted.front();
    if (fraction >= 1) return sorted.back();
    float p = fraction * static_cast<float>(sorted.size() - 1);
    const auto ip = static_cast<size_t>(p);
    p -= static_cast<float>(ip);
    return (1 - p) * sorted[ip] + p * sorted[std::min(ip + 1, sorted.size() - 1)];
}

float median(const std::vector<float>& sorted) {
    if (sorted.empty()) return 0;
    const size_t n = sorted.size();
    return n % 2 == 0 ? 0.5f * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
}

KlReport kl_report(const KlSums& sums) {
    KlReport r;
    const uint64_t n = sums.count;
    if (n == 0) return r;
    const MeanError ln_q = sums.model.mean();
    const MeanError ln_base = sums.base.mean();
    r.ppl_model = {std::exp(ln_q.mean), std::exp(ln_q.mean) * ln_q.error};
    r.ppl_base = {std::exp(ln_base.mean), std::exp(ln_base.mean) * ln_base.error};
    // Covariance of the two mean NLLs (llama.cpp's covariance(): of the means, hence / (n - 1)).
    const auto dn = static_cast<double>(n);
    const double cov = n > 1 ? (sums.sum_nll_nll_base / dn - ln_q.mean * ln_base.mean) / (dn - 1) : 0.0;
    r.ppl_correlation = ln_q.error > 0 && ln_base.error > 0 ? cov / (ln_q.error * ln_base.error) : 1.0;
    r.ln_ppl_ratio.mean = ln_q.mean - ln_base.mean;
    r.ln_ppl_ratio.error = std::sqrt(std::max(0.0, ln_q.error * ln_q.error + ln_base.error * ln_base.error - 2 * cov));
    r.ppl_ratio = {std::exp(r.ln_ppl_ratio.mean), std::exp(r.ln_ppl_ratio.mean) * r.ln_ppl_ratio.error};
    const double ppl_cov = r.ppl_model.mean * r.ppl_base.mean * cov;
    r.ppl_diff.mean = r.ppl_model.mean - r.ppl_base.mean;
    r.ppl_diff.error = std::sqrt(std::max(
        0.0, r.ppl_model.error * r.ppl_model.error + r.ppl_base.error * r.ppl_base.error - 2 * ppl_cov));

    r.kld = mean_and_error(sums.sum_kld, sums.sum_kld2, n);
    std::vector<float> kld = sums.kld_values;
    std::sort(kld.begin(), kld.end());
    r.kld_max = kld.back();
    r.kld_99_9 = percentile(kld, 0.999f);
    r.kld_99 = percentile(kld, 0.99f);
    r.kld_95 = percentile(kld, 0.95f);
    r.kld_90 = percentile(kld, 0.90f);
    r.kld_median = median(kld);
    r.kld_10 = percentile(kld, 0.10f);
    r.kld_5 = percentile(kld, 0.05f);
    r.kld_1 = percentile(kld, 0.01f);
    r.kld_0_1 = percentile(kld, 0.001f);
    r.kld_min = kld.front();

    r.p_diff = mean_and_error(sums.sum_p_diff, sums.sum_p_diff2, n);
    const MeanError mse = mean_and_error(sums.sum_p_diff2, sums.sum_p_diff4, n);
    r.p_diff_rms.mean = std::sqrt(mse.mean);
    r.p_diff_rms.error = r.p_diff_rms.mean > 0 ? 0.5 / r.p_diff_rms.mean * mse.error : 0.0;
    std::vector<float> dp = sums.p_diff_values;
    std::sort(dp.begin(), dp.end());
    r.p_diff_max = dp.back();
    r.p_diff_99 = percentile(dp, 0.99f);
    r.p_diff_median = median(dp);
    r.p_diff_1 = percentile(dp, 0.01f);
    r.p_diff_min = dp.front();

    r.same_top.mean = static_cast<double>(sums.same_top) / dn;
    r.same_top.error = n > 1 ? std::sqrt(r.same_top.mean * (1 - r.same_top.mean) / (dn - 1)) : 0.0;
    r.max_abs_log_prob_diff = sums.max_abs_log_prob_diff;
    r.mean_abs_log_prob_diff =
        sums.log_prob_values > 0 ? sums.sum_abs_log_prob_diff / static_cast<double>(sums.log_prob_values) : 0.0;
    return r;
}

}  // namespace powerhouse::cli
