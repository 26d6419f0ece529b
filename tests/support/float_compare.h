// GoogleTest assertions that compare float arrays and name the worst (or first) bad
// element: shared by the GPU kernel tests and the op conformance tests. Needs no CUDA.
//
// Thread-safety: pure functions.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace powerhouse::test {

// |actual[i] - expected[i]| <= tolerance[i] for every i (a NaN never is); the arrays must
// have the same, non-zero length.
inline ::testing::AssertionResult all_close(const std::vector<double>& expected, const std::vector<float>& actual,
                                            const std::vector<double>& tolerance) {
    if (expected.size() != actual.size() || expected.size() != tolerance.size() || expected.empty()) {
        return ::testing::AssertionFailure() << "sizes differ or are empty: " << expected.size() << " expected, "
                                             << actual.size() << " actual, " << tolerance.size() << " tolerances";
    }
    size_t bad = 0, worst = 0;
    double worst_ratio = -1;
    for (size_t i = 0; i < expected.size(); ++i) {
        const double err = std::fabs(static_cast<double>(actual[i]) - expected[i]);
        const double ratio = std::isnan(err) ? std::numeric_limits<double>::infinity() : err / tolerance[i];
        if (!(err <= tolerance[i])) ++bad;
        if (ratio > worst_ratio) {
            worst_ratio = ratio;
            worst = i;
        }
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << bad << " of " << expected.size() << " elements out of tolerance; worst at "
                                         << worst << ": expected " << expected[worst] << ", got " << actual[worst]
                                         << ", tolerance " << tolerance[worst];
}

// Bit-identical float arrays of the same, non-zero length; names the first difference.
inline ::testing::AssertionResult same_floats(const std::vector<float>& expected, const std::vector<float>& actual) {
    if (expected.size() != actual.size() || expected.empty()) {
        return ::testing::AssertionFailure()
               << "sizes differ or are empty: " << expected.size() << " and " << actual.size();
    }
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
        if (std::memcmp(&expected[i], &actual[i], sizeof(float)) != 0 && bad++ == 0) first = i;
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << bad << " of " << expected.size() << " elements differ; first at " << first
                                         << ": expected " << expected[first] << ", got " << actual[first];
}

}  // namespace powerhouse::test
