// The Models page: the catalog of the user's models (app/core/catalog) as a list model,
// with whether and how each one fits on the GPUs (or the CPU) with the current settings,
// imports of dropped or chosen files, and loading one. The list is "the library" of
// catalog/library.h: the library folder, the folders the user added and other apps'
// downloads (LM Studio, Ollama, ...), used in place, the same list `powerhouse-cli list`
// prints.
//
// A scan reads the header of every new or changed file in every folder, and an import may
// copy gigabytes: both run on a worker thread (LibraryWorker), with its own store
// connection, in the order asked, and the list changes when a task's listing comes back
// (a queued call). So rescan(), importUrls(), forget() and addDownloaded() return at once;
// `scanning` is true from a rescan until its rows are listed, and `message` says how an
// import went once it has. The "fits" column plans each model's shape (read on the worker
// with the listing) on the GUI thread, so a change of settings re-plans without reading
// a file.
//
// Dropped web addresses are handed on through `downloadRequested`; anything else dropped
// is refused with the reason.
//
// Thread-safety: a QObject of the GUI thread; the worker only posts listings to it.
// Destroying it mid-scan cancels the scan and waits for the worker.
#pragma once

#include <QtQml/qqmlregistration.h>
#include <QAbstractListModel>
#include <QHash>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QUrl>
#include <QVariantList>

#include <memory>
#include <vector>

#include "catalog/library.h"
#include "catalog/other_apps.h"
#include "library_worker.h"
#include "powerhouse/plan.h"
#include "settings_controller.h"
#include "store/store.h"

class ModelListModel : public QAbstractListModel {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("owned by LibraryController")
    Q_PROPERTY(int count READ rowCount NOTIFY countChanged)

public:
    enum Role {
        PathRole = Qt::UserRole + 1,
        NameRole,  // the name a person writes: "SmolLM2 135M Instruct · Q4_1" (catalog/display_name.h)
        FileNameRole,
        DetailsRole,  // "llama · Q4_1 · 135 M parameters · 30 layers · 92 MiB"
        UsableRole,   // the engine can run it
        ProblemRole,  // why not
        FitsRole,
        FitRole,         // the plan in words, or why it does not fit
        SuggestionRole,  // what would make it fit
        LoadedRole,
        SourceRole,      // where it came from, in words: "Folder", "LM Studio", "Ollama · llama3.2:3b"
        SourceKindRole,  // the same as a key: "downloaded", "imported", "folder", "lmstudio", "ollama", ...
        SourceNameRole,  // the other app's name for it ("llama3.2:3b"); empty when it has none
        OtherAppRole,    // another app's download, used in place (forgetting it only hides it)
        LoadErrorRole,   // why its last load failed, until it loads or the user dismisses it; "" for none
        // An encoder (ModelShape::embedding_only, from the worker's reading of the file): it
        // makes embeddings for the API server's /v1/embeddings and cannot chat.
        EmbeddingOnlyRole,
    };

    struct Row {
        powerhouse::store::ModelRecord record;
        QString name, details, source;
        PlanFit fit;
        // What the fit is planned from: null when it cannot be used or read.
        std::shared_ptr<const powerhouse::ModelShape> shape;
    };

    explicit ModelListModel(QObject* parent = nullptr) : QAbstractListModel(parent) {}
    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    void setRows(std::vector<Row> rows);
    void setFits(const std::vector<PlanFit>& fits);  // same order as the rows
    // Loaded: its load error, if any, is over.
    void setLoadedPath(const QString& path);
    // Why the model at `path` could not be loaded ("" clears it). Kept by path, so a rescan,
    // or a model listed only later, keeps it.
    void setLoadError(const QString& path, const QString& message);
    QString loadError(const QString& path) const { return m_loadErrors.value(path); }
    const std::vector<Row>& rows() const { return m_rows; }

signals:
    void countChanged();

private:
    void changedPath(const QString& path, int role);
    std::vector<Row> m_rows;
    QString m_loaded;
    QHash<QString, QString> m_loadErrors;  // by path
};

class LibraryController : public QObject {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("made by main.cpp")
    Q_PROPERTY(ModelListModel* models READ models CONSTANT)
    Q_PROPERTY(QString libraryFolder READ libraryFolder CONSTANT)
    // How imported files are kept: in_place (registered where they are), copy or move (into
    // the library folder).
    Q_PROPERTY(QString importMode READ importMode WRITE setImportMode NOTIFY importModeChanged)
    Q_PROPERTY(QString message READ message NOTIFY messageChanged)  // the last import's outcome
    // What the last rescan passed over, each with why (a folder that cannot be read, a
    // malformed Ollama manifest).
    Q_PROPERTY(QStringList scanNotes READ scanNotes NOTIFY scanNotesChanged)
    // A rescan is waiting or running (on the worker thread).
    Q_PROPERTY(bool scanning READ scanning NOTIFY scanningChanged)
    // Bumped when a model's chat template is chosen or dropped, so that the cards read
    // chatTemplateFile() again.
    Q_PROPERTY(int chatTemplatesRevision READ chatTemplatesRevision NOTIFY chatTemplatesChanged)
    // Bumped when a model's draft model is chosen, so that the cards read draftModel() again.
    Q_PROPERTY(int draftModelsRevision READ draftModelsRevision NOTIFY draftModelsChanged)
    // Bumped when the models that could be a draft change (one listed or gone, one that
    // becomes usable or unusable: a download done, a file spoilt or repaired, a name read
    // anew), so that the cards read draftChoices() again; the row count alone misses a model
    // that turns usable or unusable in place.
    Q_PROPERTY(int draftChoicesRevision READ draftChoicesRevision NOTIFY draftChoicesChanged)
    // What went wrong with the library itself (a refresh that failed, a model that could not
    // be forgotten, a chat template or draft model not kept), shown on the Models page above
    // the list until dismissed, or, for a failed refresh, until a refresh succeeds; "" for
    // nothing. Also said once through `error` (the chat's line).
    Q_PROPERTY(QString errorText READ errorText NOTIFY errorTextChanged)

public:
    // `environment` says where other apps keep their downloads (tests pass a fake home).
    LibraryController(powerhouse::store::Store& store, SettingsController& settings, QString libraryFolder,
                      QObject* parent = nullptr,
                      powerhouse::catalog::Environment environment = powerhouse::catalog::Environment::from_process());
    ~LibraryController() override;

    ModelListModel* models() { return &m_models; }
    QString libraryFolder() const { return m_library; }
    QString importMode() const { return m_importMode; }
    void setImportMode(const QString& mode);
    QString message() const { return m_message; }
    QStringList scanNotes() const { return m_scanNotes; }
    bool scanning() const { return m_scans > 0; }
    QString errorText() const { return m_errorText; }
    Q_INVOKABLE void dismissError() { setErrorText({}, false); }

    // Refreshes the library (its folder, the user's folders, other apps' downloads), then
    // lists every model, on the worker. Asked again while a scan runs, one more scan follows
    // it (however often it is asked meanwhile).
    Q_INVOKABLE void rescan();
    // Dropped or chosen: local .gguf files are imported and folders added (on the worker),
    // web addresses handed to downloads, anything else refused with the reason; `message`
    // says how each went once the import is done. Returns how many were accepted: the web
    // addresses, the folders and the .gguf files (one whose import fails, a copy that finds
    // the disk full, is counted and its message says why).
    Q_INVOKABLE int importUrls(const QList<QUrl>& urls);
    Q_INVOKABLE void load(const QString& path);
    // A download arrived in the library folder: rescans (a scan, as rescan()), and keeps the
    // sha256 it was verified against with its record.
    void addDownloaded(const QString& path, const QString& verifiedSha256);
    // Forgets a model (its file stays where it is); one that a rescan would find again
    // (another app's, or in a library folder) stays hidden until imported again. Done on
    // the worker, after the tasks asked for before it.
    Q_INVOKABLE void forget(const QString& path);
    void setLoadedPath(const QString& path) { m_models.setLoadedPath(path); }
    // A model that failed to load: its card on the Models page says why (`loadError`) until
    // it loads or the user dismisses it (dismissLoadError).
    void setLoadError(const QString& path, const QString& message) { m_models.setLoadError(path, message); }
    Q_INVOKABLE void dismissLoadError(const QString& path) { m_models.setLoadError(path, {}); }

    // A chat template for one model instead of its own (model_templates.h), used from its
    // next load. chatTemplateFile: the file it was read from; "" for the model's own.
    // setChatTemplateFile reads the file now (its text is kept: the file may move); false,
    // with `error` saying why, if it cannot be read or kept.
    int chatTemplatesRevision() const { return m_chatTemplatesRevision; }
    Q_INVOKABLE QString chatTemplateFile(const QString& path) const;
    Q_INVOKABLE bool setChatTemplateFile(const QString& path, const QUrl& file);
    Q_INVOKABLE bool useOwnChatTemplate(const QString& path);

    // A draft model for one model (model_templates.h: speculative decoding by a small model
    // of the same vocabulary), used from its next load. draftModel: its path, "" for none.
    // draftChoices: the models of the library that could be one, [{path, name}] (the usable
    // ones but embedding models and the model itself). setDraftModel("" for none): false,
    // with `error` saying why, if it cannot be kept.
    int draftModelsRevision() const { return m_draftModelsRevision; }
    int draftChoicesRevision() const { return m_draftChoicesRevision; }
    Q_INVOKABLE QString draftModel(const QString& path) const;
    Q_INVOKABLE QVariantList draftChoices(const QString& path) const;
    Q_INVOKABLE bool setDraftModel(const QString& path, const QString& draft);

signals:
    void importModeChanged();
    void messageChanged();
    void scanNotesChanged();
    void scanningChanged();
    void chatTemplatesChanged();
    void draftModelsChanged();
    void draftChoicesChanged();
    void errorTextChanged();
    // A scan (rescan() or addDownloaded()) ended and its rows are listed; `scanning` says
    // whether another one follows.
    void scanFinished();
    void loadRequested(const QString& path);
    void downloadRequested(const QUrl& url);
    void error(const QString& message);

private:
    void enqueue(LibraryWorker::Task task, bool scan, bool coalesce = false);
    void show(const LibraryWorker::Listing& listing);
    void refit();
    void say(const QString& message);
    // Shows `message` on the page (errorText) and says it through `error`.
    void fail(const QString& message, bool fromScan = false);
    void setErrorText(const QString& text, bool fromScan);
    powerhouse::catalog::LibraryPlaces places() const;

    powerhouse::store::Store& m_store;
    SettingsController& m_settings;
    QString m_library;
    QString m_importMode = QStringLiteral("in_place");
    int m_chatTemplatesRevision = 0;
    int m_draftModelsRevision = 0;
    int m_draftChoicesRevision = 0;
    QVariantList m_draftCandidates;  // every usable chat model, [{path, name}], as last listed
    QString m_errorText;
    bool m_errorFromScan = false;  // errorText is a failed refresh's, which the next good one clears
    QString m_message;
    QStringList m_scanNotes;
    powerhouse::catalog::Environment m_environment;
    ModelListModel m_models;
    int m_scans = 0;  // scans handed to the worker whose listing has not come back
    // Made at the first task; reset first in the destructor (it joins the thread).
    std::unique_ptr<LibraryWorker> m_worker;
};
