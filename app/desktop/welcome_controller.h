// The first run: with no model loaded, the welcome view shows this machine (its GPUs and
// RAM) and a few models that fit it well, each one click from downloading and loading.
// The models come from the list that ships with the app (app/core/catalog/suggestions.h),
// planned by the planner on the GPUs as the settings see them (in use, reserves, split
// mode), or on the CPU without one; the plan is redone when the GPUs or the settings change.
//
// The first plan lays out the real models (vocabularies included, about 0.1 s each), so
// planning runs on a worker thread; the shapes are kept for the next plans.
//
// Thread-safety: GUI thread only (the worker posts its result back).
#pragma once

#include <QAbstractListModel>
#include <QObject>
#include <QSet>
#include <QString>
#include <QStringList>
#include <QtQml/qqmlregistration.h>

#include <memory>
#include <thread>
#include <vector>

#include "catalog/suggestions.h"

class DownloadController;
class SettingsController;

class SuggestionListModel : public QAbstractListModel {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("owned by WelcomeController")
    Q_PROPERTY(int count READ rowCount NOTIFY countChanged)

public:
    enum class Placement { Gpu, Split, GpuAndRam, Cpu, DoesNotFit };
    Q_ENUM(Placement)
    enum class Download { Available, Downloading, Loaded };
    Q_ENUM(Download)
    enum Role {
        NameRole = Qt::UserRole + 1,
        SummaryRole,
        RepoRole,
        QuantizationRole,
        SizeRole,            // "4.7 GiB"
        WhereRole,           // "fits on GPU 0 (RTX 4090)", "split over 2 GPUs", ...
        PlacementRole,       // Placement
        TokensPerSecondRole, // the planner's estimate (double)
        RecommendedRole,
        DownloadRole,        // Download
    };

    explicit SuggestionListModel(QObject* parent = nullptr) : QAbstractListModel(parent) {}
    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    void setRows(std::vector<powerhouse::catalog::Suggestion> rows);
    void setDownload(int row, Download state);
    const std::vector<powerhouse::catalog::Suggestion>& rows() const { return m_rows; }

signals:
    void countChanged();

private:
    std::vector<powerhouse::catalog::Suggestion> m_rows;
    std::vector<Download> m_downloads;
};

class WelcomeController : public QObject {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("made by DesktopApp")
    Q_PROPERTY(SuggestionListModel* suggestions READ suggestions CONSTANT)
    // One line per GPU ("RTX 4090 · 24 GiB"), empty without one.
    Q_PROPERTY(QStringList gpus READ gpus NOTIFY machineChanged)
    Q_PROPERTY(QString memory READ memory NOTIFY machineChanged)  // "62 GiB of RAM, 48 GiB free"
    Q_PROPERTY(bool planning READ planning NOTIFY planningChanged)
    Q_PROPERTY(QString message READ message NOTIFY messageChanged)  // the last download's outcome
    // Whether the welcome view shows: the suggestions are planned only while it does (and
    // again when the GPUs or settings change meanwhile), so an app that opens on a model
    // never lays out the suggested models' vocabularies.
    Q_PROPERTY(bool active READ active WRITE setActive NOTIFY activeChanged)
    // The small model scripts/run fetches (SmolLM2 135M), when it is on disk: loadable at
    // once for a first look. Empty without it.
    Q_PROPERTY(QString starterPath READ starterPath CONSTANT)
    Q_PROPERTY(QString starterName READ starterName CONSTANT)

public:
    // `endpoint`: Hugging Face's address (a mirror, or a test server).
    WelcomeController(SettingsController& settings, DownloadController& downloads, QString endpoint,
                      QObject* parent = nullptr);
    ~WelcomeController() override;

    SuggestionListModel* suggestions() { return &m_suggestions; }
    QStringList gpus() const { return m_gpus; }
    QString memory() const { return m_memory; }
    bool planning() const { return m_planning; }
    bool active() const { return m_active; }
    void setActive(bool active);
    QString message() const { return m_message; }
    QString starterPath() const { return m_starterPath; }
    // Read from the starter's header the first time it is asked for (the welcome view shows),
    // not at every start of the app.
    QString starterName() const;

    // Plans the list again on the devices as they are now (when active: on activation and
    // whenever the GPUs or the settings change; else at the next activation).
    Q_INVOKABLE void refresh();
    // Downloads suggestion `row` (every part) into the library; once all parts are there,
    // loadRequested() names the first.
    Q_INVOKABLE void download(int row);
    // Loads the starter model (loadRequested).
    Q_INVOKABLE void loadStarter();
    // The list to plan instead of the shipped one (tests).
    void setModels(std::vector<powerhouse::catalog::SuggestedModel> models);

    // A download finished (DownloadController::finished): when it completes a suggestion,
    // that model is loaded.
    void downloadFinished(const QString& path);

signals:
    void machineChanged();
    void activeChanged();
    void planningChanged();
    void messageChanged();
    void loadRequested(const QString& path);

private:
    struct Pending {
        int row = -1;
        QSet<QString> waiting;  // file names not yet downloaded
        QString first;          // the first part's path, once known
        QString firstName;
    };
    void applyPlan(quint64 list, std::vector<powerhouse::catalog::Suggestion> rows,
                   std::shared_ptr<const std::vector<powerhouse::Result<powerhouse::ModelShape>>> shapes);
    void say(const QString& message);

    SettingsController& m_settings;
    DownloadController& m_downloads;
    QString m_endpoint;
    std::vector<powerhouse::catalog::SuggestedModel> m_models;
    // The models' shapes, made by the first plan and kept (the list does not change).
    std::shared_ptr<const std::vector<powerhouse::Result<powerhouse::ModelShape>>> m_shapes;
    SuggestionListModel m_suggestions;
    QStringList m_gpus;
    QString m_memory;
    bool m_planning = false;
    bool m_active = false;
    bool m_stale = true;  // the plan does not reflect the latest GPUs and settings
    QString m_message;
    QString m_starterPath;
    mutable QString m_starterName;  // "" until starterName() first reads it
    std::vector<Pending> m_pending;
    quint64 m_list = 0;  // which list of models: a plan of an older one is dropped
    // One plan at a time: a refresh while one runs plans again when it ends. The destructor
    // joins the worker, so its queued result never outlives this object.
    std::thread m_worker;
    bool m_again = false;
};
