// The engine thread (powerhouse::Engine) as seen from the GUI thread: commands go in as
// plain calls; events come back as queued signals on the GUI thread. Several generations
// run at once (the engine batches them); their tokens are gathered per request and
// delivered at most once per frame, however fast the model writes, so that the UI never
// has more than one update per frame to lay out. A generation that reads its answer
// (GenerateCommand::read_answer: a reasoning model's thinking apart from its text) has both
// gathered apart and handed on together.
//
// EngineClient is the engine's one reader of events: a reader thread of its own takes each
// event as the engine sends it, offers it first to the event hook (the API server that
// shares the engine, app/desktop/server_controller.h: the events of its requests are its
// own and the app never sees them), and posts the rest to the GUI thread. So the server's
// requests are answered whatever the GUI thread is doing, and a server stopping on the GUI
// thread still gets the last events of its requests.
//
// Thread-safety: a QObject of the GUI thread. Its reader thread only calls the hook and
// posts to this object's thread; setEventHook() and engine() may be called from any thread.
#pragma once

#include <QHash>
#include <QObject>
#include <QString>
#include <QTimer>
#include <QVariantMap>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "powerhouse/engine.h"

// A device failed under the loaded model, and what the engine did about it (its
// RecoveryEvent, powerhouse/engine.h), for the GUI thread. `Stopped` is the app's own: with
// the recovery policy stop the engine ends the answers with the error (a device_failed
// ErrorEvent) and the model runs nothing more.
struct EngineRecovery {
    enum class Phase { Reloading, Recovered, GaveUp, Stopped };
    Phase phase = Phase::Reloading;
    // For the banner, as the engine writes it: "GPU 1 stopped answering: Xid 79, fell off the
    // bus. Continuing on GPU 0 and RAM, at about 24 tokens/s."
    QString message;
    QString device;           // the device that failed: "GPU 1", "CPU 0"; may be empty
    QString uuid;             // a GPU's UUID; empty for a CPU device
    QString cause;            // "Xid 79, fell off the bus"
    QString devices;          // ModelOptions::devices of the reload
    QList<quint64> requests;  // the answers under way when it failed
    QVariantMap model;        // Recovered: where the model runs now (as EngineClient::loaded's)
};
Q_DECLARE_METATYPE(EngineRecovery)

class EngineClient : public QObject {
    Q_OBJECT

public:
    explicit EngineClient(QObject* parent = nullptr);
    ~EngineClient() override;

    // Both emit modelGoing() first: whatever uses the loaded model stops before it goes.
    // `recovery` says what the engine does when a device fails under the model; `draftModel`
    // is a small model of the same vocabulary for speculative decoding (LoadCommand::
    // draft_model; "" for none).
    void load(const QString& path, const powerhouse::ModelOptions& options,
              powerhouse::RecoveryPolicy recovery = powerhouse::RecoveryPolicy::replan, const QString& draftModel = {});
    void unload();
    // Starts a generation; returns its request id (never 0; the app's ids stay small, far
    // below the API server's, ApiServer::kFirstRequestId).
    quint64 generate(powerhouse::GenerateCommand command);
    void cancel(quint64 requestId);
    // The GPU monitor saw a GPU fail (lost, or a fatal Xid): the engine sets it aside for the
    // session and, if the model uses it, moves the model off it (recovery()).
    void deviceFailed(const QString& uuid, const QString& cause, bool stoppedAnswering);

    // Called on the reader thread with every event before the app sees it; true means the
    // event was the hook's and the app skips it. It must be quick (a server's deliver()).
    // Replacing or clearing the hook waits for a call in progress to end, so that after
    // setEventHook({}) returns it is never called again.
    using EventHook = std::function<bool(const powerhouse::EngineEvent&)>;
    void setEventHook(EventHook hook);
    // The engine, for a second submitter of commands (the API server), whose events still
    // come through here. Valid as long as this object.
    powerhouse::Engine& engine() { return *m_engine; }

signals:
    // A load (of nextPath) or an unload (nextPath empty) is about to be submitted: the loaded
    // model, if any, goes next.
    void modelGoing(const QString& nextPath);
    void unloaded();
    void loadProgress(double fraction, const QString& stage);
    // summary: name, architecture, device, nCtx, weightBytes, kvCacheBytes, split, devices;
    // with a draft model, draftName (its display name) and draftPath
    void loaded(const QVariantMap& summary);
    // The last load failed; never sent for a load cancelled by the next load or unload.
    void loadFailed(const QString& message);
    // The text and the reasoning (TokenEvent::reasoning; empty unless the request reads its
    // answer) that came since the last call, at most one call per request and frame; the
    // reasoning came first where both did (a model thinks before it answers).
    void tokens(quint64 requestId, const QString& text, const QString& reasoning);
    // stats: promptTokens, reusedTokens, generatedTokens, ttftMs, tokensPerSecond, stopReason,
    // draftedTokens and acceptedTokens (speculative decoding: guessed, and kept of those),
    // and recoveries when a device failed under the answer: [{atToken, failed, cause,
    // continuedOn}]. The text is the whole answer, the part from before a recovery included
    // (with read_answer its content), and the reasoning the whole of it (DoneEvent's).
    void finished(quint64 requestId, const QString& text, const QVariantMap& stats, const QString& reasoning);
    void failed(quint64 requestId, const QString& message);
    // How the running generations stand: sequences running and waiting, KV cache blocks.
    void schedulerStats(const powerhouse::SchedulerStats& stats);
    // A device failed under the model: Reloading, then Recovered (the answers under way go on
    // streaming under their request ids; `model` is the new summary) or GaveUp (they fail, and
    // unloaded() follows: no model is loaded); Stopped with the policy stop, before the
    // answers' failed().
    void recovery(const EngineRecovery& recovery);

private:
    void read();                                             // the reader thread
    bool isOwn(const powerhouse::EngineEvent& event) const;  // not another submitter's request
    void drain();
    void flushTokens();

    std::unique_ptr<powerhouse::Engine> m_engine;
    std::mutex m_hookMutex;
    EventHook m_hook;
    std::mutex m_inboxMutex;
    std::deque<powerhouse::EngineEvent> m_inbox;  // read, not yet handled on the GUI thread
    std::atomic<bool> m_drainQueued{false};
    std::atomic<bool> m_reading{true};
    std::thread m_reader;
    QTimer m_frame;  // one token delivery per frame
    struct Pending {
        QString text;
        QString reasoning;
    };
    QHash<quint64, Pending> m_pending;  // text and reasoning not yet delivered, per request
    quint64 m_nextRequest = 1;
    // The policy of the last load, for reading its device errors (EngineRecovery::Stopped).
    powerhouse::RecoveryPolicy m_policy = powerhouse::RecoveryPolicy::replan;
};
