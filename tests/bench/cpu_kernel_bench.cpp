// Throughput of the CPU backend's dot-product kernels (backend/cpu/quant_dot.h): a
// 512 x 2048 weight matrix of each type against 1 token (the matrix-vector product of
// decoding) and 64 tokens (a prompt), for every variant the machine runs. One thread:
// the figure is per core; items are multiply-adds.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "backend/cpu/quant_dot.h"
#include "tensor/dtype.h"
#include "tensor/quantize.h"

namespace {

using namespace powerhouse;
using namespace powerhouse::cpu;

constexpr int64_t kIn = 2048;
constexpr int kRows = 512;

void dots(benchmark::State& state, GgmlType type, KernelIsa isa, int tokens) {
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> w_f32(static_cast<size_t>(kIn * kRows)), x(static_cast<size_t>(kIn * tokens));
    for (float& v : w_f32) v = dist(rng);
    for (float& v : x) v = dist(rng);
    const size_t w_row = row_bytes(type_traits(type), kIn);
    std::vector<std::byte> w(w_row * kRows);
    for (int r = 0; r < kRows; ++r) quantize_row(type, w_f32.data() + r * kIn, w.data() + w_row * r, kIn);
    const size_t a_row = activation_bytes(type, kIn);
    std::vector<std::byte> act(a_row * static_cast<size_t>(tokens));
    for (int t = 0; t < tokens; ++t) quantize_activations(isa, type, x.data() + t * kIn, act.data() + a_row * t, kIn);
    std::vector<float> out(static_cast<size_t>(kRows * tokens));
    for (auto _ : state) {
        dot_rows(isa, type, kIn, w.data(), w_row, kRows, act.data(), a_row, tokens, out.data(), kRows);
        benchmark::DoNotOptimize(out.data());
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kIn * kRows * tokens);
}

const bool registered = [] {
    for (GgmlType type : {GgmlType::f16, GgmlType::bf16, GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0,
                          GgmlType::q5_1, GgmlType::q8_0, GgmlType::q2_k, GgmlType::q3_k, GgmlType::q4_k,
                          GgmlType::q5_k, GgmlType::q6_k, GgmlType::mxfp4}) {
        for (KernelIsa isa : available_isas()) {
            for (int tokens : {1, 64}) {
                const std::string name =
                    std::string("dot/") + std::string(type_traits(type).name) + "/" + isa_name(isa) + "/t" +
                    std::to_string(tokens);
                benchmark::RegisterBenchmark(name.c_str(), dots, type, isa, tokens);
            }
        }
    }
    return true;
}();

}  // namespace

BENCHMARK_MAIN();
