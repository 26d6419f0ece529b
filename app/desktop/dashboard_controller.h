// The GPU dashboard's data: the GPU monitor's snapshots (real NVML, or the simulated GPUs of
// POWERHOUSE_SIMULATE_GPUS) as a list model, why there are no GPUs when there are none,
// the NVLink topology, where the loaded model's parts sit, and the engine's batching: the
// sequences running and waiting and the KV cache blocks they hold. It also measures the
// energy of each answer: the power of the GPUs that hold the model, integrated over the
// answer and shared evenly among the answers generated meanwhile.
//
// A GPU that fails is marked so on its card, for the rest of the run: when its telemetry
// says so (lost, or a fatal Xid: gpu_failed), which is also handed on once per GPU as
// gpuFailed() for the engine to move the model off it, and when the engine found it failing
// (markGpuFailed, from its RecoveryEvent).
//
// Until the CUDA backend runs models on GPUs, only simulated GPUs hold one: they stand in
// for it, following the settings' plan (its memory, and its load while an answer is
// generated), so that the dashboard and the energy figures can be seen and tested.
//
// Thread-safety: a QObject of the GUI thread; the monitor's thread only posts snapshots to it.
#pragma once

#include <QObject>
#include <QSet>
#include <QString>
#include <QVariantList>
#include <QtQml/qqmlregistration.h>

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "gpu_list_model.h"
#include "remote_gpu_model.h"
#include "powerhouse/scheduler.h"
#include "powerhouse/telemetry.h"

class DashboardController : public QObject {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("made by main.cpp")
    Q_PROPERTY(GpuListModel* gpus READ gpus CONSTANT)
    // Remote machines' GPUs and engines, from the metrics URLs of Settings → Engines.
    Q_PROPERTY(RemoteGpuModel* remote READ remote CONSTANT)
    Q_PROPERTY(QString status READ status NOTIFY changed)
    Q_PROPERTY(QString source READ source NOTIFY changed)
    Q_PROPERTY(bool simulated READ simulated NOTIFY changed)
    Q_PROPERTY(QString topology READ topology NOTIFY changed)
    Q_PROPERTY(QVariantList placement READ placement NOTIFY placementChanged)
    // The engine's batching, from its last scheduler report (hasBatching: there was one).
    Q_PROPERTY(bool hasBatching READ hasBatching NOTIFY batchingChanged)
    Q_PROPERTY(int sequencesRunning READ sequencesRunning NOTIFY batchingChanged)
    Q_PROPERTY(int sequencesWaiting READ sequencesWaiting NOTIFY batchingChanged)
    Q_PROPERTY(int kvBlocksUsed READ kvBlocksUsed NOTIFY batchingChanged)  // held by sequences or cached prefixes
    Q_PROPERTY(int kvBlocksTotal READ kvBlocksTotal NOTIFY batchingChanged)
    Q_PROPERTY(double kvBytesUsed READ kvBytesUsed NOTIFY batchingChanged)
    Q_PROPERTY(double kvBytesTotal READ kvBytesTotal NOTIFY batchingChanged)
    Q_PROPERTY(int cachedPrefixes READ cachedPrefixes NOTIFY batchingChanged)
    // Heat (issue 24): whether the model's GPUs were slowed (power cap, thermal) during the
    // answers running now, or else the last ones, from their history over that time
    // (summarize_throttling): "GPU 0 throttled (power cap) for 40% of the answer, 18% slower".
    // Empty when they were not. "Slower" is the tokens/s lost where the GPUs give it (the
    // simulated ones' speed factor), else left out.
    Q_PROPERTY(QString answerThrottle READ answerThrottle NOTIFY throttleChanged)

public:
    explicit DashboardController(powerhouse::GpuMonitorOptions options, QObject* parent = nullptr);
    ~DashboardController() override;

    GpuListModel* gpus() { return &m_gpus; }
    RemoteGpuModel* remote() { return &m_remote; }
    QString status() const { return m_status; }
    QString source() const { return m_source; }
    bool simulated() const { return m_simulated; }
    QString topology() const { return m_topology; }
    QVariantList placement() const { return m_placement; }
    bool hasBatching() const { return m_batching.has_value(); }
    int sequencesRunning() const { return m_batching ? static_cast<int>(m_batching->running) : 0; }
    int sequencesWaiting() const { return m_batching ? static_cast<int>(m_batching->waiting) : 0; }
    int kvBlocksUsed() const;
    int kvBlocksTotal() const { return m_batching ? static_cast<int>(m_batching->kv.total_blocks) : 0; }
    double kvBytesUsed() const { return static_cast<double>(kvBlocksUsed()) * blockBytes(); }
    double kvBytesTotal() const { return static_cast<double>(kvBlocksTotal()) * blockBytes(); }
    QString answerThrottle() const { return m_answerThrottle; }
    int cachedPrefixes() const { return m_batching ? static_cast<int>(m_batching->kv.cached_prefixes) : 0; }

    // Starts sampling (once a second).
    void start();
    // The loaded model's devices (EngineClient's summary "devices"): name, part, bytes. A
    // new model starts with no batching report.
    void setPlacement(const QVariantList& devices);
    // The engine's scheduler report (EngineClient::schedulerStats).
    void setSchedulerStats(const powerhouse::SchedulerStats& stats);
    // The monitor's latest snapshot; any thread (the API server's /metrics reads it).
    powerhouse::TelemetrySnapshot latestSnapshot() const { return m_monitor->snapshot(); }
    // The monitor itself (thread-safe): power limits (PowerController) and GPU history.
    powerhouse::GpuMonitor& monitor() { return *m_monitor; }
    // Applies a snapshot (normally posted by the monitor's thread).
    void apply(const powerhouse::TelemetrySnapshot& snapshot);

    // The GPUs the model is planned on (the settings' plannedGpus: [{gpu, bytes}]).
    void setModelGpus(const QVariantList& planned);
    // Their GpuInfo::index, in the plan's order.
    std::vector<uint32_t> modelGpus() const;
    // An answer starts and ends (answers overlap: each has its request id). The end gives
    // its share of the joules spent meanwhile by the GPUs that hold the model (the power
    // is divided among the answers running at each reading), when there are any and they
    // report power, and answerThrottle as it stands then (empty when they were not slowed).
    struct AnswerEnd {
        std::optional<double> joules;
        QString throttle;
    };
    void beginAnswer(quint64 id);
    AnswerEnd endAnswer(quint64 id);
    // The engine found this GPU failing: `why` goes on its card.
    void markGpuFailed(const QString& uuid, const QString& why);

signals:
    void changed();
    void placementChanged();
    void batchingChanged();
    void throttleChanged();
    // Each snapshot as it is applied (for the settings panel's plan preview).
    void snapshotApplied(const powerhouse::TelemetrySnapshot& snapshot);
    // A GPU's telemetry turned failed (gpu_failed), once per GPU: `text` is the whole line
    // ("GPU 1 stopped answering: Xid 79, fell off the bus"), `cause` its part after the GPU
    // ("Xid 79, fell off the bus"), `lost` whether it stopped answering altogether.
    void gpuFailed(const QString& uuid, const QString& text, const QString& cause, bool lost);

private:
    GpuListModel m_gpus;
    RemoteGpuModel m_remote;
    QString m_status;
    QString m_source;
    bool m_simulated = false;
    QString m_topology;
    QVariantList m_placement;
    struct ModelGpu {
        uint32_t gpu = 0;
        uint64_t bytes = 0;
    };
    std::vector<ModelGpu> m_modelGpus;
    std::optional<powerhouse::SchedulerStats> m_batching;
    double blockBytes() const { return m_batching ? static_cast<double>(m_batching->kv.block_bytes) : 0.0; }
    // The answers running, by request id, each with its meter while it is measured.
    std::map<quint64, std::optional<powerhouse::EnergyMeter>> m_answers;
    void report(bool busy);
    void startMeters();
    void meter(const powerhouse::TelemetrySnapshot& snapshot);
    std::optional<double> m_throttleSince;  // the monitor's time when the answers running began
    QString m_answerThrottle;
    void updateThrottle();
    QSet<QString> m_failedGpus;  // UUIDs whose failure gpuFailed() has told
    uint64_t m_subscription = 0;
    std::unique_ptr<powerhouse::GpuMonitor> m_monitor;  // last: stopped first
};
