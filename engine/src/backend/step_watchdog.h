// A deadline for one step of a model (ARCHITECTURE.md section 7): armed before the stages
// run, disarmed when they return. If they have not returned when the deadline passes, the
// watchdog's own thread calls `on_expiry` once, which interrupts the stages and aborts their
// communicator, so that a device that never answers (a hung kernel or collective) costs the
// caller a deadline, not its thread.
//
// Thread-safety: arm(), disarm() and fired() from the thread that runs the steps; on_expiry
// runs on the watchdog's thread while a step is armed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace powerhouse {

class StepWatchdog {
public:
    StepWatchdog(std::chrono::milliseconds deadline, std::function<void()> on_expiry);
    ~StepWatchdog();
    StepWatchdog(const StepWatchdog&) = delete;
    StepWatchdog& operator=(const StepWatchdog&) = delete;

    std::chrono::milliseconds deadline() const { return deadline_; }
    // Starts the clock of a step (and forgets whether the previous one fired).
    void arm();
    // The step returned; returns whether its deadline passed first (on_expiry was called).
    bool disarm();

private:
    void run();

    const std::chrono::milliseconds deadline_;
    const std::function<void()> on_expiry_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool armed_ = false;
    bool fired_ = false;
    bool stopping_ = false;
    uint64_t step_ = 0;  // which arming the thread is timing
    std::chrono::steady_clock::time_point due_;
    std::thread thread_;
};

}  // namespace powerhouse
