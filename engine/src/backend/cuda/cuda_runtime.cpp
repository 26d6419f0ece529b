#include "backend/cuda/cuda_runtime.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <thread>
#include <utility>

namespace powerhouse::cuda {
namespace {

// As nvidia-smi and NVML print it, so that settings keyed by UUID match across tools.
std::string format_uuid(const cudaUUID_t& uuid) {
    const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
    char text[48];
    std::snprintf(text, sizeof(text), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                  b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return text;
}

}  // namespace

CudaVersions cuda_versions() {
    CudaVersions versions;
    if (cudaRuntimeGetVersion(&versions.runtime) != cudaSuccess) versions.runtime = 0;
    // Documented to report 0 (with success) when no driver is installed.
    if (cudaDriverGetVersion(&versions.driver) != cudaSuccess) versions.driver = 0;
    return versions;
}

double peak_memory_bandwidth(const CudaDeviceInfo& info) {
    return 2.0 * info.memory_clock_khz * 1000.0 * info.memory_bus_width_bits / 8.0;
}

std::string format_cuda_version(int version) {
    return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

Result<void> cuda_check(int cuda_status, const std::string& what) {
    if (cuda_status == 0) return {};
    return cuda_error(cuda_status, what);
}

Error cuda_error(int cuda_status, const std::string& what) {
    // The runtime keeps the last error per thread: once it is this Error, it must not
    // resurface from an unrelated later cudaGetLastError() (e.g. after a kernel launch).
    cudaGetLastError();
    const auto status = static_cast<cudaError_t>(cuda_status);
    ErrorCode code = ErrorCode::internal;
    switch (status) {
        case cudaErrorMemoryAllocation:
            code = ErrorCode::out_of_memory;
            break;
        case cudaErrorInvalidValue:
            code = ErrorCode::invalid_argument;
            break;
        case cudaErrorNotSupported:
        case cudaErrorNoDevice:
        case cudaErrorInsufficientDriver:
            code = ErrorCode::unsupported;
            break;
        // Sticky errors: the context is broken (every later call fails the same way) or the
        // GPU itself failed. The device is not to be trusted again (ARCHITECTURE.md section 7).
        case cudaErrorIllegalAddress:
        case cudaErrorLaunchFailure:
        case cudaErrorLaunchTimeout:
        case cudaErrorHardwareStackError:
        case cudaErrorIllegalInstruction:
        case cudaErrorMisalignedAddress:
        case cudaErrorInvalidAddressSpace:
        case cudaErrorInvalidPc:
        case cudaErrorECCUncorrectable:
        case cudaErrorNvlinkUncorrectable:
        case cudaErrorContextIsDestroyed:
        case cudaErrorDevicesUnavailable:
        case cudaErrorSystemNotReady:
        case cudaErrorUnknown:
            code = ErrorCode::device_failed;
            break;
        default:
            break;
    }
    return make_error(code, what + ": " + cudaGetErrorString(status) + " (" + cudaGetErrorName(status) + ")");
}

Result<int> cuda_device_count() {
    const CudaVersions versions = cuda_versions();
    if (versions.driver == 0) {
        return make_error(ErrorCode::unsupported,
                          "no NVIDIA driver found (libcuda.so.1 is missing or cannot be loaded); "
                          "install the NVIDIA driver to use a GPU");
    }
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status == cudaErrorInsufficientDriver) {
        cudaGetLastError();
        return make_error(ErrorCode::unsupported,
                          "the NVIDIA driver supports CUDA " + format_cuda_version(versions.driver) +
                              " but Powerhouse was built with CUDA " + format_cuda_version(versions.runtime) +
                              ": update the NVIDIA driver");
    }
    if (status == cudaErrorNoDevice || (status == cudaSuccess && count == 0)) {
        cudaGetLastError();
        return make_error(ErrorCode::unsupported, "no CUDA device (the NVIDIA driver " +
                                                      format_cuda_version(versions.driver) +
                                                      " sees no GPU; check nvidia-smi and CUDA_VISIBLE_DEVICES)");
    }
    if (status != cudaSuccess) return cuda_error(status, "looking for CUDA devices");
    return count;
}

Result<void> cuda_available() {
    auto count = cuda_device_count();
    if (!count) return std::move(count).error();
    return {};
}

Result<CudaDeviceInfo> cuda_device_info(int device, bool with_free_memory) {
    auto count = cuda_device_count();
    if (!count) return std::move(count).error();
    if (device < 0 || device >= *count) {
        return make_error(ErrorCode::invalid_argument, "CUDA device " + std::to_string(device) +
                                                           " does not exist (devices: " + std::to_string(*count) + ")");
    }
    const std::string which = "GPU " + std::to_string(device);
    cudaDeviceProp prop{};
    if (const cudaError_t status = cudaGetDeviceProperties(&prop, device); status != cudaSuccess) {
        return cuda_error(status, "reading the properties of " + which);
    }
    CudaDeviceInfo info;
    info.index = device;
    info.name = prop.name;
    info.uuid = format_uuid(prop.uuid);
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    info.multiprocessors = prop.multiProcessorCount;
    info.memory_bus_width_bits = prop.memoryBusWidth;
    info.total_memory = prop.totalGlobalMem;
    // Gone from cudaDeviceProp in CUDA 13, still an attribute; a missing one is not fatal.
    if (cudaDeviceGetAttribute(&info.memory_clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess) {
        cudaGetLastError();
        info.memory_clock_khz = 0;
    }
    char bus_id[32] = {};
    if (const cudaError_t status = cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device); status != cudaSuccess) {
        return cuda_error(status, "reading the PCI bus id of " + which);
    }
    info.pci_bus_id = bus_id;
    if (with_free_memory) {
        DeviceScope scope;
        PH_TRY(scope.select(device));
        size_t free_bytes = 0;
        size_t total_bytes = 0;
        if (const cudaError_t status = cudaMemGetInfo(&free_bytes, &total_bytes); status != cudaSuccess) {
            return cuda_error(status, "reading the free memory of " + which + " (" + info.name + ")");
        }
        info.free_memory = free_bytes;
    }
    return info;
}

Result<std::vector<CudaDeviceInfo>> cuda_devices(bool with_free_memory) {
    auto count = cuda_device_count();
    if (!count) return std::move(count).error();
    std::vector<CudaDeviceInfo> devices;
    for (int i = 0; i < *count; ++i) {
        auto info = cuda_device_info(i, with_free_memory);
        if (!info) return std::move(info).error();
        devices.push_back(std::move(info).value());
    }
    return devices;
}

Result<void> cuda_synchronize() {
    if (const cudaError_t status = cudaDeviceSynchronize(); status != cudaSuccess) {
        return cuda_error(status, "waiting for the GPU");
    }
    return {};
}

int cuda_wait_stream(void* stream, const std::atomic<bool>& stop) {
    for (;;) {
        const cudaError_t status = cudaStreamQuery(static_cast<cudaStream_t>(stream));
        if (status != cudaErrorNotReady) return status;
        if (stop.load(std::memory_order_relaxed)) return kStreamWaitStopped;
        std::this_thread::yield();  // as a synchronize that spins, but one that can be told to stop
    }
}

// --- DeviceBuffer ------------------------------------------------------------------------

DeviceBuffer::~DeviceBuffer() {
    release();
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      device_(std::exchange(other.device_, -1)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        device_ = std::exchange(other.device_, -1);
    }
    return *this;
}

void DeviceBuffer::release() noexcept {
    if (data_ == nullptr) return;
    DeviceScope scope;
    if (scope.select(device_)) cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
}

DeviceScope::DeviceScope() {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
        cudaGetLastError();
        previous_ = -1;
    }
}

DeviceScope::~DeviceScope() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

Result<void> DeviceScope::select(int device) {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now == device) return {};
    if (const cudaError_t status = cudaSetDevice(device); status != cudaSuccess) {
        return cuda_error(status, "selecting GPU " + std::to_string(device));
    }
    return {};
}

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
    DeviceBuffer buffer;
    if (bytes == 0) return Result<DeviceBuffer>(std::move(buffer));
    int device = 0;
    if (const cudaError_t status = cudaGetDevice(&device); status != cudaSuccess) {
        return cuda_error(status, "selecting a GPU for a buffer");
    }
    void* data = nullptr;
    if (const cudaError_t status = cudaMalloc(&data, bytes); status != cudaSuccess) {
        return cuda_error(status, "allocating " + std::to_string(bytes) + " bytes on GPU " + std::to_string(device));
    }
    buffer.data_ = data;
    buffer.size_ = bytes;
    buffer.device_ = device;
    return Result<DeviceBuffer>(std::move(buffer));
}

Result<void> DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
    if (offset > size_ || bytes > size_ - offset) {
        return make_error(ErrorCode::invalid_argument, "upload of " + std::to_string(bytes) + " bytes at offset " +
                                                           std::to_string(offset) + " overruns a buffer of " +
                                                           std::to_string(size_));
    }
    if (bytes == 0) return {};
    const cudaError_t status = cudaMemcpy(static_cast<char*>(data_) + offset, host, bytes, cudaMemcpyHostToDevice);
    if (status != cudaSuccess) return cuda_error(status, "copying to GPU " + std::to_string(device_));
    return {};
}

Result<void> DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
    if (offset > size_ || bytes > size_ - offset) {
        return make_error(ErrorCode::invalid_argument, "download of " + std::to_string(bytes) + " bytes at offset " +
                                                           std::to_string(offset) + " overruns a buffer of " +
                                                           std::to_string(size_));
    }
    if (bytes == 0) return {};
    const cudaError_t status =
        cudaMemcpy(host, static_cast<const char*>(data_) + offset, bytes, cudaMemcpyDeviceToHost);
    if (status != cudaSuccess) return cuda_error(status, "copying from GPU " + std::to_string(device_));
    return {};
}

// --- CudaEventTimer --------------------------------------------------------------------

CudaEventTimer::~CudaEventTimer() {
    release();
}

CudaEventTimer::CudaEventTimer(CudaEventTimer&& other) noexcept
    : start_(std::exchange(other.start_, nullptr)), stop_(std::exchange(other.stop_, nullptr)) {}

CudaEventTimer& CudaEventTimer::operator=(CudaEventTimer&& other) noexcept {
    if (this != &other) {
        release();
        start_ = std::exchange(other.start_, nullptr);
        stop_ = std::exchange(other.stop_, nullptr);
    }
    return *this;
}

void CudaEventTimer::release() noexcept {
    if (start_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(start_));
    if (stop_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
    start_ = nullptr;
    stop_ = nullptr;
}

Result<CudaEventTimer> CudaEventTimer::create() {
    CudaEventTimer timer;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
    if (const cudaError_t status = cudaEventCreate(&start); status != cudaSuccess) {
        return cuda_error(status, "creating a CUDA event");
    }
    timer.start_ = start;
    if (const cudaError_t status = cudaEventCreate(&stop); status != cudaSuccess) {
        return cuda_error(status, "creating a CUDA event");
    }
    timer.stop_ = stop;
    return Result<CudaEventTimer>(std::move(timer));
}

Result<void> CudaEventTimer::start(void* stream) {
    const cudaError_t status = cudaEventRecord(static_cast<cudaEvent_t>(start_), static_cast<cudaStream_t>(stream));
    if (status != cudaSuccess) return cuda_error(status, "recording a CUDA event");
    return {};
}

Result<float> CudaEventTimer::stop_ms(void* stream) {
    cudaError_t status = cudaEventRecord(static_cast<cudaEvent_t>(stop_), static_cast<cudaStream_t>(stream));
    if (status == cudaSuccess) status = cudaEventSynchronize(static_cast<cudaEvent_t>(stop_));
    float ms = 0.0f;
    if (status == cudaSuccess) {
        status = cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_));
    }
    if (status != cudaSuccess) return cuda_error(status, "timing GPU work");
    return ms;
}

}  // namespace powerhouse::cuda
