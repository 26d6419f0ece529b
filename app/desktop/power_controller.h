// Per-GPU power limits (issue 24): each GPU's limit, default and range as the monitor reads
// them, a limit set within the range (GpuMonitor::set_power_limit) and kept as the GPU's
// setting (`power_limit_w` in its per-GPU settings, by UUID), set again at each start, and
// "Restore default" in one click. A refusal shows the engine's words and, where the right is
// missing, the `sudo nvidia-smi -i N -pl W` command to run instead (copied with one click).
//
// Quitting puts the limits Powerhouse set back (the monitor does it as it goes, and this
// controller first, explicitly) unless the user ticked "keep my power limits after quitting"
// (`keep_power_limits`). A crash skips both, so every change is also written to the store as
// it is made (`power_limit_changes`: [{uuid, before_w, now_w}]); restoreLeftovers, at the next
// start and before the app's monitor opens, sets them back through a monitor of its own and
// says so once (startupNote). A change is recorded before it is made: a limit the store cannot
// record is not set (the GPU's refusal says why), since a crash would leave it set for good.
// Other failed writes (the kept limit, "keep my power limits") are shown as well (the GPU's
// refusal, `error`), and what is shown follows the store.
//
// Thread-safety: a QObject of the GUI thread; the monitor is thread-safe.
#pragma once

#include <QHash>
#include <QObject>
#include <QString>
#include <QVariantList>
#include <QtQml/qqmlregistration.h>

#include <cstdint>
#include <vector>

#include "powerhouse/telemetry.h"
#include "store/store.h"

class PowerController : public QObject {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("made by main.cpp")
    // [{gpu, uuid, name, supported, simulated, currentW, defaultW, minW, maxW, enforcedW,
    //   changedFromW (0: not changed by Powerhouse), settingW (0: none kept), error, command,
    //   held}] in the monitor's order; watts are 0 where the GPU does not say. `error` is the
    // last refusal for that GPU, `command` the nvidia-smi command it gives (else empty), `held`
    // why its limit cannot be changed now (an efficiency sweep runs on it; else empty).
    Q_PROPERTY(QVariantList gpus READ gpus NOTIFY changed)
    Q_PROPERTY(bool keepLimits READ keepLimits WRITE setKeepLimits NOTIFY keepLimitsChanged)
    // Said once: limits a crashed run left changed were set back at this start.
    Q_PROPERTY(QString startupNote READ startupNote NOTIFY startupNoteChanged)

public:
    PowerController(powerhouse::store::Store& store, powerhouse::GpuMonitor& monitor, QString startupNote = {},
                    QObject* parent = nullptr);
    // Puts back what this run set, unless the limits are to be kept, and records what is left.
    ~PowerController() override;

    // The changes a run that did not quit cleanly left in the store, set back on a monitor of
    // its own (made from `options`, keeping what it sets), unless that run's user asked to keep
    // them. Returns what to tell the user ("" when there was nothing); the record is cleared.
    static QString restoreLeftovers(powerhouse::store::Store& store, powerhouse::GpuMonitorOptions options);

    QVariantList gpus() const { return m_gpus; }
    bool keepLimits() const { return m_keep; }
    void setKeepLimits(bool keep);
    QString startupNote() const { return m_startupNote; }

    // Reads every GPU's limits again (after each snapshot; a change elsewhere shows).
    void refresh();
    // Sets each GPU's kept limit (`power_limit_w`) where it differs from the one set now.
    void applySettings();
    // Sets GPU `gpu`'s limit and keeps it as its setting; false with `error` set on refusal,
    // or with nothing changed while the GPU is held (its row's `held` says why).
    Q_INVOKABLE bool setLimit(int gpu, double watts);
    // Back to the GPU's default limit (or, without one, to what it was before Powerhouse),
    // and no limit kept for it. False, changing nothing, while the GPU is held.
    Q_INVOKABLE bool restoreDefault(int gpu);
    // The efficiency sweep's GPUs while it runs: it sets their limits itself and puts back the
    // ones from before it at its end, which would undo a change made meanwhile (and the change
    // would skew its figures). So until releaseLimits, setLimit, restoreDefault and
    // applySettings leave these GPUs alone, and their rows say why (`held`: `why`).
    void holdLimits(const std::vector<uint32_t>& gpus, const QString& why);
    void releaseLimits();
    bool held(int gpu) const { return m_held.contains(gpu); }
    Q_INVOKABLE void copyText(const QString& text) const;
    // Writes the limits changed so far (by this controller or by anything else on the same
    // monitor, such as the efficiency sweep) to the store, for restoreLeftovers after a crash.
    // An error says the store refused it (the limits then cannot be put back after a crash).
    powerhouse::Result<void> saveChanges();
    // Records limits about to be set (`limits[i]` on GPU `gpus[i]`, GpuInfo::index) as if they
    // were set, before they are, in the same record: what the monitor has changed so far, and
    // these GPUs at these limits (with the limit each has now as the one to set back, where
    // Powerhouse has not changed it yet). A crash before or after the sets is then undone at
    // the next start. The efficiency sweep calls it before each step; an error says the store
    // refused it, and then nothing may be set.
    powerhouse::Result<void> recordBefore(const std::vector<uint32_t>& gpus, const std::vector<double>& limits);
    Q_INVOKABLE void dismissStartupNote();

signals:
    void changed();
    void keepLimitsChanged();
    void startupNoteChanged();
    // A write the store refused that no GPU's refusal shows ("keep my power limits", the
    // record of changes at start): what failed and what to do. DesktopApp shows it above the chat.
    void error(const QString& message);

private:
    struct Refusal {
        QString error, command;
    };
    powerhouse::Result<void> keepSetting(const std::string& uuid, double watts);  // 0: none
    // Records `limit` for GPU `gpu` as if it were set (before setting it), then sets it and
    // records what the monitor says; an error (the record refused, or the GPU's) sets nothing.
    powerhouse::Result<void> setRecorded(const powerhouse::GpuInfo& gpu, double limit);
    void refuseStore(int gpu, const QString& what, const powerhouse::Error& error);
    double keptSetting(const std::string& uuid) const;
    void refuse(int gpu, const powerhouse::Error& error, double limit);  // limit: for the command

    powerhouse::store::Store& m_store;
    powerhouse::GpuMonitor& m_monitor;
    QVariantList m_gpus;
    QHash<int, Refusal> m_refusals;
    QHash<int, QString> m_held;  // GPU: why its limit cannot be changed now
    bool m_keep = false;
    QString m_startupNote;
};
