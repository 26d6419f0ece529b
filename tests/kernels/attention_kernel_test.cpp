// The KV cache and attention launchers against the CPU backend (backend/cpu/attention.h):
// ph_kv_store against the CPU KvCache's bytes (exact ties of Q8_0 may round either way),
// and ph_attention against cpu::attention over both cache types, GQA, sliding windows and
// splits, with empty and cut-short chunks. Each tolerance is derived where it is used.
// Without a usable GPU these tests skip with the reason (gpu_test.h); their argument
// checks are in ops_kernel_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/quant_dot.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/vec.h"
#include "backend/cuda/cuda_runtime.h"
#include "kernels/gpu_test.h"
#include "kernels/kernel_test_support.h"
#include "powerhouse/model_info.h"
#include "powerhouse_kernels.h"
#include "tensor/dequantize.h"
#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"

namespace powerhouse {

namespace {

using test::all_close;
using test::DeviceArray;
using test::GpuTest;
using test::ran;
using test::same_bytes;
using test::uniform;

// --- ph_kv_store and ph_attention -------------------------------------------------------------

struct KvCase {
    int kv_type;  // PH_KV_F16 or PH_KV_Q8_0
    int head_dim;
};

std::string kv_case_name(const KvCase& c) {
    return std::string(c.kv_type == PH_KV_F16 ? "F16" : "Q8_0") + "_head" + std::to_string(c.head_dim);
}

[[maybe_unused]] void PrintTo(const KvCase& c, std::ostream* os) {
    *os << kv_case_name(c);
}

// A block of 32 whose Q8_0 encoding leaves no room for interpretation: d = max|x| / 127 is
// not within two f32 ulps of an f16 rounding boundary, and no x * 127 / max|x| is within
// 1e-3 of a half-integer. There ggml's quantize_row_q8_0 (x * (1 / d), ties away from
// zero), the CPU cache's quantizer (x * (127 / max), ties to even), and x / d all agree,
// so the GPU cache must equal the CPU cache byte for byte. (Exact ties are the subject of
// Q8_0TiesRoundEitherWayAndNothingElseMoves.)
bool q8_0_unambiguous(const float* x) {
    float amax = 0.0f;
    for (int i = 0; i < kQK; ++i) amax = std::max(amax, std::fabs(x[i]));
    if (amax == 0.0f) return false;
    const float d = amax / 127.0f;
    const uint16_t h = f32_to_f16(d);
    float lo = d, hi = d;
    for (int step = 0; step < 2; ++step) {
        lo = std::nextafter(lo, 0.0f);
        hi = std::nextafter(hi, 1.0f);
        if (f32_to_f16(lo) != h || f32_to_f16(hi) != h) return false;
    }
    for (int i = 0; i < kQK; ++i) {
        const double scaled = std::fabs(static_cast<double>(x[i]) * 127.0 / static_cast<double>(amax));
        if (std::fabs(scaled - std::floor(scaled) - 0.5) < 1e-3) return false;
    }
    return true;
}

// [n][width] random keys or values in [-1, 1]; Q8_0 blocks drawn until unambiguous.
std::vector<float> random_kv(int kv_type, size_t n, size_t width, std::mt19937& rng) {
    std::vector<float> v = uniform(n * width, -1.0f, 1.0f, rng);
    if (kv_type != PH_KV_Q8_0) return v;
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (size_t b = 0; b < v.size(); b += kQK) {
        while (!q8_0_unambiguous(v.data() + b)) {
            for (int i = 0; i < kQK; ++i) v[b + static_cast<size_t>(i)] = dist(rng);
        }
    }
    return v;
}

// [n / 32] blocks of 32 query values n_i * d (integers |n_i| <= 127, one of them +-127 per
// block, d a power of two): exact in f16 and in Q8_0 under any max/127 scale, so the
// CPU's rounding of the query to its cache's activation format (attention.h) loses
// nothing, and no GPU choice of query precision can part from it.
std::vector<float> exact_query(size_t n, float d, std::mt19937& rng) {
    std::vector<float> q(n);
    for (size_t b = 0; b < n; b += kQK) {
        for (size_t i = 0; i < size_t{kQK}; ++i) q[b + i] = d * static_cast<float>(static_cast<int>(rng() % 255) - 127);
        q[b + rng() % size_t{kQK}] = rng() % 2 != 0 ? 127 * d : -127 * d;
    }
    return q;
}

class AttentionKernel : public GpuTest, public ::testing::WithParamInterface<KvCase> {
protected:
    static constexpr int kNHead = 8;
    static constexpr int kNHeadKv = 2;  // GQA: query heads 0-3 read KV head 0, 4-7 KV head 1
    static constexpr int kNCtx = 300;

    int head_dim() const { return GetParam().head_dim; }
    size_t width() const { return static_cast<size_t>(kNHeadKv * head_dim()); }
    KvCacheType cpu_type() const { return GetParam().kv_type == PH_KV_F16 ? KvCacheType::f16 : KvCacheType::q8_0; }

    // Stores the same random keys and values at positions 0 .. kNCtx - 1 into cpu_ (one
    // KvCache::store per position) and into the device caches (ph_kv_store over a few
    // calls of different sizes), checking after each call that the device rows written so
    // far equal the CPU's and the rest still hold their fill pattern.
    void fill_caches() {
        std::mt19937 rng(77u + static_cast<uint32_t>(head_dim()) + 1000u * static_cast<uint32_t>(GetParam().kv_type));
        k_ = random_kv(GetParam().kv_type, kNCtx, width(), rng);
        v_ = random_kv(GetParam().kv_type, kNCtx, width(), rng);
        if (GetParam().kv_type == PH_KV_F16) {
            // f16 rounding edges, all finite (an inf key would make every logit inf): ties
            // to even both ways, ties into and inside the subnormals.
            const float edges[] = {1.00048828125f, 1.00146484375f, -2.0009765625f, 0x1.8p-25f,
                                   0x1p-25f,       -0x1.8p-24f,    0x1.ffcp-15f};
            std::copy(std::begin(edges), std::end(edges), k_.begin());
            std::copy(std::begin(edges), std::end(edges), v_.begin() + static_cast<std::ptrdiff_t>(width()));
        }
        cpu_.init(cpu_type(), 1, kNCtx, kNHeadKv, static_cast<uint32_t>(head_dim()));
        for (uint32_t p = 0; p < static_cast<uint32_t>(kNCtx); ++p) {
            cpu_.store(0, p, k_.data() + p * width(), v_.data() + p * width());
        }
        row_bytes_ = cpu_.row_bytes();
        const size_t bytes = row_bytes_ * kNCtx;
        const auto* k_cpu = reinterpret_cast<const uint8_t*>(cpu_.k_row(0, 0));
        const auto* v_cpu = reinterpret_cast<const uint8_t*>(cpu_.v_row(0, 0));

        const std::vector<uint8_t> fill(bytes, 0xa5);
        k_cache_ = std::make_unique<DeviceArray<uint8_t>>(fill);
        v_cache_ = std::make_unique<DeviceArray<uint8_t>>(fill);
        DeviceArray<float> k_dev(k_), v_dev(v_);
        int32_t begin = 0;
        for (const int count : {1, 6, 13, 80, 200}) {
            SCOPED_TRACE("ph_kv_store of positions " + std::to_string(begin) + ".." +
                         std::to_string(begin + count - 1));
            DeviceArray<int32_t> pos0(std::vector<int32_t>{begin});
            const size_t first = static_cast<size_t>(begin) * width();
            ASSERT_TRUE(ran(ph_kv_store(GetParam().kv_type, k_dev.get() + first, v_dev.get() + first, k_cache_->get(),
                                        v_cache_->get(), row_bytes_, static_cast<int64_t>(width()), count, pos0.get(),
                                        nullptr)));
            begin += count;
            const size_t written = static_cast<size_t>(begin) * row_bytes_;
            for (const auto& [cache, cpu] : {std::pair{k_cache_.get(), k_cpu}, std::pair{v_cache_.get(), v_cpu}}) {
                const std::vector<uint8_t> got = cache->download();
                std::vector<uint8_t> expected(cpu, cpu + written);
                expected.resize(bytes, 0xa5);
                ASSERT_TRUE(same_bytes(expected, got, row_bytes_)) << (cache == k_cache_.get() ? "K" : "V") << " cache";
            }
        }
        ASSERT_EQ(begin, kNCtx);
    }

    std::vector<float> k_, v_;  // [kNCtx][width] f32
    cpu::KvCache cpu_;
    size_t row_bytes_ = 0;
    std::unique_ptr<DeviceArray<uint8_t>> k_cache_, v_cache_;  // [kNCtx][row_bytes] each
};

TEST_P(AttentionKernel, KvStoreWritesTheCpuCacheBytes) {
    fill_caches();
}

TEST_P(AttentionKernel, MatchesCpuAttention) {
    fill_caches();
    if (HasFatalFailure()) return;
    const int hd = head_dim();
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    cpu::ThreadPool pool(1);
    std::vector<std::vector<float>> scratch;
    std::mt19937 rng(31u + static_cast<uint32_t>(hd));
    struct Step {
        int n_tokens;
        int last;  // position of the last token; the tokens sit at last - n_tokens + 1 .. last
    };
    // Decode and prefill-like steps at the start, in the middle (the last of 4 or 16
    // splits empty, a 5-position window straddling two splits of 19) and at the end of the
    // context (the last of 16 splits of 19 cut short by n_ctx).
    const Step steps[] = {{1, 0}, {1, 97}, {1, 299}, {7, 6}, {7, 97}, {7, 299}};
    // The query is exact in both formats (exact_query), so what remains of the CPU's own
    // rounding is, for F16, its probabilities rounded to f16 before the product with V:
    // at most 2^-11 of sum p |v| <= 4.9e-4 (|v| <= 1; measured 3.5e-4); Q8_0 uses f32
    // probabilities (measured within 2e-5 of a double evaluation). A GPU summing in f32
    // adds ~1e-5; one rounding its probabilities to f16 as well up to 4.9e-4 more.
    const double tol = GetParam().kv_type == PH_KV_F16 ? 1.5e-3 : 1e-3;
    for (const Step& step : steps) {
        const int pos0 = step.last - step.n_tokens + 1;
        const size_t q_size = static_cast<size_t>(step.n_tokens * kNHead * hd);
        DeviceArray<int32_t> pos_dev(std::vector<int32_t>{pos0});
        // Queries up to 4, 32 and 254: logits of standard deviation about 1, 10 and 80,
        // from a spread softmax to one where exp without the running maximum overflows.
        for (const float q_step : {1.0f / 32, 0.25f, 2.0f}) {
            const std::vector<float> q = exact_query(q_size, q_step, rng);
            DeviceArray<float> q_dev(q);
            // Attention sinks (gpt-oss): one logit per head, from far below to far above the
            // scores, so that the sink takes none, some or nearly all of the softmax.
            std::vector<float> sinks(kNHead);
            for (uint32_t h = 0; h < kNHead; ++h) sinks[h] = -20.0f + 40.0f * static_cast<float>(h) / (kNHead - 1);
            DeviceArray<float> sinks_dev(sinks);
            struct Variant {
                uint32_t window;
                bool sinks;
            };
            for (const Variant variant : {Variant{0, false}, Variant{0, true}, Variant{5, false}, Variant{5, true}}) {
                const uint32_t window = variant.window;
                const bool with_sinks = variant.sinks;
                std::vector<float> expected_f(q_size);
                const cpu::AttentionShape shape{kNHead, kNHeadKv, static_cast<uint32_t>(hd), scale, window,
                                                with_sinks ? sinks.data() : nullptr};
                cpu::attention(pool, cpu::KernelIsa::scalar, cpu_, 0, shape, q.data(), expected_f.data(), step.n_tokens,
                               static_cast<uint32_t>(pos0), scratch);
                const std::vector<double> expected(expected_f.begin(), expected_f.end());
                const std::vector<double> tolerance(q_size, tol);
                for (const int n_splits : {1, 4, 16}) {
                    SCOPED_TRACE(std::to_string(step.n_tokens) + " tokens from position " + std::to_string(pos0) +
                                 ", queries in steps of " + std::to_string(q_step) + ", window " +
                                 std::to_string(window) + ", " + std::to_string(n_splits) + " splits" +
                                 (with_sinks ? ", sinks" : ""));
                    const size_t partial_floats = ph_attention_partial_floats(step.n_tokens, kNHead, hd, n_splits);
                    ASSERT_GT(partial_floats, 0u);
                    // NaN in the scratch and the output: whatever is read before being written shows.
                    DeviceArray<float> partial(std::vector<float>(partial_floats, std::nanf("")));
                    DeviceArray<float> out(std::vector<float>(q_size, std::nanf("")));
                    ASSERT_TRUE(ran(ph_attention_sinks(GetParam().kv_type, q_dev.get(), k_cache_->get(),
                                                       v_cache_->get(), row_bytes_, out.get(), step.n_tokens, kNHead,
                                                       kNHeadKv, hd, scale, window, kNCtx, n_splits, partial.get(),
                                                       with_sinks ? sinks_dev.get() : nullptr, pos_dev.get(),
                                                       nullptr)));
                    EXPECT_TRUE(all_close(expected, out.download(), tolerance));
                }
            }
        }
    }
}

// Several sequences in a pool of blocks (engine/src/backend/kv_blocks.h): keys and values
// written through shuffled block tables by ph_kv_store_rows land where the CPU's KvCache puts
// them through the same tables, byte for byte, and ph_attention_rows over a batch mixing a
// decode row of one sequence with a prompt chunk of another (and a sliding window, sinks)
// gives the CPU's paged attention.
TEST_P(AttentionKernel, BlockTablesMatchTheCpuCacheAndAttention) {
    const int hd = head_dim();
    constexpr int kBlock = 16;
    constexpr int kBlocks = 20;
    constexpr int kRows = kBlock * kBlocks;
    std::mt19937 rng(5u + static_cast<uint32_t>(hd));
    // Two sequences: A holds positions 0..149 (ten blocks), B 0..139 (nine), in shuffled blocks.
    std::vector<int32_t> order(kBlocks);
    for (int b = 0; b < kBlocks; ++b) order[static_cast<size_t>(b)] = b;
    std::shuffle(order.begin(), order.end(), rng);
    constexpr int kStride = 10;
    std::vector<int32_t> tables(2 * kStride, 0);
    for (int b = 0; b < 10; ++b) tables[static_cast<size_t>(b)] = order[static_cast<size_t>(b)];
    for (int b = 0; b < 9; ++b) tables[static_cast<size_t>(kStride + b)] = order[static_cast<size_t>(10 + b)];
    const int lengths[2] = {150, 140};
    // Every position of both, written in one batch (rows interleaved by sequence).
    std::vector<int32_t> pos, seq;
    for (int p = 0; p < 150; ++p) {
        for (int s = 0; s < 2; ++s) {
            if (p < lengths[s]) {
                pos.push_back(p);
                seq.push_back(s);
            }
        }
    }
    const int n_write = static_cast<int>(pos.size());
    const std::vector<float> k = random_kv(GetParam().kv_type, n_write, width(), rng);
    const std::vector<float> v = random_kv(GetParam().kv_type, n_write, width(), rng);
    StageBatch write;
    write.n = n_write;
    write.pos = pos.data();
    write.seq = seq.data();
    write.tables = tables.data();
    write.table_stride = kStride;
    write.block_size = kBlock;
    cpu::KvCache cpu_cache;
    cpu_cache.init(cpu_type(), 1, kRows, kNHeadKv, static_cast<uint32_t>(hd));
    for (int t = 0; t < n_write; ++t) {
        cpu_cache.store(0, write.slot(t, pos[static_cast<size_t>(t)]), k.data() + static_cast<size_t>(t) * width(),
                        v.data() + static_cast<size_t>(t) * width());
    }
    const size_t row_bytes = cpu_cache.row_bytes();
    const size_t bytes = row_bytes * kRows;
    DeviceArray<uint8_t> k_cache(std::vector<uint8_t>(bytes, 0)), v_cache(std::vector<uint8_t>(bytes, 0));
    DeviceArray<float> k_dev(k), v_dev(v);
    DeviceArray<int32_t> pos_dev(pos), seq_dev(seq), tables_dev(tables);
    const PhRows write_rows{pos_dev.get(), 1, seq_dev.get(), tables_dev.get(), kStride, kBlock};
    ASSERT_TRUE(ran(ph_kv_store_rows(GetParam().kv_type, k_dev.get(), v_dev.get(), k_cache.get(), v_cache.get(),
                                     row_bytes, static_cast<int64_t>(width()), n_write, write_rows, nullptr)));
    const auto* k_cpu = reinterpret_cast<const uint8_t*>(cpu_cache.k_row(0, 0));
    const auto* v_cpu = reinterpret_cast<const uint8_t*>(cpu_cache.v_row(0, 0));
    // Rows no position maps to stay 0 on both sides (KvCache::init zero-fills).
    ASSERT_TRUE(same_bytes(std::vector<uint8_t>(k_cpu, k_cpu + bytes), k_cache.download(), row_bytes)) << "K cache";
    ASSERT_TRUE(same_bytes(std::vector<uint8_t>(v_cpu, v_cpu + bytes), v_cache.download(), row_bytes)) << "V cache";

    // The batch: A's last position (decode), then B's positions 128..139 (a prompt chunk).
    std::vector<int32_t> q_pos = {149}, q_seq = {0};
    for (int p = 128; p < 140; ++p) {
        q_pos.push_back(p);
        q_seq.push_back(1);
    }
    StageBatch batch = write;
    batch.n = static_cast<int>(q_pos.size());
    batch.pos = q_pos.data();
    batch.seq = q_seq.data();
    const size_t q_size = static_cast<size_t>(batch.n) * kNHead * static_cast<size_t>(hd);
    const std::vector<float> q = exact_query(q_size, 0.25f, rng);
    DeviceArray<float> q_dev(q);
    DeviceArray<int32_t> q_pos_dev(q_pos), q_seq_dev(q_seq);
    const PhRows rows{q_pos_dev.get(), 1, q_seq_dev.get(), tables_dev.get(), kStride, kBlock};
    std::vector<float> sinks(kNHead);
    for (uint32_t h = 0; h < kNHead; ++h) sinks[h] = -4.0f + static_cast<float>(h);
    DeviceArray<float> sinks_dev(sinks);
    cpu::ThreadPool pool(1);
    std::vector<std::vector<float>> scratch;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const double tol = GetParam().kv_type == PH_KV_F16 ? 1.5e-3 : 1e-3;
    for (const uint32_t window : {0u, 20u}) {
        for (const bool with_sinks : {false, true}) {
            SCOPED_TRACE(std::string("window ") + std::to_string(window) + (with_sinks ? ", sinks" : ""));
            const cpu::AttentionShape shape{kNHead, kNHeadKv, static_cast<uint32_t>(hd), scale, window,
                                            with_sinks ? sinks.data() : nullptr};
            std::vector<float> expected_f(q_size);
            cpu::attention(pool, cpu::KernelIsa::scalar, cpu_cache, 0, shape, q.data(), expected_f.data(), batch,
                           scratch);
            for (const int n_splits : {1, 8}) {
                const size_t partial_floats = ph_attention_partial_floats(batch.n, kNHead, hd, n_splits);
                DeviceArray<float> partial(std::vector<float>(partial_floats, std::nanf("")));
                DeviceArray<float> out(std::vector<float>(q_size, std::nanf("")));
                // n_ctx: the longest a sequence may be (the chunks of the splits cover it).
                ASSERT_TRUE(ran(ph_attention_rows(GetParam().kv_type, q_dev.get(), k_cache.get(), v_cache.get(),
                                                  row_bytes, out.get(), batch.n, kNHead, kNHeadKv, hd, scale, window,
                                                  160, n_splits, partial.get(),
                                                  with_sinks ? sinks_dev.get() : nullptr, rows, nullptr)));
                EXPECT_TRUE(all_close(std::vector<double>(expected_f.begin(), expected_f.end()), out.download(),
                                      std::vector<double>(q_size, tol)))
                    << n_splits << " splits";
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(CacheTypesAndHeadSizes, AttentionKernel,
                         // The head sizes of real models (Phi-3: 96; 80 and 112 leave lanes idle) and of
                         // the test fixtures (16, 32); a Q8_0 cache takes multiples of its block, 32.
                         ::testing::Values(KvCase{PH_KV_F16, 16}, KvCase{PH_KV_F16, 32}, KvCase{PH_KV_F16, 64},
                                           KvCase{PH_KV_F16, 80}, KvCase{PH_KV_F16, 96}, KvCase{PH_KV_F16, 112},
                                           KvCase{PH_KV_F16, 128}, KvCase{PH_KV_F16, 256}, KvCase{PH_KV_Q8_0, 32},
                                           KvCase{PH_KV_Q8_0, 64}, KvCase{PH_KV_Q8_0, 96}, KvCase{PH_KV_Q8_0, 128},
                                           KvCase{PH_KV_Q8_0, 256}),
                         [](const ::testing::TestParamInfo<KvCase>& param_info) {
                             return kv_case_name(param_info.param);
                         });

class KvStoreKernel : public GpuTest {};

TEST_F(KvStoreKernel, Q8_0TiesRoundEitherWayAndNothingElseMoves) {
    // Where x * 127 / max|x| is exactly a half-integer, ggml's quantize_row_q8_0 (the
    // header's words: roundf, ties away from zero; the engine's quantize_row) and the CPU
    // KvCache (nearbyint, ties to even) part by one unit. Which one the GPU follows is left
    // open: every value must be one of the two, the scales exact. max|x| = 127 makes d = 1
    // and max|x| = 63.5 makes d = 0.5, so these values land on ties exactly.
    std::vector<float> k(64, 0.0f);
    const float first[] = {127.0f, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 126.5f, -126.5f, 3.25f, 64.5f, -0.25f};
    const float second[] = {-63.5f, 0.25f, -0.25f, 0.75f, 1.25f, -1.25f, 31.75f, -31.25f, 0.0f, 2.0f};
    std::copy(std::begin(first), std::end(first), k.begin());
    std::copy(std::begin(second), std::end(second), k.begin() + 32);
    std::vector<float> v(k.rbegin(), k.rend());
    cpu::KvCache cpu_cache;
    cpu_cache.init(KvCacheType::q8_0, 1, 1, 1, 64);
    cpu_cache.store(0, 0, k.data(), v.data());
    const size_t row_bytes = cpu_cache.row_bytes();
    ASSERT_EQ(row_bytes, 2 * sizeof(BlockQ8_0));

    DeviceArray<float> k_dev(k), v_dev(v);
    DeviceArray<uint8_t> k_cache(row_bytes), v_cache(row_bytes);
    DeviceArray<int32_t> pos0(std::vector<int32_t>{0});
    ASSERT_TRUE(ran(ph_kv_store(PH_KV_Q8_0, k_dev.get(), v_dev.get(), k_cache.get(), v_cache.get(), row_bytes, 64, 1,
                                pos0.get(), nullptr)));
    for (const auto& [name, x, stored, cpu_row] : {std::tuple{"K", &k, k_cache.download(), cpu_cache.k_row(0, 0)},
                                                   std::tuple{"V", &v, v_cache.download(), cpu_cache.v_row(0, 0)}}) {
        std::vector<BlockQ8_0> ggml(2), cpu(2), gpu(2);
        quantize_row(GgmlType::q8_0, x->data(), ggml.data(), 64);
        std::memcpy(cpu.data(), cpu_row, row_bytes);
        std::memcpy(gpu.data(), stored.data(), row_bytes);
        int ties = 0;
        for (size_t b = 0; b < 2; ++b) {
            EXPECT_EQ(gpu[b].d, ggml[b].d) << name << " block " << b << " scale";
            for (int i = 0; i < kQK; ++i) {
                if (ggml[b].qs[i] != cpu[b].qs[i]) ++ties;
                EXPECT_TRUE(gpu[b].qs[i] == ggml[b].qs[i] || gpu[b].qs[i] == cpu[b].qs[i])
                    << name << " block " << b << " value " << i << " (" << (*x)[b * kQK + static_cast<size_t>(i)]
                    << "): got " << int{gpu[b].qs[i]} << ", ggml " << int{ggml[b].qs[i]} << ", CPU cache "
                    << int{cpu[b].qs[i]};
            }
        }
        EXPECT_GE(ties, 8) << name << ": the inputs must hit ties where the two rules part";
    }
}


}  // namespace
}  // namespace powerhouse
