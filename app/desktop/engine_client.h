// The engine thread (powerhouse::Engine) as seen from the GUI thread: commands go in as
// plain calls; events come back as queued signals on the GUI thread. Several generations
// run at once (the engine batches them); their tokens are gathered per request and
// delivered at most once per frame, however fast the model writes, so that the UI never
// has more than one update per frame to lay out.
//
// Thread-safety: a QObject of the GUI thread; only the engine's notify hook runs elsewhere,
// and it only posts to this object's thread.
#pragma once

#include <QHash>
#include <QObject>
#include <QString>
#include <QTimer>
#include <QVariantMap>

#include <atomic>
#include <memory>

#include "powerhouse/engine.h"

class EngineClient : public QObject {
    Q_OBJECT

public:
    explicit EngineClient(QObject* parent = nullptr);
    ~EngineClient() override;

    void load(const QString& path, const powerhouse::ModelOptions& options);
    // Starts a generation; returns its request id (never 0).
    quint64 generate(powerhouse::GenerateCommand command);
    void cancel(quint64 requestId);

signals:
    void loadProgress(double fraction, const QString& stage);
    // summary: name, architecture, device, nCtx, weightBytes, kvCacheBytes, split, devices
    void loaded(const QVariantMap& summary);
    void loadFailed(const QString& message);
    void tokens(quint64 requestId, const QString& text);
    // stats: promptTokens, reusedTokens, generatedTokens, ttftMs, tokensPerSecond, stopReason
    void finished(quint64 requestId, const QString& text, const QVariantMap& stats);
    void failed(quint64 requestId, const QString& message);
    // How the running generations stand: sequences running and waiting, KV cache blocks.
    void schedulerStats(const powerhouse::SchedulerStats& stats);

private:
    void drain();
    void flushTokens();

    std::unique_ptr<powerhouse::Engine> m_engine;
    std::shared_ptr<std::atomic<bool>> m_drainQueued;
    QTimer m_frame;                          // one token delivery per frame
    QHash<quint64, QString> m_pendingText;   // text not yet delivered, per request
    quint64 m_nextRequest = 1;
};
