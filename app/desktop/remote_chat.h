// Chat answers from a remote engine (an OpenAI-compatible server, app/core/remote) with the
// same signals as EngineClient's, so that ChatController streams, stops, stores and shows
// them on the path of local answers.
//
// Each answer runs RemoteEngine::chat on a std::thread of its own (the call blocks for the
// whole stream). The worker only appends the streamed text (and a reasoning model's thinking,
// which servers send apart: ChatCallbacks::on_reasoning) to its answer's buffers; a 16 ms
// timer on the GUI thread hands it on as `tokens` (one update per frame, like EngineClient),
// and the end comes back as a queued call. cancel() sets the answer's flag, which curl's
// progress callback polls several times a second: the stream is closed, and the answer ends
// with stopReason "cancelled" and the text received so far.
//
// `finished` carries the whole text and reasoning (ChatResult's). Its stats: promptTokens and generatedTokens (the
// server's usage, else the text chunks), ttftMs and tokensPerSecond (measured here), stopReason (the server's
// finish_reason, or "cancelled", or "interrupted" with `interruption` saying why the stream
// broke), engine (the base URL) and model (as the server named it). `failed`: the answer
// never started; the message is RemoteEngine's (what happened, what to do).
//
// The API key travels inside RemoteTarget in memory only; it is never logged or stored here.
//
// Thread-safety: a QObject of the GUI thread; the workers touch only their own Run (under
// its mutex) and post back. The destructor cancels every answer and joins the threads.
#pragma once

#include <QMetaType>
#include <QObject>
#include <QString>
#include <QTimer>
#include <QVariantMap>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "powerhouse/generation.h"
#include "remote/remote_engine.h"

// Where remote answers go: an endpoint (Settings → Engines) and one of its models.
struct RemoteTarget {
    QString name;    // the endpoint's display name
    QString url;     // its base URL
    QString caFile;  // PEM certificates to trust; empty: the system's
    QString apiKey;  // from the keyring; empty: none. Never logged.
    QString model;
    bool operator==(const RemoteTarget&) const = default;
};

// A conversation's sampling settings as an OpenAI chat request (temperature 0 is greedy on
// every server that matters; a seed is sent when one is set). `template_variables`
// (conversation_template_variables) go as the servers read them: reasoning_effort as OpenAI's
// field of that name, the others (enable_thinking) in chat_template_kwargs; none: neither sent.
powerhouse::remote::ChatRequest remote_chat_request(
    const QString& model, std::vector<powerhouse::ChatMessage> messages, const powerhouse::GenerationSettings& settings,
    const nlohmann::ordered_json& template_variables = nlohmann::ordered_json());

class RemoteChat : public QObject {
    Q_OBJECT

public:
    explicit RemoteChat(QObject* parent = nullptr);
    ~RemoteChat() override;

    // Starts an answer; returns its request id (from 2^48 up, never one of EngineClient's).
    quint64 start(const RemoteTarget& target, powerhouse::remote::ChatRequest request);
    void cancel(quint64 requestId);
    bool running(quint64 requestId) const { return m_runs.contains(requestId); }

signals:
    void tokens(quint64 requestId, const QString& text, const QString& reasoning);
    void finished(quint64 requestId, const QString& text, const QVariantMap& stats, const QString& reasoning);
    void failed(quint64 requestId, const QString& message);

private:
    struct Run {
        std::thread thread;
        std::atomic<bool> cancelled{false};
        std::mutex mutex;
        std::string pending;           // streamed text not yet handed on
        std::string pendingReasoning;  // streamed reasoning not yet handed on
    };
    void flush();
    void end(quint64 requestId, const powerhouse::Result<powerhouse::remote::ChatResult>& result, const QString& engine,
             const QString& model);

    std::map<quint64, std::shared_ptr<Run>> m_runs;
    quint64 m_next = quint64{1} << 48;
    QTimer m_flush;
};

Q_DECLARE_METATYPE(RemoteTarget)
