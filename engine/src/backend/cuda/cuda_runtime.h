// The host side of CUDA, reduced to what the engine needs: is there a usable GPU (and if
// not, why not, in words a user can act on), what each device is, and owning handles for
// device memory and timing events. Everything is plain C++: no CUDA header leaks out of
// this file, so callers (the planner, the CLI, tests) compile without the toolkit.
//
// It wraps the CUDA runtime API (linked statically; the runtime loads the driver,
// libcuda, when first used), so a program built with CUDA starts and answers "no NVIDIA
// driver found" on a machine without one instead of failing to load. (Not to be confused
// with the toolkit's <cuda_runtime.h>; include this one as "backend/cuda/cuda_runtime.h".)
//
// Thread-safety: the free functions may be called from any thread. The runtime's
// "current device" is per host thread: functions taking a device index select it for
// the call and restore the caller's. DeviceBuffer and CudaEventTimer are not shared
// between threads without a lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "powerhouse/result.h"

namespace powerhouse::cuda {

struct CudaVersions {
    int runtime = 0;  // CUDA runtime the program was built with, e.g. 13000 for 13.0
    int driver = 0;   // highest CUDA version the installed driver supports; 0: no driver
};

struct CudaDeviceInfo {
    int index = 0;  // runtime device index (changes between boots; identify by uuid)
    std::string name;
    std::string uuid;        // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi/NVML
    std::string pci_bus_id;  // domain:bus:device.function, e.g. "0000:3B:00.0"
    int compute_major = 0;
    int compute_minor = 0;
    int multiprocessors = 0;
    int memory_bus_width_bits = 0;
    int memory_clock_khz = 0;   // peak memory clock; 0 when the device does not say
    uint64_t total_memory = 0;  // bytes
    uint64_t free_memory = 0;   // bytes, when queried (see cuda_device_info)
};

// Theoretical peak memory bandwidth in bytes/s (double data rate x bus width), the
// roofline GPU results are reported against; 0 when the clock is unknown.
double peak_memory_bandwidth(const CudaDeviceInfo& info);

// Versions; never fails (driver is 0 when no driver is installed).
CudaVersions cuda_versions();
// "13.0" for 13000.
std::string format_cuda_version(int version);

// Ok when at least one CUDA device can be used. Otherwise an error that says why:
// "no NVIDIA driver found", "the NVIDIA driver supports CUDA 12.2 but Powerhouse was
// built with CUDA 13.0: update the driver", "no CUDA device", ... Tests skip with it.
Result<void> cuda_available();

// Number of usable devices (>= 1), or cuda_available()'s error.
Result<int> cuda_device_count();

// Properties of one device. with_free_memory asks the device for its free memory, which
// creates a CUDA context on it (a few hundred MiB and ~0.1 s the first time); pass false
// to read only static properties. (NVML reads free memory without a context; the
// telemetry module uses that for the dashboard.)
Result<CudaDeviceInfo> cuda_device_info(int device, bool with_free_memory = true);
Result<std::vector<CudaDeviceInfo>> cuda_devices(bool with_free_memory = true);

// Turns a cudaError_t value (as int, so callers need no CUDA header) into an Error naming
// what failed: "<what>: out of memory (cudaErrorMemoryAllocation)". Clears the calling
// thread's pending runtime error, which the Error now reports, so that it does not
// resurface as the failure of a later, unrelated call.
Error cuda_error(int cuda_status, const std::string& what);
// Ok for 0 (cudaSuccess), else cuda_error(cuda_status, what).
Result<void> cuda_check(int cuda_status, const std::string& what);

// Owning handle for `size` bytes of device memory on one device. Move-only.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    // Allocates on the calling thread's current device; bytes == 0 gives an empty buffer.
    static Result<DeviceBuffer> allocate(size_t bytes);

    void* data() { return data_; }
    const void* data() const { return data_; }
    size_t size() const { return size_; }
    int device() const { return device_; }

    // Synchronous copies of `bytes` (<= size() - offset) between host and this buffer.
    Result<void> upload(const void* host, size_t bytes, size_t offset = 0);
    Result<void> download(void* host, size_t bytes, size_t offset = 0) const;

private:
    void release() noexcept;

    void* data_ = nullptr;
    size_t size_ = 0;
    int device_ = -1;
};

// GPU-side timing with a pair of CUDA events on the legacy default stream (or `stream`,
// a cudaStream_t passed as void*): the time the device spent between start() and stop(),
// without host-side launch jitter. Move-only.
class CudaEventTimer {
public:
    CudaEventTimer() = default;
    ~CudaEventTimer();
    CudaEventTimer(CudaEventTimer&& other) noexcept;
    CudaEventTimer& operator=(CudaEventTimer&& other) noexcept;
    CudaEventTimer(const CudaEventTimer&) = delete;
    CudaEventTimer& operator=(const CudaEventTimer&) = delete;

    static Result<CudaEventTimer> create();
    Result<void> start(void* stream = nullptr);
    // Records the stop event, waits for it and returns the elapsed milliseconds.
    Result<float> stop_ms(void* stream = nullptr);

private:
    void release() noexcept;

    void* start_ = nullptr;  // cudaEvent_t
    void* stop_ = nullptr;   // cudaEvent_t
};

// Selects devices for a scope and, at its end, gives the calling thread back the device it
// had (the runtime's current device is per thread): asking about GPU 2, or summing on it,
// must not move the caller's later work there. Without a usable runtime it does nothing.
class DeviceScope {
public:
    DeviceScope();
    ~DeviceScope();
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

    Result<void> select(int device);

private:
    int previous_ = -1;
};

// Waits for all work on the current device; returns the first asynchronous error.
Result<void> cuda_synchronize();

// Waits for `stream` (a cudaStream_t) by asking it rather than blocking in a synchronize,
// so that `stop`, set from another thread, ends the wait (ARCHITECTURE.md section 7: a hung
// kernel or collective costs a deadline, not a thread). Returns the stream's status once it
// has finished (0: success), or kStreamWaitStopped when stopped first.
constexpr int kStreamWaitStopped = -1;
int cuda_wait_stream(void* stream, const std::atomic<bool>& stop);

}  // namespace powerhouse::cuda
