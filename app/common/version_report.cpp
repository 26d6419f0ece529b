#include "version_report.h"

#include <fmt/format.h>

#include "build_info.h"
#include "powerhouse/telemetry.h"
#ifdef POWERHOUSE_HAS_CUDA
#include "backend/cuda/cuda_runtime.h"
#endif

namespace powerhouse {

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
    out += "NCCL: not linked by this build\n";
    return out;
}

}  // namespace powerhouse
