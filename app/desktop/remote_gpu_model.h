// The dashboard's remote machines: one row per host of each metrics source (a metrics URL of
// an endpoint in Settings → Engines: the DCGM exporter, vLLM's or a Powerhouse server's
// /metrics), with a title ("gpu-node-1 · DCGM exporter at http://…"), its GPUs as a
// GpuListModel (the same cards, readings and history as local GPUs), the engines' figures
// (requests running and waiting, KV cache use, tokens/s) and the source's error when its last
// reading failed. A source that never answered has one row (the URL's host) with the error.
//
// Readings come from a RemoteMetricsPoller (every 2 s by default) on its own thread, posted
// to the GUI thread and mapped with remote_gpus(). A failing source keeps its rows: their
// GPUs read as not responding ("no reading since …") and the error line says why; the error
// is logged once when it starts or changes, not on every round. It recovers on the next good
// reading.
//
// Thread-safety: a QObject of the GUI thread.
#pragma once

#include <QtQml/qqmlregistration.h>
#include <QAbstractListModel>
#include <QString>
#include <QVariantList>

#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "gpu_list_model.h"
#include "remote_metrics_poller.h"

class RemoteGpuModel : public QAbstractListModel {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("owned by DashboardController")
    Q_PROPERTY(int count READ rowCount NOTIFY countChanged)

public:
    enum Role {
        SourceRole = Qt::UserRole + 1,  // the endpoint's name
        UrlRole,                        // the metrics URL
        HostRole,                       // "gpu-node-1"
        TitleRole,                      // "gpu-node-1 · DCGM exporter at http://…"
        ErrorRole,                      // "" while the source answers
        SimulatedRole,                  // any of the host's GPUs is simulated
        GpusRole,                       // GpuListModel*
        GpuCountRole,
        EnginesRole,  // [{engine, model, running, waiting, kvCache (0..1), tokensPerSecond (-1: unknown), summary}]
    };

    // `interval` 0: no poller, readings come only through apply() (the views' tests).
    explicit RemoteGpuModel(std::chrono::milliseconds interval = std::chrono::seconds(2), QObject* parent = nullptr);
    ~RemoteGpuModel() override;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    // The sources to read (Settings → Engines' metrics URLs); rows of sources no longer
    // listed go. The same list again changes nothing.
    void setSources(const std::vector<MetricsSource>& sources);
    // Applies a reading (normally posted by the poller's thread).
    void apply(const MetricsReading& reading);

    // For tests: the row of a host of a source, -1 when none.
    int find(const QString& source, const QString& host) const;
    GpuListModel* gpusAt(int row) const;

signals:
    void countChanged();
    void readingApplied();

private:
    struct Row {
        QString source, url, host, title, error;
        bool simulated = false;
        std::unique_ptr<GpuListModel> gpus;
        QVariantList engines;
        powerhouse::TelemetrySnapshot last;  // the last good reading
    };
    struct Counter {
        double tokens = 0, time = 0;
    };
    struct Key {
        QString source, host;
        GpuListModel* gpus = nullptr;
        bool operator==(const Key&) const = default;
    };
    void setRows(std::vector<Row> rows);
    std::vector<Key> m_keys;  // the rows the views were last told of

    std::vector<MetricsSource> m_sources;
    std::vector<Row> m_rows;
    std::map<QString, QString> m_lastError;         // by source: what was last logged
    std::map<QString, double> m_lastGood;           // by source: time of the last good reading
    std::map<QString, Counter> m_counters;          // by source/host/engine/model: for tokens/s
    std::unique_ptr<RemoteMetricsPoller> m_poller;  // last: stopped first
};
