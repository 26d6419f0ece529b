#include "version_report.h"

#include <fmt/format.h>

#include <memory>
#include <string_view>

#include "build_info.h"
#include "powerhouse/telemetry.h"
#ifdef POWERHOUSE_HAS_CUDA
#include "backend/cuda/cuda_libraries.h"
#include "backend/cuda/cuda_runtime.h"
#endif

namespace powerhouse {
#ifdef POWERHOUSE_HAS_CUDA
namespace {

// "cuBLAS: 13.0.2 loaded at run time (/usr/local/cuda/lib64/libcublas.so.13)", or why not:
// "cuBLAS: not found (libcublas.so.13: cannot open ...): ...". The same search the backend
// makes (cuda_libraries.h), so the line says what a model load would find on this machine.
template <class Library>
std::string library_line(const char* name, const Result<std::unique_ptr<Library>>& library) {
    if (library) {
        return fmt::format("{}: {} loaded at run time ({})\n", name, (*library)->version_string(), (*library)->file());
    }
    std::string_view why = library.error().message;
    const std::string prefix = std::string(name) + " ";  // the message starts "cuBLAS not found (...)"
    if (why.substr(0, prefix.size()) == prefix) why.remove_prefix(prefix.size());
    return fmt::format("{}: {}\n", name, why);
}

}  // namespace
#endif

std::string version_report(const std::string& program) {
    std::string out = fmt::format("{} {} (commit {})\n", program, POWERHOUSE_VERSION, POWERHOUSE_GIT_COMMIT);
#ifdef POWERHOUSE_HAS_CUDA
    const cuda::CudaVersions cuda = cuda::cuda_versions();
    out += fmt::format("CUDA: runtime {} built in (static), kernels for {}\n",
                       cuda::format_cuda_version(cuda.runtime), POWERHOUSE_CUDA_ARCHITECTURES);
    const std::string driver_cuda =
        cuda.driver > 0 ? fmt::format("supports CUDA {}", cuda::format_cuda_version(cuda.driver)) : std::string();
#else
    out += "CUDA: not in this build (models run on the CPU)\n";
    const std::string driver_cuda;
#endif
    // NVML names the driver release; a monitor opened for one look, never sampling.
    GpuMonitorOptions options = options_from_environment();
    options.simulate.clear();  // the real driver, whatever the environment simulates
    GpuMonitor monitor(options);
    const TelemetrySnapshot snapshot = monitor.snapshot();
    if (!snapshot.status.empty()) {
        out += fmt::format("NVIDIA driver: {}\n", snapshot.status);
    } else {
        out += fmt::format("NVIDIA driver: {}{}{}, {} GPU(s)\n", snapshot.source, driver_cuda.empty() ? "" : ", ",
                           driver_cuda, snapshot.gpus.size());
    }
#ifdef POWERHOUSE_HAS_CUDA
    out += library_line("cuBLAS", cuda::load_cublas());
    out += library_line("NCCL", cuda::load_nccl());
#else
    out += "NCCL: not linked by this build\n";
#endif
    return out;
}

}  // namespace powerhouse
