// The experts a plan keeps in system RAM (PlanOptions::experts_in_ram): run on the CPU, with
// the weights read in place from the mapped file, for whichever device runs the rest of
// their layer. One per model, shared by its stages; they call it one at a time (a GPU
// copies the experts' input to the host, calls run, and copies the output back).
//
// Thread-safety: run may be called from any thread; calls are serialised.
#pragma once

#include <cstdint>
#include <mutex>

#include "backend/cpu/moe.h"
#include "backend/cpu/quant_dot.h"
#include "backend/cpu/thread_pool.h"
#include "backend/stage_layout.h"

namespace powerhouse::cpu {

class HostExperts {
public:
    HostExperts(int n_threads, KernelIsa isa) : pool_(n_threads), isa_(isa) {}

    // interleave_experts (moe.h) with copies this host keeps: a stage calls it once per
    // layer whose experts it hands to run.
    void interleave(BoundWeight& w, const GgufModel* release_from);

    // run_moe (moe.h) on the host's threads; src, scores and dst are host memory.
    void run(const BoundWeight& w, const float* src, const float* scores, float* dst, int n, int64_t n_embd);

    uint64_t scratch_bytes() const;
    double busy_seconds() const;

private:
    mutable std::mutex mutex_;
    ThreadPool pool_;
    KernelIsa isa_;
    MoeScratch scratch_;
    InterleavedCopies copies_;
    double busy_seconds_ = 0;
};

}  // namespace powerhouse::cpu
