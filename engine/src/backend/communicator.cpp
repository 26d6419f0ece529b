#include "backend/communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace powerhouse {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Host memory: the sum is formed in a vector and copied back into every rank's buffer.
class HostCommunicator final : public RendezvousCommunicator {
public:
    explicit HostCommunicator(int n) : RendezvousCommunicator(n) {}

    Result<void> copy(int from, const float* src, int to, float* dst, size_t count) override {
        PH_TRY(check_ranks(from, to));
        const auto start = Clock::now();
        if (src != dst) std::memcpy(dst, src, count * sizeof(float));
        add_copy_seconds(from, to, since(start));
        return {};
    }

protected:
    Result<void> reduce(const std::vector<float*>& slots, size_t count) override {
        sum_.assign(slots[0], slots[0] + count);
        for (size_t r = 1; r < slots.size(); ++r) {
            const float* src = slots[r];
            for (size_t i = 0; i < count; ++i) sum_[i] += src[i];
        }
        for (float* slot : slots) std::copy(sum_.begin(), sum_.end(), slot);
        return {};
    }

private:
    std::vector<float> sum_;
};

}  // namespace

RendezvousCommunicator::RendezvousCommunicator(int n_ranks)
    : slots_(static_cast<size_t>(std::max(1, n_ranks)), nullptr), seconds_(slots_.size(), 0.0) {}

int RendezvousCommunicator::size() const { return static_cast<int>(slots_.size()); }

Result<void> RendezvousCommunicator::all_reduce_sum(int rank, float* data, size_t count) {
    const auto start = Clock::now();
    std::unique_lock lock(mutex_);
    Result<void> result = arrive(lock, rank, data, count);
    if (rank >= 0 && rank < size()) seconds_[static_cast<size_t>(rank)] += since(start);
    return result;
}

Result<void> RendezvousCommunicator::check_ranks(int from, int to) const {
    if (from < 0 || to < 0 || from >= size() || to >= size()) {
        return make_error(ErrorCode::invalid_argument, fmt::format("copy between devices {} and {} of {}", from, to,
                                                                   size()));
    }
    return {};
}

void RendezvousCommunicator::add_copy_seconds(int from, int to, double seconds) {
    std::lock_guard lock(mutex_);
    seconds_[static_cast<size_t>(from)] += seconds;
    if (to != from) seconds_[static_cast<size_t>(to)] += seconds;
}

void RendezvousCommunicator::abort(const std::string& reason) {
    std::lock_guard lock(mutex_);
    if (!aborted_) abort_reason_ = reason;
    aborted_ = true;
    wake_.notify_all();
}

void RendezvousCommunicator::reset() {
    std::lock_guard lock(mutex_);
    aborted_ = false;
    abort_reason_.clear();
    arrived_ = 0;
    std::fill(slots_.begin(), slots_.end(), nullptr);
}

double RendezvousCommunicator::seconds(int rank) const {
    std::lock_guard lock(mutex_);
    return seconds_.at(static_cast<size_t>(rank));
}

Result<void> RendezvousCommunicator::aborted() const {
    return make_error(ErrorCode::cancelled, fmt::format("the all-reduce was abandoned: {}", abort_reason_));
}

Result<void> RendezvousCommunicator::arrive(std::unique_lock<std::mutex>& lock, int rank, float* data, size_t count) {
    if (aborted_) return aborted();
    if (rank < 0 || rank >= size() || slots_[static_cast<size_t>(rank)] != nullptr) {
        return make_error(ErrorCode::internal, fmt::format("all-reduce: rank {} of {} arrived twice or is unknown",
                                                           rank, size()));
    }
    if (arrived_ == 0) {
        count_ = count;
    } else if (count != count_) {
        return make_error(ErrorCode::internal, fmt::format("all-reduce: rank {} has {} values, the others {}", rank,
                                                           count, count_));
    }
    slots_[static_cast<size_t>(rank)] = data;
    if (++arrived_ == size()) {
        // Everyone else is waiting: sum in rank order and hand the result to all.
        last_result_ = reduce(slots_, count);
        std::fill(slots_.begin(), slots_.end(), nullptr);
        arrived_ = 0;
        ++generation_;
        wake_.notify_all();
        return last_result_;
    }
    const uint64_t generation = generation_;
    wake_.wait(lock, [&] { return generation_ != generation || aborted_; });
    if (generation_ == generation) return aborted();
    return last_result_;
}

std::unique_ptr<Communicator> make_host_communicator(int n_ranks) {
    return std::make_unique<HostCommunicator>(std::max(1, n_ranks));
}

}  // namespace powerhouse
