#include "backend/cpu/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace powerhouse::cpu {

namespace {
// Some tens of microseconds of polling before a thread sleeps: a decode step issues a few
// hundred short jobs back to back, and waking a sleeping thread costs more than that.
constexpr int kSpinIterations = 4096;

// Polls done() with a pause between reads; every 64 polls the core is offered to other
// threads, so that on a machine with more runnable threads than cores the thread being
// waited for (descheduled by the other load) gets to run instead of the poller.
template <class Done>
bool spin_until(Done done) {
    for (int i = 0; i < kSpinIterations; ++i) {
        if (done()) return true;
#if defined(__x86_64__)
        _mm_pause();
#endif
        if ((i & 63) == 63) std::this_thread::yield();
    }
    return done();
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::run(const std::function<void(int, int)>& job) {
    if (n_threads_ == 1) {
        job(0, 1);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        job_ = &job;
        pending_.store(n_threads_ - 1, std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    job(0, n_threads_);
    if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
    if (n <= 0) return;
    const int threads = static_cast<int>(std::min<int64_t>(n_threads_, n));
    if (threads == 1) {
        fn(0, n, 0);
        return;
    }
    run([&](int index, int) {
        if (index >= threads) return;
        const int64_t begin = n * index / threads;
        const int64_t end = n * (index + 1) / threads;
        fn(begin, end, index);
    });
}

void ThreadPool::parallel_chunks(int64_t n_chunks, const std::function<void(int64_t, int)>& fn) {
    if (n_chunks <= 0) return;
    if (n_threads_ == 1 || n_chunks == 1) {
        for (int64_t c = 0; c < n_chunks; ++c) fn(c, 0);
        return;
    }
    std::atomic<int64_t> next{0};
    run([&](int index, int) {
        for (int64_t c = next.fetch_add(1, std::memory_order_relaxed); c < n_chunks;
             c = next.fetch_add(1, std::memory_order_relaxed)) {
            fn(c, index);
        }
    });
}

void ThreadPool::worker(int index) {
    uint64_t seen = 0;
    for (;;) {
        if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        }
        const std::function<void(int, int)>* job;
        {
            std::lock_guard lock(mutex_);
            if (stop_) return;
            seen = generation_.load(std::memory_order_acquire);
            job = job_;
        }
        (*job)(index, n_threads_);
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard lock(mutex_);
            done_.notify_one();
        }
    }
}

}  // namespace powerhouse::cpu
