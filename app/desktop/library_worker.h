// The Models page's worker thread (LibraryController): the catalog work that reads model
// files or copies them (scans of the library and other apps' folders, imports, forgetting)
// runs here, off the GUI thread, so a big library or a slow disk never freezes the window.
//
// Tasks run one at a time, in the order given, on a store connection of the worker's own to
// the app's database file, opened on the worker at its first task. The store is in WAL mode
// with a busy timeout, so the GUI thread's connection reads and writes meanwhile (SQLite
// makes writers wait for each other, one short statement at a time); the connection is
// opened without the crash recovery that marks streaming answers interrupted, since the
// app's answers may be streaming now. Ordering every catalog change through one queue means
// a listing never predates a change asked for before it.
//
// After each task the worker lists the library and reads each usable model's shape (its
// tensor index: what the "fits" column plans), cached by path, size and modification time,
// and hands the listing to `deliver`, on the worker thread.
//
// A rescan asked for while another scan waits is that scan: at most one waits behind the one
// running (coalesced, not a queue). Destruction drops the waiting tasks, cancels a running
// refresh between folders (a copy, or the inspection of one folder's files, finishes
// first) and joins the thread; `deliver` is not called once the destructor has begun (it
// runs under the queue's lock, which the destructor takes to stop the worker).
//
// Thread-safety: the constructor, enqueue and the destructor on the owner's thread; tasks
// and `deliver` on the worker thread.
#pragma once

#include <QStringList>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "catalog/library.h"
#include "powerhouse/plan.h"
#include "store/store.h"

class LibraryWorker {
public:
    // What a task did, as the page shows it.
    struct Listing {
        bool scan = false;  // the task refreshed the library (its notes are the scan's)
        // The library after the task (with the scan's notes); empty when the task or the
        // listing failed, then `error` says why.
        std::optional<powerhouse::catalog::Library> library;
        // Each model's shape, in the library's order; null for a model that cannot be used
        // or whose file cannot be read now.
        std::vector<std::shared_ptr<const powerhouse::ModelShape>> shapes;
        QStringList said;   // what the task has to say (an import's outcome, line by line)
        bool says = false;  // the task has an outcome to show (`said`, even when empty)
        std::string error;
    };

    // A task's own outcome: `library` when the task listed it already (a refresh), else the
    // worker lists it.
    struct Outcome {
        std::optional<powerhouse::catalog::Library> library;
        QStringList said;
        bool says = false;
        std::string error;  // the task failed: nothing is listed
    };
    // A task, on the worker's store; `cancelled` turns true when the owner goes.
    using Task = std::function<Outcome(powerhouse::store::Store& store, const std::function<bool()>& cancelled)>;

    // `busy_timeout_ms`: how long the worker's connection waits for a database another
    // program keeps locked (the app's store's, StoreOptions::busy_timeout_ms).
    LibraryWorker(std::filesystem::path database, int busy_timeout_ms, std::function<void(Listing)> deliver);
    ~LibraryWorker();
    LibraryWorker(const LibraryWorker&) = delete;
    LibraryWorker& operator=(const LibraryWorker&) = delete;

    // Queues a task; `scan`: it refreshes the library. A scan that may `coalesce` (a plain
    // rescan) asked for while another scan waits is dropped, since that scan answers for
    // both: returns false.
    bool enqueue(Task task, bool scan, bool coalesce = false);

private:
    struct Queued {
        Task task;
        bool scan = false;
    };
    struct CachedShape {
        int64_t file_size = 0;
        int64_t mtime_ns = 0;
        std::shared_ptr<const powerhouse::ModelShape> shape;
    };

    void run();
    Listing perform(Queued& queued);
    void readShapes(Listing& listing);

    std::filesystem::path m_database;
    int m_busyTimeoutMs;
    std::function<void(Listing)> m_deliver;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::deque<Queued> m_waiting;  // guarded by m_mutex
    std::atomic<bool> m_stop{false};
    // The worker thread's own: its store connection and the shapes read so far, by path.
    std::optional<powerhouse::store::Store> m_store;
    std::map<std::string, CachedShape> m_shapes;
    std::thread m_thread;  // last: started once everything above exists
};
