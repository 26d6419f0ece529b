// An ordered writer thread for the store: writes that the GUI must not wait for (an answer's
// text saved every second while it streams: with synchronous=FULL each is an fsync, tens of
// milliseconds on a slow disk) run on a thread of their own, on a connection of their own
// (WAL lets the GUI thread's connection read meanwhile), strictly in the order posted.
// flush() waits for everything posted so far, so a read or write made on another connection
// after it sees them. call() runs one job after those posted before it and waits for its
// result, for a write whose result is needed at once (the id of a new message).
//
// Thread-safety: post(), call(), flush() and take_errors() may be called from any thread but
// the writer's own (call() and flush() from a job would wait for themselves); jobs run on
// the writer's thread, one at a time.
#pragma once

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "powerhouse/result.h"
#include "store/store.h"

namespace powerhouse::store {

class StoreWriter {
public:
    using Job = std::function<Result<void>(Store&)>;

    // Opens its own connection to the database at `path` (already opened and migrated by the
    // app's first connection: this one recovers nothing, whatever `options` say) and starts
    // the thread. A job that another program's lock holds up past `options.busy_timeout_ms`
    // fails, and its error is handed back like any other: never dropped.
    static Result<std::unique_ptr<StoreWriter>> open(const std::filesystem::path& path, StoreOptions options = {});
    // Runs what is queued, then stops the thread: nothing posted is lost.
    ~StoreWriter();
    StoreWriter(const StoreWriter&) = delete;
    StoreWriter& operator=(const StoreWriter&) = delete;

    // Queues a write; jobs run in the order posted. A failed job's error is kept for
    // take_errors()/flush().
    void post(Job job);
    // Runs `job` after every job posted before it and waits for it: its result (a value or
    // the error), handed back here rather than kept for flush().
    template <class Job>
    auto call(Job job) -> decltype(job(std::declval<Store&>())) {
        using Out = decltype(job(std::declval<Store&>()));
        // The job owns the promise: set_value may still be running when get() returns.
        auto promise = std::make_shared<std::promise<Out>>();
        std::future<Out> result = promise->get_future();
        post([promise, job = std::move(job)](Store& store) mutable -> Result<void> {
            promise->set_value(job(store));
            return {};
        });
        return result.get();
    }
    // Waits until every job posted before this call has run; returns (and forgets) the
    // errors of failed jobs since the last flush() or take_errors().
    std::vector<Error> flush();
    // The errors so far, without waiting.
    std::vector<Error> take_errors();

private:
    explicit StoreWriter(Store store);
    void run();

    Store store_;
    std::mutex mutex_;
    std::condition_variable wake_;   // a job was posted, or stop
    std::condition_variable done_;   // a job ended
    std::deque<Job> jobs_;
    uint64_t posted_ = 0, finished_ = 0;
    std::vector<Error> errors_;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace powerhouse::store
