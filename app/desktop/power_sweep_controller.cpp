#include "power_sweep_controller.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QLocale>
#include <QMetaObject>
#include <QtGlobal>

#include <algorithm>
#include <cmath>

#include "dashboard_controller.h"
#include "engine_client.h"
#include "power_controller.h"

namespace {

constexpr const char* kSavedKey = "last_power_sweep";

// The same answer at every limit: long enough a story that the model never runs out of
// things to say, greedy, and past any end-of-generation token.
constexpr const char* kPrompt =
    "Write a long, detailed story about a lighthouse keeper who spends a winter alone on a rocky island.";

QString watts(double w) { return QString::number(std::lround(w)) + QStringLiteral(" W"); }

QString limitsText(const std::vector<double>& limits) { return QString::fromStdString(powerhouse::power_limits_text(limits)); }

QString gpusText(const std::vector<uint32_t>& gpus) { return QString::fromStdString(powerhouse::gpu_list_text(gpus)); }

QJsonValue orNull(const std::optional<double>& v) { return v ? QJsonValue(*v) : QJsonValue(); }

powerhouse::Error cancelled() { return powerhouse::make_error(powerhouse::ErrorCode::cancelled, "the sweep was cancelled"); }

}  // namespace

PowerSweepController::PowerSweepController(powerhouse::store::Store& store, EngineClient& engine,
                                           DashboardController& dashboard, PowerController& power, Options options,
                                           QObject* parent)
    : QObject(parent), m_store(store), m_engine(engine), m_dashboard(dashboard), m_power(power),
      m_options(std::move(options)) {
    connect(&m_engine, &EngineClient::finished, this,
            [this](quint64 request, const QString&, const QVariantMap& stats) { onFinished(request, stats); });
    connect(&m_engine, &EngineClient::failed, this, &PowerSweepController::onFailed);
    connect(&m_engine, &EngineClient::modelGoing, this, [this] {
        if (running()) {
            m_cancelReason = tr("The sweep stopped: the model was unloaded.");
            cancel();
        }
        setModel({});
    });
    connect(&m_dashboard, &DashboardController::batchingChanged, this, &PowerSweepController::availabilityChanged);
    connect(&m_dashboard, &DashboardController::changed, this, &PowerSweepController::availabilityChanged);
    loadSaved();
}

PowerSweepController::~PowerSweepController() {
    if (!m_thread.joinable()) return;
    // The GUI thread answers nothing more: the answer waited for ends here, as cancelled,
    // and the sweep thread sets the limits back before it ends.
    m_cancel = true;
    quint64 request = 0;
    {
        const std::lock_guard lock(m_mutex);
        request = m_request;
        m_request = 0;
    }
    if (request != 0) {
        m_engine.cancel(request);
        (void)m_dashboard.endAnswer(request);
    }
    settle(cancelled());
    settleRecord(cancelled());
    m_thread.join();
    m_power.releaseLimits();
    // Nobody is left to tell but the log; PowerController's own end writes it again.
    if (auto saved = m_power.saveChanges(); !saved)
        qWarning("power sweep: the record of power limits was not updated: %s", saved.error().message.c_str());
}

QString PowerSweepController::whyNot() const {
    if (running()) return tr("A sweep is running.");
    if (m_model.isEmpty()) return tr("Load a model first: the sweep runs it at each power limit.");
    if (m_dashboard.gpus()->rowCount() == 0) {
        return tr("No GPU was found%1: a sweep needs one.")
            .arg(m_dashboard.status().isEmpty() ? QString() : QStringLiteral(" (") + m_dashboard.status() + QStringLiteral(")"));
    }
    if (m_dashboard.sequencesRunning() + m_dashboard.sequencesWaiting() > 0)
        return tr("Wait for the answers running to end: they would share the GPUs with the sweep.");
    return {};
}

void PowerSweepController::setModel(const QVariantMap& summary) {
    m_model = summary;
    emit availabilityChanged();
}

void PowerSweepController::setState(State state) {
    if (state == m_state) return;
    m_state = state;
    emit stateChanged();
    emit availabilityChanged();
}

void PowerSweepController::say(const QString& text, bool error) {
    m_message = text;
    m_messageIsError = error;
    emit messageChanged();
}

QVariantList PowerSweepController::rows() const {
    QVariantList out;
    for (const PowerSweepRow& r : m_rows) out.append(QVariant::fromValue(r));
    return out;
}

bool PowerSweepController::start() {
    if (const QString why = whyNot(); !why.isEmpty()) {
        say(why, true);
        return false;
    }
    powerhouse::GpuMonitor& monitor = m_dashboard.monitor();
    std::vector<powerhouse::DeviceUsage> usage;
    for (const QVariant& v : m_model.value("devices").toList()) {
        powerhouse::DeviceUsage u;
        u.name = v.toMap().value("name").toString().toStdString();
        u.uuid = v.toMap().value("uuid").toString().toStdString();
        usage.push_back(u);
    }
    powerhouse::Result<powerhouse::ModelGpus> found = powerhouse::power_sweep_gpus(monitor.sample_now(), usage);
    if (!found) {
        QString text = QString::fromStdString(found.error().message);
        if (std::all_of(usage.begin(), usage.end(), [](const auto& u) { return u.uuid.empty(); }))
            text += tr(" (Settings → GPUs, then load the model again)");
        say(text, true);
        return false;
    }
    // Stand-ins for a model on the CPU: the GPUs the settings' plan puts it on, which the
    // dashboard loads while the sweep's answers run (as it does for the chat's).
    std::vector<uint32_t> gpus = found->gpus;
    if (found->stand_in && !m_dashboard.modelGpus().empty()) gpus = m_dashboard.modelGpus();
    if (!m_options.gpus.empty()) gpus = m_options.gpus;

    powerhouse::PowerSweepOptions options;
    options.gpus = gpus;
    options.limits_w = m_options.limitsW;
    // Each step's limits are in the store before they are set: a crash is undone at the next
    // start (PowerController::restoreLeftovers). Not recorded, they are not set at all.
    options.before_set = [this](const powerhouse::PowerSweepStep& step) { return record(step); };
    // The steps, for the progress and to refuse limits out of range before anything changes.
    std::vector<powerhouse::PowerLimits> limits;
    for (const uint32_t g : gpus) {
        powerhouse::Result<powerhouse::PowerLimits> l = monitor.power_limits(g);
        if (!l) {
            say(tr("GPU %1: %2").arg(g).arg(QString::fromStdString(l.error().message)), true);
            return false;
        }
        limits.push_back(*l);
    }
    powerhouse::Result<std::vector<std::vector<double>>> steps = powerhouse::power_sweep_limits(limits, options);
    if (!steps) {
        say(QString::fromStdString(steps.error().message), true);
        return false;
    }
    m_steps = static_cast<int>(steps->size());
    m_cancel = false;
    m_cancelReason.clear();
    m_modelName = m_model.value("displayName").toString();
    m_sweepGpus = gpus;
    m_progress = 0;
    m_progressText = tr("Warming up at the current limit…");
    emit progressChanged();
    say({}, false);
    setState(State::Running);
    // The sweep sets these GPUs' limits and puts back the ones from before it at its end: a
    // change on the Power page meanwhile would be undone, so it is refused, saying why.
    m_power.holdLimits(gpus, tr("The efficiency sweep is setting this GPU's power limit and will put back the one "
                                "from before it when it ends, which would undo a change made now. Change it once "
                                "the sweep has ended, or cancel the sweep."));

    const powerhouse::ModelGpus metered{gpus, false};  // the dashboard, not the meter, loads stand-ins
    const double seconds = m_options.secondsPerLimit;
    const bool standIn = found->stand_in;
    m_thread = std::thread([this, &monitor, options, metered, seconds, standIn] {
        powerhouse::GpuPowerMeter meter(monitor, metered);
        bool warm = false;
        const powerhouse::PowerSweepWorkload workload =
            [&](const powerhouse::PowerSweepStep& step) -> powerhouse::Result<powerhouse::PowerSweepRun> {
            QMetaObject::invokeMethod(
                this, [this, index = static_cast<int>(step.index), l = step.limits_w] { onStep(index, l); },
                Qt::QueuedConnection);
            if (!warm) {  // the first answer loads caches and clocks: not measured
                powerhouse::Result<Generated> first = generate();
                if (!first) return first.error();
                warm = true;
            }
            Generated total;
            const auto began = std::chrono::steady_clock::now();
            do {
                meter.begin();
                powerhouse::Result<Generated> one = generate();
                meter.end();
                if (!one) return one.error();
                total.tokens += one->tokens;
                total.seconds += one->seconds;
            } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count() < seconds);
            powerhouse::PowerSweepRun run = meter.take(total.tokens, total.seconds);
            // The CPU did the work: the stand-ins' power model says how much slower they
            // would have done it at this limit.
            if (standIn) run.seconds /= powerhouse::lowest_simulated_speed(run.samples, metered.gpus);
            return run;
        };
        powerhouse::Result<powerhouse::PowerSweepResult> result = powerhouse::run_power_sweep(monitor, options, workload);
        QMetaObject::invokeMethod(
            this, [this, r = std::move(result)]() mutable { onSweepEnded(std::move(r)); }, Qt::QueuedConnection);
    });
    return true;
}

void PowerSweepController::cancel() {
    if (m_state != State::Running) return;
    m_cancel = true;
    setState(State::Cancelling);
    m_progressText = tr("Cancelling: setting the power limits back…");
    emit progressChanged();
    quint64 request = 0;
    {
        const std::lock_guard lock(m_mutex);
        request = m_request;
    }
    // Its end (finished, cancelled) settles the answer the sweep waits for; with none
    // running, the next one is never started.
    if (request != 0) m_engine.cancel(request);
}

powerhouse::Result<PowerSweepController::Generated> PowerSweepController::generate() {
    std::future<powerhouse::Result<Generated>> done;
    {
        const std::lock_guard lock(m_mutex);
        if (m_cancel) return cancelled();
        m_waiting.emplace();
        done = m_waiting->get_future();
    }
    QMetaObject::invokeMethod(this, [this] { startGeneration(); }, Qt::QueuedConnection);
    return done.get();
}

powerhouse::Result<void> PowerSweepController::record(const powerhouse::PowerSweepStep& step) {
    std::future<powerhouse::Result<void>> done;
    {
        const std::lock_guard lock(m_mutex);
        if (m_cancel) return cancelled();
        m_recording.emplace();
        done = m_recording->get_future();
    }
    QMetaObject::invokeMethod(
        this, [this, limits = step.limits_w] { recordStep(limits); }, Qt::QueuedConnection);
    return done.get();
}

void PowerSweepController::recordStep(const std::vector<double>& limits) {
    if (m_cancel) {
        settleRecord(cancelled());
        return;
    }
    const powerhouse::Result<void> recorded = m_power.recordBefore(m_sweepGpus, limits);
    if (!recorded) {
        settleRecord(powerhouse::make_error(
            recorded.error().code,
            tr("Powerhouse could not record the power limits it was about to set, which it needs to put them back if "
               "it does not quit cleanly, so it did not set them and the sweep stopped: %1")
                .arg(QString::fromStdString(recorded.error().message))
                .toStdString()));
        return;
    }
    settleRecord({});
}

void PowerSweepController::settleRecord(powerhouse::Result<void> result) {
    const std::lock_guard lock(m_mutex);
    if (!m_recording) return;
    m_recording->set_value(std::move(result));
    m_recording.reset();
}

void PowerSweepController::startGeneration() {
    if (m_cancel) {
        settle(cancelled());
        return;
    }
    if (m_model.isEmpty()) {
        settle(powerhouse::make_error(powerhouse::ErrorCode::cancelled, "the model was unloaded"));
        return;
    }
    // The step's limits were recorded before they were set (recordStep); the GPU cards show them.
    m_power.refresh();
    powerhouse::GenerateCommand command;
    command.messages.push_back({"user", kPrompt});
    command.settings.max_tokens = m_options.tokensPerAnswer;
    command.settings.ignore_eos = true;
    command.settings.sampling.temperature = 0;
    const quint64 request = m_engine.generate(std::move(command));
    quint64 previous = 0;
    {
        const std::lock_guard lock(m_mutex);
        previous = m_previousRequest;
        m_request = request;
    }
    // The GPUs stay loaded from one answer to the next: the previous answer leaves the
    // dashboard only once this one is counted.
    m_dashboard.beginAnswer(request);
    if (previous != 0) (void)m_dashboard.endAnswer(previous);
}

void PowerSweepController::onFinished(quint64 request, const QVariantMap& stats) {
    {
        const std::lock_guard lock(m_mutex);
        if (request == 0 || request != m_request) return;
        m_request = 0;
        m_previousRequest = request;
    }
    if (stats.value("stopReason").toString() == QLatin1String("cancelled") || m_cancel) {
        settle(cancelled());
        return;
    }
    // As GenerationStats::tokens_per_second counts them: the tokens after the first, over
    // the time from the first to the last.
    const qint64 generated = stats.value("generatedTokens").toLongLong();
    const double rate = stats.value("tokensPerSecond").toDouble();
    if (generated < 2 || rate <= 0) {
        settle(powerhouse::make_error(powerhouse::ErrorCode::internal,
                                      "the model generated too little to time at this limit"));
        return;
    }
    Generated g;
    g.tokens = static_cast<uint64_t>(generated - 1);
    g.seconds = static_cast<double>(g.tokens) / rate;
    settle(g);
}

void PowerSweepController::onFailed(quint64 request, const QString& message) {
    {
        const std::lock_guard lock(m_mutex);
        if (request == 0 || request != m_request) return;
        m_request = 0;
        m_previousRequest = request;
    }
    settle(powerhouse::make_error(powerhouse::ErrorCode::internal, message.toStdString()));
}

void PowerSweepController::settle(powerhouse::Result<Generated> result) {
    const std::lock_guard lock(m_mutex);
    if (!m_waiting) return;
    m_waiting->set_value(std::move(result));
    m_waiting.reset();
}

void PowerSweepController::onStep(int index, const std::vector<double>& limits) {
    if (m_state != State::Running) return;
    m_progress = m_steps > 0 ? static_cast<double>(index) / m_steps : 0;
    m_progressText = tr("Limit %1 of %2: %3 on %4").arg(index + 1).arg(m_steps).arg(limitsText(limits), gpusText(m_sweepGpus));
    emit progressChanged();
}

void PowerSweepController::onSweepEnded(powerhouse::Result<powerhouse::PowerSweepResult> result) {
    if (m_thread.joinable()) m_thread.join();
    quint64 last = 0;
    {
        const std::lock_guard lock(m_mutex);
        last = m_previousRequest;
        m_previousRequest = 0;
    }
    if (last != 0) (void)m_dashboard.endAnswer(last);
    // The limits are back; a record not updated says more was changed than is, which the
    // next start would only set back to the same limits again.
    const powerhouse::Result<void> recorded = m_power.saveChanges();
    m_power.releaseLimits();
    m_power.refresh();
    m_progress = 1;
    m_progressText.clear();
    emit progressChanged();
    if (!result) {
        const bool wasCancelled = m_cancel && result.error().code == powerhouse::ErrorCode::cancelled;
        if (wasCancelled) {
            say(m_cancelReason.isEmpty() ? tr("Sweep cancelled; the power limits are back as they were.") : m_cancelReason,
                !m_cancelReason.isEmpty());
        } else {
            say(tr("The sweep failed: %1").arg(QString::fromStdString(result.error().message)), true);
        }
        setState(wasCancelled ? (m_rows.empty() ? State::Idle : State::Done) : State::Failed);
        return;
    }
    const powerhouse::PowerSweepResult& r = *result;
    QJsonArray points;
    for (const powerhouse::PowerSweepPoint& p : r.points) {
        QJsonArray limits;
        for (const double w : p.limits_w) limits.append(w);
        QStringList reasons;
        for (const std::string& why : p.throttle_reasons) reasons << QString::fromStdString(why);
        points.append(QJsonObject{{"limits_w", limits},
                                  {"tokens_per_second", p.tokens_per_second},
                                  {"average_w", orNull(p.average_w)},
                                  {"tokens_per_joule", orNull(p.tokens_per_joule)},
                                  {"peak_temperature_c", orNull(p.peak_temperature_c)},
                                  {"slowdown", reasons.join(QStringLiteral(", "))}});
    }
    QJsonArray gpus;
    for (const uint32_t g : r.gpus) gpus.append(static_cast<int>(g));
    const QJsonObject saved{
        {"when", QDateTime::currentDateTime().toString(Qt::ISODate)},
        {"model", m_modelName},
        {"tokens_per_answer", m_options.tokensPerAnswer},
        {"seconds_per_limit", m_options.secondsPerLimit},
        {"label", QString::fromStdString(r.label)},
        {"gpus", gpus},
        {"points", points},
        {"most_efficient", r.most_efficient ? static_cast<int>(*r.most_efficient) : -1},
        {"knee", r.knee ? static_cast<int>(*r.knee) : -1},
    };
    const powerhouse::Result<void> kept =
        m_store.set_setting(kSavedKey, QJsonDocument(saved).toJson(QJsonDocument::Compact).toStdString());
    showResult(saved);
    QString said = tr("The power limits are back at %1, as before the sweep.").arg(limitsText(r.restored_w));
    if (!kept) {
        said +=
            QLatin1Char(' ') +
            tr("The result could not be kept for the next start: %1").arg(QString::fromStdString(kept.error().message));
    }
    if (!recorded) {
        said += QLatin1Char(' ') + tr("The record of power limits could not be updated, so the next start will set "
                                      "them back again: %1")
                                       .arg(QString::fromStdString(recorded.error().message));
    }
    say(said, !kept || !recorded);
    setState(State::Done);
}

void PowerSweepController::loadSaved() {
    auto saved = m_store.setting(kSavedKey);
    if (!saved || !*saved) return;
    const QJsonObject o = QJsonDocument::fromJson(QByteArray::fromStdString(**saved)).object();
    if (o.value("points").toArray().isEmpty()) return;
    showResult(o);
    m_state = State::Done;
}

void PowerSweepController::showResult(const QJsonObject& saved) {
    m_rows.clear();
    m_gpus.clear();
    for (const QJsonValue& g : saved.value("gpus").toArray()) m_gpus.push_back(static_cast<uint32_t>(g.toInt()));
    const QJsonArray points = saved.value("points").toArray();
    double fastest = 0;
    for (const QJsonValue& p : points) fastest = std::max(fastest, p.toObject().value("tokens_per_second").toDouble());
    m_mostEfficient = saved.value("most_efficient").toInt(-1);
    m_knee = saved.value("knee").toInt(-1);
    for (qsizetype i = 0; i < points.size(); ++i) {
        const QJsonObject p = points[i].toObject();
        PowerSweepRow row;
        for (const QJsonValue& w : p.value("limits_w").toArray()) {
            row.limitsW.push_back(w.toDouble());
            row.totalLimitW += w.toDouble();
        }
        row.limit = limitsText(row.limitsW);
        row.tokensPerSecond = p.value("tokens_per_second").toDouble();
        row.speedShare = fastest > 0 ? row.tokensPerSecond / fastest : 0;
        row.hasPower = p.value("average_w").isDouble() && p.value("tokens_per_joule").isDouble();
        row.averageW = p.value("average_w").toDouble();
        row.tokensPerJoule = p.value("tokens_per_joule").toDouble();
        row.hasTemperature = p.value("peak_temperature_c").isDouble();
        row.peakTemperatureC = p.value("peak_temperature_c").toDouble();
        row.slowdown = p.value("slowdown").toString();
        row.mostEfficient = i == m_mostEfficient;
        row.knee = i == m_knee;
        m_rows.push_back(std::move(row));
    }
    if (m_mostEfficient >= static_cast<int>(m_rows.size())) m_mostEfficient = -1;
    if (m_knee >= static_cast<int>(m_rows.size())) m_knee = -1;

    const QDateTime when = QDateTime::fromString(saved.value("when").toString(), Qt::ISODate);
    m_about = tr("%1 on %2, %3 tokens per answer, %4 s per limit, %5")
                  .arg(saved.value("model").toString().isEmpty() ? tr("The model") : saved.value("model").toString(),
                       gpusText(m_gpus))
                  .arg(saved.value("tokens_per_answer").toInt())
                  .arg(saved.value("seconds_per_limit").toDouble())
                  .arg(QLocale().toString(when, QLocale::ShortFormat));
    m_label = saved.value("label").toString();

    QStringList summary;
    const PowerSweepRow* first = m_rows.empty() ? nullptr : &m_rows.front();
    if (m_mostEfficient >= 0 && first != nullptr) {
        const PowerSweepRow& best = m_rows[static_cast<size_t>(m_mostEfficient)];
        QString line = tr("Most efficient: %1, %2 tokens/J").arg(best.limit).arg(best.tokensPerJoule, 0, 'f', 3);
        if (&best != first && first->hasPower && first->tokensPerJoule > 0) {
            line += tr(" (%1% more than at %2)")
                        .arg(std::lround((best.tokensPerJoule / first->tokensPerJoule - 1) * 100))
                        .arg(first->limit);
        }
        line += tr(", %1% of the fastest speed.").arg(std::lround(best.speedShare * 100));
        summary << line;
    }
    if (m_knee >= 0) {
        const PowerSweepRow& knee = m_rows[static_cast<size_t>(m_knee)];
        QString line = tr("Knee: %1, %2 tokens/s (%3% of the fastest)")
                           .arg(knee.limit)
                           .arg(knee.tokensPerSecond, 0, 'f', 1)
                           .arg(std::lround(knee.speedShare * 100));
        if (knee.hasPower) line += tr(" at %1 W").arg(std::lround(knee.averageW));
        summary << line + QStringLiteral(".");
    }
    m_summary = summary.join(QStringLiteral("\n"));
    emit resultChanged();
}

bool PowerSweepController::apply(int row) {
    if (running() || row < 0 || row >= static_cast<int>(m_rows.size())) return false;
    const PowerSweepRow& chosen = m_rows[static_cast<size_t>(row)];
    QStringList refused;
    for (size_t i = 0; i < m_gpus.size() && i < chosen.limitsW.size(); ++i) {
        const int gpu = static_cast<int>(m_gpus[i]);
        if (m_power.setLimit(gpu, chosen.limitsW[i])) continue;
        QString why;
        for (const QVariant& v : m_power.gpus()) {
            const QVariantMap g = v.toMap();
            if (g.value("gpu").toInt() != gpu) continue;
            why = g.value("error").toString();
            if (!g.value("command").toString().isEmpty()) why += tr(". To set it yourself: %1").arg(g.value("command").toString());
        }
        refused << tr("GPU %1 refused %2: %3").arg(gpu).arg(watts(chosen.limitsW[i]), why.isEmpty() ? tr("no such GPU now") : why);
    }
    if (!refused.isEmpty()) {
        say(refused.join(QStringLiteral("\n")), true);
        return false;
    }
    say(tr("%1 applied to %2 and kept as the GPU's setting; \"Restore default\" on its card puts the default back.")
            .arg(chosen.limit, gpusText(m_gpus)),
        false);
    return true;
}
