// The GPU dashboard's data: the GPU monitor's snapshots (real NVML, or the simulated GPUs of
// POWERHOUSE_SIMULATE_GPUS) as a list model, why there are no GPUs when there are none,
// the NVLink topology, and where the loaded model's parts sit. It also measures the energy
// of each answer: the power of the GPUs that hold the model, integrated over the answer.
//
// Until the CUDA backend runs models on GPUs, only simulated GPUs hold one: they stand in
// for it, following the settings' plan (its memory, and its load while an answer is
// generated), so that the dashboard and the energy figures can be seen and tested.
//
// Thread-safety: a QObject of the GUI thread; the monitor's thread only posts snapshots to it.
#pragma once

#include <QObject>
#include <QString>
#include <QVariantList>
#include <QtQml/qqmlregistration.h>

#include <memory>
#include <optional>
#include <vector>

#include "gpu_list_model.h"
#include "powerhouse/telemetry.h"

class DashboardController : public QObject {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("made by main.cpp")
    Q_PROPERTY(GpuListModel* gpus READ gpus CONSTANT)
    Q_PROPERTY(QString status READ status NOTIFY changed)
    Q_PROPERTY(QString source READ source NOTIFY changed)
    Q_PROPERTY(bool simulated READ simulated NOTIFY changed)
    Q_PROPERTY(QString topology READ topology NOTIFY changed)
    Q_PROPERTY(QVariantList placement READ placement NOTIFY placementChanged)

public:
    explicit DashboardController(powerhouse::GpuMonitorOptions options, QObject* parent = nullptr);
    ~DashboardController() override;

    GpuListModel* gpus() { return &m_gpus; }
    QString status() const { return m_status; }
    QString source() const { return m_source; }
    bool simulated() const { return m_simulated; }
    QString topology() const { return m_topology; }
    QVariantList placement() const { return m_placement; }

    // Starts sampling (once a second).
    void start();
    // The loaded model's devices (EngineClient's summary "devices"): name, part, bytes.
    void setPlacement(const QVariantList& devices);
    // Applies a snapshot (normally posted by the monitor's thread).
    void apply(const powerhouse::TelemetrySnapshot& snapshot);

    // The GPUs the model is planned on (the settings' plannedGpus: [{gpu, bytes}]).
    void setModelGpus(const QVariantList& planned);
    // An answer starts and ends. The end gives the joules spent meanwhile by the GPUs that
    // hold the model, when there are any and they report power; nothing otherwise.
    void beginAnswer();
    std::optional<double> endAnswer();

signals:
    void changed();
    void placementChanged();
    // Each snapshot as it is applied (for the settings panel's plan preview).
    void snapshotApplied(const powerhouse::TelemetrySnapshot& snapshot);

private:
    GpuListModel m_gpus;
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
    bool m_answering = false;
    std::optional<powerhouse::EnergyMeter> m_meter;  // while an answer is measured
    void report(bool busy);
    void startMeter();
    void meter(const powerhouse::TelemetrySnapshot& snapshot);
    uint64_t m_subscription = 0;
    std::unique_ptr<powerhouse::GpuMonitor> m_monitor;  // last: stopped first
};
