// Throughput of the reference dequantize and quantize routines per type. These are the
// yardsticks, not the fast paths; the figures show what the SIMD and CUDA kernels beat.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "tensor/dequantize.h"
#include "tensor/dtype.h"
#include "tensor/quantize.h"

namespace {

using namespace powerhouse;

constexpr int64_t kElements = 1 << 20;

std::vector<float> random_floats() {
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<float> v(kElements);
    for (float& x : v) x = dist(rng);
    return v;
}

void dequantize(benchmark::State& state, GgmlType type) {
    const TypeTraits& traits = type_traits(type);
    const std::vector<float> input = random_floats();
    std::vector<std::byte> blocks(row_bytes(traits, kElements));
    quantize_row(type, input.data(), blocks.data(), kElements);
    std::vector<float> out(kElements);
    for (auto _ : state) {
        dequantize_row(type, blocks.data(), out.data(), kElements);
        benchmark::DoNotOptimize(out.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(blocks.size()));
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kElements);
}

void quantize(benchmark::State& state, GgmlType type) {
    const TypeTraits& traits = type_traits(type);
    const std::vector<float> input = random_floats();
    std::vector<std::byte> blocks(row_bytes(traits, kElements));
    for (auto _ : state) {
        quantize_row(type, input.data(), blocks.data(), kElements);
        benchmark::DoNotOptimize(blocks.data());
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kElements);
}

const GgmlType kTypes[] = {GgmlType::f32,  GgmlType::f16,  GgmlType::bf16, GgmlType::q4_0, GgmlType::q4_1,
                           GgmlType::q5_0, GgmlType::q5_1, GgmlType::q8_0, GgmlType::q2_k, GgmlType::q3_k,
                           GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k, GgmlType::mxfp4};

}  // namespace

int main(int argc, char** argv) {
    for (GgmlType type : kTypes) {
        const std::string name(type_traits(type).name);
        benchmark::RegisterBenchmark(("dequantize/" + name).c_str(), dequantize, type);
        benchmark::RegisterBenchmark(("quantize/" + name).c_str(), quantize, type)->Unit(benchmark::kMillisecond);
    }
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
