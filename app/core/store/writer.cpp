#include "store/writer.h"

#include <utility>

namespace powerhouse::store {

Result<std::unique_ptr<StoreWriter>> StoreWriter::open(const std::filesystem::path& path, StoreOptions options) {
    options.recover_interrupted = false;  // the app's own answers may be streaming now
    Result<Store> store = Store::open(path, options);
    if (!store) return std::move(store).error();
    return std::unique_ptr<StoreWriter>(new StoreWriter(std::move(*store)));
}

StoreWriter::StoreWriter(Store store) : store_(std::move(store)), thread_([this] { run(); }) {}

StoreWriter::~StoreWriter() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

void StoreWriter::post(Job job) {
    {
        std::lock_guard lock(mutex_);
        jobs_.push_back(std::move(job));
        ++posted_;
    }
    wake_.notify_one();
}

std::vector<Error> StoreWriter::flush() {
    std::unique_lock lock(mutex_);
    const uint64_t target = posted_;
    done_.wait(lock, [&] { return finished_ >= target; });
    return std::exchange(errors_, {});
}

std::vector<Error> StoreWriter::take_errors() {
    std::lock_guard lock(mutex_);
    return std::exchange(errors_, {});
}

void StoreWriter::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopped, and everything posted has run
        Job job = std::move(jobs_.front());
        jobs_.pop_front();
        lock.unlock();
        Result<void> done = job(store_);
        lock.lock();
        if (!done) errors_.push_back(std::move(done).error());
        ++finished_;
        done_.notify_all();
    }
}

}  // namespace powerhouse::store
