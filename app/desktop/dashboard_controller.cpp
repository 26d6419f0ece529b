#include "dashboard_controller.h"

#include <QMetaObject>
#include <QPointer>
#include <QStringList>

#include <algorithm>
#include <cmath>

#include "powerhouse/power.h"

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
    meter(snapshot);
    if (!m_answers.empty()) updateThrottle();
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
    emit snapshotApplied(snapshot);
    for (size_t i = 0; i < snapshot.gpus.size() && i < snapshot.latest.size(); ++i) {
        const powerhouse::GpuSample& sample = snapshot.latest[i];
        const QString uuid = QString::fromStdString(snapshot.gpus[i].uuid);
        if (!powerhouse::gpu_failed(sample) || m_failedGpus.contains(uuid)) continue;
        m_failedGpus.insert(uuid);
        const QString text = QString::fromStdString(powerhouse::gpu_failure_text(snapshot.gpus[i].index, sample));
        // "GPU 1 stopped answering: Xid 79, fell off the bus": the engine names the device itself.
        const qsizetype colon = text.indexOf(QStringLiteral(": "));
        emit gpuFailed(uuid, text, colon < 0 ? text : text.mid(colon + 2), sample.lost);
    }
}

void DashboardController::markGpuFailed(const QString& uuid, const QString& why) { m_gpus.markFailed(uuid, why); }

void DashboardController::setPlacement(const QVariantList& devices) {
    m_placement = devices;
    emit placementChanged();
    m_batching.reset();
    emit batchingChanged();
}

void DashboardController::setSchedulerStats(const powerhouse::SchedulerStats& stats) {
    m_batching = stats;
    emit batchingChanged();
}

// Blocks that cached prefixes alone hold are handed out when needed, but until then they
// hold what going back to a conversation reuses: they count as used.
int DashboardController::kvBlocksUsed() const {
    return m_batching ? static_cast<int>(m_batching->kv.total_blocks - m_batching->kv.free_blocks) : 0;
}

void DashboardController::setModelGpus(const QVariantList& planned) {
    if (m_simulated || m_monitor->snapshot().simulated) report(false);  // the old placement leaves
    m_modelGpus.clear();
    for (const QVariant& v : planned) {
        const QVariantMap m = v.toMap();
        if (m.value("gpu").toInt() < 0) continue;  // the experts kept in system RAM
        m_modelGpus.push_back({m.value("gpu").toUInt(), static_cast<uint64_t>(m.value("bytes").toDouble())});
    }
    report(!m_answers.empty());
    startMeters();  // the model may have moved to GPUs during an answer
}

std::vector<uint32_t> DashboardController::modelGpus() const {
    std::vector<uint32_t> out;
    for (const ModelGpu& g : m_modelGpus) out.push_back(g.gpu);
    return out;
}

// Simulated GPUs take the model's memory and load; real ones ignore what is reported.
void DashboardController::report(bool busy) {
    for (const ModelGpu& g : m_modelGpus) m_monitor->report_activity(g.gpu, busy ? 0.9f : 0.0f, g.bytes);
}

void DashboardController::meter(const powerhouse::TelemetrySnapshot& snapshot) {
    double watts = 0;
    bool any = false;
    for (const ModelGpu& g : m_modelGpus) {
        if (g.gpu < snapshot.latest.size() && snapshot.latest[g.gpu].power_w) {
            watts += *snapshot.latest[g.gpu].power_w;
            any = true;
        }
    }
    if (!any || snapshot.latest.empty() || m_answers.empty()) return;
    const double share = watts / static_cast<double>(m_answers.size());
    for (auto& answer : m_answers) {
        if (answer.second) answer.second->add(snapshot.latest.front().time, share);
    }
}

void DashboardController::beginAnswer(quint64 id) {
    if (m_answers.empty()) {
        const powerhouse::TelemetrySnapshot now = m_monitor->snapshot();
        m_throttleSince = now.latest.empty() ? 0.0 : now.latest.front().time;
        if (!m_answerThrottle.isEmpty()) {
            m_answerThrottle.clear();
            emit throttleChanged();
        }
    }
    m_answers[id].reset();
    report(true);
    startMeters();
}

// Starts the meters of the answers not measured yet, with a first reading.
void DashboardController::startMeters() {
    // Only GPUs that hold the model count, and for now only simulated ones can (see the header).
    if (m_modelGpus.empty()) return;
    if (std::all_of(m_answers.begin(), m_answers.end(), [](const auto& a) { return a.second.has_value(); })) return;
    const powerhouse::TelemetrySnapshot now = m_monitor->sample_now();
    if (!now.simulated) return;
    for (auto& answer : m_answers) {
        if (!answer.second) answer.second.emplace();
    }
    meter(now);
}

DashboardController::AnswerEnd DashboardController::endAnswer(quint64 id) {
    const auto found = m_answers.find(id);
    if (found == m_answers.end()) return {};
    if (found->second) meter(m_monitor->sample_now());  // the power at the end, before the load drops
    const std::optional<powerhouse::EnergyMeter> done = found->second;
    updateThrottle();
    m_answers.erase(found);
    if (m_answers.empty()) {
        report(false);
        if (!m_modelGpus.empty()) m_monitor->sample_now();  // show the GPUs idle at once
    }
    AnswerEnd end;
    end.throttle = m_answerThrottle;
    if (done && done->seconds() > 0) end.joules = done->joules();
    return end;
}

void DashboardController::updateThrottle() {
    if (!m_throttleSince) return;
    QStringList said;
    for (const ModelGpu& g : m_modelGpus) {
        std::vector<powerhouse::GpuSample> samples;
        for (powerhouse::GpuSample& sample : m_monitor->history(g.gpu)) {
            if (sample.time >= *m_throttleSince) samples.push_back(std::move(sample));
        }
        const powerhouse::ThrottleSummary summary = powerhouse::summarize_throttling(samples);
        if (!summary.throttled() || summary.seconds <= 0) continue;
        QStringList reasons;
        for (const std::string& r : summary.reason_names) reasons << QString::fromStdString(r);
        QString text = tr("GPU %1 throttled (%2) for %3% of the answer")
                           .arg(g.gpu)
                           .arg(reasons.join(QStringLiteral(", ")))
                           .arg(std::lround(100.0 * summary.throttled_seconds / summary.seconds));
        if (summary.simulated_speed_lost && *summary.simulated_speed_lost >= 0.005) {
            text += tr(", %1% slower").arg(std::lround(100.0 * *summary.simulated_speed_lost));
        }
        said << text;
    }
    const QString text = said.join(QStringLiteral("; "));
    if (text == m_answerThrottle) return;
    m_answerThrottle = text;
    emit throttleChanged();
}
