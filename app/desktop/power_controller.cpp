#include "power_controller.h"

#include <QClipboard>
#include <QGuiApplication>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>

#include <cmath>

namespace {

constexpr const char* kChangesKey = "power_limit_changes";
constexpr const char* kKeepKey = "keep_power_limits";

double watts(const std::optional<double>& w) { return w ? *w : 0.0; }

QString w(double value) { return QString::number(std::lround(value)) + QStringLiteral(" W"); }

QJsonObject gpuSettings(const powerhouse::store::Store& store, const std::string& uuid) {
    auto saved = store.gpu_settings(uuid);
    if (!saved || !*saved) return {};
    return QJsonDocument::fromJson(QByteArray::fromStdString(**saved)).object();
}

}  // namespace

PowerController::PowerController(powerhouse::store::Store& store, powerhouse::GpuMonitor& monitor,
                                 QString startupNote, QObject* parent)
    : QObject(parent), m_store(store), m_monitor(monitor), m_startupNote(std::move(startupNote)) {
    auto keep = m_store.setting(kKeepKey);
    m_keep = keep && *keep && **keep == "true";
    m_monitor.keep_power_limits(m_keep);
    refresh();
}

PowerController::~PowerController() {
    if (!m_keep) (void)m_monitor.restore_power_limits();
    // Kept limits are the user's to keep: nothing for the next start to undo.
    if (m_keep) {
        (void)m_store.set_setting(kChangesKey, "[]");
    } else {
        saveChanges();
    }
}

QString PowerController::restoreLeftovers(powerhouse::store::Store& store, powerhouse::GpuMonitorOptions options) {
    auto saved = store.setting(kChangesKey);
    if (!saved || !*saved) return {};
    const QJsonArray changes = QJsonDocument::fromJson(QByteArray::fromStdString(**saved)).array();
    if (changes.isEmpty()) return {};
    auto keep = store.setting(kKeepKey);
    (void)store.set_setting(kChangesKey, "[]");
    if (keep && *keep && **keep == "true") return {};
    options.keep_power_limits = true;  // what it sets back is meant to stay
    powerhouse::GpuMonitor monitor(options);
    const powerhouse::TelemetrySnapshot snapshot = monitor.sample_now();
    QStringList said;
    for (const QJsonValue& value : changes) {
        const QJsonObject c = value.toObject();
        const std::string uuid = c.value("uuid").toString().toStdString();
        const double before = c.value("before_w").toDouble();
        const double now = c.value("now_w").toDouble();
        const powerhouse::GpuInfo* gpu = nullptr;
        for (const auto& g : snapshot.gpus)
            if (g.uuid == uuid) gpu = &g;
        if (gpu == nullptr) {
            said << tr("a GPU no longer present (%1) was left at %2").arg(QString::fromStdString(uuid), w(now));
            continue;
        }
        auto set = monitor.set_power_limit(gpu->index, before);
        const QString name = tr("GPU %1 (%2)").arg(gpu->index).arg(QString::fromStdString(gpu->name));
        if (set) {
            said << tr("%1 set back from %2 to %3").arg(name, w(now), w(before));
        } else {
            said << tr("%1 could not be set back to %2: %3")
                        .arg(name, w(before), QString::fromStdString(set.error().message));
        }
    }
    return tr("Powerhouse did not quit cleanly last time and left power limits changed: %1.").arg(said.join("; "));
}

void PowerController::setKeepLimits(bool keep) {
    if (keep == m_keep) return;
    m_keep = keep;
    m_monitor.keep_power_limits(keep);
    (void)m_store.set_setting(kKeepKey, keep ? "true" : "false");
    emit keepLimitsChanged();
}

void PowerController::dismissStartupNote() {
    if (m_startupNote.isEmpty()) return;
    m_startupNote.clear();
    emit startupNoteChanged();
}

void PowerController::copyText(const QString& text) const {
    if (auto* clipboard = QGuiApplication::clipboard()) clipboard->setText(text);
}

double PowerController::keptSetting(const std::string& uuid) const {
    return gpuSettings(m_store, uuid).value("power_limit_w").toDouble(0);
}

void PowerController::keepSetting(const std::string& uuid, double limit) {
    QJsonObject o = gpuSettings(m_store, uuid);
    if (limit > 0) {
        o.insert("power_limit_w", limit);
    } else {
        o.remove("power_limit_w");
    }
    (void)m_store.set_gpu_settings(uuid, QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString());
}

void PowerController::saveChanges() {
    QJsonArray out;
    for (const powerhouse::PowerLimitChange& c : m_monitor.power_limit_changes()) {
        out.append(QJsonObject{{"uuid", QString::fromStdString(c.uuid)}, {"before_w", c.before_w}, {"now_w", c.now_w}});
    }
    (void)m_store.set_setting(kChangesKey, QJsonDocument(out).toJson(QJsonDocument::Compact).toStdString());
}

void PowerController::refresh() {
    const powerhouse::TelemetrySnapshot snapshot = m_monitor.snapshot();
    QVariantList gpus;
    for (const powerhouse::GpuInfo& g : snapshot.gpus) {
        const int index = static_cast<int>(g.index);
        QVariantMap row{{"gpu", index},
                        {"uuid", QString::fromStdString(g.uuid)},
                        {"name", QString::fromStdString(g.name)},
                        {"simulated", g.simulated},
                        {"settingW", keptSetting(g.uuid)}};
        auto limits = m_monitor.power_limits(g.index);
        row.insert("supported", static_cast<bool>(limits) && limits->min_w && limits->max_w);
        if (limits) {
            row.insert("currentW", watts(limits->current_w));
            row.insert("defaultW", watts(limits->default_w));
            row.insert("minW", watts(limits->min_w));
            row.insert("maxW", watts(limits->max_w));
            row.insert("enforcedW", watts(limits->enforced_w));
            row.insert("changedFromW", watts(limits->changed_from_w));
        } else if (!m_refusals.contains(index)) {
            row.insert("unsupportedReason", QString::fromStdString(limits.error().message));
        }
        const Refusal refusal = m_refusals.value(index);
        row.insert("error", refusal.error);
        row.insert("command", refusal.command);
        gpus.append(row);
    }
    if (gpus == m_gpus) return;
    m_gpus = gpus;
    emit changed();
}

void PowerController::refuse(int gpu, const powerhouse::Error& error, double limit) {
    Refusal r{QString::fromStdString(error.message), {}};
    // No permission: the command to run instead, as the engine writes it, on a line of its own.
    if (error.code == powerhouse::ErrorCode::io && limit > 0)
        r.command = QString::fromStdString(powerhouse::nvidia_smi_power_limit_command(static_cast<uint32_t>(gpu), limit));
    m_refusals.insert(gpu, r);
}

bool PowerController::setLimit(int gpu, double limit) {
    if (gpu < 0 || !std::isfinite(limit)) return false;
    m_refusals.remove(gpu);
    auto set = m_monitor.set_power_limit(static_cast<uint32_t>(gpu), limit);
    if (!set) {
        refuse(gpu, set.error(), std::round(limit));
        refresh();
        return false;
    }
    saveChanges();
    for (const auto& g : m_monitor.snapshot().gpus)
        if (static_cast<int>(g.index) == gpu) keepSetting(g.uuid, std::round(limit));
    refresh();
    return true;
}

bool PowerController::restoreDefault(int gpu) {
    if (gpu < 0) return false;
    m_refusals.remove(gpu);
    auto limits = m_monitor.power_limits(static_cast<uint32_t>(gpu));
    powerhouse::Result<void> done;
    if (limits && limits->default_w) {
        auto set = m_monitor.set_power_limit(static_cast<uint32_t>(gpu), *limits->default_w);
        if (!set) done = set.error();
    } else {
        done = m_monitor.restore_power_limit(static_cast<uint32_t>(gpu));
    }
    if (!done) {
        refuse(gpu, done.error(), limits && limits->default_w ? *limits->default_w : 0.0);
        refresh();
        return false;
    }
    saveChanges();
    for (const auto& g : m_monitor.snapshot().gpus)
        if (static_cast<int>(g.index) == gpu) keepSetting(g.uuid, 0);
    refresh();
    return true;
}

void PowerController::applySettings() {
    for (const auto& g : m_monitor.snapshot().gpus) {
        const double kept = keptSetting(g.uuid);
        if (kept <= 0) continue;
        auto limits = m_monitor.power_limits(g.index);
        if (limits && limits->current_w && std::abs(*limits->current_w - kept) < 0.5) continue;
        m_refusals.remove(static_cast<int>(g.index));
        auto set = m_monitor.set_power_limit(g.index, kept);
        if (!set) refuse(static_cast<int>(g.index), set.error(), kept);
    }
    saveChanges();
    refresh();
}
