#include "backend/cuda/cuda_communicator.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <powerhouse_kernels.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "backend/cuda/cuda_libraries.h"
#include "backend/cuda/cuda_runtime.h"

namespace powerhouse::cuda {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

class CudaCommunicator final : public RendezvousCommunicator {
public:
    explicit CudaCommunicator(std::vector<int> devices)
        : RendezvousCommunicator(static_cast<int>(devices.size())), devices_(std::move(devices)) {}

    ~CudaCommunicator() override {
        // Each stream is destroyed with its own GPU current (the NCCL ranks' are on several).
        DeviceScope scope;
        for (size_t r = 0; r < streams_.size(); ++r) {
            if (streams_[r] != nullptr && scope.select(devices_[r])) cudaStreamDestroy(streams_[r]);
        }
        if (stream_ != nullptr && scope.select(devices_[0])) cudaStreamDestroy(stream_);
    }

    Result<void> init(bool use_nccl) {
        DeviceScope scope;
        PH_TRY(scope.select(devices_[0]));
        PH_TRY(cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream"));
        std::vector<int> distinct = devices_;
        std::sort(distinct.begin(), distinct.end());
        distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
        if (distinct.size() == 1) {
            kind_ = "same GPU";
            return {};
        }
        kind_ = "peer copies";
        if (!use_nccl) return {};
        if (distinct.size() != devices_.size()) {
            // NCCL needs one rank per GPU; a plan that puts two shards on one of several GPUs
            // keeps to copies.
            kind_ = "peer copies (a GPU holds two shards, which NCCL cannot pair)";
            return {};
        }
        Result<std::unique_ptr<NcclLibrary>> nccl = load_nccl();
        if (!nccl) {
            kind_ = "peer copies (" + nccl.error().message + ")";
            return {};
        }
        Result<NcclComms> comms = NcclComms::init_all(**nccl, devices_);
        if (!comms) {
            kind_ = "peer copies (NCCL did not start: " + comms.error().message + ")";
            return {};
        }
        nccl_ = std::move(nccl).value();
        comms_ = std::move(comms).value();
        streams_.assign(devices_.size(), nullptr);
        for (size_t r = 0; r < devices_.size(); ++r) {
            PH_TRY(scope.select(devices_[r]));
            PH_TRY(cuda_check(cudaStreamCreateWithFlags(&streams_[r], cudaStreamNonBlocking), "creating a stream"));
        }
        kind_ = "NCCL " + nccl_->version_string();
        return {};
    }

    const std::string& kind() const { return kind_; }

    Result<void> copy(int from, const float* src, int to, float* dst, size_t count) override {
        PH_TRY(check_ranks(from, to));
        if (src == dst || count == 0) return {};
        const auto start = Clock::now();
        const int df = devices_[static_cast<size_t>(from)];
        const int dt = devices_[static_cast<size_t>(to)];
        DeviceScope scope;
        PH_TRY(scope.select(dt));
        const size_t bytes = count * sizeof(float);
        // On the legacy default stream, waited for here: neither a device-to-device cudaMemcpy
        // nor a peer copy waits for itself to finish, and the stages' streams do not wait for
        // the default stream. (The sender's stream was synchronized when its call returned.)
        const int status = df == dt ? cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nullptr)
                                    : cudaMemcpyPeerAsync(dst, dt, src, df, bytes, nullptr);
        PH_TRY(cuda_check(status, fmt::format("copying {} bytes from GPU {} to GPU {}", bytes, df, dt)));
        PH_TRY(cuda_check(cudaStreamSynchronize(nullptr), fmt::format("copying from GPU {} to GPU {}", df, dt)));
        add_copy_seconds(from, to, since(start));
        return {};
    }

protected:
    Result<void> reduce(const std::vector<float*>& slots, size_t count) override {
        if (count == 0) return {};
        if (!comms_.devices().empty()) return reduce_nccl(slots, count);
        const size_t bytes = count * sizeof(float);
        const int home = devices_[0];
        DeviceScope scope;  // the calling rank's thread goes on with its own GPU afterwards
        PH_TRY(scope.select(home));
        PH_TRY(ensure(sum_, bytes));
        PH_TRY(cuda_check(cudaMemcpyAsync(sum_.data(), slots[0], bytes, cudaMemcpyDeviceToDevice, stream_),
                     "starting an all-reduce"));
        for (size_t r = 1; r < slots.size(); ++r) {
            const float* part = slots[r];
            if (devices_[r] != home) {
                PH_TRY(ensure(staging_, bytes));
                PH_TRY(cuda_check(cudaMemcpyPeerAsync(staging_.data(), home, slots[r], devices_[r], bytes, stream_),
                             fmt::format("all-reduce: copying from GPU {} to GPU {}", devices_[r], home)));
                part = static_cast<const float*>(staging_.data());
            }
            PH_TRY(cuda_check(ph_accumulate(static_cast<float*>(sum_.data()), part, static_cast<int64_t>(count), stream_),
                         "all-reduce: adding on GPU " + std::to_string(home)));
        }
        for (size_t r = 0; r < slots.size(); ++r) {
            const int status = devices_[r] == home
                                   ? cudaMemcpyAsync(slots[r], sum_.data(), bytes, cudaMemcpyDeviceToDevice, stream_)
                                   : cudaMemcpyPeerAsync(slots[r], devices_[r], sum_.data(), home, bytes, stream_);
            PH_TRY(cuda_check(status, fmt::format("all-reduce: copying the sum to GPU {}", devices_[r])));
        }
        return cuda_check(cudaStreamSynchronize(stream_), "all-reduce on GPU " + std::to_string(home));
    }

private:
    Result<void> ensure(DeviceBuffer& buffer, size_t bytes) {
        if (buffer.size() >= bytes) return {};
        Result<DeviceBuffer> fresh = DeviceBuffer::allocate(bytes);
        if (!fresh) return fresh.error();
        buffer = std::move(fresh).value();
        return {};
    }

    Result<void> reduce_nccl(const std::vector<float*>& slots, size_t count) {
        DeviceScope scope;  // the calling rank's thread goes on with its own GPU afterwards
        PH_TRY(comms_.group_start());
        Result<void> launched;
        for (size_t r = 0; r < slots.size() && launched; ++r) {
            launched = scope.select(devices_[r]);
            if (launched) launched = comms_.all_reduce_sum_f32(static_cast<int>(r), slots[r], count, streams_[r]);
        }
        // The group is closed whatever happened, so that the thread is not left inside it.
        Result<void> ended = comms_.group_end();
        PH_TRY(launched);
        PH_TRY(ended);
        for (size_t r = 0; r < slots.size(); ++r) {
            PH_TRY(scope.select(devices_[r]));
            // Asked rather than waited for, so that abort() can end a collective that hangs.
            const int status = cuda_wait_stream(streams_[r], aborting_);
            if (status == kStreamWaitStopped) {
                comms_.abort();
                return make_error(ErrorCode::cancelled, "the NCCL all-reduce was aborted");
            }
            PH_TRY(cuda_check(status, "NCCL all-reduce on GPU " + std::to_string(devices_[r])));
        }
        return {};
    }

public:
    void abort(const std::string& reason) override {
        aborting_.store(true, std::memory_order_relaxed);
        RendezvousCommunicator::abort(reason);
    }
    void reset() override {
        aborting_.store(false, std::memory_order_relaxed);
        RendezvousCommunicator::reset();
    }

private:

    std::vector<int> devices_;
    std::string kind_;
    cudaStream_t stream_ = nullptr;  // on devices_[0]
    DeviceBuffer sum_;
    DeviceBuffer staging_;
    std::unique_ptr<NcclLibrary> nccl_;  // before comms_: the communicators borrow it
    NcclComms comms_;
    std::vector<cudaStream_t> streams_;  // NCCL: one per rank, on its GPU
    std::atomic<bool> aborting_{false};    // abort(): a hung collective is ended, not waited for
};

}  // namespace

Result<std::unique_ptr<Communicator>> make_cuda_communicator(const std::vector<int>& devices, bool use_nccl) {
    if (devices.empty()) return make_error(ErrorCode::invalid_argument, "a communicator needs at least one GPU");
    PH_TRY(cuda_available());
    auto comm = std::make_unique<CudaCommunicator>(devices);
    PH_TRY(comm->init(use_nccl));
    return std::unique_ptr<Communicator>(std::move(comm));
}

std::string cuda_communicator_kind(const Communicator& comm) {
    const auto* cuda = dynamic_cast<const CudaCommunicator*>(&comm);
    return cuda != nullptr ? cuda->kind() : std::string("host memory");
}

}  // namespace powerhouse::cuda
