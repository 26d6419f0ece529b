#include "version_report.h"

#include <fmt/format.h>

#include "build_info.h"
#include "powerhouse/model.h"
#include "powerhouse/telemetry.h"

namespace powerhouse {

std::string version_report(const std::string& program) {
    std::string out = fmt::format("{} {} (commit {})\n", program, POWERHOUSE_VERSION, POWERHOUSE_GIT_COMMIT);
    const CudaReport cuda = cuda_report();
#ifdef POWERHOUSE_CUDA_ARCHITECTURES
    const char* architectures = POWERHOUSE_CUDA_ARCHITECTURES;
#else
    const char* architectures = "none";
#endif
    if (cuda.built) {
        out += fmt::format("CUDA: runtime {} built in (static), kernels for {}\n", cuda.runtime, architectures);
    } else {
        out += "CUDA: not in this build (models run on the CPU)\n";
    }
    const std::string driver_cuda = cuda.driver.empty() ? std::string() : fmt::format("supports CUDA {}", cuda.driver);
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
    if (cuda.built) {
        out += fmt::format("cuBLAS: {}\nNCCL: {}\n", cuda.cublas, cuda.nccl);
    } else {
        out += "NCCL: not linked by this build\n";
    }
    return out;
}

}  // namespace powerhouse
