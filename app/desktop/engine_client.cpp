#include "engine_client.h"

#include <QMetaObject>

#include <chrono>
#include <utility>

#include "catalog/catalog.h"

namespace {

QVariantMap summaryMap(const powerhouse::ModelSummary& s) {
    QVariantList devices;
    for (const powerhouse::DeviceUsage& d : s.devices) {
        devices.append(QVariantMap{{"name", QString::fromStdString(d.name)},
                                   {"part", QString::fromStdString(d.part)},
                                   {"weightBytes", static_cast<double>(d.weight_bytes)},
                                   {"ramWeightBytes", static_cast<double>(d.ram_weight_bytes)},
                                   {"kvCacheBytes", static_cast<double>(d.kv_cache_bytes)},
                                   {"uuid", QString::fromStdString(d.uuid)},
                                   {"bandwidthGbS", d.bandwidth_gb_s},
                                   {"stepBytes", static_cast<double>(d.step_bytes)}});
    }
    // The name as a person writes it ("SmolLM2 135M Instruct · Q4_1"), from what the header
    // the load read says (ModelSummary::info).
    QString displayName = QString::fromStdString(s.name);
    if (!s.info.path.empty()) displayName = QString::fromStdString(powerhouse::catalog::model_display_name(s.info));
    return {{"name", QString::fromStdString(s.name)},
            {"displayName", displayName},
            {"architecture", QString::fromStdString(s.architecture)},
            {"path", QString::fromStdString(s.path.string())},
            {"device", QString::fromStdString(s.device)},
            {"nCtx", s.n_ctx},
            {"nVocab", s.n_vocab},
            {"weightBytes", static_cast<double>(s.weight_bytes)},
            {"kvCacheBytes", static_cast<double>(s.kv_cache_bytes)},
            {"expectedTokensPerSecond", s.expected_tokens_per_second},
            {"split", QString::fromUtf8(powerhouse::split_mode_name(s.split))},
            // The chat template's switches (GenerateCommand::template_variables) and why
            // another template than the model's own is used, if it is.
            {"hasThinkingSwitch", s.has_thinking_switch},
            // How the template the model chats with writes tool calls (the server's grammars).
            {"toolFormat", static_cast<int>(s.tool_format)},
            {"hasReasoningEffort", s.has_reasoning_effort},
            {"templateNote", QString::fromStdString(s.template_note)},
            // An encoder (ModelInfo::embedding_only): it serves /v1/embeddings, and the chat
            // refuses to send to it.
            {"embeddingOnly", s.info.embedding_only},
            {"devices", devices}};
}

QVariantMap statsMap(const powerhouse::DoneEvent& done) {
    const powerhouse::GenerationStats& s = done.stats;
    QVariantMap stats{{"promptTokens", s.prompt_tokens},
                      {"reusedTokens", s.reused_tokens},
                      {"generatedTokens", s.generated_tokens},
                      {"ttftMs", s.time_to_first_token * 1e3},
                      {"tokensPerSecond", s.tokens_per_second()},
                      {"stopReason", QString::fromUtf8(powerhouse::stop_reason_name(s.stop_reason))},
                      // Speculative decoding: tokens guessed, and of those the model kept.
                      {"draftedTokens", s.drafted_tokens},
                      {"acceptedTokens", s.accepted_tokens}};
    if (!done.recoveries.empty()) {
        QVariantList notes;
        for (const powerhouse::RecoveryNote& n : done.recoveries) {
            notes.append(QVariantMap{{"atToken", n.at_token},
                                     {"failed", QString::fromStdString(n.failed)},
                                     {"cause", QString::fromStdString(n.cause)},
                                     {"continuedOn", QString::fromStdString(n.continued_on)}});
        }
        stats.insert("recoveries", notes);
    }
    return stats;
}

EngineRecovery recoveryOf(const powerhouse::RecoveryEvent& e) {
    EngineRecovery r;
    switch (e.phase) {
        case powerhouse::RecoveryEvent::Phase::reloading: r.phase = EngineRecovery::Phase::Reloading; break;
        case powerhouse::RecoveryEvent::Phase::recovered: r.phase = EngineRecovery::Phase::Recovered; break;
        case powerhouse::RecoveryEvent::Phase::gave_up: r.phase = EngineRecovery::Phase::GaveUp; break;
    }
    r.message = QString::fromStdString(e.message);
    r.device = QString::fromStdString(e.fault.name);
    r.uuid = QString::fromStdString(e.fault.uuid);
    r.cause = QString::fromStdString(e.fault.cause);
    r.devices = QString::fromStdString(e.devices);
    for (uint64_t id : e.requests) r.requests.append(id);
    if (e.phase == powerhouse::RecoveryEvent::Phase::recovered) r.model = summaryMap(e.model);
    return r;
}

}  // namespace

EngineClient::EngineClient(QObject* parent) : QObject(parent), m_engine(std::make_unique<powerhouse::Engine>()) {
    m_frame.setSingleShot(true);
    m_frame.setInterval(16);
    connect(&m_frame, &QTimer::timeout, this, &EngineClient::flushTokens);
    m_reader = std::thread([this] { read(); });
}

EngineClient::~EngineClient() {
    m_reading = false;
    m_reader.join();   // no hook call or post after this
    m_engine.reset();  // joins the engine thread; drains posted meanwhile go with this object
}

void EngineClient::load(const QString& path, const powerhouse::ModelOptions& options,
                        powerhouse::RecoveryPolicy recovery, const QString& draftModel) {
    emit modelGoing(path);
    m_policy = recovery;
    powerhouse::LoadCommand command{path.toStdString(), options, recovery};
    command.draft_model = draftModel.toStdString();
    m_engine->submit(std::move(command));
}

void EngineClient::unload() {
    emit modelGoing({});
    m_engine->submit(powerhouse::UnloadCommand{});
}

quint64 EngineClient::generate(powerhouse::GenerateCommand command) {
    command.request_id = m_nextRequest++;
    const quint64 id = command.request_id;
    m_engine->submit(std::move(command));
    return id;
}

void EngineClient::cancel(quint64 requestId) { m_engine->submit(powerhouse::CancelCommand{requestId}); }

void EngineClient::deviceFailed(const QString& uuid, const QString& cause, bool stoppedAnswering) {
    m_engine->submit(powerhouse::DeviceFailedCommand{uuid.toStdString(), cause.toStdString(), stoppedAnswering});
}

void EngineClient::setEventHook(EventHook hook) {
    const std::lock_guard lock(m_hookMutex);
    m_hook = std::move(hook);
}

// The reader thread: each event goes to the hook first, the rest to the GUI thread, with one
// drain posted at a time.
void EngineClient::read() {
    while (m_reading) {
        std::optional<powerhouse::EngineEvent> event = m_engine->wait_event(std::chrono::milliseconds(50));
        if (!event) continue;
        {
            const std::lock_guard lock(m_hookMutex);
            if (m_hook && m_hook(*event)) continue;
        }
        {
            const std::lock_guard lock(m_inboxMutex);
            m_inbox.push_back(std::move(*event));
        }
        if (m_drainQueued.exchange(true)) continue;
        QMetaObject::invokeMethod(
            this,
            [this] {
                m_drainQueued = false;
                drain();
            },
            Qt::QueuedConnection);
    }
}

bool EngineClient::isOwn(const powerhouse::EngineEvent& event) const {
    uint64_t id = 0;
    if (const auto* t = std::get_if<powerhouse::TokenEvent>(&event)) id = t->request_id;
    if (const auto* d = std::get_if<powerhouse::DoneEvent>(&event)) id = d->request_id;
    if (const auto* e = std::get_if<powerhouse::ErrorEvent>(&event)) id = e->request_id;
    return id < m_nextRequest;  // 0: a load's or unload's
}

void EngineClient::drain() {
    std::deque<powerhouse::EngineEvent> events;
    {
        const std::lock_guard lock(m_inboxMutex);
        events.swap(m_inbox);
    }
    for (const powerhouse::EngineEvent& event : events) {
        // Another submitter's request (the API server's, after its hook has gone): not the app's.
        if (!isOwn(event)) continue;
        if (const auto* p = std::get_if<powerhouse::LoadProgressEvent>(&event)) {
            emit loadProgress(p->fraction, QString::fromStdString(p->stage));
        } else if (const auto* l = std::get_if<powerhouse::LoadedEvent>(&event)) {
            QVariantMap summary = summaryMap(l->model);
            if (l->draft) {
                const QVariantMap draft = summaryMap(*l->draft);
                summary.insert(QStringLiteral("draftName"), draft.value(QStringLiteral("displayName")));
                summary.insert(QStringLiteral("draftPath"), draft.value(QStringLiteral("path")));
            }
            emit loaded(summary);
        } else if (const auto* t = std::get_if<powerhouse::TokenEvent>(&event)) {
            Pending& pending = m_pending[t->request_id];
            pending.text += QString::fromStdString(t->text);
            pending.reasoning += QString::fromStdString(t->reasoning);
            if (!m_frame.isActive()) m_frame.start();
        } else if (const auto* d = std::get_if<powerhouse::DoneEvent>(&event)) {
            flushTokens();
            emit finished(d->request_id, QString::fromStdString(d->text), statsMap(*d),
                          QString::fromStdString(d->reasoning));
        } else if (const auto* e = std::get_if<powerhouse::ErrorEvent>(&event)) {
            flushTokens();
            const QString message = QString::fromStdString(e->error.message);
            if (e->request_id == 0) {
                // A load that the next load (or an unload) cancelled: that one reports for
                // itself, and this is no failure to show.
                if (e->error.code == powerhouse::ErrorCode::cancelled) continue;
                emit loadFailed(message);
            } else {
                // The policy stop: the engine sends no RecoveryEvent, only this error, and the
                // model it leaves runs nothing more.
                if (e->error.code == powerhouse::ErrorCode::device_failed &&
                    m_policy == powerhouse::RecoveryPolicy::stop) {
                    EngineRecovery stopped;
                    stopped.phase = EngineRecovery::Phase::Stopped;
                    stopped.message = message;
                    stopped.requests = {e->request_id};
                    emit recovery(stopped);
                }
                emit failed(e->request_id, message);
            }
        } else if (const auto* r = std::get_if<powerhouse::RecoveryEvent>(&event)) {
            flushTokens();  // the text from before the failure first
            emit recovery(recoveryOf(*r));
            // The engine has let the model go: nothing answers until the user loads one.
            if (r->phase == powerhouse::RecoveryEvent::Phase::gave_up) emit unloaded();
        } else if (const auto* s = std::get_if<powerhouse::SchedulerEvent>(&event)) {
            emit schedulerStats(s->stats);
        } else if (std::holds_alternative<powerhouse::UnloadedEvent>(event)) {
            emit unloaded();
        }
    }
}

void EngineClient::flushTokens() {
    m_frame.stop();
    const QHash<quint64, Pending> pending = std::exchange(m_pending, {});
    for (auto it = pending.begin(); it != pending.end(); ++it) {
        // A reader waiting to see what a marker opens sends events with neither.
        if (it->text.isEmpty() && it->reasoning.isEmpty()) continue;
        emit tokens(it.key(), it->text, it->reasoning);
    }
}
