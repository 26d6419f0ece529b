// Test glue shared by the GPU kernel tests that call the launchers of
// kernels/powerhouse_kernels.h directly: device arrays whose CUDA API errors throw (and
// GoogleTest reports them as a failure of the running test), a launch-and-wait check,
// random inputs, and comparisons that name the worst or first bad element.
//
// Thread-safety: as GoogleTest tests; nothing here is shared between threads.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_runtime.h"
#include "support/float_compare.h"
#include "tensor/dtype.h"

namespace powerhouse::test {

inline uint32_t type_id(GgmlType type) {
    return static_cast<uint32_t>(type);
}


template <class T>
class DeviceArray {
public:
    explicit DeviceArray(size_t n) : n_(n) {
        auto buffer = cuda::DeviceBuffer::allocate(n * sizeof(T));
        if (!buffer) throw std::runtime_error(buffer.error().message);
        buffer_ = std::move(buffer).value();
    }
    explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }

    T* get() { return static_cast<T*>(buffer_.data()); }
    size_t size() const { return n_; }

    void upload(const std::vector<T>& host) {
        if (host.size() != n_) throw std::logic_error("upload of a different size");
        if (auto r = buffer_.upload(host.data(), n_ * sizeof(T)); !r) throw std::runtime_error(r.error().message);
    }
    std::vector<T> download() const {
        std::vector<T> host(n_);
        if (auto r = buffer_.download(host.data(), n_ * sizeof(T)); !r) throw std::runtime_error(r.error().message);
        return host;
    }

private:
    size_t n_;
    cuda::DeviceBuffer buffer_;
};

// A launcher's status, then the kernel's own errors (waiting for the device).
inline ::testing::AssertionResult ran(int status) {
    if (status != 0) return ::testing::AssertionFailure() << cuda::cuda_error(status, "launch").message;
    if (auto done = cuda::cuda_synchronize(); !done) return ::testing::AssertionFailure() << done.error().message;
    return ::testing::AssertionSuccess();
}

inline std::vector<float> uniform(size_t n, float lo, float hi, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// --- comparisons ---------------------------------------------------------------------------

// |actual[i] - expected[i]| <= tolerance[i] everywhere (NaN fails); names the worst element.
inline ::testing::AssertionResult same_bytes(const std::vector<uint8_t>& expected, const std::vector<uint8_t>& actual,
                                      size_t row_bytes) {
    if (expected.size() != actual.size()) return ::testing::AssertionFailure() << "sizes differ";
    size_t bad = 0;
    size_t first = expected.size();
    for (size_t i = 0; i < expected.size(); ++i) {
        if (expected[i] != actual[i] && bad++ == 0) first = i;
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << bad << " of " << expected.size() << " bytes differ; first in row "
                                         << first / row_bytes << " at byte " << first % row_bytes << ": expected "
                                         << int{expected[first]} << ", got " << int{actual[first]};
}

}  // namespace powerhouse::test
