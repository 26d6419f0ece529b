#include "power_controller.h"

#include <QClipboard>
#include <QGuiApplication>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>
#include <QtGlobal>

#include <cmath>

namespace {

constexpr const char* kChangesKey = "power_limit_changes";
constexpr const char* kKeepKey = "keep_power_limits";

double watts(const std::optional<double>& w) { return w ? *w : 0.0; }

QString w(double value) { return QString::number(std::lround(value)) + QStringLiteral(" W"); }

std::string changesJson(const std::vector<powerhouse::PowerLimitChange>& changes) {
    QJsonArray out;
    for (const powerhouse::PowerLimitChange& c : changes) {
        out.append(QJsonObject{{"uuid", QString::fromStdString(c.uuid)}, {"before_w", c.before_w}, {"now_w", c.now_w}});
    }
    return QJsonDocument(out).toJson(QJsonDocument::Compact).toStdString();
}

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
    // Kept limits are the user's to keep: nothing for the next start to undo. Nobody is left
    // to tell of a refusal but the log: the next start then sets back what the record says.
    const powerhouse::Result<void> saved = m_keep ? m_store.set_setting(kChangesKey, "[]") : saveChanges();
    if (!saved) qWarning("power limits: the record of changes was not updated: %s", saved.error().message.c_str());
}

QString PowerController::restoreLeftovers(powerhouse::store::Store& store, powerhouse::GpuMonitorOptions options) {
    auto saved = store.setting(kChangesKey);
    if (!saved || !*saved) return {};
    const QJsonArray changes = QJsonDocument::fromJson(QByteArray::fromStdString(**saved)).array();
    if (changes.isEmpty()) return {};
    auto keep = store.setting(kKeepKey);
    const powerhouse::Result<void> cleared = store.set_setting(kChangesKey, "[]");
    // Not cleared, the record is set back again at the next start: nothing is lost, but say so.
    const QString notCleared =
        cleared ? QString()
                : tr(" The record of them could not be cleared, so they will be set back again at the next start: %1")
                      .arg(QString::fromStdString(cleared.error().message));
    if (keep && *keep && **keep == "true") {
        return notCleared.isEmpty() ? QString() : tr("Power limits kept from last time.") + notCleared;
    }
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
    return tr("Powerhouse did not quit cleanly last time and left power limits changed: %1.").arg(said.join("; ")) +
           notCleared;
}

void PowerController::setKeepLimits(bool keep) {
    if (keep == m_keep) return;
    // Stored first: refused, the choice stays as it is stored (and the box shows it).
    if (auto saved = m_store.set_setting(kKeepKey, keep ? "true" : "false"); !saved) {
        emit error(tr("\"Keep my power limits after quitting\" could not be saved, so it stays %1: %2")
                       .arg(m_keep ? tr("on") : tr("off"), QString::fromStdString(saved.error().message)));
        emit keepLimitsChanged();
        return;
    }
    m_keep = keep;
    m_monitor.keep_power_limits(keep);
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

powerhouse::Result<void> PowerController::keepSetting(const std::string& uuid, double limit) {
    QJsonObject o = gpuSettings(m_store, uuid);
    if (limit > 0) {
        o.insert("power_limit_w", limit);
    } else {
        o.remove("power_limit_w");
    }
    return m_store.set_gpu_settings(uuid, QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString());
}

powerhouse::Result<void> PowerController::saveChanges() {
    return m_store.set_setting(kChangesKey, changesJson(m_monitor.power_limit_changes()));
}

powerhouse::Result<void> PowerController::recordBefore(const std::vector<uint32_t>& gpus,
                                                       const std::vector<double>& limits) {
    // The record as it will be once the limits are set: the monitor's, with these GPUs now at
    // theirs. A GPU already changed keeps its entry even when going back to where it was: until
    // that set is made it is still changed, and a crash then must find it recorded.
    std::vector<powerhouse::PowerLimitChange> changes = m_monitor.power_limit_changes();
    const powerhouse::TelemetrySnapshot snapshot = m_monitor.snapshot();
    for (size_t i = 0; i < gpus.size() && i < limits.size(); ++i) {
        bool known = false;
        for (powerhouse::PowerLimitChange& c : changes) {
            if (c.gpu != gpus[i]) continue;
            c.now_w = limits[i];
            known = true;
        }
        if (known) continue;
        auto now = m_monitor.power_limits(gpus[i]);
        if (!now || !now->current_w) continue;  // the monitor refuses to set it anyway
        // Set to the limit it has: nothing changes, nothing to set back (the monitor's own
        // record drops such a change too), to NVML's milliwatt.
        if (std::lround(*now->current_w * 1000) == std::lround(limits[i] * 1000)) continue;
        std::string uuid;
        for (const powerhouse::GpuInfo& g : snapshot.gpus)
            if (g.index == gpus[i]) uuid = g.uuid;
        changes.push_back({gpus[i], uuid, *now->current_w, limits[i]});
    }
    return m_store.set_setting(kChangesKey, changesJson(changes));
}

void PowerController::refuseStore(int gpu, const QString& what, const powerhouse::Error& error) {
    m_refusals.insert(gpu, Refusal{what.arg(QString::fromStdString(error.message)), {}});
}

powerhouse::Result<void> PowerController::setRecorded(const powerhouse::GpuInfo& gpu, double limit) {
    const int index = static_cast<int>(gpu.index);
    if (auto recorded = recordBefore({gpu.index}, {limit}); !recorded) {
        refuseStore(index,
                    tr("Not set: Powerhouse could not record the change, which it needs to put the limit back if it "
                       "does not quit cleanly. %1"),
                    recorded.error());
        return recorded.error();
    }
    auto set = m_monitor.set_power_limit(gpu.index, limit);
    // The monitor's own record: after a refusal, the one above said more than was done, which
    // restoring would only set to the limit before Powerhouse again. Refused now, that stays.
    (void)saveChanges();
    if (!set) {
        refuse(index, set.error(), std::round(limit));
        return set.error();
    }
    return {};
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
        row.insert("held", m_held.value(index));
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

void PowerController::holdLimits(const std::vector<uint32_t>& gpus, const QString& why) {
    m_held.clear();
    for (const uint32_t g : gpus) m_held.insert(static_cast<int>(g), why);
    refresh();
}

void PowerController::releaseLimits() {
    if (m_held.isEmpty()) return;
    m_held.clear();
    refresh();
}

bool PowerController::setLimit(int gpu, double limit) {
    if (gpu < 0 || !std::isfinite(limit) || held(gpu)) return false;
    m_refusals.remove(gpu);
    const powerhouse::GpuInfo* info = nullptr;
    const powerhouse::TelemetrySnapshot snapshot = m_monitor.snapshot();
    for (const auto& g : snapshot.gpus)
        if (static_cast<int>(g.index) == gpu) info = &g;
    if (info == nullptr) {
        auto set = m_monitor.set_power_limit(static_cast<uint32_t>(gpu), limit);  // no such GPU: its words
        if (!set) refuse(gpu, set.error(), std::round(limit));
        refresh();
        return static_cast<bool>(set);
    }
    bool done = static_cast<bool>(setRecorded(*info, limit));
    if (done) {
        if (auto kept = keepSetting(info->uuid, std::round(limit)); !kept) {
            m_refusals.insert(gpu, Refusal{tr("Set to %1 for now, but it could not be kept as the GPU's setting for "
                                              "the next start: %2")
                                               .arg(w(limit), QString::fromStdString(kept.error().message)),
                                           {}});
            done = false;
        }
    }
    refresh();
    return done;
}

bool PowerController::restoreDefault(int gpu) {
    if (gpu < 0 || held(gpu)) return false;
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
    QStringList refused;
    if (auto saved = saveChanges(); !saved) {
        refused
            << tr("the record of changes could not be updated: %1").arg(QString::fromStdString(saved.error().message));
    }
    for (const auto& g : m_monitor.snapshot().gpus) {
        if (static_cast<int>(g.index) != gpu) continue;
        if (auto kept = keepSetting(g.uuid, 0); !kept) {
            refused << tr("the kept limit could not be forgotten, so it will be set again at the next start: %1")
                           .arg(QString::fromStdString(kept.error().message));
        }
    }
    if (!refused.isEmpty()) {
        m_refusals.insert(gpu, Refusal{tr("The default is back, but %1").arg(refused.join(tr("; and "))), {}});
    }
    refresh();
    return refused.isEmpty();
}

void PowerController::applySettings() {
    for (const auto& g : m_monitor.snapshot().gpus) {
        const double kept = keptSetting(g.uuid);
        if (kept <= 0 || held(static_cast<int>(g.index))) continue;
        auto limits = m_monitor.power_limits(g.index);
        if (limits && limits->current_w && std::abs(*limits->current_w - kept) < 0.5) continue;
        m_refusals.remove(static_cast<int>(g.index));
        (void)setRecorded(g, kept);  // a refusal, the store's or the GPU's, shows on the GPU
    }
    refresh();
}
