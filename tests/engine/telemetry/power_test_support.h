// What the power tests share (power_limit_test.cpp, power_sweep_test.cpp): monitors on the
// fake NVML library or on simulated GPUs, the fake's own record of the limits set, and a
// check of a refusal's code and words.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "platform/shared_library.h"
#include "powerhouse/telemetry.h"

namespace powerhouse::power_test {

// A monitor's options for the fake NVML library, answering as FAKE_NVML_SCENARIO says.
inline GpuMonitorOptions fake_nvml(const char* scenario, const char* library = FAKE_NVML_PATH) {
    setenv("FAKE_NVML_SCENARIO", scenario, 1);
    GpuMonitorOptions options;
    options.nvml = library;
    return options;
}

inline GpuMonitorOptions simulated_gpus(const char* spec) {
    GpuMonitorOptions options;
    options.simulate = spec;
    return options;
}

// The fake's own record of the limits, read through a handle of the test's own, so that it
// outlives the monitors (which close theirs) and shows what they did as they went.
class FakeNvmlLimits {
public:
    FakeNvmlLimits() {
        Result<SharedLibrary> lib = SharedLibrary::open(FAKE_NVML_PATH);
        if (lib) library_ = std::move(lib).value();
        now_ = library_.symbol<unsigned int (*)(int)>("fake_nvml_power_limit");
        sets_ = library_.symbol<int (*)(int, unsigned int*, int)>("fake_nvml_power_limit_sets");
    }
    bool loaded() const { return now_ != nullptr && sets_ != nullptr; }
    unsigned int now(int gpu) const { return now_(gpu); }  // mW
    std::vector<unsigned int> sets(int gpu) const {        // mW, in order, since nvmlInit_v2
        std::vector<unsigned int> out(64);
        out.resize(static_cast<size_t>(sets_(gpu, out.data(), static_cast<int>(out.size()))));
        return out;
    }

private:
    SharedLibrary library_;
    unsigned int (*now_)(int) = nullptr;
    int (*sets_)(int, unsigned int*, int) = nullptr;
};

// `r` failed with `code`, and its message is `message` (or, with `whole` false, contains it).
template <class T>
::testing::AssertionResult refused(const Result<T>& r, ErrorCode code, const std::string& message, bool whole = true) {
    if (r) return ::testing::AssertionFailure() << "succeeded; expected the error: " << message;
    const Error& e = r.error();
    if (e.code != code) {
        return ::testing::AssertionFailure()
               << "error code " << error_code_name(e.code) << ", not " << error_code_name(code) << ": " << e.message;
    }
    if (whole ? e.message != message : e.message.find(message) == std::string::npos) {
        return ::testing::AssertionFailure() << "the message\n  " << e.message << "\n"
                                             << (whole ? "is not" : "does not contain") << "\n  " << message;
    }
    return ::testing::AssertionSuccess();
}

}  // namespace powerhouse::power_test
