// Random test data with a fixed seed, shared by the CPU kernel tests.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace powerhouse::test {

// n values drawn from N(mean, scale²) by a std::mt19937 seeded with `seed`: the same values on
// every run and every machine that has the same standard library.
inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f, float mean = 0.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(mean, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

}  // namespace powerhouse::test
