#include "backend/communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

namespace powerhouse {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

class HostCommunicator final : public Communicator {
public:
    explicit HostCommunicator(int n) : slots_(static_cast<size_t>(n), nullptr), seconds_(static_cast<size_t>(n), 0.0) {}

    int size() const override { return static_cast<int>(slots_.size()); }

    Result<void> all_reduce_sum(int rank, float* data, size_t count) override {
        const auto start = Clock::now();
        std::unique_lock lock(mutex_);
        Result<void> result = arrive(lock, rank, data, count);
        seconds_[static_cast<size_t>(rank)] += since(start);
        return result;
    }

    Result<void> copy(int from, const float* src, int to, float* dst, size_t count) override {
        if (from < 0 || to < 0 || from >= size() || to >= size()) {
            return make_error(ErrorCode::invalid_argument, fmt::format("copy between devices {} and {} of {}", from, to,
                                                                       size()));
        }
        const auto start = Clock::now();
        if (src != dst) std::memcpy(dst, src, count * sizeof(float));
        const double s = since(start);
        std::lock_guard lock(mutex_);
        seconds_[static_cast<size_t>(from)] += s;
        if (to != from) seconds_[static_cast<size_t>(to)] += s;
        return {};
    }

    void abort(const std::string& reason) override {
        std::lock_guard lock(mutex_);
        if (!aborted_) abort_reason_ = reason;
        aborted_ = true;
        wake_.notify_all();
    }

    void reset() override {
        std::lock_guard lock(mutex_);
        aborted_ = false;
        abort_reason_.clear();
        arrived_ = 0;
        std::fill(slots_.begin(), slots_.end(), nullptr);
    }

    double seconds(int rank) const override {
        std::lock_guard lock(mutex_);
        return seconds_.at(static_cast<size_t>(rank));
    }

private:
    Result<void> aborted() const {
        return make_error(ErrorCode::cancelled, fmt::format("the all-reduce was abandoned: {}", abort_reason_));
    }

    Result<void> arrive(std::unique_lock<std::mutex>& lock, int rank, float* data, size_t count) {
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
            sum_.assign(slots_[0], slots_[0] + count);
            for (size_t r = 1; r < slots_.size(); ++r) {
                const float* src = slots_[r];
                for (size_t i = 0; i < count; ++i) sum_[i] += src[i];
            }
            for (float* slot : slots_) std::copy(sum_.begin(), sum_.end(), slot);
            std::fill(slots_.begin(), slots_.end(), nullptr);
            arrived_ = 0;
            ++generation_;
            wake_.notify_all();
            return {};
        }
        const uint64_t generation = generation_;
        wake_.wait(lock, [&] { return generation_ != generation || aborted_; });
        if (generation_ == generation) return aborted();
        return {};
    }

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::vector<float*> slots_;
    std::vector<double> seconds_;
    std::vector<float> sum_;
    size_t count_ = 0;
    int arrived_ = 0;
    uint64_t generation_ = 0;
    bool aborted_ = false;
    std::string abort_reason_;
};

}  // namespace

std::unique_ptr<Communicator> make_host_communicator(int n_ranks) {
    return std::make_unique<HostCommunicator>(std::max(1, n_ranks));
}

}  // namespace powerhouse
