#include "backend/step_watchdog.h"

#include <utility>

namespace powerhouse {

StepWatchdog::StepWatchdog(std::chrono::milliseconds deadline, std::function<void()> on_expiry)
    : deadline_(deadline), on_expiry_(std::move(on_expiry)), thread_([this] { run(); }) {}

StepWatchdog::~StepWatchdog() {
    {
        const std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

void StepWatchdog::arm() {
    {
        const std::lock_guard lock(mutex_);
        armed_ = true;
        fired_ = false;
        ++step_;
        due_ = std::chrono::steady_clock::now() + deadline_;
    }
    wake_.notify_all();
}

bool StepWatchdog::disarm() {
    std::unique_lock lock(mutex_);
    armed_ = false;
    wake_.notify_all();
    return fired_;
}

void StepWatchdog::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return stopping_ || armed_; });
        if (stopping_) return;
        const uint64_t step = step_;
        // Until this step is disarmed (or another armed), or its time is up.
        const bool ended = wake_.wait_until(lock, due_, [&] { return stopping_ || !armed_ || step_ != step; });
        if (stopping_) return;
        if (ended) continue;
        fired_ = true;
        // Not under the lock: the stages' interrupts take their own locks, and the step's
        // thread, once released, disarms.
        lock.unlock();
        on_expiry_();
        lock.lock();
        wake_.wait(lock, [&] { return stopping_ || !armed_ || step_ != step; });
    }
}

}  // namespace powerhouse
