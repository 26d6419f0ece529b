#include "backend/cuda/dequantize_cuda.h"

#include <powerhouse_kernels.h>

#include <string>

#include "backend/cuda/cuda_runtime.h"

namespace powerhouse::cuda {
namespace {

std::string type_name(GgmlType type) {
    return std::string(type_traits(type).name);
}

template <class Out>
Result<void> round_trip(GgmlType type, const void* host_src, int64_t n, DequantOutput output, std::vector<Out>& out) {
    PH_TRY(check_dequantize_args(type, n));
    out.assign(static_cast<size_t>(n), Out{});
    if (n == 0) return {};
    PH_TRY(cuda_available());  // "no NVIDIA driver found" rather than a failed allocation
    const uint64_t src_bytes = row_bytes(type_traits(type), static_cast<uint64_t>(n));
    auto src = DeviceBuffer::allocate(src_bytes);
    if (!src) return std::move(src).error();
    auto dst = DeviceBuffer::allocate(static_cast<size_t>(n) * sizeof(Out));
    if (!dst) return std::move(dst).error();
    PH_TRY(src->upload(host_src, src_bytes));
    PH_TRY(dequantize_device(type, src->data(), dst->data(), output, n));
    PH_TRY(cuda_synchronize());
    return dst->download(out.data(), dst->size());
}

}  // namespace

bool has_dequantize_kernel(GgmlType type) {
    return ph_dequantize_supported(static_cast<uint32_t>(type)) != 0;
}

Result<void> check_dequantize_args(GgmlType type, int64_t n) {
    if (!has_dequantize_kernel(type)) {
        return make_error(ErrorCode::unsupported, "no GPU dequantize kernel for type " + type_name(type));
    }
    const int64_t block_size = ph_dequantize_block_size(static_cast<uint32_t>(type));
    if (n < 0 || n % block_size != 0) {
        return make_error(ErrorCode::invalid_argument, "cannot dequantize " + std::to_string(n) + " elements of " +
                                                           type_name(type) + ": not a multiple of its block size " +
                                                           std::to_string(block_size));
    }
    return {};
}

Result<void> dequantize_device(GgmlType type, const void* device_src, void* device_dst, DequantOutput output, int64_t n,
                               void* stream) {
    PH_TRY(check_dequantize_args(type, n));
    const auto id = static_cast<uint32_t>(type);
    const auto s = static_cast<cudaStream_t>(stream);
    const int status = output == DequantOutput::f32
                           ? ph_dequantize_f32(id, device_src, static_cast<float*>(device_dst), n, s)
                           : ph_dequantize_f16(id, device_src, static_cast<uint16_t*>(device_dst), n, s);
    if (status != 0) {
        return cuda_error(status, "dequantizing " + std::to_string(n) + " " + type_name(type) + " elements on the GPU");
    }
    return {};
}

Result<void> dequantize_on_device(GgmlType type, const void* host_src, int64_t n, std::vector<float>& out) {
    return round_trip(type, host_src, n, DequantOutput::f32, out);
}

Result<void> dequantize_on_device_f16(GgmlType type, const void* host_src, int64_t n, std::vector<uint16_t>& out) {
    return round_trip(type, host_src, n, DequantOutput::f16, out);
}

}  // namespace powerhouse::cuda
