// The settings panel. GPUs: which to use, each one's share of the model and the memory to
// keep free on it, the split mode and the main GPU, with a live preview from the planner of
// where the current model would go and whether it fits, before anything is loaded.
// General: context length, KV-cache type and size, conversations generated at once, CPU
// threads, guessing tokens from the conversation (speculative decoding), theme, electricity
// price, and where the data lives. Everything is kept in the store: per GPU under its UUID,
// the rest as app settings. Nothing takes effect until apply() (but the theme and the
// guessing, which reload nothing); `applied` then lets main reload the model.
//
// A GPU that failed in this run (markGpuFailed: the monitor or the engine said so) is left
// out of every plan and load until the app restarts, shown unticked with the reason, and
// cannot be ticked again; what the user chose for it stays stored as it was. General also
// holds what the engine does when a GPU fails under the model (recoveryPolicy).
//
// Its writes stay on the GUI thread's connection, unlike the chat's (ChatController's
// writer): they are rare (apply, a theme change) and a few small rows.
//
// Thread-safety: GUI thread only.
#pragma once

#include <QHash>
#include <QObject>
#include <QString>
#include <QVariantList>
#include <QVariantMap>
#include <QtQml/qqmlregistration.h>

#include <optional>
#include <vector>

#include "powerhouse/engine.h"
#include "powerhouse/model.h"
#include "powerhouse/plan.h"
#include "powerhouse/telemetry.h"
#include "store/store.h"

// Whether a model fits with the current choices, as the Models page shows it
// (SettingsController::fitFor): a value type with typed properties, which QML reads as a
// planFit.
struct PlanFit {
    Q_GADGET
    QML_VALUE_TYPE(planFit)
    Q_PROPERTY(bool fits MEMBER fits)
    Q_PROPERTY(QString text MEMBER text)              // the plan in words, or why it does not fit
    Q_PROPERTY(QString mode MEMBER mode)              // the split chosen
    Q_PROPERTY(QString suggestion MEMBER suggestion)  // what would make it fit

public:
    bool fits = false;
    QString text;
    QString mode;
    QString suggestion;
    bool operator==(const PlanFit&) const = default;
    // As a map {fits, text, mode, suggestion}: HubController's rows still keep it so.
    operator QVariantMap() const {
        return {{"fits", fits}, {"text", text}, {"mode", mode}, {"suggestion", suggestion}};
    }
};

class SettingsController : public QObject {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("made by main.cpp")
    // [{uuid, name, totalGiB, use, ratio, reserveMiB, failed, failure}], in the monitor's
    // order; a failed GPU's `use` is false
    Q_PROPERTY(QVariantList gpus READ gpus NOTIFY changed)
    Q_PROPERTY(QString splitMode READ splitMode WRITE setSplitMode NOTIFY changed)
    // Mixture-of-experts models: "auto", "all" or a number of layers whose experts stay in
    // system RAM, run by the CPU.
    Q_PROPERTY(QString expertsInRam READ expertsInRam WRITE setExpertsInRam NOTIFY changed)
    Q_PROPERTY(int mainGpu READ mainGpu WRITE setMainGpu NOTIFY changed)
    Q_PROPERTY(int contextLength READ contextLength WRITE setContextLength NOTIFY changed)
    Q_PROPERTY(QString kvCacheType READ kvCacheType WRITE setKvCacheType NOTIFY changed)  // f16, q8_0
    // Positions the KV cache holds for all conversations together; 0: the context length.
    Q_PROPERTY(int kvCacheTokens READ kvCacheTokens WRITE setKvCacheTokens NOTIFY changed)
    // Conversations whose answers are generated at once (1-16; more wait their turn).
    Q_PROPERTY(int maxSequences READ maxSequences WRITE setMaxSequences NOTIFY changed)
    Q_PROPERTY(int cpuThreads READ cpuThreads WRITE setCpuThreads NOTIFY changed)         // 0: all cores
    Q_PROPERTY(int cpuCores READ cpuCores CONSTANT)
    // The theme applies at once (it reloads nothing): system, light or dark.
    Q_PROPERTY(QString theme READ theme WRITE setTheme NOTIFY themeChanged)
    // Speculative decoding by prompt lookup: every local answer guesses tokens from the
    // conversation itself (ChatController::setGuessTokens). The same answer, faster on a GPU
    // where it repeats earlier text; it can be slower on a CPU. Off by default; applies at
    // once (it reloads nothing), kept as the app setting `guess_tokens`.
    Q_PROPERTY(bool guessTokens READ guessTokens WRITE setGuessTokens NOTIFY guessTokensChanged)
    // Per kWh, in the user's currency; 0: no cost shown.
    Q_PROPERTY(double electricityPrice READ electricityPrice WRITE setElectricityPrice NOTIFY changed)
    Q_PROPERTY(QString dataFolder READ dataFolder CONSTANT)
    // When a GPU fails under the model: "replan" (go on with the devices left: the default),
    // "retry" (load it again on the same GPUs) or "stop" (end the answer with the error).
    Q_PROPERTY(QString recoveryPolicy READ recoveryPolicy WRITE setRecoveryPolicy NOTIFY changed)
    Q_PROPERTY(QString preview READ preview NOTIFY previewChanged)
    Q_PROPERTY(bool fits READ fits NOTIFY previewChanged)
    // Placement of the previewed plan: [{gpu, name, part, first, count, bytes}] for the dashboard's bar.
    // Kept maps, not gadgets: DashboardController::setModelGpus reads them as maps, and
    // PlacementBar.qml treats the list as a JS array of objects (reduce, map, modelData.bytes),
    // which a QVariantList of gadgets is not cleanly in Qt 6.4 (each element a wrapped value
    // type, copied at every access).
    Q_PROPERTY(QVariantList plannedGpus READ plannedGpus NOTIFY previewChanged)
    Q_PROPERTY(int modelLayers READ modelLayers NOTIFY previewChanged)

public:
    SettingsController(powerhouse::store::Store& store, QString dataFolder, QObject* parent = nullptr);

    QVariantList gpus() const;
    QString splitMode() const { return m_splitMode; }
    QString expertsInRam() const { return m_expertsInRam; }
    int mainGpu() const { return m_mainGpu; }
    int contextLength() const { return m_contextLength; }
    QString kvCacheType() const { return m_kvCacheType; }
    int kvCacheTokens() const { return m_kvCacheTokens; }
    int maxSequences() const { return m_maxSequences; }
    int cpuThreads() const { return m_cpuThreads; }
    int cpuCores() const;
    QString theme() const { return m_theme; }
    bool guessTokens() const { return m_guessTokens; }
    double electricityPrice() const { return m_price; }
    QString dataFolder() const { return m_dataFolder; }
    QString recoveryPolicy() const { return m_recoveryPolicy; }
    // As the engine takes it (LoadCommand::recovery).
    powerhouse::RecoveryPolicy recovery() const;
    QString preview() const { return m_preview; }
    bool fits() const { return m_fits; }
    QVariantList plannedGpus() const { return m_planned; }
    int modelLayers() const { return m_shape ? static_cast<int>(m_shape->n_layer) : 0; }

    void setSplitMode(const QString& mode);
    void setExpertsInRam(const QString& value);
    void setMainGpu(int index);
    void setContextLength(int n);
    void setKvCacheType(const QString& type);
    void setKvCacheTokens(int n);
    void setMaxSequences(int n);
    void setCpuThreads(int n);
    void setTheme(const QString& theme);
    void setGuessTokens(bool on);
    void setElectricityPrice(double price);
    void setRecoveryPolicy(const QString& policy);
    // This GPU failed (`why`, in a line): out of use until the app restarts.
    void markGpuFailed(const QString& uuid, const QString& why);
    Q_INVOKABLE void setGpuUse(int index, bool use);
    Q_INVOKABLE void setGpuRatio(int index, double ratio);
    Q_INVOKABLE void setGpuReserve(int index, int mib);
    // Saves everything to the store and emits `applied`; false (and `error`) if it could not.
    Q_INVOKABLE bool apply();
    // Forgets unapplied changes: reads everything back from the store.
    Q_INVOKABLE void revert();

    // Whether a model fits with the current choices, as the Models page shows it.
    PlanFit fitFor(const powerhouse::ModelShape& shape) const;

    // The devices and options the planner is given for a model (`moe`: it has experts, so
    // system RAM is offered for them): the GPUs as the monitor sees them with each one's
    // reserve folded into its free memory, those in use and their ratios. No GPU in use:
    // options.use is empty and the model runs on the CPU.
    struct PlanInputs {
        std::vector<powerhouse::DeviceDesc> devices;
        powerhouse::PlanOptions options;
    };
    PlanInputs planInputs(int contextLength, bool moe) const;

    // What a model is loaded with, from the applied settings; the GPUs that failed in this run
    // are in excluded_gpus (the engine refuses them anyway).
    powerhouse::ModelOptions modelOptions() const;

    // The GPUs as the monitor sees them (their saved settings are read the first time a
    // UUID is seen); the model the preview plans for.
    void setDevices(const powerhouse::TelemetrySnapshot& snapshot);
    void setModel(const QString& path);

signals:
    void changed();
    void themeChanged();
    void guessTokensChanged();
    void previewChanged();
    void applied();
    void error(const QString& message);

private:
    struct Gpu {
        powerhouse::DeviceDesc desc;
        bool use = true;
        double ratio = 1.0;
        int reserveMiB = 512;
        bool simulated = false;  // POWERHOUSE_SIMULATE_GPUS: planned on, never run on
        // In use: chosen, and not failed in this run.
        bool usable(const QHash<QString, QString>& failed) const {
            return use && !failed.contains(QString::fromStdString(desc.uuid));
        }
    };
    struct Plan {
        QString text;
        bool fits = false;
        QString mode;
        QVariantList planned;
    };
    Plan planFor(const powerhouse::ModelShape& shape, int contextLength) const;
    void load();
    void loadGpu(Gpu& gpu);
    void updatePreview();
    template <class T>
    void set(T& field, T value);

    powerhouse::store::Store& m_store;
    QString m_dataFolder;
    std::vector<Gpu> m_gpus;
    QString m_splitMode = QStringLiteral("auto");
    QString m_expertsInRam = QStringLiteral("auto");
    int m_mainGpu = 0;
    int m_contextLength = 4096;
    QString m_kvCacheType = QStringLiteral("f16");
    int m_kvCacheTokens = 0;
    int m_maxSequences = 4;
    int m_cpuThreads = 0;
    QString m_theme = QStringLiteral("system");
    bool m_guessTokens = false;
    double m_price = 0;
    QString m_recoveryPolicy = QStringLiteral("replan");
    QHash<QString, QString> m_failed;  // GPUs that failed in this run, by UUID: why
    QString m_modelPath;
    std::optional<powerhouse::ModelShape> m_shape;
    QString m_preview;
    bool m_fits = false;
    QVariantList m_planned;
};
