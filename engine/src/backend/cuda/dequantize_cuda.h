// Dequantization on the GPU, in engine types: the bridge between GgmlType tensors and the
// C launchers of kernels/powerhouse_kernels.h. dequantize_device() is what prompt
// processing uses (weights already on the device, f16 output for a tensor-core GEMM);
// dequantize_on_device() round-trips through host memory and exists for tests and tools.
//
// Results are bit-identical to dequantize_row (tensor/dequantize.h) for f32 output, and
// equal to f32_to_f16 of it (tensor/half.h) for f16 output.
//
// Thread-safety: as cuda_runtime.h; the functions hold no state and work on the calling
// thread's current device.
#pragma once

#include <cstdint>
#include <vector>

#include "powerhouse/result.h"
#include "tensor/dtype.h"

namespace powerhouse::cuda {

enum class DequantOutput {
    f32,  // float
    f16,  // IEEE binary16 bits (uint16_t)
};

// True for the types with a GPU kernel (today: exactly those with a CPU reference).
bool has_dequantize_kernel(GgmlType type);

// Checks type and n before anything touches the GPU: invalid_argument when n < 0 or not a
// multiple of the block size, unsupported for a type without a kernel.
Result<void> check_dequantize_args(GgmlType type, int64_t n);

// Enqueues the decoding of n elements of `type` at device_src (any byte alignment) into
// device_dst (n floats or n f16 values, naturally aligned) on `stream` (a cudaStream_t;
// nullptr is the legacy default stream). Asynchronous: errors inside the kernel show up
// at the next synchronization.
Result<void> dequantize_device(GgmlType type, const void* device_src, void* device_dst, DequantOutput output, int64_t n,
                               void* stream = nullptr);

// Uploads row_bytes(type, n) bytes from host_src, decodes them on the current device and
// downloads the result into `out` (resized to n). Synchronous.
Result<void> dequantize_on_device(GgmlType type, const void* host_src, int64_t n, std::vector<float>& out);
Result<void> dequantize_on_device_f16(GgmlType type, const void* host_src, int64_t n, std::vector<uint16_t>& out);

}  // namespace powerhouse::cuda
