#include "tensor/quantize_k.h"

#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <limits>

#include "tensor/half.h"

// How a super-block is encoded:
//  1. Each sub-block gets the continuous scale (and min) that minimises its squared
//     error: candidate scales around the min-max one (and coarser whole-level ones), each
//     followed by a least-squares fit of scale and min to the levels it chose. Doubles
//     throughout, so that no finite input overflows (3e38 - (-3e38) is fine in double).
//  2. The f16 super-block scales d (and dmin) are chosen among candidates by how well
//     the sub-block scales (mins) land on their integer grids; then each sub-block picks
//     its integer scale and min among the nearest ones, and its levels, by measured error.
//  3. d and dmin are refitted by least squares to the chosen integers and step 2's choice
//     is redone, kept only while the error drops.
// Errors are measured on values decoded exactly as the decoder decodes them, so the result
// is the best found for the bytes actually written.

namespace powerhouse::detail {
namespace {

// The integer geometry of a K-quant as its decoder sees it:
// x = (d * sc) * q - (dmin * m), or x = (d * sc) * q for the symmetric ones (m_hi == 0).
struct KFormat {
    int n_sub;    // sub-blocks per super-block
    int sub_len;  // elements per sub-block
    int q_lo;     // levels q_lo..q_hi
    int q_hi;
    int sc_lo;  // sub-block scales sc_lo..sc_hi
    int sc_hi;
    int m_hi;  // sub-block mins 0..m_hi; 0 for symmetric formats
};

constexpr KFormat kQ2K{16, 16, 0, 3, 0, 15, 15};
constexpr KFormat kQ3K{16, 16, -4, 3, -32, 31, 0};
constexpr KFormat kQ4K{8, 32, 0, 15, 0, 63, 63};
constexpr KFormat kQ5K{8, 32, 0, 31, 0, 63, 63};
constexpr KFormat kQ6K{16, 16, -32, 31, -128, 127, 0};

constexpr int kMaxSub = 16;
constexpr int kMaxSubLen = 32;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kF16Max = 65504.0;

// A super-block before bit packing.
struct KBlock {
    uint16_t d = 0;     // f16
    uint16_t dmin = 0;  // f16
    int sc[kMaxSub] = {};
    int m[kMaxSub] = {};
    int q[QK_K] = {};
    double err = kInf;
};

// x ~ scale * q - min for one sub-block (min >= 0; 0 for symmetric formats).
struct SubFit {
    double scale = 0.0;
    double min = 0.0;
    double weight = 0.0;  // sum of q^2: what an error in `scale` costs
    // Top levels left unused: the min may move up by that many steps (scale each) with
    // the levels moving along, which can put it on dmin's grid.
    int slack = 0;
};

// round(v) (halves up) clamped to [lo, hi]; NaN (non-finite input only) gives lo
// without UB. Written so that the inner loops have no data-dependent branch to
// mispredict and no library call (std::round is one on baseline x86-64).
int round_clamped(double v, int lo, int hi) {
    if (!(v > lo)) return lo;
    if (!(v < hi)) return hi;
    return lo + static_cast<int>(v - lo + 0.5);  // v - lo > 0: truncation is floor
}

// f16 bits of a super-block scale, saturated to the largest finite f16.
uint16_t to_f16(double v) {
    if (!(v == v)) v = 0.0;
    if (v > kF16Max) v = kF16Max;
    if (v < -kF16Max) v = -kF16Max;
    return f32_to_f16(static_cast<float>(v));
}

// 1 / scale, or 0 for a zero scale (nearest_level's convention).
double inverse(double scale) {
    return scale != 0.0 ? 1.0 / scale : 0.0;
}

// The level nearest to x for x ~ scale * q - min, given inv = inverse(scale).
int nearest_level(double x, double inv, double min, int q_lo, int q_hi) {
    if (inv == 0.0) return q_lo > 0 ? q_lo : (q_hi < 0 ? q_hi : 0);
    return round_clamped((x + min) * inv, q_lo, q_hi);
}

double fit_error(const float* x, int n, const SubFit& f, int q_lo, int q_hi) {
    const double inv = inverse(f.scale);
    double err = 0.0;
    for (int i = 0; i < n; ++i) {
        const double q = nearest_level(x[i], inv, f.min, q_lo, q_hi);
        const double e = f.scale * q - f.min - x[i];
        err += e * e;
    }
    return err;
}

// Fills in weight and slack once scale and min are chosen.
SubFit finish_fit(const float* x, int n, SubFit f, int q_lo, int q_hi) {
    const double inv = inverse(f.scale);
    int top = q_lo;
    for (int i = 0; i < n; ++i) {
        const int q = nearest_level(x[i], inv, f.min, q_lo, q_hi);
        f.weight += static_cast<double>(q) * q;
        if (q > top) top = q;
    }
    f.slack = q_lo == 0 ? q_hi - top : 0;
    return f;
}

// Step 1 for formats with a min: levels 0..q_hi, min >= 0 (a sub-block of positive
// values uses min 0, as the field cannot shift upwards).
SubFit fit_with_min(const float* x, int n, int q_hi) {
    double lo = 0.0;
    double hi = x[0];
    for (int i = 0; i < n; ++i) {
        lo = std::fmin(lo, static_cast<double>(x[i]));
        hi = std::fmax(hi, static_cast<double>(x[i]));
    }
    if (!(hi > lo)) return finish_fit(x, n, {0.0, -lo, 0.0, 0}, 0, q_hi);  // constant <= 0

    SubFit best{(hi - lo) / q_hi, -lo, 0.0, 0};
    double best_err = fit_error(x, n, best, 0, q_hi);
    // Candidate level counts: a fine grid around q_hi, then whole numbers below it (values
    // that already sit on a coarser grid, e.g. decoded ones, are found exactly).
    const int n_fine = 21;
    const int n_coarse = (q_hi - 1) / 2;
    for (int c = 0; c < n_fine + n_coarse; ++c) {
        const double target = c < n_fine ? q_hi + (c - 10) / 10.0 : q_hi - 2 - (c - n_fine);
        const double iscale = target / (hi - lo);
        double sq = 0, sqq = 0, sx = 0, sxq = 0;
        for (int i = 0; i < n; ++i) {
            const int q = round_clamped((x[i] - lo) * iscale, 0, q_hi);
            sq += q;
            sqq += static_cast<double>(q) * q;
            sx += x[i];
            sxq += static_cast<double>(x[i]) * q;
        }
        const double det = n * sqq - sq * sq;
        if (!(det > 0)) continue;  // all on one level: nothing to fit
        double scale = (n * sxq - sq * sx) / det;
        double offset = (sqq * sx - sq * sxq) / det;  // x ~ scale * q + offset
        if (offset > 0) {
            offset = 0;
            scale = sxq / sqq;
        }
        if (!(scale > 0)) continue;
        const SubFit cand{scale, -offset, 0.0, 0};
        const double err = fit_error(x, n, cand, 0, q_hi);
        if (err < best_err) {
            best_err = err;
            best = cand;
        }
    }
    return finish_fit(x, n, best, 0, q_hi);
}

// Step 1 for symmetric formats, levels q_lo..q_hi with q_lo = -(q_hi + 1): the element
// of largest magnitude goes near either end (the scale's sign picks which).
SubFit fit_symmetric(const float* x, int n, int q_lo, int q_hi) {
    double v = x[0];
    for (int i = 1; i < n; ++i) {
        if (std::fabs(x[i]) > std::fabs(v)) v = x[i];
    }
    if (v == 0.0) return {};

    SubFit best{v / q_lo, 0.0, 0.0, 0};
    double best_err = fit_error(x, n, best, q_lo, q_hi);
    double sxx = 0;
    for (int i = 0; i < n; ++i) sxx += static_cast<double>(x[i]) * x[i];
    for (const int end : {q_lo, q_hi}) {
        const int dir = end > 0 ? 1 : -1;
        // A fine grid near the end, then whole levels inside (as in fit_with_min).
        const int n_fine = 16;
        const int n_coarse = (std::abs(end) + 1) / 2 - 1;
        for (int c = 0; c < n_fine + n_coarse; ++c) {
            const double target = c < n_fine ? end + dir * (c - 10) / 10.0 : end - dir * (2 + c - n_fine);
            const double iscale = target / v;
            double sqq = 0, sxq = 0;
            for (int i = 0; i < n; ++i) {
                const int q = round_clamped(x[i] * iscale, q_lo, q_hi);
                sqq += static_cast<double>(q) * q;
                sxq += static_cast<double>(x[i]) * q;
            }
            if (!(sqq > 0)) continue;
            const SubFit cand{sxq / sqq, 0.0, 0.0, 0};
            // The error for the levels chosen above, from the sums (re-choosing the
            // nearest levels for this scale could only lower it).
            const double err = sxx - sxq * sxq / sqq;
            if (err < best_err) {
                best_err = err;
                best = cand;
            }
        }
    }
    return finish_fit(x, n, best, q_lo, q_hi);
}

// Step 2a: the f16 super-block scale D for per-sub-block values v[j] ~ D * k[j], k
// integers in [lo, hi], minimising sum w[j] * (v[j] - D * k[j])^2. With `shift`, v[j] may
// also be v[j] + t * shift[j] for t up to slack[j] (mins of sub-blocks with unused top
// levels). Candidates map the largest |v| near either end of the range, or onto any whole
// number inside it, which finds values already on a grid (decoded ones) exactly.
uint16_t choose_super_scale(const double* v, const double* w, const double* shift, const int* slack, int n, int lo,
                            int hi) {
    double big = 0.0;
    for (int j = 0; j < n; ++j) {
        if (std::fabs(v[j]) > std::fabs(big)) big = v[j];
    }
    if (big == 0.0) return 0;
    uint16_t best_bits = 0;
    double best_err = kInf;
    auto consider = [&](double target) {
        const uint16_t bits = to_f16(big / target);
        const double d = f16_to_f32(bits);
        double err = 0.0;
        for (int j = 0; j < n; ++j) {
            double ej = kInf;
            for (int t = 0; t <= (shift ? slack[j] : 0); ++t) {
                const double vj = shift ? v[j] + t * shift[j] : v[j];
                const int k = d != 0.0 ? round_clamped(vj / d, lo, hi) : 0;
                ej = std::fmin(ej, (vj - d * k) * (vj - d * k));
            }
            err += w[j] * ej;
        }
        if (err < best_err) {
            best_err = err;
            best_bits = bits;
        }
    };
    for (const int end : {lo, hi}) {
        if (end == 0) continue;
        const int dir = end > 0 ? 1 : -1;
        for (int k = -10; k <= 5; ++k) consider(end + dir * k / 10.0);
        // Every whole number: the largest scale is not always best mapped near the end,
        // e.g. when that would make D an imprecise f16 subnormal.
        for (int c = 2; c < std::abs(end); ++c) consider(end - dir * c);
    }
    return best_bits;
}

// Step 2b: integer scales, mins and levels for the given f16 super-block scales.
KBlock assign(const float* x, const KFormat& f, const SubFit* fits, uint16_t d_bits, uint16_t dmin_bits) {
    KBlock out;
    out.d = d_bits;
    out.dmin = dmin_bits;
    out.err = 0.0;
    const float d = f16_to_f32(d_bits);
    const float dmin = f16_to_f32(dmin_bits);
    for (int s = 0; s < f.n_sub; ++s) {
        const float* xs = x + s * f.sub_len;
        const SubFit& fit = fits[s];
        const int sc0 = d != 0.0f ? round_clamped(fit.scale / d, f.sc_lo, f.sc_hi) : 0;
        const int sc_step = d != 0.0f ? 1 : 0;
        const int m_step = dmin != 0.0f ? 1 : 0;
        double best = kInf;
        for (int sc = sc0 - sc_step; sc <= sc0 + sc_step; ++sc) {
            if (sc < f.sc_lo || sc > f.sc_hi) continue;
            const float dl = d * static_cast<float>(sc);  // rounded as the decoder does
            const double inv = inverse(dl);
            for (int t = 0; t <= (dmin != 0.0f ? fit.slack : 0); ++t) {
                const double min = fit.min + t * static_cast<double>(dl);
                const int m0 = dmin != 0.0f ? round_clamped(min / dmin, 0, f.m_hi) : 0;
                for (int m = m0 - m_step; m <= m0 + m_step; ++m) {
                    if (m < 0 || m > f.m_hi) continue;
                    const float ml = dmin * static_cast<float>(m);
                    double err = 0.0;
                    int q[kMaxSubLen];
                    for (int i = 0; i < f.sub_len; ++i) {
                        q[i] = nearest_level(xs[i], inv, ml, f.q_lo, f.q_hi);
                        const float y = dl * static_cast<float>(q[i]) - ml;
                        const double e = static_cast<double>(y) - xs[i];
                        err += e * e;
                    }
                    if (err < best) {
                        best = err;
                        out.sc[s] = sc;
                        out.m[s] = m;
                        for (int i = 0; i < f.sub_len; ++i) out.q[s * f.sub_len + i] = q[i];
                    }
                }
            }
        }
        out.err += best;
    }
    return out;
}

// Step 3: least-squares d and dmin for fixed integers, x ~ d * (sc * q) - dmin * m.
// Returns false when the system is degenerate or the fit is not usable.
bool refit(const float* x, const KFormat& f, const KBlock& b, double& d, double& dmin) {
    double saa = 0, sab = 0, sbb = 0, sxa = 0, sxb = 0;
    for (int i = 0; i < f.n_sub * f.sub_len; ++i) {
        const int s = i / f.sub_len;
        const double a = static_cast<double>(b.sc[s]) * b.q[i];
        const double c = b.m[s];
        saa += a * a;
        sab += a * c;
        sbb += c * c;
        sxa += x[i] * a;
        sxb += x[i] * c;
    }
    if (!(saa > 0)) return false;
    d = sxa / saa;
    dmin = f16_to_f32(b.dmin);
    const double det = saa * sbb - sab * sab;
    if (f.m_hi > 0 && det > 1e-9 * saa * sbb) {
        d = (sxa * sbb - sab * sxb) / det;
        dmin = -(saa * sxb - sab * sxa) / det;  // the fit's offset is -dmin
    }
    return std::isfinite(d) && std::isfinite(dmin) && dmin >= 0 && (f.m_hi == 0 || d >= 0);
}

KBlock encode(const float* x, const KFormat& f) {
    SubFit fits[kMaxSub];
    double scales[kMaxSub];
    double scale_weights[kMaxSub];
    double mins[kMaxSub];
    double min_weights[kMaxSub];
    int slack[kMaxSub];
    for (int s = 0; s < f.n_sub; ++s) {
        const float* xs = x + s * f.sub_len;
        fits[s] = f.m_hi > 0 ? fit_with_min(xs, f.sub_len, f.q_hi) : fit_symmetric(xs, f.sub_len, f.q_lo, f.q_hi);
        scales[s] = fits[s].scale;
        scale_weights[s] = fits[s].weight;
        mins[s] = fits[s].min;
        min_weights[s] = f.sub_len;  // an error in the min moves every element
        slack[s] = fits[s].slack;
    }
    const uint16_t d0 = choose_super_scale(scales, scale_weights, nullptr, nullptr, f.n_sub, f.sc_lo, f.sc_hi);
    const uint16_t dmin0 = f.m_hi > 0 ? choose_super_scale(mins, min_weights, scales, slack, f.n_sub, 0, f.m_hi) : 0;

    KBlock best = assign(x, f, fits, d0, dmin0);
    for (int iter = 0; iter < 3; ++iter) {
        double d = 0.0;
        double dmin = 0.0;
        if (!refit(x, f, best, d, dmin)) break;
        const uint16_t d_bits = to_f16(d);
        const uint16_t dmin_bits = to_f16(dmin);
        if (d_bits == best.d && dmin_bits == best.dmin) break;
        KBlock cand = assign(x, f, fits, d_bits, dmin_bits);
        if (!(cand.err < best.err)) break;
        best = cand;
    }
    return best;
}

}  // namespace

BlockQ2_K quantize_block_q2_k(const float* x) {
    const KBlock k = encode(x, kQ2K);
    BlockQ2_K b{};
    b.d = k.d;
    b.dmin = k.dmin;
    for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<uint8_t>(k.sc[s] | (k.m[s] << 4));
    for (int i = 0; i < QK_K; ++i) {
        const int h = i / 128, kk = (i % 128) / 32, j = i % 32;
        b.qs[32 * h + j] = static_cast<uint8_t>(b.qs[32 * h + j] | (k.q[i] << (2 * kk)));
    }
    return b;
}

BlockQ3_K quantize_block_q3_k(const float* x) {
    const KBlock k = encode(x, kQ3K);
    BlockQ3_K b{};
    b.d = k.d;
    pack_q3_k_scales(k.sc, b.scales);
    for (int i = 0; i < QK_K; ++i) {
        const int h = i / 128, kk = (i % 128) / 32, j = i % 32;
        const int u = k.q[i] + 4;  // bit 2 set means "no -4 offset" to the decoder
        b.qs[32 * h + j] = static_cast<uint8_t>(b.qs[32 * h + j] | ((u & 3) << (2 * kk)));
        b.hmask[j] = static_cast<uint8_t>(b.hmask[j] | ((u >> 2) << (i / 32)));
    }
    return b;
}

namespace {

// Q4_K and Q5_K share scales and the low nibbles; qh (Q5_K only) takes bit 4.
void pack_k4(const KBlock& k, uint8_t scales[kScaleSizeK], uint8_t qs[QK_K / 2], uint8_t* qh) {
    pack_k4_scales(k.sc, k.m, scales);
    for (int i = 0; i < QK_K; ++i) {
        const int s = i / 32, j = i % 32;
        qs[32 * (s / 2) + j] = static_cast<uint8_t>(qs[32 * (s / 2) + j] | ((k.q[i] & 0x0F) << (4 * (s % 2))));
        if (qh) qh[j] = static_cast<uint8_t>(qh[j] | ((k.q[i] >> 4) << s));
    }
}

}  // namespace

BlockQ4_K quantize_block_q4_k(const float* x) {
    const KBlock k = encode(x, kQ4K);
    BlockQ4_K b{};
    b.d = k.d;
    b.dmin = k.dmin;
    pack_k4(k, b.scales, b.qs, nullptr);
    return b;
}

BlockQ5_K quantize_block_q5_k(const float* x) {
    const KBlock k = encode(x, kQ5K);
    BlockQ5_K b{};
    b.d = k.d;
    b.dmin = k.dmin;
    pack_k4(k, b.scales, b.qs, b.qh);
    return b;
}

BlockQ6_K quantize_block_q6_k(const float* x) {
    const KBlock k = encode(x, kQ6K);
    BlockQ6_K b{};
    b.d = k.d;
    for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(k.sc[s]);
    for (int i = 0; i < QK_K; ++i) {
        const int h = i / 128, r = i % 128;
        const int u = k.q[i] + 32;
        uint8_t& lo = b.ql[64 * h + r % 64];
        uint8_t& hi = b.qh[32 * h + r % 32];
        lo = static_cast<uint8_t>(lo | ((u & 0x0F) << (4 * (r / 64))));
        hi = static_cast<uint8_t>(hi | ((u >> 4) << (2 * (r / 32))));
    }
    return b;
}

}  // namespace powerhouse::detail
