#include "library_worker.h"

#include <algorithm>
#include <set>

LibraryWorker::LibraryWorker(std::filesystem::path database, int busy_timeout_ms, std::function<void(Listing)> deliver)
    : m_database(std::move(database)),
      m_busyTimeoutMs(busy_timeout_ms),
      m_deliver(std::move(deliver)),
      m_thread([this] { run(); }) {}

LibraryWorker::~LibraryWorker() {
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
        m_waiting.clear();
    }
    m_wake.notify_all();
    if (m_thread.joinable()) m_thread.join();
}

bool LibraryWorker::enqueue(Task task, bool scan, bool coalesce) {
    {
        std::lock_guard lock(m_mutex);
        if (scan && coalesce &&
            std::any_of(m_waiting.begin(), m_waiting.end(), [](const Queued& q) { return q.scan; })) {
            return false;
        }
        m_waiting.push_back(Queued{std::move(task), scan});
    }
    m_wake.notify_one();
    return true;
}

void LibraryWorker::run() {
    for (;;) {
        Queued next;
        {
            std::unique_lock lock(m_mutex);
            m_wake.wait(lock, [this] { return m_stop || !m_waiting.empty(); });
            if (m_stop) break;
            next = std::move(m_waiting.front());
            m_waiting.pop_front();
        }
        Listing listing = perform(next);
        // Under the lock, so that once the destructor has set m_stop nothing is delivered.
        std::lock_guard lock(m_mutex);
        if (m_stop) break;
        m_deliver(std::move(listing));
    }
    m_store.reset();  // closed on the thread that used it
}

LibraryWorker::Listing LibraryWorker::perform(Queued& queued) {
    Listing listing;
    listing.scan = queued.scan;
    if (!m_store) {
        // The app's file, opened and migrated by the app already. No recovery: answers
        // streaming now are not a crash's leftovers.
        powerhouse::store::StoreOptions options;
        options.recover_interrupted = false;
        options.busy_timeout_ms = m_busyTimeoutMs;  // as long as the app's own connection waits
        auto opened = powerhouse::store::Store::open(m_database, options);
        if (!opened) {
            listing.error = opened.error().message;
            return listing;
        }
        m_store.emplace(std::move(opened).value());
    }
    Outcome outcome = queued.task(*m_store, [this] { return m_stop.load(); });
    listing.said = std::move(outcome.said);
    listing.says = outcome.says;
    if (!outcome.error.empty()) {
        listing.error = std::move(outcome.error);
        return listing;
    }
    if (outcome.library) {
        listing.library = std::move(outcome.library);
    } else {
        auto listed = powerhouse::catalog::list_library(*m_store);
        if (!listed) {
            listing.error = listed.error().message;
            return listing;
        }
        listing.library = std::move(listed).value();
    }
    readShapes(listing);
    return listing;
}

void LibraryWorker::readShapes(Listing& listing) {
    std::set<std::string> listed;
    for (const powerhouse::catalog::LibraryEntry& entry : listing.library->models) {
        const powerhouse::store::ModelRecord& record = entry.record;
        listed.insert(record.path);
        if (!record.ok || m_stop) {
            listing.shapes.push_back(nullptr);
            continue;
        }
        // The record's size and time say whether the file changed since its shape was read
        // (a rescan updates them); a file that could not be read is tried again next time.
        auto cached = m_shapes.find(record.path);
        if (cached == m_shapes.end() || cached->second.file_size != record.file_size ||
            cached->second.mtime_ns != record.mtime_ns || !cached->second.shape) {
            auto read = powerhouse::read_model_shape(record.path);
            CachedShape fresh{record.file_size, record.mtime_ns, nullptr};
            if (read) fresh.shape = std::make_shared<const powerhouse::ModelShape>(std::move(read).value());
            cached = m_shapes.insert_or_assign(record.path, std::move(fresh)).first;
        }
        listing.shapes.push_back(cached->second.shape);
    }
    std::erase_if(m_shapes, [&listed](const auto& kv) { return listed.count(kv.first) == 0; });
}
