#include "dashboard_controller.h"

#include <QMetaObject>
#include <QPointer>
#include <QStringList>

DashboardController::DashboardController(powerhouse::GpuMonitorOptions options, QObject* parent)
    : QObject(parent), m_monitor(std::make_unique<powerhouse::GpuMonitor>(std::move(options))) {
    QPointer<DashboardController> self(this);
    m_subscription = m_monitor->subscribe([self](const powerhouse::TelemetrySnapshot& snapshot) {
        // On the monitor's thread: hand a copy to the GUI thread.
        QMetaObject::invokeMethod(
            self.data(),
            [self, snapshot] {
                if (self) self->apply(snapshot);
            },
            Qt::QueuedConnection);
    });
}

DashboardController::~DashboardController() {
    m_monitor->unsubscribe(m_subscription);
    m_monitor->stop();
}

void DashboardController::start() {
    apply(m_monitor->sample_now());
    m_monitor->start();
}

void DashboardController::apply(const powerhouse::TelemetrySnapshot& snapshot) {
    m_gpus.update(snapshot);
    m_status = QString::fromStdString(snapshot.status);
    m_source = QString::fromStdString(snapshot.source);
    m_simulated = snapshot.simulated;
    QStringList links;
    for (const powerhouse::GpuLink& l : snapshot.links) {
        links << tr("GPU %1 ↔ GPU %2: %n NVLink(s)", nullptr, static_cast<int>(l.nvlinks)).arg(l.a).arg(l.b);
    }
    m_topology = links.isEmpty() && snapshot.gpus.size() > 1 ? tr("No NVLink between the GPUs: transfers go over PCIe")
                                                             : links.join(QStringLiteral("\n"));
    emit changed();
}

void DashboardController::setPlacement(const QVariantList& devices) {
    m_placement = devices;
    emit placementChanged();
}
