#include "engine_client.h"

#include <QMetaObject>
#include <QPointer>

namespace {

QVariantMap summaryMap(const powerhouse::ModelSummary& s) {
    QVariantList devices;
    for (const powerhouse::DeviceUsage& d : s.devices) {
        devices.append(QVariantMap{{"name", QString::fromStdString(d.name)},
                                   {"part", QString::fromStdString(d.part)},
                                   {"weightBytes", static_cast<double>(d.weight_bytes)},
                                   {"ramWeightBytes", static_cast<double>(d.ram_weight_bytes)},
                                   {"kvCacheBytes", static_cast<double>(d.kv_cache_bytes)}});
    }
    return {{"name", QString::fromStdString(s.name)},
            {"architecture", QString::fromStdString(s.architecture)},
            {"path", QString::fromStdString(s.path.string())},
            {"device", QString::fromStdString(s.device)},
            {"nCtx", s.n_ctx},
            {"weightBytes", static_cast<double>(s.weight_bytes)},
            {"kvCacheBytes", static_cast<double>(s.kv_cache_bytes)},
            {"split", QString::fromUtf8(powerhouse::split_mode_name(s.split))},
            {"devices", devices}};
}

QVariantMap statsMap(const powerhouse::GenerationStats& s) {
    return {{"promptTokens", s.prompt_tokens},
            {"reusedTokens", s.reused_tokens},
            {"generatedTokens", s.generated_tokens},
            {"ttftMs", s.time_to_first_token * 1e3},
            {"tokensPerSecond", s.tokens_per_second()},
            {"stopReason", QString::fromUtf8(powerhouse::stop_reason_name(s.stop_reason))}};
}

}  // namespace

EngineClient::EngineClient(QObject* parent)
    : QObject(parent),
      m_engine(std::make_unique<powerhouse::Engine>()),
      m_drainQueued(std::make_shared<std::atomic<bool>>(false)) {
    m_frame.setSingleShot(true);
    m_frame.setInterval(16);
    connect(&m_frame, &QTimer::timeout, this, &EngineClient::flushTokens);
    // Runs on the engine thread: post one drain at a time to the GUI thread. The QPointer
    // guards against an event that arrives while this object is being destroyed.
    QPointer<EngineClient> self(this);
    auto queued = m_drainQueued;
    m_engine->set_notify([self, queued] {
        if (queued->exchange(true)) return;
        QMetaObject::invokeMethod(
            self.data(),
            [self, queued] {
                queued->store(false);
                if (self) self->drain();
            },
            Qt::QueuedConnection);
    });
}

EngineClient::~EngineClient() {
    m_engine->set_notify({});
    m_engine.reset();  // joins the engine thread before the members it posts to go
}

void EngineClient::load(const QString& path, const powerhouse::ModelOptions& options) {
    m_engine->submit(powerhouse::LoadCommand{path.toStdString(), options});
}

quint64 EngineClient::generate(powerhouse::GenerateCommand command) {
    command.request_id = m_nextRequest++;
    const quint64 id = command.request_id;
    m_engine->submit(std::move(command));
    return id;
}

void EngineClient::cancel(quint64 requestId) { m_engine->submit(powerhouse::CancelCommand{requestId}); }

void EngineClient::drain() {
    while (std::optional<powerhouse::EngineEvent> event = m_engine->poll()) {
        if (const auto* p = std::get_if<powerhouse::LoadProgressEvent>(&*event)) {
            emit loadProgress(p->fraction, QString::fromStdString(p->stage));
        } else if (const auto* l = std::get_if<powerhouse::LoadedEvent>(&*event)) {
            emit loaded(summaryMap(l->model));
        } else if (const auto* t = std::get_if<powerhouse::TokenEvent>(&*event)) {
            m_pendingText[t->request_id] += QString::fromStdString(t->text);
            if (!m_frame.isActive()) m_frame.start();
        } else if (const auto* d = std::get_if<powerhouse::DoneEvent>(&*event)) {
            flushTokens();
            emit finished(d->request_id, QString::fromStdString(d->text), statsMap(d->stats));
        } else if (const auto* e = std::get_if<powerhouse::ErrorEvent>(&*event)) {
            flushTokens();
            const QString message = QString::fromStdString(e->error.message);
            if (e->request_id == 0) {
                emit loadFailed(message);
            } else {
                emit failed(e->request_id, message);
            }
        } else if (const auto* s = std::get_if<powerhouse::SchedulerEvent>(&*event)) {
            emit schedulerStats(s->stats);
        }
    }
}

void EngineClient::flushTokens() {
    m_frame.stop();
    const QHash<quint64, QString> pending = std::exchange(m_pendingText, {});
    for (auto it = pending.begin(); it != pending.end(); ++it) emit tokens(it.key(), it.value());
}
