// The CPU attention (backend/cpu/attention.h) against attention in double over the keys and
// values as the cache holds them, and its tile kernels (vec.h) against their plain variants.
// The cases cross the chunk boundaries of the split-K path (contexts of one chunk, one
// position more, many chunks, the largest chunk), with GQA ratios 1, 3, 4 and 8, sliding
// windows, attention sinks, both cache types, 1 and 2 threads, every instruction-set variant,
// single tokens and prompts, and batches that mix two sequences read through block tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/quant_dot.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/vec.h"
#include "backend/device_stage.h"
#include "support/random_data.h"
#include "tensor/dequantize.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace powerhouse::cpu {
namespace {

using test::random_floats;

// --- tile kernels ---------------------------------------------------------------------

TEST(AttentionKernels, TileKernelsMatchScalar) {
    for (const size_t n : {16u, 64u, 80u, 128u, 67u}) {
        for (const int nq : {1, 2, 3, 16}) {
            for (const int rows : {1, 3, 4, 7, 8, 32}) {
                SCOPED_TRACE("n " + std::to_string(n) + " queries " + std::to_string(nq) + " rows " +
                             std::to_string(rows));
                const size_t stride = n + 5;  // rows that do not follow each other
                const auto q = random_floats(stride * static_cast<size_t>(nq), 1);
                const auto k = random_floats(stride * static_cast<size_t>(rows), 2);
                const auto w = random_floats(40 * static_cast<size_t>(nq), 3);
                const auto acc0 = random_floats(stride * static_cast<size_t>(nq), 4);
                std::vector<uint16_t> k16(k.size());
                for (size_t i = 0; i < k.size(); ++i) k16[i] = f32_to_f16(k[i]);
                // Q8_0 rows of the first n / 32 blocks of each row.
                const size_t nb = n / kQK, q8_row = (nb + 1) * sizeof(BlockQ8_0);
                std::vector<std::byte> k8(q8_row * static_cast<size_t>(rows));
                for (int r = 0; r < rows && nb > 0; ++r) {
                    quantize_activations(GgmlType::q8_0, k.data() + static_cast<size_t>(r) * stride,
                                         k8.data() + static_cast<size_t>(r) * q8_row, static_cast<int64_t>(nb * kQK));
                }
                // The queries as Q8_0 blocks too, for the Q8_0 keys.
                std::vector<std::byte> q8(q8_row * static_cast<size_t>(nq));
                for (int i = 0; i < nq && nb > 0; ++i) {
                    quantize_activations(GgmlType::q8_0, q.data() + static_cast<size_t>(i) * stride,
                                         q8.data() + static_cast<size_t>(i) * q8_row, static_cast<int64_t>(nb * kQK));
                }
                std::vector<float> s_want(40 * static_cast<size_t>(nq), -1.0f), s8_want(s_want), acc_want(acc0),
                    acc16_want(acc0), acc8_want(acc0);
                dot_tile_q8_0(KernelIsa::scalar, q8.data(), q8_row, nq, k8.data(), q8_row, rows, nb * kQK,
                              s8_want.data(), 40);
                dot_tile_f16(KernelIsa::scalar, q.data(), stride, nq, k16.data(), 2 * stride, rows, n, s_want.data(),
                             40);
                accumulate_tile(KernelIsa::scalar, w.data(), 40, nq, k.data(), stride, rows, n, acc_want.data(),
                                stride);
                accumulate_tile_f16(KernelIsa::scalar, w.data(), 40, nq, k16.data(), 2 * stride, rows, n,
                                    acc16_want.data(), stride);
                accumulate_tile_q8_0(KernelIsa::scalar, w.data(), 40, nq, k8.data(), q8_row, rows, nb * kQK,
                                     acc8_want.data(), stride);
                // The plain F16 product against f32 arithmetic on the F16 values.
                for (int i = 0; i < nq; ++i) {
                    for (int r = 0; r < rows; ++r) {
                        double dot = 0, mag = 0;
                        for (size_t d = 0; d < n; ++d) {
                            const double x = static_cast<double>(q[static_cast<size_t>(i) * stride + d]) *
                                             f16_to_f32(k16[static_cast<size_t>(r) * stride + d]);
                            dot += x;
                            mag += std::fabs(x);
                        }
                        EXPECT_NEAR(s_want[static_cast<size_t>(i) * 40 + static_cast<size_t>(r)], dot, 1e-6 * mag);
                        // The plain Q8_0 product against quant_dot's.
                        float want8 = 0.0f;
                        if (nb > 0) {
                            dot_rows(KernelIsa::scalar, GgmlType::q8_0, static_cast<int64_t>(nb * kQK),
                                     k8.data() + static_cast<size_t>(r) * q8_row, 0, 1,
                                     q8.data() + static_cast<size_t>(i) * q8_row, 0, 1, &want8, 1);
                        }
                        EXPECT_NEAR(s8_want[static_cast<size_t>(i) * 40 + static_cast<size_t>(r)], want8,
                                    1e-6f * (1 + std::fabs(want8)));
                    }
                }
                for (KernelIsa isa : available_isas()) {
                    std::vector<float> s(40 * static_cast<size_t>(nq), -1.0f), s8(s), acc(acc0), acc16(acc0),
                        acc8(acc0);
                    dot_tile_f16(isa, q.data(), stride, nq, k16.data(), 2 * stride, rows, n, s.data(), 40);
                    dot_tile_q8_0(isa, q8.data(), q8_row, nq, k8.data(), q8_row, rows, nb * kQK, s8.data(), 40);
                    accumulate_tile(isa, w.data(), 40, nq, k.data(), stride, rows, n, acc.data(), stride);
                    accumulate_tile_f16(isa, w.data(), 40, nq, k16.data(), 2 * stride, rows, n, acc16.data(), stride);
                    accumulate_tile_q8_0(isa, w.data(), 40, nq, k8.data(), q8_row, rows, nb * kQK, acc8.data(), stride);
                    for (size_t i = 0; i < s.size(); ++i) {
                        EXPECT_NEAR(s[i], s_want[i], 1e-5f * (1 + std::fabs(s_want[i]))) << isa_name(isa);
                        EXPECT_NEAR(s8[i], s8_want[i], 1e-5f * (1 + std::fabs(s8_want[i]))) << isa_name(isa);
                    }
                    for (size_t i = 0; i < acc.size(); ++i) {
                        EXPECT_NEAR(acc[i], acc_want[i], 1e-5f * (1 + std::fabs(acc_want[i]))) << isa_name(isa);
                        EXPECT_NEAR(acc16[i], acc16_want[i], 1e-5f * (1 + std::fabs(acc16_want[i]))) << isa_name(isa);
                        EXPECT_NEAR(acc8[i], acc8_want[i], 1e-5f * (1 + std::fabs(acc8_want[i]))) << isa_name(isa);
                    }
                }
            }
        }
    }
}

TEST(AttentionKernels, SoftmaxStepsAreExact) {
    const size_t n = 203;
    // Values down to F16's subnormals, so that the rounding of every range is compared.
    std::vector<float> x = random_floats(n, 7, 2.0f);
    for (size_t i = 0; i < n; i += 5) x[i] *= 1e-5f;
    for (KernelIsa isa : available_isas()) {
        std::vector<float> got = x;
        scale_round_f16(isa, got.data(), n, 0.37f);
        for (size_t i = 0; i < n; ++i) EXPECT_EQ(got[i], f16_to_f32(f32_to_f16(x[i] * 0.37f))) << isa_name(isa);
        got = x;
        const float max = scale_max(isa, got.data(), n, -1.5f);
        float want_max = -INFINITY;
        for (size_t i = 0; i < n; ++i) {
            EXPECT_EQ(got[i], x[i] * -1.5f) << isa_name(isa);
            want_max = std::max(want_max, x[i] * -1.5f);
        }
        EXPECT_EQ(max, want_max) << isa_name(isa);
        EXPECT_EQ(scale_max(isa, got.data(), 0, 2.0f), -INFINITY);
    }
}

// --- attention against double ---------------------------------------------------------

constexpr uint32_t kBlock = 32;  // the paged batches' block size

struct Shape {
    uint32_t n_head, n_head_kv, head_dim;
};

// Sequences held in a cache of blocks handed out in a shuffled order, and a batch of rows
// (sequence, position) over them.
struct Scene {
    KvCacheType type;
    Shape shape;
    uint32_t window = 0;
    bool sinks = false;
    std::vector<uint32_t> lengths;              // per sequence: positions stored
    std::vector<std::pair<int, int32_t>> rows;  // (sequence, position) of each batch row
};

class Paged {
public:
    explicit Paged(const Scene& s) {
        table_stride_ = 0;
        for (uint32_t len : s.lengths) table_stride_ = std::max(table_stride_, (len + kBlock - 1) / kBlock);
        const uint32_t n_blocks = table_stride_ * static_cast<uint32_t>(s.lengths.size());
        std::vector<int32_t> order(n_blocks);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), std::mt19937(5));
        tables_ = order;
        n_rows_ = n_blocks * kBlock;
        for (const auto& [seq, pos] : s.rows) {
            seq_.push_back(seq);
            pos_.push_back(pos);
        }
        batch_.n = static_cast<int>(s.rows.size());
        batch_.pos = pos_.data();
        batch_.seq = seq_.data();
        batch_.tables = tables_.data();
        batch_.table_stride = static_cast<int>(table_stride_);
        batch_.block_size = kBlock;
    }
    const StageBatch& batch() const { return batch_; }
    uint32_t n_rows() const { return n_rows_; }
    int64_t slot(int seq, uint32_t p) const {
        return int64_t{tables_[static_cast<size_t>(seq) * table_stride_ + p / kBlock]} * kBlock + p % kBlock;
    }

private:
    uint32_t table_stride_ = 0, n_rows_ = 0;
    std::vector<int32_t> tables_, pos_, seq_;
    StageBatch batch_;
};

// The keys or values of a sequence as the cache holds them: [length][n_head_kv * head_dim].
std::vector<double> cached(const KvCache& cache, const Paged& paged, int seq, uint32_t length, bool values,
                           size_t width) {
    const GgmlType type = cache.type() == KvCacheType::q8_0 ? GgmlType::q8_0 : GgmlType::f16;
    std::vector<float> row(width);
    std::vector<double> out;
    for (uint32_t p = 0; p < length; ++p) {
        const int64_t slot = paged.slot(seq, p);
        dequantize_row(type, values ? cache.v_row(0, slot) : cache.k_row(0, slot), row.data(),
                       static_cast<int64_t>(width));
        out.insert(out.end(), row.begin(), row.end());
    }
    return out;
}

void check_scene(const Scene& s, uint32_t seed) {
    const Shape& sh = s.shape;
    const uint32_t hd = sh.head_dim, group = sh.n_head / sh.n_head_kv;
    const size_t kv_w = size_t{sh.n_head_kv} * hd, q_w = size_t{sh.n_head} * hd;
    const Paged paged(s);
    KvCache cache;
    cache.init(s.type, 1, paged.n_rows(), sh.n_head_kv, hd);
    for (size_t seq = 0; seq < s.lengths.size(); ++seq) {
        const auto k = random_floats(kv_w * s.lengths[seq], seed + 10 * static_cast<uint32_t>(seq));
        const auto v = random_floats(kv_w * s.lengths[seq], seed + 10 * static_cast<uint32_t>(seq) + 1);
        for (uint32_t p = 0; p < s.lengths[seq]; ++p) {
            cache.store(0, paged.slot(static_cast<int>(seq), p), k.data() + p * kv_w, v.data() + p * kv_w);
        }
    }
    std::vector<std::vector<double>> keys, values;
    for (size_t seq = 0; seq < s.lengths.size(); ++seq) {
        keys.push_back(cached(cache, paged, static_cast<int>(seq), s.lengths[seq], false, kv_w));
        values.push_back(cached(cache, paged, static_cast<int>(seq), s.lengths[seq], true, kv_w));
    }
    const int n = paged.batch().n;
    // Queries twice the keys' spread, so that the softmax is far from flat.
    const auto q = random_floats(q_w * static_cast<size_t>(n), seed + 7, 2.0f);
    const auto sinks = random_floats(sh.n_head, seed + 8, 1.0f, 1.0f);
    AttentionShape shape{sh.n_head, sh.n_head_kv, hd, 0.0f, s.window, s.sinks ? sinks.data() : nullptr};
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    const bool f16 = s.type == KvCacheType::f16;

    // The reference, with the query rounded as the keys' dot products take it.
    std::vector<double> want(q_w * static_cast<size_t>(n)), tolerance(want.size());
    for (int t = 0; t < n; ++t) {
        const int seq = s.rows[static_cast<size_t>(t)].first;
        const auto n_keys = static_cast<uint32_t>(s.rows[static_cast<size_t>(t)].second) + 1;
        const uint32_t first = s.window != 0 && n_keys > s.window ? n_keys - s.window : 0;
        for (uint32_t h = 0; h < sh.n_head; ++h) {
            const float* qh = q.data() + static_cast<size_t>(t) * q_w + size_t{h} * hd;
            std::vector<float> qr(hd);
            if (f16) {
                for (uint32_t i = 0; i < hd; ++i) qr[i] = f16_to_f32(f32_to_f16(qh[i]));
            } else {
                std::vector<std::byte> blocks(activation_bytes(GgmlType::q8_0, hd));
                quantize_activations(KernelIsa::scalar, GgmlType::q8_0, qh, blocks.data(), hd);
                dequantize_row(GgmlType::q8_0, blocks.data(), qr.data(), hd);
            }
            std::vector<double> score;
            double max = s.sinks ? sinks[h] : -INFINITY;
            for (uint32_t p = first; p < n_keys; ++p) {
                const double* k = keys[static_cast<size_t>(seq)].data() + p * kv_w + (h / group) * hd;
                double dot = 0;
                for (uint32_t i = 0; i < hd; ++i) dot += qr[i] * k[i];
                score.push_back(dot * scale);
                max = std::max(max, score.back());
            }
            double sum = s.sinks ? std::exp(sinks[h] - max) : 0.0;
            for (double& x : score) sum += (x = std::exp(x - max));
            std::vector<double> out(hd), weighted(hd), total(hd);
            for (uint32_t p = first; p < n_keys; ++p) {
                const double* v = values[static_cast<size_t>(seq)].data() + p * kv_w + (h / group) * hd;
                const double w = score[p - first] / sum;
                for (uint32_t i = 0; i < hd; ++i) {
                    out[i] += w * v[i];
                    weighted[i] += w * std::fabs(v[i]);
                    total[i] += std::fabs(v[i]);
                }
            }
            // Float sums and exponentials: 2e-4 of the weighted |values| bounds them at these
            // lengths. An F16 cache rounds the weights to F16 too: 2^-11 of each, or 2^-25
            // where they are subnormal.
            for (uint32_t i = 0; i < hd; ++i) {
                const size_t at = static_cast<size_t>(t) * q_w + size_t{h} * hd + i;
                want[at] = out[i];
                tolerance[at] = (2e-4 + (f16 ? std::ldexp(1.0, -11) : 0.0)) * weighted[i] +
                                (f16 ? std::ldexp(total[i], -25) : 0.0) + 1e-6;
            }
        }
    }
    // Every variant on 2 threads; the chunks differ on 1, where the chosen variant is enough.
    for (const int threads : {1, 2}) {
        ThreadPool pool(threads);
        std::vector<std::vector<float>> scratch;
        for (KernelIsa isa : available_isas()) {
            if (threads == 1 && isa != best_isa()) continue;
            std::vector<float> got(want.size(), NAN);
            attention(pool, isa, cache, 0, shape, q.data(), got.data(), paged.batch(), scratch);
            size_t bad = 0;
            for (size_t i = 0; i < got.size() && bad < 5; ++i) {
                if (!(std::fabs(got[i] - want[i]) <= tolerance[i])) {
                    ++bad;
                    ADD_FAILURE() << isa_name(isa) << ", " << threads << " threads: value " << i << " is " << got[i]
                                  << ", want " << want[i] << " +- " << tolerance[i];
                }
            }
        }
    }
}

std::string describe(const Scene& s) {
    std::string out = std::string(s.type == KvCacheType::f16 ? "F16" : "Q8_0") + " heads " +
                      std::to_string(s.shape.n_head) + "/" + std::to_string(s.shape.n_head_kv) + "x" +
                      std::to_string(s.shape.head_dim) + " window " + std::to_string(s.window) +
                      (s.sinks ? " sinks" : "") + " lengths";
    for (uint32_t len : s.lengths) out += " " + std::to_string(len);
    return out + ", " + std::to_string(s.rows.size()) + " rows";
}

// GQA ratios 1, 3, 8 and 4; head sizes with and without a tail of 32 (80).
const Shape kShapes[] = {{2, 2, 64}, {6, 2, 64}, {8, 1, 64}, {3, 1, 80}, {8, 2, 128}};

// No window, a window shorter than a tile's rows, one longer than a chunk; sinks with
// either kind of layer.
const std::pair<uint32_t, bool> kWindowsAndSinks[] = {{0, false}, {0, true}, {7, false}, {600, true}};

std::vector<KvCacheType> types_for(const Shape& sh) {
    if (sh.head_dim % kQK != 0) return {KvCacheType::f16};
    return {KvCacheType::f16, KvCacheType::q8_0};
}

// One token after contexts of one chunk (512 positions), one position more, several chunks
// and many, with windows that start inside a chunk and cross into the next.
TEST(CpuAttention, OneTokenAgreesWithDoubleAcrossChunkBoundaries) {
    uint32_t seed = 100;
    for (const Shape& sh : kShapes) {
        for (const KvCacheType type : types_for(sh)) {
            for (const uint32_t len : {1u, 511u, 512u, 513u, 700u, 1025u, 5000u}) {
                for (const auto& [window, sinks] : kWindowsAndSinks) {
                    Scene s{type, sh, window, sinks, {len}, {{0, static_cast<int32_t>(len - 1)}}};
                    SCOPED_TRACE(describe(s));
                    check_scene(s, ++seed);
                }
            }
        }
    }
    // 20000 positions, one KV head: 40 chunks, the last one short.
    for (const KvCacheType type : {KvCacheType::f16, KvCacheType::q8_0}) {
        Scene s{type, {8, 1, 64}, 0, true, {20000}, {{0, 19999}}};
        SCOPED_TRACE(describe(s));
        check_scene(s, ++seed);
    }
}

// Prompts: tiles of several rows (16 / group of them) whose rows read different positions,
// at the start of the context, across the first chunk boundary (rows that read one chunk
// beside rows that read two) and after several chunks.
TEST(CpuAttention, PromptsAgreeWithDouble) {
    uint32_t seed = 300;
    for (const Shape& sh : kShapes) {
        for (const KvCacheType type : types_for(sh)) {
            for (const uint32_t len : {37u, 530u, 2100u}) {
                for (const auto& [window, sinks] : kWindowsAndSinks) {
                    Scene s{type, sh, window, sinks, {len}, {}};
                    for (uint32_t p = len - 37; p < len; ++p) s.rows.emplace_back(0, static_cast<int32_t>(p));
                    SCOPED_TRACE(describe(s));
                    check_scene(s, ++seed);
                }
            }
        }
    }
}

// Two sequences in one batch: a prompt's rows of one, then a single token of the other, then
// a row of the first that does not follow its last (a tile of its own).
TEST(CpuAttention, BatchesMixingSequencesAgreeWithDouble) {
    uint32_t seed = 500;
    for (const Shape& sh : {kShapes[1], kShapes[2]}) {
        for (const KvCacheType type : types_for(sh)) {
            for (const uint32_t window : {0u, 600u}) {
                Scene s{type, sh, window, false, {3000, 900}, {}};
                for (int32_t p = 880; p < 900; ++p) s.rows.emplace_back(1, p);
                s.rows.emplace_back(0, 2999);
                s.rows.emplace_back(1, 500);
                SCOPED_TRACE(describe(s));
                check_scene(s, ++seed);
            }
        }
    }
}

// A row's result is the same, bit for bit, whatever batch it comes in and on any number of
// threads: alone, inside a prompt (other tiles, other chunk layouts around it) or beside
// another sequence; so perplexity does not depend on the batch size, nor an answer on the
// requests beside it.
TEST(CpuAttention, ARowsResultDoesNotDependOnItsBatchOrTheThreads) {
    for (const KvCacheType type : {KvCacheType::f16, KvCacheType::q8_0}) {
        for (const uint32_t window : {0u, 600u}) {
            const Shape sh{6, 2, 64};
            const uint32_t len = 1400, kv_w = 2 * 64, q_w = 6 * 64;
            KvCache cache;
            cache.init(type, 1, len + 8, sh.n_head_kv, sh.head_dim);
            const auto k = random_floats(kv_w * len, 11), v = random_floats(kv_w * len, 12);
            for (uint32_t p = 0; p < len; ++p) cache.store(0, p, k.data() + p * kv_w, v.data() + p * kv_w);
            const auto q = random_floats(q_w * len, 13, 2.0f);
            const AttentionShape shape{sh.n_head, sh.n_head_kv, sh.head_dim, 0.0f, window};
            std::vector<std::vector<float>> scratch;
            // Every position alone, one thread: the reference.
            ThreadPool one(1), two(2);
            std::vector<float> alone(q.size());
            for (uint32_t p = 0; p < len; ++p) {
                attention(one, best_isa(), cache, 0, shape, q.data() + p * q_w, alone.data() + p * q_w, 1, p, scratch);
            }
            // Prompts of several sizes, cut at several places, on two threads.
            for (const int batch : {5, 64, 333}) {
                std::vector<float> got(q.size());
                for (uint32_t p = 0; p < len; p += static_cast<uint32_t>(batch)) {
                    const int n = std::min(batch, static_cast<int>(len - p));
                    attention(two, best_isa(), cache, 0, shape, q.data() + p * q_w, got.data() + p * q_w, n, p,
                              scratch);
                }
                for (size_t i = 0; i < got.size(); ++i) {
                    ASSERT_EQ(got[i], alone[i]) << "batch " << batch << ", value " << i << (window ? ", window" : "");
                }
            }
        }
    }
}

}  // namespace
}  // namespace powerhouse::cpu
