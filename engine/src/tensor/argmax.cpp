#include "tensor/argmax.h"

#include <cmath>

namespace powerhouse {

int32_t argmax(std::span<const float> values) {
    int32_t best = -1;
    float best_value = -INFINITY;
    for (size_t i = 0; i < values.size(); ++i) {
        // Strictly greater: ties keep the lower index; NaN and -inf never compare greater.
        if (values[i] > best_value) {
            best_value = values[i];
            best = static_cast<int32_t>(i);
        }
    }
    return best;
}

}  // namespace powerhouse
