// Downloads in the app: a queue of model files (app/core/library's resumable, verified
// downloads) into the library folder, one at a time on a worker thread, with progress,
// speed and time left, pause, resume and cancel. A Hugging Face model page is listed first
// (its GGUF files grouped by quantization, with sizes) and the user picks one; a file page
// becomes its download link. Unfinished downloads are remembered in the store and come back
// paused at the next start, their bytes kept for resuming. The user's Hugging Face token
// (setHubToken) goes with requests to the Hub's own host only (libcurl drops it on a
// redirect to another host, the Hub's CDN); a 401/403 from the Hub says what to do.
//
// Thread-safety: a QObject of the GUI thread; the worker thread only posts to it.
#pragma once

#include <QAbstractListModel>
#include <QObject>
#include <QString>
#include <QUrl>
#include <QVariantList>
#include <QtQml/qqmlregistration.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "store/store.h"

class DownloadController : public QAbstractListModel {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("made by main.cpp")
    Q_PROPERTY(int count READ rowCount NOTIFY countChanged)
    // What went wrong with the downloads as a whole (the list of unfinished ones could not be
    // saved), shown above them on the Models page until dismissed or a later save succeeds;
    // "" for nothing. Each download's own failure is its row's `status`.
    Q_PROPERTY(QString errorText READ errorText NOTIFY errorTextChanged)

public:
    enum Role {
        IdRole = Qt::UserRole + 1,
        NameRole,
        UrlRole,
        StateRole,     // a State, as an int
        ProgressRole,  // 0..1, -1 while the size is unknown
        StatusRole,    // "1.2 GiB of 4.7 GiB · 85 MB/s · 41 s left", or the outcome
        OptionsRole,   // choose: [{label, size}] (one per model of a listed repository)
    };

    // Where a download is. QML reads them as DownloadController.Downloading, ...
    enum class State {
        Queued,       // waiting for the worker
        Listing,      // a model page's files being listed
        Choose,       // listed: the user picks one of `options`
        Downloading,
        Paused,
        Failed,       // `status` says why
        Done,
    };
    Q_ENUM(State)

    // `endpoint`: Hugging Face's address (a mirror, or a test server).
    DownloadController(powerhouse::store::Store& store, QString libraryFolder,
                       QString endpoint = QStringLiteral("https://huggingface.co"), QObject* parent = nullptr);
    ~DownloadController() override;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    // A file link, a Hugging Face file page or model page. Returns the new row's id.
    Q_INVOKABLE int add(const QUrl& url) { return add(url, {}); }
    // ... with the file's expected sha256 (else the server's, when it sends one).
    int add(const QUrl& url, const std::string& sha256);
    Q_INVOKABLE void pause(int id);
    Q_INVOKABLE void resume(int id);
    // Stops and deletes the partial file.
    Q_INVOKABLE void cancel(int id);
    // For a listed repository: downloads option `option` (all parts of a split model).
    Q_INVOKABLE void choose(int id, int option);
    // Removes finished and failed rows.
    Q_INVOKABLE void clearFinished();
    QString errorText() const { return m_errorText; }
    Q_INVOKABLE void dismissError() { setErrorText({}); }

    // Test hook: retries and stall detection (defaults: 8 attempts, 1 s backoff, 30 s stall).
    void setRetryTiming(int maxAttempts, int backoffMs, long stallSeconds);
    // The Hugging Face token sent to the Hub's host ("" for none): HubController's.
    void setHubToken(const QString& token);

signals:
    void countChanged();
    void errorTextChanged();
    // A file is complete (and verified when a hash was known): the library takes it, with
    // its sha256 when it was verified against one ("" otherwise).
    void finished(const QString& path, const QString& verifiedSha256);
    // The store refused the list of unfinished downloads: what failed and what to do.
    void error(const QString& message);

private:
    struct Job;
    struct Shared;
    void post(int id, std::function<void(Job&)> change);
    void save();
    int rowOf(int id) const;
    Job* job(int id);
    void changed(int id);
    void work();

    powerhouse::store::Store& m_store;
    QString m_library;
    QString m_endpoint;
    std::vector<std::unique_ptr<Job>> m_jobs;
    int m_nextId = 1;
    std::shared_ptr<Shared> m_shared;  // the queue, shared with the worker thread
    std::thread m_worker;
    bool m_saveFailed = false;  // the last save() was refused (said once)
    QString m_errorText;
    void setErrorText(const QString& text);
};
