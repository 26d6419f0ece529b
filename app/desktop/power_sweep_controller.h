// The dashboard's efficiency sweep (issue 24): the loaded model generates the same greedy
// answer at several power limits (100% of the default down to 60%, as `bench --power-sweep`),
// and each limit's tokens/s, watts, tokens per joule, peak temperature and slowdown are shown
// with the most efficient limit and the knee (the lowest limit about as fast as the fastest)
// marked; either can then be applied, as a setting of the GPU (PowerController::setLimit).
//
// The engine's run_power_sweep does the bookkeeping on a thread of this controller: it sets
// each limit through the GPU monitor, and its workload asks the GUI thread to start each
// generation through EngineClient (its own request ids; the chat never sees them), then
// waits for the answer's end. The GPUs' power is read by a GpuPowerMeter around each
// generation. The limits before the sweep are always set back at its end, also when it is
// cancelled, fails, or the app quits meanwhile. Each step's limits are written to the store
// before they are set (run_power_sweep's before_set asks the GUI thread, which owns the
// store, to record them through PowerController::recordBefore, and waits), so that a crash
// mid-sweep is undone at the next start; a record the store refuses stops the sweep before
// that step's limits are set. While it runs, the Power page refuses to change its GPUs'
// limits, saying why (PowerController::holdLimits): the end of the sweep would undo such a
// change. The chat cannot send while a sweep runs, and a sweep starts
// only when the engine has no answer running: other answers would share the GPUs and skew
// the figures.
//
// On simulated GPUs standing in for a model on the CPU (POWERHOUSE_SIMULATE_GPUS) the watts
// and temperatures are the power model's and each step's speed is the CPU's scaled by its
// speed factor; the result says so (`label`).
//
// The last result is kept in the store (`last_power_sweep`) and shown again after a restart.
//
// Thread-safety: a QObject of the GUI thread. Its sweep thread touches only the (thread-safe)
// monitor, its meter, and the hand-over of each record and generation (under m_mutex); it
// reaches the GUI thread only through queued calls.
#pragma once

#include <QDateTime>
#include <QJsonObject>
#include <QObject>
#include <QString>
#include <QVariantList>
#include <QVariantMap>
#include <QtQml/qqmlregistration.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "powerhouse/power.h"
#include "store/store.h"

class DashboardController;
class EngineClient;
class PowerController;

// One limit of a sweep, as the dialog's table shows it.
struct PowerSweepRow {
    Q_GADGET
    Q_PROPERTY(QString limit MEMBER limit)           // "315 W", or "315 W / 300 W" per GPU
    Q_PROPERTY(double totalLimitW MEMBER totalLimitW)
    Q_PROPERTY(double tokensPerSecond MEMBER tokensPerSecond)
    Q_PROPERTY(double speedShare MEMBER speedShare)  // of the fastest limit's tokens/s, 0..1
    Q_PROPERTY(bool hasPower MEMBER hasPower)        // averageW and tokensPerJoule were measured
    Q_PROPERTY(double averageW MEMBER averageW)
    Q_PROPERTY(double tokensPerJoule MEMBER tokensPerJoule)
    Q_PROPERTY(bool hasTemperature MEMBER hasTemperature)
    Q_PROPERTY(double peakTemperatureC MEMBER peakTemperatureC)
    Q_PROPERTY(QString slowdown MEMBER slowdown)     // "power cap, thermal (software)"; "" when none
    Q_PROPERTY(bool mostEfficient MEMBER mostEfficient)
    Q_PROPERTY(bool knee MEMBER knee)

public:
    QString limit;
    double totalLimitW = 0, tokensPerSecond = 0, speedShare = 0;
    bool hasPower = false;
    double averageW = 0, tokensPerJoule = 0;
    bool hasTemperature = false;
    double peakTemperatureC = 0;
    QString slowdown;
    bool mostEfficient = false, knee = false;
    std::vector<double> limitsW;  // per GPU of the sweep, for applying
    bool operator==(const PowerSweepRow&) const = default;
};
Q_DECLARE_METATYPE(PowerSweepRow)

class PowerSweepController : public QObject {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("made by DesktopApp")
    Q_PROPERTY(State state READ state NOTIFY stateChanged)
    Q_PROPERTY(bool running READ running NOTIFY stateChanged)
    // Why a sweep cannot start now ("Load a model first", "Wait for the answers running to
    // end"); empty when it can.
    Q_PROPERTY(QString whyNot READ whyNot NOTIFY availabilityChanged)
    // While running: "Limit 2 of 5: 405 W on GPU 0", and the share of the sweep done (0..1).
    Q_PROPERTY(QString progressText READ progressText NOTIFY progressChanged)
    Q_PROPERTY(double progress READ progress NOTIFY progressChanged)
    // The last result (also one kept from an earlier run of the app).
    Q_PROPERTY(QVariantList rows READ rows NOTIFY resultChanged)  // PowerSweepRow values
    Q_PROPERTY(int mostEfficient READ mostEfficient NOTIFY resultChanged)  // row index; -1: none
    Q_PROPERTY(int knee READ knee NOTIFY resultChanged)
    // "SmolLM2 135M Instruct · Q4_1 on GPU 0, 128 tokens per answer, 5 s per limit, 3 Dec 22:14"
    Q_PROPERTY(QString about READ about NOTIFY resultChanged)
    // Non-empty for simulated GPUs: the figures come from a power model, not from hardware.
    Q_PROPERTY(QString label READ label NOTIFY resultChanged)
    // "Most efficient: 315 W, 0.42 tokens/J (+18%), 4% slower than 450 W."
    Q_PROPERTY(QString summary READ summary NOTIFY resultChanged)
    // What the last sweep, cancel or apply said: its error, "the limits are back at 450 W".
    Q_PROPERTY(QString message READ message NOTIFY messageChanged)
    Q_PROPERTY(bool messageIsError READ messageIsError NOTIFY messageChanged)

public:
    enum class State { Idle, Running, Cancelling, Done, Failed };
    Q_ENUM(State)

    struct Options {
        double secondsPerLimit = 5;  // each limit runs answers until this long has passed (at least one)
        int tokensPerAnswer = 128;   // greedy, past any end-of-generation token
        std::vector<double> limitsW;  // empty: PowerSweepOptions' fractions of the default
        std::vector<uint32_t> gpus;   // GpuInfo::index of the GPUs to sweep; empty: the model's
    };

    PowerSweepController(powerhouse::store::Store& store, EngineClient& engine, DashboardController& dashboard,
                         PowerController& power, Options options, QObject* parent = nullptr);
    // Cancels a sweep under way and waits for its thread, which sets the limits back.
    ~PowerSweepController() override;

    State state() const { return m_state; }
    bool running() const { return m_state == State::Running || m_state == State::Cancelling; }
    QString whyNot() const;
    QString progressText() const { return m_progressText; }
    double progress() const { return m_progress; }
    QVariantList rows() const;
    int mostEfficient() const { return m_mostEfficient; }
    int knee() const { return m_knee; }
    QString about() const { return m_about; }
    QString label() const { return m_label; }
    QString summary() const { return m_summary; }
    QString message() const { return m_message; }
    bool messageIsError() const { return m_messageIsError; }

    // Starts a sweep of the loaded model's GPUs; false (message says why) when it cannot.
    Q_INVOKABLE bool start();
    Q_INVOKABLE void cancel();
    // Sets row `row`'s limits on the sweep's GPUs and keeps them as their settings; false
    // with the refusal in message (the GPU card shows the nvidia-smi command to run).
    Q_INVOKABLE bool apply(int row);

    // The loaded model's summary (EngineClient::loaded), or none (an empty map).
    void setModel(const QVariantMap& summary);

signals:
    void stateChanged();
    void availabilityChanged();
    void progressChanged();
    void resultChanged();
    void messageChanged();

private:
    struct Generated {
        uint64_t tokens = 0;
        double seconds = 0;
    };
    // The sweep thread: one answer through the GUI thread, waited for.
    powerhouse::Result<Generated> generate();
    // The sweep thread: a step's limits recorded in the store by the GUI thread, waited for.
    powerhouse::Result<void> record(const powerhouse::PowerSweepStep& step);
    // GUI thread: records them (PowerController::recordBefore) and settles the wait.
    void recordStep(const std::vector<double>& limits);
    void settleRecord(powerhouse::Result<void> result);
    // GUI thread: the engine answers the sweep's requests.
    void startGeneration();
    void onFinished(quint64 request, const QVariantMap& stats);
    void onFailed(quint64 request, const QString& message);
    // Settles the answer the sweep thread waits for, once.
    void settle(powerhouse::Result<Generated> result);
    void onStep(int index, const std::vector<double>& limits);
    void onSweepEnded(powerhouse::Result<powerhouse::PowerSweepResult> result);
    void setState(State state);
    void say(const QString& text, bool error);
    void showResult(const QJsonObject& saved);
    void loadSaved();

    powerhouse::store::Store& m_store;
    EngineClient& m_engine;
    DashboardController& m_dashboard;
    PowerController& m_power;
    Options m_options;

    QVariantMap m_model;  // the loaded model's summary; empty: none
    State m_state = State::Idle;
    QString m_progressText;
    double m_progress = 0;
    int m_steps = 0;
    std::vector<PowerSweepRow> m_rows;
    std::vector<uint32_t> m_gpus;  // of the result shown
    int m_mostEfficient = -1, m_knee = -1;
    QString m_about, m_label, m_summary, m_message;
    bool m_messageIsError = false;

    // The sweep under way.
    std::thread m_thread;
    std::atomic<bool> m_cancel{false};
    QString m_modelName;
    QString m_cancelReason;          // why the app cancelled it ("" when the user did)
    std::vector<uint32_t> m_sweepGpus;
    std::mutex m_mutex;  // guards m_waiting, m_recording and m_request
    std::optional<std::promise<powerhouse::Result<Generated>>> m_waiting;
    std::optional<std::promise<powerhouse::Result<void>>> m_recording;
    quint64 m_request = 0;          // the engine request of the answer running; 0: none
    quint64 m_previousRequest = 0;  // the last one that ended, still counted as load on the dashboard
};
