// One row per GPU for the dashboard: its identity, the latest reading and the recent
// history of load, temperature, memory and power (for the cards' charts). Fed by the GPU
// monitor's snapshots (real NVML or simulated GPUs); a GPU that stopped answering keeps its
// row with the reason. A GPU that failed (the driver reports it lost or a fatal Xid, or the
// engine found it failing: markFailed) is marked failed, with why, for the rest of the run.
//
// Thread-safety: GUI thread only.
#pragma once

#include <QAbstractListModel>
#include <QHash>
#include <QString>
#include <QVariantList>
#include <QtQml/qqmlregistration.h>

#include <deque>
#include <vector>

#include "powerhouse/telemetry.h"

class GpuListModel : public QAbstractListModel {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("owned by DashboardController")
    Q_PROPERTY(int count READ rowCount NOTIFY countChanged)

public:
    enum Role {
        NameRole = Qt::UserRole + 1,
        UuidRole,
        SimulatedRole,
        RespondingRole,
        ProblemRole,
        LoadRole,            // percent, -1 when unknown
        MemoryUsedRole,      // bytes
        MemoryTotalRole,     // bytes
        TemperatureRole,     // °C, -1 when unknown
        PowerRole,           // W, -1 when unknown
        PowerLimitRole,      // W, -1 when unknown
        ClocksRole,          // "2520 / 10501 MHz"
        LinkRole,            // "PCIe 4.0 x16"
        ThrottleRole,        // "power cap, thermal", empty when not throttled
        LoadHistoryRole,     // [percent...], oldest first
        TemperatureHistoryRole,
        MemoryHistoryRole,   // [fraction of total...]
        PowerHistoryRole,    // [W...]
        FailedRole,          // its work must move elsewhere, for the rest of the run
        FailureRole,         // why: "GPU 1 stopped answering: Xid 79, fell off the bus"
    };

    explicit GpuListModel(QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;

    // Takes a new snapshot: rows change in place when the GPUs are the same ones.
    void update(const powerhouse::TelemetrySnapshot& snapshot);
    // The engine found the GPU with this UUID failing (its RecoveryEvent): marked failed with
    // `why`, whatever its telemetry says.
    void markFailed(const QString& uuid, const QString& why);

    static constexpr size_t kHistory = 120;  // samples per chart (two minutes at 1 Hz)

signals:
    void countChanged();

private:
    struct Row {
        powerhouse::GpuInfo info;
        powerhouse::GpuSample latest;
        std::deque<double> load, temperature, memory, power;
    };
    std::vector<Row> m_rows;
    QHash<QString, QString> m_failures;  // by UUID: what the engine said
    QString failure(const Row& row) const;
};
