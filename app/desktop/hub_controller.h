// Finding models on Hugging Face from the Models page: a search by name (the Hub's model
// search, GGUF repositories only, most downloaded first) into `results`, a chosen
// repository's GGUF models by quantization into `files` (size, parts, sha256) with whether
// each would fit, and download(), which hands the files to the downloads.
//
// Fit: the planner needs a model's shape (layers, heads, ...), which only the file's header
// holds. Listed, each model gets an estimate, and says so: its size against the free memory
// of the GPUs chosen in Settings (each one's reserve taken off), or of the system when none
// is chosen, with a tenth of its size to spare for the KV cache and activations.
// checkFit(row) then reads the model's GGUF header over HTTP Range requests (every part of a
// split model; app/core/library/remote_shape.h, at most 64 MiB a file) on a worker and plans
// it with SettingsController::fitFor, the Models page's own answer for a local file. Shapes
// are kept per file URL (which names the revision) for the session. A header that cannot be
// read keeps the estimate, with the reason.
//
// Token: the user's Hugging Face token lives in the system keyring (KeyStore, entry
// "huggingface-token"; never in the store). loadToken() reads it at start, saveToken() and
// clearToken() change it (Settings), and it goes as "Authorization: Bearer" to the Hub's
// API (search, listings, headers) on the endpoint's host only; tokenChanged hands it to the
// downloads. A gated repository (the search's `gated`) opened without a token, or a 401/403,
// says what to do (hf_access_message).
//
// Network: each search or listing runs on a worker thread of its own (app/core/library's
// search_hf_models / list_hf_gguf_files); the result comes back as a queued call on the GUI
// thread. A newer search supersedes an older one: the older is cancelled and its answer,
// should it still arrive, dropped; likewise listings. Errors are shown as text (`error`).
// The destructor cancels what is running and joins.
//
// Thread-safety: QObjects of the GUI thread.
#pragma once

#include <QAbstractListModel>
#include <QObject>
#include <QString>
#include <QUrl>
#include <QVariantList>
#include <QtQml/qqmlregistration.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "library/download.h"
#include "library/hf_search.h"
#include "library/hf_url.h"
#include "powerhouse/plan.h"
#include "powerhouse/telemetry.h"
#include "key_store.h"
#include "library/remote_shape.h"
#include "settings_controller.h"

// The repositories a search found, in the Hub's order (most downloaded first).
class HubSearchModel : public QAbstractListModel {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("owned by HubController")
    Q_PROPERTY(int count READ rowCount NOTIFY countChanged)

public:
    enum Role {
        RepoIdRole = Qt::UserRole + 1,  // "owner/name"
        DownloadsRole,                  // int, as the Hub counts them (the last 30 days)
        LikesRole,
        UpdatedRole,       // "2025-01-14": the last change, else the creation date
        GatedRole,         // "" (open), "auto" or "manual": the files want the user's token
        PipelineTagRole,   // "text-generation", ...
        TagsRole,          // [string]
    };

    explicit HubSearchModel(QObject* parent = nullptr) : QAbstractListModel(parent) {}
    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    void setRows(std::vector<powerhouse::library::HfModelSummary> rows);
    const std::vector<powerhouse::library::HfModelSummary>& rows() const { return m_rows; }

signals:
    void countChanged();

private:
    std::vector<powerhouse::library::HfModelSummary> m_rows;
};

// A repository's GGUF models: grouped by quantization (small ones first), a model in parts
// as one row.
class HubFilesModel : public QAbstractListModel {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("owned by HubController")
    Q_PROPERTY(int count READ rowCount NOTIFY countChanged)

public:
    enum Role {
        QuantizationRole = Qt::UserRole + 1,  // "Q4_K_M"; "" when the name names none
        NameRole,      // the path without ".gguf" and the part suffix
        SizeRole,      // bytes (double: QML's numbers), all parts together
        SizeTextRole,  // "4.36 GiB"
        PartsRole,     // how many files make the model
        CompleteRole,  // every part is in the repository
        Sha256Role,    // the first part's; "" when the Hub gave none
        FilesRole,     // [{path, size, sha256, url}], in part order
        FitsRole,      // the estimate, or the planner once the header is read, says it fits
        FitRole,       // in words: the estimate labelled as one, else the planner's text
        EstimateRole,  // true until the header is read: not the planner's answer
        CheckingRole,  // the header is being read
    };

    struct Row {
        powerhouse::library::GgufModel model;
        QVariantMap fit;  // {fits, text}
        std::shared_ptr<const powerhouse::ModelShape> shape;  // from the header, once read
        QString note;           // why the header was not read (the estimate is kept)
        bool checking = false;  // the header is being read
    };

    explicit HubFilesModel(QObject* parent = nullptr) : QAbstractListModel(parent) {}
    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    void setRows(std::vector<Row> rows, powerhouse::library::HfRepo repo, QString endpoint);
    void setFits(const std::vector<QVariantMap>& fits);  // same order as the rows
    const std::vector<Row>& rows() const { return m_rows; }
    const powerhouse::library::HfRepo& repo() const { return m_repo; }
    Row* row(int index) { return index >= 0 && index < rowCount() ? &m_rows[static_cast<size_t>(index)] : nullptr; }
    void rowChanged(int index) { emit dataChanged(this->index(index), this->index(index)); }
    QString fileUrl(const powerhouse::library::HfFile& file) const;

signals:
    void countChanged();

private:
    std::vector<Row> m_rows;
    powerhouse::library::HfRepo m_repo;
    QString m_endpoint;
};

class HubController : public QObject {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("made by main.cpp")
    Q_PROPERTY(HubSearchModel* results READ results CONSTANT)
    Q_PROPERTY(HubFilesModel* files READ files CONSTANT)
    Q_PROPERTY(QString query READ query NOTIFY stateChanged)             // searched last
    Q_PROPERTY(bool searching READ searching NOTIFY stateChanged)
    Q_PROPERTY(bool more READ more NOTIFY stateChanged)                  // the Hub has more results
    Q_PROPERTY(QString repository READ repository NOTIFY stateChanged)   // whose files are listed
    Q_PROPERTY(bool listing READ listing NOTIFY stateChanged)
    // The last failure, or what there is to say about an empty answer; "" otherwise.
    Q_PROPERTY(QString error READ error NOTIFY stateChanged)
    Q_PROPERTY(QString message READ message NOTIFY stateChanged)
    // A Hugging Face token is saved in the keyring (the token itself never reaches QML).
    Q_PROPERTY(bool tokenSaved READ tokenSaved NOTIFY tokenStateChanged)
    Q_PROPERTY(bool tokenBusy READ tokenBusy NOTIFY tokenStateChanged)
    // What became of the last save or clear: "" or the keyring's refusal.
    Q_PROPERTY(QString tokenError READ tokenError NOTIFY tokenStateChanged)

public:
    // `endpoint`: Hugging Face's address (HF_ENDPOINT: a mirror, or a test server).
    HubController(SettingsController& settings, QString endpoint = QStringLiteral("https://huggingface.co"),
                  QObject* parent = nullptr);
    ~HubController() override;

    HubSearchModel* results() { return &m_results; }
    HubFilesModel* files() { return &m_files; }
    QString query() const { return m_query; }
    bool searching() const { return m_searching; }
    bool more() const { return m_more; }
    QString repository() const { return m_repository; }
    bool listing() const { return m_listing; }
    QString error() const { return m_error; }
    QString message() const { return m_message; }
    bool tokenSaved() const { return !m_token.isEmpty(); }
    bool tokenBusy() const { return m_tokenBusy; }
    QString tokenError() const { return m_tokenError; }

    // Searches (an empty query clears the results); supersedes a search under way.
    Q_INVOKABLE void search(const QString& query, int limit = 30);
    // Lists a repository's GGUF models ("owner/name"); supersedes a listing under way.
    Q_INVOKABLE void showFiles(const QString& repoId);
    // Downloads row `model` of `files`, which must be the listing of `repoId`: one
    // downloadRequested per part, with the part's sha256. False (and `error`) otherwise.
    Q_INVOKABLE bool download(const QString& repoId, int model);
    // Reads row `model`'s GGUF header off the GUI thread and replaces its estimate with the
    // planner's fit (at once when this file's shape was read before in this session).
    Q_INVOKABLE void checkFit(int model);

    // The token: saved in the keyring, then used (an empty one is refused); cleared from it.
    Q_INVOKABLE void saveToken(const QString& token);
    Q_INVOKABLE void clearToken();
    // Reads the saved token from the keyring (DesktopApp, at start); no keyring: none.
    void loadToken();
    // The token used from now on, without the keyring (tests; loadToken's result).
    void setToken(const QString& token);

    // The GPUs' free memory, as the monitor reads it (DashboardController::snapshotApplied).
    void setDevices(const powerhouse::TelemetrySnapshot& snapshot);
    // Test hook: retries (default 3 attempts, 1 s backoff).
    void setRetryTiming(int maxAttempts, int backoffMs);
    // Test hook: how much of a header is read at first and at most (2 MiB, 64 MiB).
    void setHeaderLimits(uint64_t firstBytes, uint64_t maxBytes);

    // The estimate for `bytes` of weights: {fits, text}. `gpus`: each GPU in use with its
    // free memory, reserve taken off; none: the system's `cpuAvailable` bytes.
    static QVariantMap estimateFit(uint64_t bytes, const std::vector<powerhouse::DeviceDesc>& gpus,
                                   uint64_t cpuAvailable);

signals:
    void stateChanged();
    // A file to download, with the sha256 the listing gives for it ("" when none):
    // DownloadController::add(url, sha256) takes it.
    void downloadRequested(const QUrl& url, const QString& sha256);
    void tokenStateChanged();
    // The token to send to the Hub's host from now on ("": none): DownloadController::setHubToken.
    void tokenChanged(const QString& token);

private:
    // Runs `work` on a worker thread and `done` with its result on the GUI thread.
    void runWorker(std::function<std::function<void()>()> work);
    void refit();
    void setState(std::function<void()> change);

    SettingsController& m_settings;
    QString m_endpoint;
    HubSearchModel m_results;
    HubFilesModel m_files;
    QString m_query, m_repository, m_error, m_message;
    bool m_searching = false, m_listing = false, m_more = false;
    // Each search and listing has a number; an answer whose number is no longer the latest
    // is dropped. The flags cancel the one running.
    uint64_t m_searchTicket = 0, m_listTicket = 0;
    std::shared_ptr<std::atomic<bool>> m_searchCancel, m_listCancel;
    std::map<uint64_t, std::thread> m_workers;
    uint64_t m_nextWorker = 0;
    struct Gpu {
        std::string uuid, name;
        uint64_t free = 0;
    };
    std::vector<Gpu> m_gpus;  // from the last snapshot
    // The retries and timeouts of the Hub's API requests (setRetryTiming changes them).
    powerhouse::library::DownloadOptions requestOptions() const;
    int m_maxAttempts = 3;
    int m_backoffMs = 1000;
    powerhouse::library::RemoteHeaderLimits m_headerLimits;
    // Shapes read this session, by the model's file URLs (one per part, joined).
    std::map<std::string, std::shared_ptr<const powerhouse::ModelShape>> m_shapes;
    std::string shapeKey(const powerhouse::library::HfRepo& repo, const powerhouse::library::GgufModel& model) const;
    // The repository listed is gated (the search said so): its message without a token.
    QString gatedMessage() const;
    KeyStore m_keys;
    QString m_token, m_tokenError;
    bool m_tokenBusy = false;
};
