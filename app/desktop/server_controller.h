// Settings → Server: serves the loaded model over the OpenAI API (app/server/api_server.h)
// from inside the app, on the app's own engine, so that other programs on this computer (or,
// with an API key, on the network) can use it while the user chats. Chat answers and the
// server's requests are batched together by the engine's scheduler.
//
// The server runs on a thread of its own while it is switched on and a model is loaded. It is
// stopped when switched off, before the model goes (a load or unload: EngineClient::modelGoing)
// and when this object is destroyed (at quit): stop() then join, which ends quickly because
// the requests in flight are cancelled and EngineClient's reader thread still hands them
// their last events. The engine's events reach the server through EngineClient's event hook
// (ApiServer::deliver): the events of the server's requests never reach the chat.
//
// Safe by default: 127.0.0.1 (this computer only); any other address needs an API key, which
// generateApiKey() makes (32 random bytes from the system's CSPRNG, as hex), shows once
// (shownApiKey, until hideApiKey()) and keeps in the store with the other settings. The key
// is never logged. enabled, host and port are kept in the store at once (no Apply needed).
// Problems that can be known before starting are refused with a message that says what to do:
// a public address without a key, a port in use, an address that is not this computer's.
//
// One per EngineClient, which must outlive it: it installs the client's event hook (and
// clears it when destroyed), and its server submits to the client's engine.
//
// Thread-safety: a QObject of the GUI thread. The server's thread and EngineClient's reader
// thread only post to it.
#pragma once

#include <QtQml/qqmlregistration.h>
#include <QObject>
#include <QString>
#include <QTimer>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "powerhouse/telemetry.h"
#include "store/store.h"

class EngineClient;
namespace powerhouse::server {
class ApiServer;
}

class ServerController : public QObject {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("made by main.cpp")
    // The user's choice: serve the loaded model (kept in the store).
    Q_PROPERTY(bool enabled READ enabled WRITE setEnabled NOTIFY changed)
    // The address to listen on: 127.0.0.1 (this computer only) by default, 0.0.0.0 for every
    // network; changing it, the port or the key restarts a running server.
    Q_PROPERTY(QString host READ host WRITE setHost NOTIFY changed)
    Q_PROPERTY(int port READ port WRITE setPort NOTIFY changed)   // 0: any free port (boundPort says which)
    Q_PROPERTY(bool keyRequired READ keyRequired NOTIFY changed)  // the host is not a loopback address
    Q_PROPERTY(bool hasApiKey READ hasApiKey NOTIFY changed)
    // The key generateApiKey() just made, until hideApiKey(); empty otherwise.
    Q_PROPERTY(QString shownApiKey READ shownApiKey NOTIFY changed)
    // off, no_model, loading, starting, running, stopping or error.
    Q_PROPERTY(QString state READ state NOTIFY changed)
    Q_PROPERTY(bool running READ running NOTIFY changed)  // accepting requests
    Q_PROPERTY(QString statusText READ statusText NOTIFY changed)
    Q_PROPERTY(QString error READ error NOTIFY changed)      // why it is not running, and what to do
    Q_PROPERTY(int boundPort READ boundPort NOTIFY changed)  // while running; else 0
    // The base address clients use ("http://127.0.0.1:8080"; 127.0.0.1 for a server on every
    // network); empty for port 0 until it runs.
    Q_PROPERTY(QString address READ address NOTIFY changed)
    Q_PROPERTY(QString modelId READ modelId NOTIFY changed)  // what requests name as "model"
    Q_PROPERTY(QString curlExample READ curlExample NOTIFY changed)
    Q_PROPERTY(QString pythonExample READ pythonExample NOTIFY changed)
    // Completions the server has answered (finished, cancelled or failed) since the app started.
    Q_PROPERTY(int requestsServed READ requestsServed NOTIFY requestsServedChanged)

public:
    ServerController(powerhouse::store::Store& store, EngineClient& engine, QObject* parent = nullptr);
    ~ServerController() override;  // stops the server and waits for its thread

    bool enabled() const { return m_enabled; }
    QString host() const { return m_host; }
    int port() const { return m_port; }
    bool keyRequired() const;
    bool hasApiKey() const { return !m_apiKey.isEmpty(); }
    QString shownApiKey() const { return m_shownKey; }
    QString state() const;
    bool running() const;
    QString statusText() const;
    QString error() const;
    int boundPort() const;
    QString address() const;
    QString modelId() const { return m_modelId; }
    QString curlExample() const;
    QString pythonExample() const;
    int requestsServed() const;

    void setEnabled(bool enabled);
    void setHost(const QString& host);
    void setPort(int port);
    // Where /metrics takes each GPU's telemetry (the dashboard's monitor); called on the
    // server's threads. Takes effect at the next start.
    void setTelemetry(std::function<powerhouse::TelemetrySnapshot()> source) { m_telemetry = std::move(source); }
    // New requests get 503 with `reason` (and Retry-After) until releaseRequests(), a server
    // started meanwhile too; requests in flight go on (ApiServer::hold). For work that other
    // requests on the engine would skew: the efficiency sweep.
    void holdRequests(const QString& reason, int retryAfterSeconds);
    void releaseRequests();
    QString heldReason() const { return m_held; }
    // A new key replaces the old one (clients must then use the new one).
    Q_INVOKABLE void generateApiKey();
    Q_INVOKABLE void removeApiKey();
    Q_INVOKABLE void hideApiKey();

signals:
    void changed();
    void requestsServedChanged();

private:
    std::function<powerhouse::TelemetrySnapshot()> m_telemetry;
    enum class Model { none, loading, ready };
    // What a server was started with; another configuration means a restart.
    struct Config {
        QString host;
        int port = 0;
        QString apiKey;
        QString modelPath;
        uint32_t nCtx = 0;
        bool operator==(const Config&) const = default;
    };
    // One server from start to the end of its thread.
    struct Run {
        quint64 id = 0;
        Config config;
        std::shared_ptr<powerhouse::server::ApiServer> server;
        std::thread thread;
        std::atomic<bool> ended{false};
        bool listening = false;
        bool stopping = false;
        int port = 0;
        int stopDelayMs = 100;  // until the next stop() (see retryStop)
    };
    // What EngineClient's hook (on its reader thread) shares with this object.
    struct Shared {
        std::mutex mutex;
        std::shared_ptr<powerhouse::server::ApiServer> server;  // while one runs
        std::atomic<int> served{0};
    };

    Config config() const;
    // Why the server cannot start with these settings (a public address without a key); shown
    // at once, with or without a model.
    QString settingsProblem() const;
    QString bindError() const;  // why listening would fail now (a port in use); empty when it would not
    void update();              // starts, stops or restarts the server as things now stand
    void start();
    void stop();
    void retryStop();
    void onListening(quint64 run, int port);
    void onEnded(quint64 run, const QString& error);
    void finishRun();  // joins the ended thread and forgets the server
    void save(const char* key, const QString& value);

    powerhouse::store::Store& m_store;
    EngineClient& m_engine;
    std::shared_ptr<Shared> m_shared;
    bool m_enabled = false;
    QString m_host = QStringLiteral("127.0.0.1");
    int m_port = 8080;
    QString m_apiKey;  // never logged
    QString m_shownKey;
    Model m_model = Model::none;
    QString m_modelPath;  // the model loaded or loading
    QString m_modelId;
    QString m_held;  // holdRequests' reason; empty: not held
    int m_heldRetrySeconds = 0;
    uint32_t m_nCtx = 0;
    powerhouse::ToolCallFormat m_toolFormat = powerhouse::ToolCallFormat::generic;
    uint32_t m_nVocab = 0;  // logit_bias ids are checked against it
    QString m_error;  // why the last start failed; cleared by a change of settings or model
    std::unique_ptr<Run> m_run;
    quint64 m_nextRun = 1;
    QTimer m_stopTimer;
};
