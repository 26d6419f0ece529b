#include "backend/cpu/host_experts.h"

#include <chrono>

namespace powerhouse::cpu {

void HostExperts::run(const BoundWeight& w, const float* src, const float* scores, float* dst, int n,
                      int64_t n_embd) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto start = std::chrono::steady_clock::now();
    run_moe(pool_, isa_, w, src, scores, dst, n, n_embd, scratch_);
    busy_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void HostExperts::interleave(BoundWeight& w, const GgufModel* release_from) {
    const std::lock_guard<std::mutex> lock(mutex_);
    interleave_experts(pool_, isa_, w, copies_, release_from);
}

uint64_t HostExperts::scratch_bytes() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return scratch_.bytes();
}

double HostExperts::busy_seconds() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return busy_seconds_;
}

}  // namespace powerhouse::cpu
