// The batch invariance of the CPU dot products of quantized weights, which continuous
// batching relies on (a request gives the same tokens alone and beside others): a token's
// result is the same bit for bit whether dot_rows sees it alone or among up to eight,
// whether the tiled product (sixteen tokens per vector with AVX-512 VNNI, eight with AVX2)
// or dot_rows computes it, and whatever the batch size matmul gets. The tiled product's
// accuracy follows from that equality and from cpu_kernel_test.cpp's checks of dot_rows
// against dequantized arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "backend/cpu/interleave.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/quant_dot.h"
#include "backend/cpu/thread_pool.h"
#include "support/random_data.h"
#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"

namespace powerhouse::cpu {
namespace {

using test::random_floats;

const GgmlType kTiledTypes[] = {GgmlType::q2_k, GgmlType::q3_k, GgmlType::q4_k, GgmlType::q5_k,
                                GgmlType::q6_k, GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0,
                                GgmlType::q5_1, GgmlType::q8_0, GgmlType::mxfp4};

struct Problem {
    GgmlType type;
    int64_t n;
    int rows;
    int tokens;
    std::vector<std::byte> w;    // [rows] rows of the type
    std::vector<std::byte> act;  // [tokens] activation rows
    size_t w_row = 0, a_row = 0;

    Problem(GgmlType type_, int64_t n_, int rows_, int tokens_, KernelIsa isa)
        : type(type_), n(n_), rows(rows_), tokens(tokens_) {
        w_row = row_bytes(type_traits(type), static_cast<uint64_t>(n));
        a_row = activation_bytes(type, n);
        const auto wf = random_floats(static_cast<size_t>(n * rows), 11 + static_cast<uint32_t>(type));
        w.resize(w_row * static_cast<size_t>(rows));
        for (int r = 0; r < rows; ++r) {
            std::byte* row = w.data() + w_row * static_cast<size_t>(r);
            if (type == GgmlType::f32) {
                std::memcpy(row, wf.data() + r * n, w_row);
            } else {
                quantize_row(type, wf.data() + r * n, row, n);
            }
        }
        const auto x = random_floats(static_cast<size_t>(n * tokens), 17 + static_cast<uint32_t>(tokens));
        act.resize(a_row * static_cast<size_t>(tokens));
        for (int t = 0; t < tokens; ++t) {
            quantize_activations(isa, type, x.data() + t * n, act.data() + a_row * static_cast<size_t>(t), n);
        }
    }

    // dst[t][r] by dot_rows with all tokens in one call.
    std::vector<float> together(KernelIsa isa) const {
        std::vector<float> dst(static_cast<size_t>(rows * tokens), -1.0f);
        dot_rows(isa, type, n, w.data(), w_row, rows, act.data(), a_row, tokens, dst.data(), static_cast<size_t>(rows));
        return dst;
    }
    // The same, one token per call.
    std::vector<float> alone(KernelIsa isa) const {
        std::vector<float> dst(static_cast<size_t>(rows * tokens), -1.0f);
        for (int t = 0; t < tokens; ++t) {
            dot_rows(isa, type, n, w.data(), w_row, rows, act.data() + a_row * static_cast<size_t>(t), a_row, 1,
                     dst.data() + static_cast<size_t>(t * rows), static_cast<size_t>(rows));
        }
        return dst;
    }
};

// Bit for bit, naming the first difference.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
            ADD_FAILURE() << what << ": at " << i << " " << got[i] << " != " << want[i];
            return;
        }
    }
}

TEST(BatchInvariance, DotRowsGivesATokenTheSameBitsAloneAndAmongOthers) {
    // Quantized weights: float weights (F16, BF16, F32) sum one token alone in four partial
    // sums, for the FMA latency, and a batch's tokens in one each (quant_dot_simd.inc).
    const GgmlType types[] = {GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0, GgmlType::q5_1,
                              GgmlType::q8_0, GgmlType::q2_k, GgmlType::q3_k, GgmlType::q4_k,
                              GgmlType::q5_k, GgmlType::q6_k, GgmlType::mxfp4};
    for (KernelIsa isa : available_isas()) {
        for (GgmlType type : types) {
            for (int tokens : {2, 3, 8, 11}) {
                const Problem p(type, 512, 5, tokens, isa);
                expect_same_bits(p.together(isa), p.alone(isa),
                                 std::string(isa_name(isa)) + " " + std::string(type_traits(type).name) + " tokens " +
                                     std::to_string(tokens));
            }
        }
    }
}

// Whether `isa` must have the tiled product of `type`: AVX-512 VNNI for every quantized
// type, AVX2 for all but Q8_0 (no faster tiled there).
bool tiles_expected(KernelIsa isa, GgmlType type) {
    return isa == KernelIsa::avx512 || (isa == KernelIsa::avx2 && type != GgmlType::q8_0);
}

// The tiled product of p's tokens on `isa`.
std::vector<float> tiled(KernelIsa isa, const Problem& p) {
    std::vector<std::byte> tiles(tiled_activation_bytes(p.type, p.n, p.tokens));
    tile_activations(p.type, p.n, p.act.data(), p.a_row, p.tokens, tiles.data());
    std::vector<float> got(static_cast<size_t>(p.rows * p.tokens), -1.0f);
    dot_rows_tiled(isa, p.type, p.n, p.w.data(), p.w_row, p.rows, tiles.data(), p.tokens, got.data(),
                   static_cast<size_t>(p.rows));
    return got;
}

TEST(BatchInvariance, TheTiledProductEqualsDotRowsBitForBit) {
    // has_tiled_dot says whether the ISA has the path, not whether this processor has the ISA.
    int checked = 0;
    for (KernelIsa isa : available_isas()) {
        for (GgmlType type : kTiledTypes) {
            // Odd rows (the last pair has one), tokens across tile boundaries and halves of
            // tiles, and a width of one super-block and of several; for the 32-element types
            // also widths whose last blocks are dot_legacy's tail (3 blocks: all tail;
            // SmolLM2's 576: 18 blocks, 2 in the tail).
            const bool k_quant = type_traits(type).block_size == 256;
            for (int64_t n : {int64_t{256}, int64_t{1536}, int64_t{96}, int64_t{576}, int64_t{800}}) {
                if (k_quant && n % 256 != 0) continue;
                const std::string what =
                    std::string(isa_name(isa)) + " " + std::string(type_traits(type).name) + " n " + std::to_string(n);
                ASSERT_EQ(has_tiled_dot(isa, type, n), tiles_expected(isa, type)) << what;
                if (!tiles_expected(isa, type)) continue;
                for (int tokens : {1, 7, 8, 9, 16, 17, 40}) {
                    const Problem p(type, n, 7, tokens, isa);
                    expect_same_bits(tiled(isa, p), p.alone(isa), what + " tokens " + std::to_string(tokens));
                    ++checked;
                }
            }
        }
    }
    if (checked == 0) GTEST_SKIP() << "neither AVX2 nor AVX-512 VNNI on this processor";
    EXPECT_FALSE(has_tiled_dot(KernelIsa::avx512, GgmlType::f16, 256));
    EXPECT_FALSE(has_tiled_dot(KernelIsa::avx2, GgmlType::f16, 256));
    EXPECT_FALSE(has_tiled_dot(KernelIsa::avx2, GgmlType::q8_0, 256));
    EXPECT_FALSE(has_tiled_dot(KernelIsa::scalar, GgmlType::q4_0, 256));
}

// Where a block of `type` keeps its f16 scales (d, then dmin where it has one): byte
// offsets, or -1.
std::pair<int, int> scale_offsets(GgmlType type) {
    switch (type) {
        case GgmlType::q4_1:
        case GgmlType::q5_1:
            return {0, 2};
        case GgmlType::q2_k:
            return {static_cast<int>(offsetof(BlockQ2_K, d)), static_cast<int>(offsetof(BlockQ2_K, dmin))};
        case GgmlType::q3_k:
            return {static_cast<int>(offsetof(BlockQ3_K, d)), -1};
        case GgmlType::q4_k:
            return {static_cast<int>(offsetof(BlockQ4_K, d)), static_cast<int>(offsetof(BlockQ4_K, dmin))};
        case GgmlType::q5_k:
            return {static_cast<int>(offsetof(BlockQ5_K, d)), static_cast<int>(offsetof(BlockQ5_K, dmin))};
        case GgmlType::q6_k:
            return {static_cast<int>(offsetof(BlockQ6_K, d)), -1};
        default:  // Q4_0, Q5_0, Q8_0: d first
            return {0, -1};
    }
}

// The 16-bit sums of the AVX2 tiles at their bounds: every byte of every block the same
// (all ones: Q6_K's 63, Q5_K's 31, Q5_1's 31, ...; all zeros: Q5_0's -16, Q4_0's -8; 0x80:
// Q8_0's -128; ...) and its scales 1.0, against activations at +127 or at -127, so that
// no sum of products cancels. A sum that overflowed would differ from dot_rows.
// Q8_K takes its scale's sign from the element of largest magnitude and maps that element
// to -127, so equal inputs give -127 whatever their sign; inputs whose first of every 256
// has the other sign give +127 for all but that one.
TEST(BatchInvariance, TheTiledProductHoldsAtTheExtremesOfItsSums) {
    int checked = 0;
    for (KernelIsa isa : available_isas()) {
        for (GgmlType type : kTiledTypes) {
            if (!tiles_expected(isa, type)) continue;
            for (const uint8_t fill : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{0x80}, uint8_t{0x7F}, uint8_t{0x77}}) {
                for (const auto& [sign, lead] :
                     {std::pair{1.0f, 1.0f}, std::pair{-1.0f, -1.0f}, std::pair{1.0f, -1.0f}, std::pair{-1.0f, 1.0f}}) {
                    const int64_t n = type_traits(type).block_size == 256 ? 768 : 576;
                    Problem p(type, n, 3, 17, isa);
                    const size_t block = type_traits(type).type_size;
                    const auto [d_at, dmin_at] = scale_offsets(type);
                    std::fill(p.w.begin(), p.w.end(), std::byte{fill});
                    for (size_t at = 0; at < p.w.size(); at += block) {
                        if (type == GgmlType::mxfp4) {
                            p.w[at] = std::byte{127};  // 2^0
                            continue;
                        }
                        for (const int off : {d_at, dmin_at}) {
                            if (off < 0) continue;
                            p.w[at + static_cast<size_t>(off)] = std::byte{0x00};  // f16 1.0
                            p.w[at + static_cast<size_t>(off) + 1] = std::byte{0x3C};
                        }
                    }
                    std::vector<float> x(static_cast<size_t>(p.n), sign);
                    for (size_t i = 0; i < x.size(); i += QK_K) x[i] = lead;
                    for (int t = 0; t < p.tokens; ++t) {
                        quantize_activations(isa, type, x.data(), p.act.data() + p.a_row * static_cast<size_t>(t), p.n);
                    }
                    expect_same_bits(tiled(isa, p), p.alone(isa),
                                     std::string(isa_name(isa)) + " " + std::string(type_traits(type).name) + " fill " +
                                         std::to_string(fill) + " sign " + std::to_string(sign) + " lead " +
                                         std::to_string(lead));
                    ++checked;
                }
            }
        }
    }
    if (checked == 0) GTEST_SKIP() << "neither AVX2 nor AVX-512 VNNI on this processor";
}

// The instruction sets with interleaved kernels that this processor runs (all but scalar).
std::vector<KernelIsa> interleaving_isas() {
    std::vector<KernelIsa> isas;
    for (KernelIsa isa : available_isas()) {
        if (isa != KernelIsa::scalar) isas.push_back(isa);
    }
    return isas;
}

// Row r of an interleaved matrix, back in the file's format, per group.
std::vector<std::byte> deinterleaved(GgmlType type, int64_t n, int rows, const std::vector<std::byte>& packed) {
    const size_t w_row = row_bytes(type_traits(type), static_cast<uint64_t>(n));
    std::vector<std::byte> out(w_row * static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) {
        deinterleave_row(type, n, packed.data() + static_cast<size_t>(r / kInterleaveRows) * kInterleaveRows * w_row,
                         r % kInterleaveRows, out.data() + static_cast<size_t>(r) * w_row);
    }
    return out;
}

TEST(Interleave, KeepsEveryByteOfTheRows) {
    for (GgmlType type : {GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k}) {
        const Problem p(type, 768, 32, 1, KernelIsa::scalar);
        std::vector<std::byte> packed(p.w.size());
        interleave_rows(type, p.n, p.rows, p.w.data(), p.w_row, packed.data());
        EXPECT_NE(packed, p.w);
        EXPECT_EQ(deinterleaved(type, p.n, p.rows, packed), p.w) << type_traits(type).name;
    }
}

TEST(Interleave, CopiesKeepTheirPlacesAndTheSameBytesAreCopiedOnce) {
    if (interleaving_isas().empty()) GTEST_SKIP() << "no AVX2: nothing is interleaved on this processor";
    const KernelIsa isa = best_isa();
    ThreadPool pool(2);
    // Three "experts" of 32 rows, 48 rows apart (as a stage's share of a 3D tensor would not
    // be, but copy keeps whatever places it is given).
    const Problem p(GgmlType::q4_k, 512, 48 * 3, 1, isa);
    const uint64_t stride = 48 * p.w_row;
    InterleavedCopies copies;
    const std::byte* copy =
        copies.copy(pool, isa, GgmlType::q4_k, 512, 32, p.w_row, p.w.data(), 3, stride, nullptr);
    ASSERT_NE(copy, nullptr);
    EXPECT_EQ(copies.bytes(), 2 * stride + 32 * p.w_row);
    for (int e = 0; e < 3; ++e) {
        std::vector<std::byte> packed(copy + e * stride, copy + e * stride + 32 * p.w_row);
        const std::vector<std::byte> rows = deinterleaved(GgmlType::q4_k, 512, 32, packed);
        EXPECT_TRUE(std::equal(rows.begin(), rows.end(), p.w.begin() + static_cast<std::ptrdiff_t>(e * stride)))
            << "expert " << e;
    }
    EXPECT_EQ(copies.copy(pool, isa, GgmlType::q4_k, 512, 32, p.w_row, p.w.data(), 3, stride, nullptr), copy);
    EXPECT_EQ(copies.bytes(), 2 * stride + 32 * p.w_row);
    EXPECT_EQ(copies.copy(pool, isa, GgmlType::q4_k, 512, 40, p.w_row, p.w.data(), 1, 0, nullptr),
              nullptr);  // not whole groups
}

TEST(Interleave, OnlyWholeGroupsOfPackedRowsWithAKernel) {
    const size_t q4 = row_bytes(type_traits(GgmlType::q4_k), 512);
    EXPECT_TRUE(can_interleave(KernelIsa::avx512, GgmlType::q4_k, 512, 32, q4));
    EXPECT_TRUE(can_interleave(KernelIsa::avx512, GgmlType::q6_k, 512, 16,
                               row_bytes(type_traits(GgmlType::q6_k), 512)));
    EXPECT_FALSE(can_interleave(KernelIsa::avx512, GgmlType::q4_k, 512, 40, q4));       // 2.5 groups
    EXPECT_FALSE(can_interleave(KernelIsa::avx512, GgmlType::q4_k, 512, 32, 2 * q4));   // a column share
    EXPECT_TRUE(can_interleave(KernelIsa::avx512, GgmlType::q5_k, 512, 32,
                               row_bytes(type_traits(GgmlType::q5_k), 512)));
    EXPECT_FALSE(can_interleave(KernelIsa::avx512, GgmlType::q3_k, 512, 32,
                                row_bytes(type_traits(GgmlType::q3_k), 512)));
    EXPECT_TRUE(can_interleave(KernelIsa::avx2, GgmlType::q4_k, 512, 32, q4));
    EXPECT_FALSE(can_interleave(KernelIsa::avx2, GgmlType::q6_k, 512, 32, row_bytes(type_traits(GgmlType::q6_k), 512)));
    EXPECT_FALSE(can_interleave(KernelIsa::scalar, GgmlType::q4_k, 512, 32, q4));
}

TEST(BatchInvariance, InterleavedRowsGiveDotRowsBitsAtEveryTokenCount) {
    std::vector<KernelIsa> isas = interleaving_isas();
    isas.insert(isas.begin(), KernelIsa::scalar);
    for (KernelIsa isa : isas) {
        for (GgmlType type : {GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k}) {
            // The scalar reference reads every layout; a vector variant, those it has a kernel for.
            if (isa != KernelIsa::scalar && !can_interleave(isa, type, 256, 16, row_bytes(type_traits(type), 256))) {
                continue;
            }
            for (int64_t n : {int64_t{256}, int64_t{768}, int64_t{2048}}) {
                for (int tokens : {1, 2, 5, 8, 9, 20}) {
                    const Problem p(type, n, 48, tokens, isa);
                    std::vector<std::byte> packed(p.w.size());
                    interleave_rows(type, n, p.rows, p.w.data(), p.w_row, packed.data());
                    std::vector<float> got(static_cast<size_t>(p.rows * tokens), -1.0f);
                    dot_rows_interleaved(isa, type, n, packed.data(), p.rows / kInterleaveRows, p.act.data(), p.a_row,
                                         tokens, got.data(), static_cast<size_t>(p.rows));
                    expect_same_bits(got, p.together(isa),
                                     std::string(isa_name(isa)) + " " + std::string(type_traits(type).name) + " n " +
                                         std::to_string(n) + " tokens " + std::to_string(tokens));
                }
            }
        }
    }
}

TEST(BatchInvariance, MatmulGivesEachTokenItsAloneResultAtEveryBatchSize) {
    ThreadPool pool(2);
    const int64_t in = 768;
    const int rows = 45;
    // Batches of 33 and 40 take the tiled product where the processor has one for the type
    // (AVX2: from 32 tokens, Q4_1 and Q5_0).
    for (GgmlType type : {GgmlType::q4_k, GgmlType::q6_k, GgmlType::q8_0, GgmlType::q4_1, GgmlType::q5_0}) {
        const Problem p(type, in, rows, 1, best_isa());
        const auto x = random_floats(static_cast<size_t>(in * 40), 23);
        std::vector<std::byte> buffer;
        std::vector<float> alone(static_cast<size_t>(rows * 40));
        for (int t = 0; t < 40; ++t) {
            matmul(pool, best_isa(), MatmulWeights{type, p.w.data(), in, rows}, x.data() + t * in,
                   alone.data() + static_cast<size_t>(t * rows), 1, buffer);
        }
        for (int n : {2, 8, 16, 33, 40}) {
            std::vector<float> batch(static_cast<size_t>(rows * n));
            matmul(pool, best_isa(), MatmulWeights{type, p.w.data(), in, rows}, x.data(), batch.data(), n, buffer);
            expect_same_bits(batch, std::vector<float>(alone.begin(), alone.begin() + rows * n),
                             std::string(type_traits(type).name) + " batch " + std::to_string(n));
        }
    }
}

// matmul over interleaved weights (the CPU stage's copies) gives every batch size the bits
// of matmul over the file's rows: dot_rows for small batches, the tiled product (AVX-512)
// from eight tokens.
TEST(BatchInvariance, MatmulOverInterleavedRowsEqualsMatmulOverTheFilesRows) {
    if (interleaving_isas().empty()) GTEST_SKIP() << "no AVX2: nothing is interleaved on this processor";
    ThreadPool pool(2);
    const int64_t in = 512;
    const int rows = 96;
    for (KernelIsa isa : interleaving_isas()) {
        for (GgmlType type : {GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k}) {
            const Problem p(type, in, rows, 1, isa);
            if (!can_interleave(isa, type, in, rows, p.w_row)) continue;  // AVX2's Q6_K
            std::vector<std::byte> packed(p.w.size());
            interleave_rows(type, in, rows, p.w.data(), p.w_row, packed.data());
            MatmulWeights interleaved{type, packed.data(), in, rows};
            interleaved.interleaved = true;
            const auto x = random_floats(static_cast<size_t>(in * 40), 29);
            std::vector<std::byte> buffer;
            for (int n : {1, 2, 7, 8, 16, 33, 40}) {
                std::vector<float> want(static_cast<size_t>(rows * n)), got(want.size(), -1.0f);
                matmul(pool, isa, MatmulWeights{type, p.w.data(), in, rows}, x.data(), want.data(), n, buffer);
                matmul(pool, isa, interleaved, x.data(), got.data(), n, buffer);
                expect_same_bits(got, want,
                                 std::string(isa_name(isa)) + " " + std::string(type_traits(type).name) + " batch " +
                                     std::to_string(n));
            }
        }
    }
}

}  // namespace
}  // namespace powerhouse::cpu
