// The fixture of every GPU kernel test: a test deriving from GpuTest skips, naming the
// reason ("no NVIDIA driver found"), where no usable GPU is present. Where a GPU is
// required (POWERHOUSE_REQUIRE_GPU set to anything but "" or "0", as scripts/device-check
// does on the GPU machine) it fails instead, so that a broken driver setup cannot pass as
// "all skipped" (DESIGN.md section 6).
//
// Thread-safety: as GoogleTest fixtures; gpu_required() reads the environment only.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_runtime.h"
#include "tensor/dtype.h"

namespace powerhouse {

// Test names and messages show "Q4_K" rather than the enum's bytes. Static: found by
// argument-dependent lookup, private to each test program.
[[maybe_unused]] static void PrintTo(GgmlType type, std::ostream* os) {
    *os << type_traits(type).name;
}

}  // namespace powerhouse

namespace powerhouse::test {

// Every weight type the kernels decode and multiply by.
inline const std::vector<GgmlType> kKernelTypes = {
    GgmlType::f32,  GgmlType::f16,  GgmlType::bf16, GgmlType::q4_0, GgmlType::q4_1, GgmlType::q5_0, GgmlType::q5_1,
    GgmlType::q8_0, GgmlType::q2_k, GgmlType::q3_k, GgmlType::q4_k, GgmlType::q5_k, GgmlType::q6_k, GgmlType::mxfp4};

inline bool gpu_required() {
    const char* value = std::getenv("POWERHOUSE_REQUIRE_GPU");
    return value != nullptr && *value != '\0' && std::string(value) != "0";
}

// Skips a test without a usable GPU, naming why; fails it instead where one is required.
class GpuTest : public ::testing::Test {
protected:
    void SetUp() override {
        auto available = cuda::cuda_available();
        if (available) return;
        if (gpu_required()) FAIL() << "POWERHOUSE_REQUIRE_GPU is set but: " << available.error().message;
        GTEST_SKIP() << available.error().message;
    }
};

}  // namespace powerhouse::test
