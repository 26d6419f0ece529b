// The CPU backend's kernels: every instruction-set variant the machine can run against the
// plain C++ variant, and the plain variant against dequantized f32 arithmetic, for every
// weight type, odd row counts and one or several tokens; the element-wise kernels, the
// threaded matmul and attention over both KV cache types.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/quant_dot.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/vec.h"
#include "support/random_data.h"
#include "tensor/dequantize.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"

namespace powerhouse::cpu {
namespace {

using test::random_floats;

const GgmlType kWeightTypes[] = {GgmlType::f32,  GgmlType::f16,  GgmlType::bf16, GgmlType::q4_0, GgmlType::q4_1,
                                 GgmlType::q5_0, GgmlType::q5_1, GgmlType::q8_0, GgmlType::q2_k, GgmlType::q3_k,
                                 GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k, GgmlType::mxfp4};

std::vector<std::byte> encode_rows(GgmlType type, const std::vector<float>& x, int64_t n, int rows) {
    const size_t rb = row_bytes(type_traits(type), static_cast<uint64_t>(n));
    std::vector<std::byte> out(rb * static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) {
        if (type == GgmlType::f32) {
            std::memcpy(out.data() + rb * static_cast<size_t>(r), x.data() + r * n, rb);
        } else {
            quantize_row(type, x.data() + r * n, out.data() + rb * static_cast<size_t>(r), n);
        }
    }
    return out;
}

// The activations as the kernels see them, decoded back to f32.
std::vector<float> decode_activations(GgmlType weight_type, const std::byte* a, int64_t n) {
    std::vector<float> out(static_cast<size_t>(n));
    switch (activation_type(weight_type)) {
        case GgmlType::q8_0:
            dequantize_row(GgmlType::q8_0, a, out.data(), n);
            break;
        case GgmlType::q8_1:
            for (int64_t b = 0; b < n / 32; ++b) {
                BlockQ8_1 blk;
                std::memcpy(&blk, a + b * static_cast<int64_t>(sizeof blk), sizeof blk);
                for (int j = 0; j < 32; ++j) out[static_cast<size_t>(b * 32 + j)] = f16_to_f32(blk.d) * blk.qs[j];
            }
            break;
        case GgmlType::q8_k:
            for (int64_t b = 0; b < n / 256; ++b) {
                BlockQ8_K blk;
                std::memcpy(&blk, a + b * static_cast<int64_t>(sizeof blk), sizeof blk);
                for (int j = 0; j < 256; ++j) out[static_cast<size_t>(b * 256 + j)] = blk.d * blk.qs[j];
            }
            break;
        case GgmlType::f16:
            dequantize_row(GgmlType::f16, a, out.data(), n);
            break;
        case GgmlType::bf16:
            dequantize_row(GgmlType::bf16, a, out.data(), n);
            break;
        default:
            std::memcpy(out.data(), a, static_cast<size_t>(n) * sizeof(float));
    }
    return out;
}

struct DotCase {
    GgmlType type;
    int64_t n;
    int rows;
    int tokens;
};

void check_dots(const DotCase& c) {
    const auto w_f32 = random_floats(static_cast<size_t>(c.n * c.rows), 1 + static_cast<uint32_t>(c.type));
    const auto x = random_floats(static_cast<size_t>(c.n * c.tokens), 100 + static_cast<uint32_t>(c.tokens), 2.0f);
    const auto w = encode_rows(c.type, w_f32, c.n, c.rows);
    const size_t w_row = row_bytes(type_traits(c.type), static_cast<uint64_t>(c.n));
    const size_t a_row = activation_bytes(c.type, c.n);
    std::vector<std::byte> act(a_row * static_cast<size_t>(c.tokens));
    for (int t = 0; t < c.tokens; ++t) {
        quantize_activations(c.type, x.data() + t * c.n, act.data() + a_row * static_cast<size_t>(t), c.n);
    }
    // Plain variant against dequantized weights and activations, summed in double; the
    // bound is relative to the sum of |products| (f16 rounding of Q8_1's block sums).
    std::vector<float> ref(static_cast<size_t>(c.rows * c.tokens));
    dot_rows(KernelIsa::scalar, c.type, c.n, w.data(), w_row, c.rows, act.data(), a_row, c.tokens, ref.data(),
             static_cast<size_t>(c.rows));
    std::vector<float> row(static_cast<size_t>(c.n));
    for (int t = 0; t < c.tokens; ++t) {
        const auto y = decode_activations(c.type, act.data() + a_row * static_cast<size_t>(t), c.n);
        for (int r = 0; r < c.rows; ++r) {
            dequantize_row(c.type == GgmlType::f32 ? GgmlType::f32 : c.type, w.data() + w_row * static_cast<size_t>(r),
                           row.data(), c.n);
            double sum = 0, mag = 0;
            for (int64_t i = 0; i < c.n; ++i) {
                sum += static_cast<double>(row[static_cast<size_t>(i)]) * y[static_cast<size_t>(i)];
                mag += std::fabs(static_cast<double>(row[static_cast<size_t>(i)]) * y[static_cast<size_t>(i)]);
            }
            const bool f16_sum = activation_type(c.type) == GgmlType::q8_1;
            EXPECT_NEAR(ref[static_cast<size_t>(t * c.rows + r)], sum, (f16_sum ? 1e-3 : 1e-5) * mag + 1e-5)
                << type_traits(c.type).name << " row " << r << " token " << t;
        }
    }
    // Every variant against the plain one: the same exact block products, summed in
    // another order.
    for (KernelIsa isa : available_isas()) {
        std::vector<float> got(ref.size(), -1.0f);
        dot_rows(isa, c.type, c.n, w.data(), w_row, c.rows, act.data(), a_row, c.tokens, got.data(),
                 static_cast<size_t>(c.rows));
        for (size_t i = 0; i < ref.size(); ++i) {
            EXPECT_NEAR(got[i], ref[i], 2e-5 * (std::fabs(ref[i]) + 0.05 * std::sqrt(static_cast<double>(c.n))))
                << isa_name(isa) << " " << type_traits(c.type).name << " n " << c.n << " at " << i;
        }
    }
}

TEST(CpuKernels, ListsScalarFirst) {
    ASSERT_FALSE(available_isas().empty());
    EXPECT_EQ(available_isas().front(), KernelIsa::scalar);
    for (KernelIsa isa : available_isas()) std::printf("variant: %s\n", isa_name(isa));
}

TEST(CpuKernels, EveryVariantAndTypeMatchesReference) {
    for (GgmlType type : kWeightTypes) {
        for (int tokens : {1, 3, 6, 11}) {  // passes of 4 or 8 tokens, and remainders
            check_dots({type, 512, 7, tokens});
        }
        check_dots({type, 256, 1, 5});
        // 32-element blocks go four at a time: 7 blocks leave a remainder of 3.
        if (activation_block(type) == 32) check_dots({type, 224, 5, 3});
    }
}

TEST(CpuKernels, EveryVariantQuantizesActivationsToTheSameBytes) {
    auto x = random_floats(1024 + 13, 21, 3.0f);
    x[5] = 0.0f;
    std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // an all-zero block
    x[600] = 70000.0f;                                  // beyond F16's range
    for (GgmlType type : kWeightTypes) {
        const int64_t n = activation_block(type) == 1 ? 1024 + 13 : 1024;
        std::vector<std::byte> want(activation_bytes(type, n));
        quantize_activations(KernelIsa::scalar, type, x.data(), want.data(), n);
        for (KernelIsa isa : available_isas()) {
            std::vector<std::byte> got(want.size(), std::byte{0x55});
            quantize_activations(isa, type, x.data(), got.data(), n);
            EXPECT_EQ(got, want) << isa_name(isa) << " " << type_traits(type).name;
        }
    }
}

TEST(CpuKernels, OddLengthsOfFloatRows) {
    for (GgmlType type : {GgmlType::f32, GgmlType::f16, GgmlType::bf16}) {
        check_dots({type, 45, 3, 2});
        // Whole passes of tokens take float rows three (AVX2) or two at a time: 5 rows are a
        // triple and a pair, 4 rows two pairs, each with the odd length's tail.
        check_dots({type, 45, 5, 9});
        check_dots({type, 45, 4, 8});
    }
}

TEST(CpuKernels, Q8KQuantizesAsGgml) {
    auto x = random_floats(512, 7);
    x[37] = -9.0f;  // the largest magnitude is negative: the scale takes its sign
    std::vector<std::byte> a(activation_bytes(GgmlType::q4_k, 512));
    quantize_activations(GgmlType::q4_k, x.data(), a.data(), 512);
    BlockQ8_K b;
    std::memcpy(&b, a.data(), sizeof b);
    EXPECT_FLOAT_EQ(b.d, 1.0f / (-127.0f / -9.0f));
    EXPECT_EQ(b.qs[37], -127);  // ggml scales by -127 / max: the largest magnitude is always -127
    for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += b.qs[16 * g + i];
        EXPECT_EQ(b.bsums[g], sum);
    }
    for (int i = 0; i < 256; ++i) EXPECT_NEAR(b.d * b.qs[i], x[static_cast<size_t>(i)], std::fabs(b.d) * 0.5f + 1e-6f);
}

TEST(CpuKernels, ElementWiseVariantsMatchScalar) {
    const size_t n = 203;
    const auto a = random_floats(n, 11, 3.0f);
    const auto b = random_floats(n, 12);
    const auto w = random_floats(n, 13);
    for (KernelIsa isa : available_isas()) {
        std::vector<float> want(n), got(n);
        swiglu(KernelIsa::scalar, a.data(), b.data(), want.data(), n);
        swiglu(isa, a.data(), b.data(), got.data(), n);
        for (size_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], want[i], 1e-6f * (1 + std::fabs(want[i]))) << isa_name(isa);
        rms_norm_row(KernelIsa::scalar, a.data(), want.data(), w.data(), static_cast<int64_t>(n), 1e-5f);
        rms_norm_row(isa, a.data(), got.data(), w.data(), static_cast<int64_t>(n), 1e-5f);
        for (size_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], want[i], 1e-5f * (1 + std::fabs(want[i]))) << isa_name(isa);
        add(isa, a.data(), b.data(), got.data(), n);
        for (size_t i = 0; i < n; ++i) EXPECT_EQ(got[i], a[i] + b[i]);
        std::vector<float> e1(a), e2(a);
        const double s1 = exp_sum(KernelIsa::scalar, e1.data(), n, 4.0f);
        const double s2 = exp_sum(isa, e2.data(), n, 4.0f);
        EXPECT_NEAR(s2, s1, 1e-5 * s1);
        for (size_t i = 0; i < n; ++i) EXPECT_NEAR(e2[i], e1[i], 1e-6f * e1[i] + 1e-30f) << isa_name(isa);
        std::vector<uint16_t> h(64);
        for (size_t i = 0; i < h.size(); ++i) h[i] = f32_to_f16(a[i]);
        std::vector<float> y1(b.begin(), b.begin() + 64), y2(y1);
        axpy_f16(KernelIsa::scalar, 0.75f, h.data(), y1.data(), 64);
        axpy_f16(isa, 0.75f, h.data(), y2.data(), 64);
        for (size_t i = 0; i < 64; ++i) EXPECT_NEAR(y2[i], y1[i], 1e-6f * (1 + std::fabs(y1[i])));
        std::vector<std::byte> q(activation_bytes(GgmlType::q8_0, 64));
        quantize_activations(GgmlType::q8_0, a.data(), q.data(), 64);
        std::vector<float> z1(b.begin(), b.begin() + 64), z2(z1);
        axpy_q8_0(KernelIsa::scalar, -0.5f, q.data(), z1.data(), 64);
        axpy_q8_0(isa, -0.5f, q.data(), z2.data(), 64);
        for (size_t i = 0; i < 64; ++i) EXPECT_NEAR(z2[i], z1[i], 1e-6f * (1 + std::fabs(z1[i])));
    }
}

TEST(CpuKernels, ThreadedMatmulEqualsDirectDots) {
    ThreadPool pool(2);
    const int64_t in = 512;
    const int rows = 37;
    for (GgmlType type : {GgmlType::q4_1, GgmlType::q4_k, GgmlType::f16}) {
        const auto w = encode_rows(type, random_floats(static_cast<size_t>(in * rows), 5), in, rows);
        for (int n : {1, 9}) {
            const auto x = random_floats(static_cast<size_t>(in * n), 6);
            std::vector<float> dst(static_cast<size_t>(rows * n));
            std::vector<std::byte> buffer;
            matmul(pool, best_isa(), MatmulWeights{type, w.data(), in, rows}, x.data(), dst.data(), n, buffer);
            const size_t a_row = activation_bytes(type, in);
            std::vector<std::byte> act(a_row);
            const size_t w_row = row_bytes(type_traits(type), in);
            for (int t = 0; t < n; ++t) {
                quantize_activations(type, x.data() + t * in, act.data(), in);
                for (int r = 0; r < rows; ++r) {
                    float want = 0.0f;
                    dot_rows(best_isa(), type, in, w.data() + w_row * static_cast<size_t>(r), 0, 1, act.data(), 0, 1,
                             &want, 1);
                    EXPECT_NEAR(dst[static_cast<size_t>(t * rows + r)], want, 1e-5f * (1 + std::fabs(want)));
                }
            }
        }
    }
}

TEST(CpuKernels, AttentionOverBothCacheTypes) {
    const AttentionShape shape{4, 2, 64};
    const uint32_t n_ctx = 16;
    const int n = 5;  // tokens at positions 3..7, after 3 earlier ones
    const size_t kv_w = 2 * 64, q_w = 4 * 64;
    ThreadPool pool(2);
    std::vector<float> outs[2];
    size_t bytes[2];
    for (int kind = 0; kind < 2; ++kind) {
        KvCache cache;
        cache.init(kind == 0 ? KvCacheType::f16 : KvCacheType::q8_0, 2, n_ctx, shape.n_head_kv, shape.head_dim);
        bytes[kind] = cache.bytes();
        for (uint32_t p = 0; p < 8; ++p) {
            const auto k = random_floats(kv_w, 50 + p);
            const auto v = random_floats(kv_w, 80 + p);
            cache.store(1, p, k.data(), v.data());
        }
        const auto q = random_floats(q_w * n, 99);
        std::vector<std::vector<float>> scratch;
        std::vector<float> want(q_w * n);
        attention(pool, KernelIsa::scalar, cache, 1, shape, q.data(), want.data(), n, 3, scratch);
        for (KernelIsa isa : available_isas()) {
            std::vector<float> got(q_w * n);
            attention(pool, isa, cache, 1, shape, q.data(), got.data(), n, 3, scratch);
            for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4f) << isa_name(isa);
        }
        outs[kind] = want;
    }
    EXPECT_EQ(bytes[1] * 64, bytes[0] * 34);  // 34 bytes per 32 values instead of 64
    for (size_t i = 0; i < outs[0].size(); ++i) EXPECT_NEAR(outs[1][i], outs[0][i], 0.05f);
}

}  // namespace
}  // namespace powerhouse::cpu
