// The index of the largest of a row of floats, as every greedy choice in the engine makes
// it: the sampler at temperature 0, a device stage that has the logits on the host, and the
// reference of the GPU's own argmax kernel.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <span>

namespace powerhouse {

// Ties go to the lowest index; NaN and -inf never win. -1 when `values` is empty or holds
// only NaN and -inf (the tokenizer's kNoToken).
int32_t argmax(std::span<const float> values);

}  // namespace powerhouse
