// How the devices of a split model exchange activations (DESIGN.md section 3): an
// all-reduce that sums the partial outputs of a tensor split's row-parallel products, and a
// copy between devices for a layer split's boundaries. The in-process version here serves
// CPU devices (and is the reference); the CUDA backend implements the same interface with
// NCCL between distinct GPUs and a same-device version for shards sharing one GPU.
//
// Thread-safety: all_reduce_sum is called by every rank at once, each from its own thread;
// copy, abort and reset from any thread; seconds() from the thread that drives the ranks,
// between steps.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "powerhouse/result.h"

namespace powerhouse {

class Communicator {
public:
    virtual ~Communicator() = default;

    virtual int size() const = 0;
    // Every rank passes its buffer of `count` floats; when all have, every buffer holds the
    // element-wise sum, added in rank order so that all ranks get the same bits. Fails on
    // every rank (ErrorCode::cancelled) once abort() has been called, so that ranks waiting
    // for a device that failed are released.
    virtual Result<void> all_reduce_sum(int rank, float* data, size_t count) = 0;
    // Copies `count` floats from a buffer on device `from` to a buffer on device `to`.
    virtual Result<void> copy(int from, const float* src, int to, float* dst, size_t count) = 0;
    // Releases every rank waiting in an all-reduce with an error naming `reason`; later
    // all-reduces fail at once until reset().
    virtual void abort(const std::string& reason) = 0;
    virtual void reset() = 0;
    // Seconds rank `rank` has spent in all-reduces and copies it took part in.
    virtual double seconds(int rank) const = 0;
};

// The rendezvous every in-process communicator shares: ranks arrive with their buffers,
// the last to arrive runs reduce() over all of them while the others wait, and all return
// its result. Abort releases the waiting ranks. Subclasses say how buffers are summed
// (host memory, one GPU, several GPUs) and copied.
class RendezvousCommunicator : public Communicator {
public:
    int size() const override;
    Result<void> all_reduce_sum(int rank, float* data, size_t count) override;
    void abort(const std::string& reason) override;
    void reset() override;
    double seconds(int rank) const override;

protected:
    explicit RendezvousCommunicator(int n_ranks);
    // Sums slots[0..size) element-wise into every one of them, in rank order. Called with
    // every rank waiting; its error is every rank's.
    virtual Result<void> reduce(const std::vector<float*>& slots, size_t count) = 0;
    // Adds transfer time to ranks `from` and `to` (copies).
    void add_copy_seconds(int from, int to, double seconds);
    Result<void> check_ranks(int from, int to) const;

private:
    Result<void> aborted() const;
    Result<void> arrive(std::unique_lock<std::mutex>& lock, int rank, float* data, size_t count);

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::vector<float*> slots_;
    std::vector<double> seconds_;
    size_t count_ = 0;
    int arrived_ = 0;
    uint64_t generation_ = 0;
    Result<void> last_result_;
    bool aborted_ = false;
    std::string abort_reason_;
};

// Devices in one process sharing host memory (the CPU backend's virtual devices).
std::unique_ptr<Communicator> make_host_communicator(int n_ranks);

}  // namespace powerhouse
