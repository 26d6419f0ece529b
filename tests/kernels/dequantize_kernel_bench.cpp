// Bandwidth of the GPU dequantize kernels: for every type, to f32 and to f16, the bytes
// read plus the bytes written per call divided by the GPU time per call (CUDA events, so
// no host launch jitter), in GB/s and as a share of the GPU's peak memory bandwidth (the
// roofline, DESIGN.md section 5). Dequantization is a pure streaming kernel, so that share
// is the whole story.
//
// One source, two programs (tests/kernels/CMakeLists.txt):
//  - dequantize_kernel_bench (POWERHOUSE_GOOGLE_BENCHMARK): Google Benchmark, where it is
//    installed; benchmarks report an error (and do not run) without a GPU.
//  - dequantize_kernel_timing: the same measurement with a plain main() printing one
//    table, built everywhere. The GPU machine has no Google Benchmark, and Debian ships
//    it compiled only (no sources to carry), so scripts/device-check runs this one.
//    Options: --elements=N (default 2^26), --iterations=N (default 20),
//    --peak-gbps=X (default: from the memory clock and bus width).
//
// Inputs are a constant byte pattern (finite values in every type): speed does not
// depend on the values, and a fill on the host is quicker than random bits.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_runtime.h"
#include "backend/cuda/dequantize_cuda.h"
#include "tensor/dtype.h"

#ifdef POWERHOUSE_GOOGLE_BENCHMARK
#include <benchmark/benchmark.h>

#include <memory>
#endif

namespace powerhouse {
namespace {

using cuda::DequantOutput;

const GgmlType kTypes[] = {GgmlType::f32,  GgmlType::f16,  GgmlType::bf16, GgmlType::q4_0, GgmlType::q4_1,
                           GgmlType::q5_0, GgmlType::q5_1, GgmlType::q8_0, GgmlType::q2_k, GgmlType::q3_k,
                           GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k, GgmlType::mxfp4};

// 2^26 elements: 256 MiB of f32 output, far beyond any L2 cache, so every call streams
// from and to HBM. A multiple of every block size.
constexpr int64_t kDefaultElements = int64_t{1} << 26;

const char* output_name(DequantOutput output) {
    return output == DequantOutput::f32 ? "f32" : "f16";
}
size_t output_size(DequantOutput output) {
    return output == DequantOutput::f32 ? 4 : 2;
}

// Device buffers for one type: the encoded source and room for either output.
struct Workload {
    GgmlType type = GgmlType::f32;
    int64_t n = 0;
    uint64_t src_bytes = 0;
    cuda::DeviceBuffer src;
    cuda::DeviceBuffer dst;

    static Result<Workload> create(GgmlType type, int64_t n) {
        Workload w;
        w.type = type;
        w.n = n;
        w.src_bytes = row_bytes(type_traits(type), static_cast<uint64_t>(n));
        auto src = cuda::DeviceBuffer::allocate(w.src_bytes);
        if (!src) return std::move(src).error();
        auto dst = cuda::DeviceBuffer::allocate(static_cast<size_t>(n) * sizeof(float));
        if (!dst) return std::move(dst).error();
        w.src = std::move(src).value();
        w.dst = std::move(dst).value();
        // 0x3c in every byte: f16 scales 0x3c3c (about 1.06), f32 0x3c3c3c3c (about 0.011).
        const std::vector<uint8_t> pattern(w.src_bytes, 0x3c);
        PH_TRY(w.src.upload(pattern.data(), pattern.size()));
        return Result<Workload>(std::move(w));
    }

    double bytes_per_call(DequantOutput output) const {
        return static_cast<double>(src_bytes) + static_cast<double>(n) * static_cast<double>(output_size(output));
    }

    Result<void> launch(DequantOutput output) {
        return cuda::dequantize_device(type, src.data(), dst.data(), output, n);
    }

    // Milliseconds of GPU time per call, averaged over `iterations` back-to-back calls.
    Result<double> time_ms(DequantOutput output, int iterations) {
        auto timer = cuda::CudaEventTimer::create();
        if (!timer) return std::move(timer).error();
        PH_TRY(launch(output));  // warm-up: first launch loads the module
        PH_TRY(cuda::cuda_synchronize());
        PH_TRY(timer->start());
        for (int i = 0; i < iterations; ++i) PH_TRY(launch(output));
        auto ms = timer->stop_ms();
        if (!ms) return std::move(ms).error();
        return static_cast<double>(*ms) / iterations;
    }
};

// Peak bandwidth in GB/s to report shares against: the override, else the device's.
double peak_gbps(double override_gbps) {
    if (override_gbps > 0) return override_gbps;
    auto info = cuda::cuda_device_info(0, false);
    return info ? cuda::peak_memory_bandwidth(*info) / 1e9 : 0.0;
}

#ifdef POWERHOUSE_GOOGLE_BENCHMARK

// Google Benchmark calls a benchmark function several times; the workload of the type
// being measured is kept between calls (one at a time, to bound device memory).
std::unique_ptr<Workload> g_workload;

void bm_dequantize(benchmark::State& state, GgmlType type, DequantOutput output) {
    if (auto available = cuda::cuda_available(); !available) {
        state.SkipWithError(available.error().message.c_str());
        return;
    }
    if (!g_workload || g_workload->type != type) {
        g_workload.reset();
        auto w = Workload::create(type, kDefaultElements);
        if (!w) {
            state.SkipWithError(w.error().message.c_str());
            return;
        }
        g_workload = std::make_unique<Workload>(std::move(w).value());
    }
    double total_ms = 0;
    for (auto _ : state) {
        auto ms = g_workload->time_ms(output, 10);
        if (!ms) {
            state.SkipWithError(ms.error().message.c_str());
            return;
        }
        total_ms += *ms;
        state.SetIterationTime(*ms / 1e3);
    }
    const double gbps =
        g_workload->bytes_per_call(output) * static_cast<double>(state.iterations()) / (total_ms / 1e3) / 1e9;
    state.counters["GB/s"] = gbps;
    if (const double peak = peak_gbps(0); peak > 0) state.counters["roofline_%"] = 100.0 * gbps / peak;
}

int run(int argc, char** argv) {
    for (const GgmlType type : kTypes) {
        for (const DequantOutput output : {DequantOutput::f32, DequantOutput::f16}) {
            const std::string name =
                "dequantize_gpu/" + std::string(type_traits(type).name) + "/" + output_name(output);
            benchmark::RegisterBenchmark(name.c_str(), bm_dequantize, type, output)
                ->UseManualTime()
                ->Unit(benchmark::kMicrosecond);
        }
    }
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    g_workload.reset();
    return 0;
}

#else  // the plain timing program

bool parse_option(const char* arg, const char* name, double& value) {
    const size_t len = std::strlen(name);
    if (std::strncmp(arg, name, len) != 0 || arg[len] != '=') return false;
    value = std::strtod(arg + len + 1, nullptr);
    return true;
}

int run(int argc, char** argv) {
    double elements = static_cast<double>(kDefaultElements);
    double iterations = 20;
    double peak_override = 0;
    for (int i = 1; i < argc; ++i) {
        if (!parse_option(argv[i], "--elements", elements) && !parse_option(argv[i], "--iterations", iterations) &&
            !parse_option(argv[i], "--peak-gbps", peak_override)) {
            std::fprintf(stderr, "usage: %s [--elements=N] [--iterations=N] [--peak-gbps=X]\n", argv[0]);
            return 2;
        }
    }
    // Round down to a multiple of 256, the largest block size.
    const int64_t n = static_cast<int64_t>(elements) / 256 * 256;
    if (n <= 0 || iterations < 1) {
        std::fprintf(stderr, "--elements must be >= 256 and --iterations >= 1\n");
        return 2;
    }
    if (auto available = cuda::cuda_available(); !available) {
        std::printf("SKIP dequantize bandwidth: %s\n", available.error().message.c_str());
        return 0;
    }
    auto info = cuda::cuda_device_info(0);
    if (!info) {
        std::fprintf(stderr, "error: %s\n", info.error().message.c_str());
        return 1;
    }
    const double peak = peak_gbps(peak_override);
    std::printf(
        "dequantize bandwidth on GPU 0: %s (sm_%d%d), %lld elements per call, %d calls timed, "
        "peak %.0f GB/s (%s)\n",
        info->name.c_str(), info->compute_major, info->compute_minor, static_cast<long long>(n),
        static_cast<int>(iterations), peak, peak_override > 0 ? "--peak-gbps" : "memory clock x bus width");
    std::printf("%-6s %-4s %10s %12s %10s %9s %7s\n", "type", "out", "read MiB", "written MiB", "us/call", "GB/s",
                "% peak");
    int failures = 0;
    for (const GgmlType type : kTypes) {
        auto w = Workload::create(type, n);
        if (!w) {
            std::printf("FAIL %s: %s\n", std::string(type_traits(type).name).c_str(), w.error().message.c_str());
            ++failures;
            continue;
        }
        for (const DequantOutput output : {DequantOutput::f32, DequantOutput::f16}) {
            auto ms = w->time_ms(output, static_cast<int>(iterations));
            if (!ms) {
                std::printf("FAIL %s %s: %s\n", std::string(type_traits(type).name).c_str(), output_name(output),
                            ms.error().message.c_str());
                ++failures;
                continue;
            }
            const double bytes = w->bytes_per_call(output);
            const double gbps = bytes / (*ms / 1e3) / 1e9;
            std::printf("%-6s %-4s %10.1f %12.1f %10.1f %9.1f %6.1f%%\n", std::string(type_traits(type).name).c_str(),
                        output_name(output), static_cast<double>(w->src_bytes) / (1 << 20),
                        static_cast<double>(n) * static_cast<double>(output_size(output)) / (1 << 20), *ms * 1e3, gbps,
                        peak > 0 ? 100.0 * gbps / peak : 0.0);
        }
    }
    return failures == 0 ? 0 : 1;
}

#endif

}  // namespace
}  // namespace powerhouse

int main(int argc, char** argv) {
    return powerhouse::run(argc, argv);
}
