// Speed of ph_matmul (f32 activations) and ph_matmul_q8 (the quantized types' 8-bit
// activations, quantized once before the timed calls, as the decode step quantizes once
// for Q, K and V) for one decode step (one token): the matrices of a Llama-3-8B layer
// (4096 x 4096 attention, 14336 x 4096 gate/up, 4096 x 14336 down; rows x in) in the
// weight types of common GGUF files. Decoding reads every weight once per token, so the
// measure is the weight bytes read per call over the GPU time per call (CUDA events), in
// GB/s and as a share of the GPU's peak memory bandwidth: the roofline (DESIGN.md
// section 5). Never asserted; a plain main() because the GPU machine has no Google
// Benchmark. Without a GPU it prints the reason and exits 0.
//
// Rows "q8c": the 8-bit path with the matrix 4 bytes off 16-byte alignment, which Q4_K and
// Q5_K take with the per-chunk kernel (matmul_q8_kernel) instead of the wide one.
//
// Options: --iterations=N (calls timed per matrix, default 200), --peak-gbps=X (default:
// from the memory clock and bus width).
//
// Each matrix is cycled through enough copies to fill 512 MiB: the H200's 50 MB L2 would
// otherwise hold the smaller matrices between calls, which a real decode step, reading
// each layer's weights once, never sees. Weights are a constant byte pattern (finite in
// every type): speed does not depend on the values.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_runtime.h"
#include "powerhouse_kernels.h"
#include "tensor/dtype.h"

namespace powerhouse {
namespace {

const GgmlType kTypes[] = {GgmlType::q4_k, GgmlType::q8_0, GgmlType::f16,  GgmlType::q6_k,
                           GgmlType::q5_k, GgmlType::q4_0, GgmlType::mxfp4};

// How a call multiplies: f32 activations (ph_matmul), 8-bit (ph_matmul_q8), or 8-bit with
// the matrix 4 bytes past 16-byte alignment, which sends Q4_K and Q5_K to the per-chunk
// kernel instead of the wide one: both kernels in one run, on the same GPU.
enum class Path { f32, q8, q8_chunk };
constexpr size_t kChunkShift = 4;

struct Shape {
    const char* name;
    int64_t rows;
    int64_t in;
};
const Shape kShapes[] = {{"attn q/o", 4096, 4096}, {"ffn gate/up", 14336, 4096}, {"ffn down", 4096, 14336}};

constexpr size_t kWorkingSet = size_t{512} << 20;
constexpr int kWarmup = 10;

// The copies of one matrix, the activations and the output on the device.
struct Workload {
    size_t matrix_bytes = 0;
    size_t row_stride = 0;
    int copies = 0;
    cuda::DeviceBuffer weights;  // [copies][rows][row_stride] bytes
    cuda::DeviceBuffer x;        // [in] f32
    cuda::DeviceBuffer act;      // x as 8-bit activations (ph_quantize_activations)
    cuda::DeviceBuffer y;        // [rows] f32
};

Result<Workload> make_workload(GgmlType type, const Shape& shape) {
    Workload w;
    w.row_stride = row_bytes(type_traits(type), static_cast<uint64_t>(shape.in));
    w.matrix_bytes = w.row_stride * static_cast<size_t>(shape.rows);
    w.copies = static_cast<int>((kWorkingSet + w.matrix_bytes - 1) / w.matrix_bytes);
    auto weights = cuda::DeviceBuffer::allocate(w.matrix_bytes * static_cast<size_t>(w.copies) + 16);
    if (!weights) return std::move(weights).error();
    auto x = cuda::DeviceBuffer::allocate(static_cast<size_t>(shape.in) * sizeof(float));
    if (!x) return std::move(x).error();
    auto y = cuda::DeviceBuffer::allocate(static_cast<size_t>(shape.rows) * sizeof(float));
    if (!y) return std::move(y).error();
    auto act = cuda::DeviceBuffer::allocate(ph_q8_activation_bytes(shape.in));
    if (!act) return std::move(act).error();
    w.weights = std::move(weights).value();
    w.x = std::move(x).value();
    w.y = std::move(y).value();
    w.act = std::move(act).value();
    // 0x3c in every byte: f16 scales 0x3c3c (about 1.06), finite in every type.
    const std::vector<uint8_t> pattern(w.weights.size(), 0x3c);
    PH_TRY(w.weights.upload(pattern.data(), pattern.size()));
    std::vector<float> x_host(static_cast<size_t>(shape.in));
    for (size_t i = 0; i < x_host.size(); ++i) x_host[i] = static_cast<float>(i % 17) / 17.0f - 0.5f;
    PH_TRY(w.x.upload(x_host.data(), x_host.size() * sizeof(float)));
    if (ph_matmul_q8_usable(static_cast<uint32_t>(type), w.weights.data(), w.row_stride) != 0) {
        const int status = ph_quantize_activations(static_cast<uint32_t>(type), static_cast<const float*>(w.x.data()),
                                                   shape.in, shape.in, 1, w.act.data(), w.act.size(), nullptr);
        if (status != 0) return cuda::cuda_error(status, "ph_quantize_activations");
    }
    return Result<Workload>(std::move(w));
}

Result<void> launch(GgmlType type, const Shape& shape, Workload& w, int call, Path path) {
    const auto* matrix = static_cast<const uint8_t*>(w.weights.data()) +
                         static_cast<size_t>(call % w.copies) * w.matrix_bytes +
                         (path == Path::q8_chunk ? kChunkShift : 0);
    if (path != Path::f32) {
        const int status = ph_matmul_q8(static_cast<uint32_t>(type), matrix, w.row_stride, shape.rows, shape.in,
                                        w.act.data(), w.act.size(), 1, static_cast<float*>(w.y.data()), shape.rows,
                                        nullptr);
        if (status != 0) return cuda::cuda_error(status, "ph_matmul_q8");
        return {};
    }
    const int status = ph_matmul(static_cast<uint32_t>(type), matrix, w.row_stride, shape.rows, shape.in,
                                 static_cast<const float*>(w.x.data()), shape.in, static_cast<float*>(w.y.data()),
                                 shape.rows, 1, nullptr);
    if (status != 0) return cuda::cuda_error(status, "ph_matmul");
    return {};
}

// Microseconds of GPU time per call, over `iterations` back-to-back calls after a warm-up.
Result<double> time_us(GgmlType type, const Shape& shape, Workload& w, int iterations, Path path) {
    for (int i = 0; i < kWarmup; ++i) PH_TRY(launch(type, shape, w, i, path));
    PH_TRY(cuda::cuda_synchronize());
    auto timer = cuda::CudaEventTimer::create();
    if (!timer) return std::move(timer).error();
    PH_TRY(timer->start());
    for (int i = 0; i < iterations; ++i) PH_TRY(launch(type, shape, w, i, path));
    auto ms = timer->stop_ms();
    if (!ms) return std::move(ms).error();
    PH_TRY(cuda::cuda_synchronize());  // a kernel's own error, after the events
    return static_cast<double>(*ms) * 1e3 / iterations;
}

bool parse_option(const char* arg, const char* name, double& value) {
    const size_t len = std::strlen(name);
    if (std::strncmp(arg, name, len) != 0 || arg[len] != '=') return false;
    value = std::strtod(arg + len + 1, nullptr);
    return true;
}

int run(int argc, char** argv) {
    double iterations = 200;
    double peak_override = 0;
    for (int i = 1; i < argc; ++i) {
        if (!parse_option(argv[i], "--iterations", iterations) &&
            !parse_option(argv[i], "--peak-gbps", peak_override)) {
            std::fprintf(stderr, "usage: %s [--iterations=N] [--peak-gbps=X]\n", argv[0]);
            return 2;
        }
    }
    if (iterations < 1) {
        std::fprintf(stderr, "--iterations must be >= 1\n");
        return 2;
    }
    if (auto available = cuda::cuda_available(); !available) {
        std::printf("SKIP matmul timing: %s\n", available.error().message.c_str());
        return 0;
    }
    auto info = cuda::cuda_device_info(0);
    if (!info) {
        std::fprintf(stderr, "error: %s\n", info.error().message.c_str());
        return 1;
    }
    const double peak = peak_override > 0 ? peak_override : cuda::peak_memory_bandwidth(*info) / 1e9;
    std::printf("ph_matmul (f32 activations) and ph_matmul_q8 (8-bit), 1 token, on GPU 0: %s (sm_%d%d), %d calls timed after %d, peak %.0f GB/s (%s)\n",
                info->name.c_str(), info->compute_major, info->compute_minor, static_cast<int>(iterations), kWarmup,
                peak, peak_override > 0 ? "--peak-gbps" : "memory clock x bus width");
    std::printf("%-6s %-4s %-12s %13s %9s %9s %9s %7s\n", "type", "act", "matrix", "rows x in", "MiB", "us/call",
                "GB/s", "% peak");
    int failures = 0;
    for (const GgmlType type : kTypes) {
        const std::string type_name(type_traits(type).name);
        if (ph_matmul_supported(static_cast<uint32_t>(type)) == 0) {
            std::printf("SKIP %s: ph_matmul has no kernel for it\n", type_name.c_str());
            continue;
        }
        for (const Shape& shape : kShapes) {
            auto w = make_workload(type, shape);
            if (!w) {
                std::printf("FAIL %s %s: %s\n", type_name.c_str(), shape.name, w.error().message.c_str());
                ++failures;
                continue;
            }
            const bool wide16 = type == GgmlType::q4_k || type == GgmlType::q5_k;
            for (const Path path : {Path::f32, Path::q8, Path::q8_chunk}) {
                if (path != Path::f32 &&
                    ph_matmul_q8_usable(static_cast<uint32_t>(type), w->weights.data(), w->row_stride) == 0) {
                    continue;
                }
                if (path == Path::q8_chunk && !wide16) continue;
                auto us = time_us(type, shape, *w, static_cast<int>(iterations), path);
                if (!us) {
                    std::printf("FAIL %s %s: %s\n", type_name.c_str(), shape.name, us.error().message.c_str());
                    ++failures;
                    continue;
                }
                const double gbps = static_cast<double>(w->matrix_bytes) / (*us * 1e-6) / 1e9;
                const std::string dims = std::to_string(shape.rows) + " x " + std::to_string(shape.in);
                const char* act = path == Path::f32 ? "f32" : (path == Path::q8 ? "q8" : "q8c");
                std::printf("%-6s %-4s %-12s %13s %9.1f %9.1f %9.1f %6.1f%%\n", type_name.c_str(), act,
                            shape.name, dims.c_str(), static_cast<double>(w->matrix_bytes) / (1 << 20), *us, gbps,
                            peak > 0 ? 100.0 * gbps / peak : 0.0);
            }
        }
    }
    return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace powerhouse

int main(int argc, char** argv) {
    return powerhouse::run(argc, argv);
}
