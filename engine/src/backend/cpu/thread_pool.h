// A fixed set of worker threads that run one parallel job at a time. The caller's thread
// takes part, so a pool of N threads starts N - 1 workers. Between jobs the workers spin
// briefly (a decode step issues a few hundred small jobs back to back) and then sleep on a
// condition variable, so an idle engine uses no CPU.
//
// Thread-safety: run() is called from one thread at a time (the engine's).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace powerhouse::cpu {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Calls job(thread_index, n_threads) on every thread and returns when all have returned.
    void run(const std::function<void(int, int)>& job);

    // Splits [0, n) into contiguous ranges, one per thread: fn(begin, end, thread_index).
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

    // Calls fn(chunk, thread_index) for every chunk in [0, n_chunks), handing chunks out
    // one at a time, so that a thread slowed by other load on the machine takes fewer.
    void parallel_chunks(int64_t n_chunks, const std::function<void(int64_t, int)>& fn);

private:
    void worker(int index);

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable done_;
    const std::function<void(int, int)>* job_ = nullptr;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    bool stop_ = false;
};

}  // namespace powerhouse::cpu
