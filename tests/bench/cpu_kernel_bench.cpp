// Throughput of the CPU backend's dot-product kernels (backend/cpu/quant_dot.h): a
// 512 x 2048 weight matrix of each type against 1 token (the matrix-vector product of
// decoding), 16 tokens (where AVX2 starts to tile) and 64 tokens (a prompt), for every
// variant the machine runs, and the same with the rows interleaved (backend/cpu/
// interleave.h) or the tokens tiled (quant_dot.h's dot_rows_tiled) where the variant has
// that kernel.
// One thread: the figure is per core; items are multiply-adds. The "/memory" cases repeat
// the matrix to 256 copies (150 to 220 MB for the K-quants), so that its bytes stream from
// RAM as a model's do when decoding: bytes per second there against the machine's memory
// bandwidth shows whether the product keeps up with it. "matmul/.../all-cores" is the same
// product through matmul on every core. "matmul/.../t64/one-core" is a prompt's product as
// the engine runs it (activations quantized, rows in chunks that stay in L2, the tiled or
// interleaved kernel where matmul takes it) on one thread, over a feed-forward-sized
// matrix: the "dot/" cases above pass all 512 rows per group of tokens, whose bytes then
// come from L3 for the float types.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/interleave.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/quant_dot.h"
#include "tensor/dtype.h"
#include "tensor/quantize.h"

namespace {

using namespace powerhouse;
using namespace powerhouse::cpu;

constexpr int64_t kIn = 2048;
constexpr int kRows = 512;

// A kRows x kIn matrix of `type` repeated `copies` times, interleaved when asked, and
// `tokens` activation rows for it.
struct Operands {
    std::vector<std::byte> w, act;
    int rows = 0;
    size_t w_row = 0, a_row = 0;

    Operands(GgmlType type, KernelIsa isa, int tokens, bool interleaved, int copies) {
        std::mt19937 rng(7);
        std::normal_distribution<float> dist(0.0f, 1.0f);
        std::vector<float> w_f32(static_cast<size_t>(kIn * kRows)), x(static_cast<size_t>(kIn * tokens));
        for (float& v : w_f32) v = dist(rng);
        for (float& v : x) v = dist(rng);
        w_row = row_bytes(type_traits(type), kIn);
        w.resize(w_row * kRows);
        for (int r = 0; r < kRows; ++r) quantize_row(type, w_f32.data() + r * kIn, w.data() + w_row * r, kIn);
        rows = kRows * copies;
        w.resize(w.size() * static_cast<size_t>(copies));
        for (int c = 1; c < copies; ++c) std::copy_n(w.data(), w_row * kRows, w.data() + w_row * kRows * c);
        a_row = activation_bytes(type, kIn);
        act.resize(a_row * static_cast<size_t>(tokens));
        for (int t = 0; t < tokens; ++t) {
            quantize_activations(isa, type, x.data() + t * kIn, act.data() + a_row * t, kIn);
        }
        if (interleaved) {
            std::vector<std::byte> packed(w.size());
            interleave_rows(type, kIn, rows, w.data(), w_row, packed.data());
            w.swap(packed);
        }
    }
};

// The tiled product (quant_dot.h's dot_rows_tiled) of the same operands, regrouping the
// activations into tiles each time as matmul does.
void tiled_dots(benchmark::State& state, GgmlType type, KernelIsa isa, int tokens) {
    const Operands o(type, isa, tokens, false, 1);
    std::vector<float> out(static_cast<size_t>(o.rows) * static_cast<size_t>(tokens));
    std::vector<std::byte> tiles(tiled_activation_bytes(type, kIn, tokens));
    for (auto _ : state) {
        tile_activations(type, kIn, o.act.data(), o.a_row, tokens, tiles.data());
        dot_rows_tiled(isa, type, kIn, o.w.data(), o.w_row, o.rows, tiles.data(), tokens, out.data(),
                       static_cast<size_t>(o.rows));
        benchmark::DoNotOptimize(out.data());
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kIn * o.rows * tokens);
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * o.w.size()));
}

void dots(benchmark::State& state, GgmlType type, KernelIsa isa, int tokens, bool interleaved, int copies) {
    const Operands o(type, isa, tokens, interleaved, copies);
    std::vector<float> out(static_cast<size_t>(o.rows) * static_cast<size_t>(tokens));
    for (auto _ : state) {
        if (interleaved) {
            dot_rows_interleaved(isa, type, kIn, o.w.data(), o.rows / kInterleaveRows, o.act.data(), o.a_row, tokens,
                                 out.data(), static_cast<size_t>(o.rows));
        } else {
            dot_rows(isa, type, kIn, o.w.data(), o.w_row, o.rows, o.act.data(), o.a_row, tokens, out.data(),
                     static_cast<size_t>(o.rows));
        }
        benchmark::DoNotOptimize(out.data());
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kIn * o.rows * tokens);
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * o.w.size()));
}

// One token's matrix-vector product from RAM through matmul on every core, as decoding
// runs it: bytes per second against the machine's memory bandwidth.
void matmul_all_cores(benchmark::State& state, GgmlType type, bool interleaved) {
    const Operands o(type, best_isa(), 1, interleaved, 256);
    ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    std::vector<float> x(static_cast<size_t>(kIn), 0.5f), out(static_cast<size_t>(o.rows));
    std::vector<std::byte> buffer;
    MatmulWeights m{type, o.w.data(), kIn, o.rows};
    m.interleaved = interleaved;
    for (auto _ : state) {
        matmul(pool, best_isa(), m, x.data(), out.data(), 1, buffer);
        benchmark::DoNotOptimize(out.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * o.w.size()));
}

// A 64-token prompt's product through matmul on one thread, over 11 copies of the matrix
// (5632 x 2048, TinyLlama's feed-forward shape), so that its results (1.4 MB) do not stay
// in L2 as a model's do not.
void matmul_one_core(benchmark::State& state, GgmlType type, bool interleaved) {
    constexpr int kTokens = 64;
    const Operands o(type, best_isa(), 1, interleaved, 11);
    ThreadPool pool(1);
    std::vector<float> x(static_cast<size_t>(kIn * kTokens)), out(static_cast<size_t>(o.rows) * kTokens);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : x) v = normal(rng);
    std::vector<std::byte> buffer;
    MatmulWeights m{type, o.w.data(), kIn, o.rows};
    m.interleaved = interleaved;
    for (auto _ : state) {
        matmul(pool, best_isa(), m, x.data(), out.data(), kTokens, buffer);
        benchmark::DoNotOptimize(out.data());
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kIn * o.rows * kTokens);
}

size_t w_row_of(GgmlType type) {
    return row_bytes(type_traits(type), kIn);
}

const bool registered = [] {
    for (GgmlType type : {GgmlType::f16, GgmlType::bf16, GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0,
                          GgmlType::q5_1, GgmlType::q8_0, GgmlType::q2_k, GgmlType::q3_k, GgmlType::q4_k,
                          GgmlType::q5_k, GgmlType::q6_k, GgmlType::mxfp4}) {
        for (KernelIsa isa : available_isas()) {
            for (int tokens : {1, 16, 64}) {
                const std::string name =
                    std::string("dot/") + std::string(type_traits(type).name) + "/" + isa_name(isa) + "/t" +
                    std::to_string(tokens);
                const bool interleaves = can_interleave(isa, type, kIn, kRows, w_row_of(type));
                benchmark::RegisterBenchmark(name.c_str(), dots, type, isa, tokens, false, 1);
                if (interleaves) {
                    benchmark::RegisterBenchmark((name + "/interleaved").c_str(), dots, type, isa, tokens, true, 1);
                }
                if (tokens > 1 && has_tiled_dot(isa, type, kIn)) {
                    benchmark::RegisterBenchmark((name + "/tiled").c_str(), tiled_dots, type, isa, tokens);
                }
                if (tokens == 1 && isa != KernelIsa::scalar) {
                    benchmark::RegisterBenchmark((name + "/memory").c_str(), dots, type, isa, tokens, false, 256);
                    if (interleaves) {
                        benchmark::RegisterBenchmark((name + "/interleaved/memory").c_str(), dots, type, isa,
                                                     tokens, true, 256);
                    }
                }
            }
        }
    }
    for (GgmlType type :
         {GgmlType::f16, GgmlType::q4_0, GgmlType::q8_0, GgmlType::q3_k, GgmlType::q4_k, GgmlType::q6_k}) {
        const std::string name = std::string("matmul/") + std::string(type_traits(type).name) + "/t64/one-core";
        benchmark::RegisterBenchmark(name.c_str(), matmul_one_core, type, false);
        if (can_interleave(best_isa(), type, kIn, kRows, w_row_of(type))) {
            benchmark::RegisterBenchmark((name + "/interleaved").c_str(), matmul_one_core, type, true);
        }
    }
    for (GgmlType type : {GgmlType::q4_k, GgmlType::q6_k, GgmlType::q8_0}) {
        const std::string name = std::string("matmul/") + std::string(type_traits(type).name) + "/t1/memory/all-cores";
        benchmark::RegisterBenchmark(name.c_str(), matmul_all_cores, type, false)->UseRealTime();
        if (can_interleave(best_isa(), type, kIn, kRows, w_row_of(type))) {
            benchmark::RegisterBenchmark((name + "/interleaved").c_str(), matmul_all_cores, type, true)->UseRealTime();
        }
    }
    return true;
}();

}  // namespace

BENCHMARK_MAIN();
