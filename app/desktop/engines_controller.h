// Settings → Engines: remote engines, i.e. OpenAI-compatible servers (vLLM, SGLang,
// llama.cpp's server, another Powerhouse's `serve`) added by URL with a display name, an
// optional API key and an optional CA file. "Test connection" lists the server's models or
// shows RemoteEngine's error (what happened, what to do); the endpoints' models feed the
// model bar, where choosing one sends the next answers there (remoteChosen, which main.cpp
// hands to ChatController::useRemote).
//
// Each endpoint may name a metrics URL (the DCGM exporter beside it, e.g.
// http://host:9400/metrics, or the engine's own /metrics): the dashboard shows its machines'
// GPUs and the engine's figures (metricsSources(), metricsSourcesChanged). The endpoint's key
// goes with it only when the metrics URL is on the endpoint's own server (same scheme, host
// and port), where a gateway may ask for it; another server never sees the key.
//
// The remote model chosen last is remembered ("remote_choice"): at start, main.cpp asks
// restoreChoice() before loading a local model; loading a local model forgets it.
//
// Storage: the endpoints (name, URL, CA file, whether a key is kept, and "metrics_url" only
// when one is given, so older saved endpoints load as they are) are one JSON setting of
// the store ("remote_endpoints"); the API key lives only in the system keyring (KeyStore).
// Adding an endpoint with a key when no keyring is reachable fails with KeyStore's message
// and keeps nothing.
//
// Network calls (list_models) run on worker threads, never the GUI thread; their results
// come back as queued calls. The destructor cancels them and joins.
//
// Thread-safety: a QObject of the GUI thread.
#pragma once

#include <QtQml/qqmlregistration.h>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QVariantList>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "key_store.h"
#include "remote_chat.h"
#include "remote_metrics_poller.h"
#include "store/store.h"

class EnginesController : public QObject {
    Q_OBJECT
    QML_ELEMENT
    QML_UNCREATABLE("made by main.cpp")
    // [{name, url, caFile, metricsUrl, hasKey, models: [ids], status: "" | "listing" | "ok" | "error",
    //   error, errorDismissed, warning (plain http to another machine)}]. `error` is why the
    // last listing, choice or remote answer failed to reach it (status "error"), shown on the
    // Models page until the next listing succeeds or the user dismisses it (errorDismissed).
    Q_PROPERTY(QVariantList endpoints READ endpoints NOTIFY changed)
    // Every endpoint's models, for the model bar: [{endpoint, model, label: "model — endpoint"}]
    Q_PROPERTY(QVariantList remoteModels READ remoteModels NOTIFY changed)
    // The outcome of the last test or add, and whether it is an error.
    Q_PROPERTY(QString message READ message NOTIFY messageChanged)
    Q_PROPERTY(bool messageIsError READ messageIsError NOTIFY messageChanged)
    Q_PROPERTY(bool busy READ busy NOTIFY messageChanged)  // a test or add is under way
    // The chosen remote model's label, or empty while answers go to the local engine.
    Q_PROPERTY(QString chosen READ chosen NOTIFY chosenChanged)

public:
    EnginesController(powerhouse::store::Store& store, QObject* parent = nullptr);
    ~EnginesController() override;

    QVariantList endpoints() const;
    QVariantList remoteModels() const;
    QString message() const { return m_message; }
    bool messageIsError() const { return m_messageIsError; }
    bool busy() const { return m_busy > 0; }
    QString chosen() const { return m_chosen; }

    // Lists the server's models with these settings (nothing is saved).
    Q_INVOKABLE void testConnection(const QString& url, const QString& apiKey, const QString& caFile);
    // Adds (or replaces, by name) an endpoint: the key goes to the keyring first, then the
    // endpoint is saved and its models listed. False when refused at once (the reason in
    // `message`); a keyring failure comes later, in `message`, and nothing is saved.
    // `metricsUrl` (optional): a Prometheus endpoint of its machines, checked here.
    Q_INVOKABLE bool addEndpoint(const QString& name, const QString& url, const QString& apiKey, const QString& caFile,
                                 const QString& metricsUrl = QString());
    // Changes the endpoint now named `original`: another name, URL, CA file or metrics URL.
    // An empty `apiKey` keeps the stored key (moved along when the name changes) unless
    // `forgetKey`; a new key replaces it. False when refused at once (why in `message`).
    Q_INVOKABLE bool editEndpoint(const QString& original, const QString& name, const QString& url,
                                  const QString& apiKey, const QString& caFile, const QString& metricsUrl,
                                  bool forgetKey = false);
    Q_INVOKABLE void removeEndpoint(const QString& name);
    // Lists every endpoint's models again.
    Q_INVOKABLE void refreshModels();
    // Lists one endpoint's models again ("Retry" beside its error).
    Q_INVOKABLE void refreshEndpoint(const QString& name) { refresh(name); }
    // Hides the endpoint's error on the Models page until it fails again.
    Q_INVOKABLE void dismissEndpointError(const QString& name);
    // A remote answer could not reach the endpoint at `url` (RemoteChat's failure): its row
    // says so, as a failed listing would.
    void answerFailed(const QString& url, const QString& message);
    // Sends the next answers to this model of this endpoint (reads its key first).
    Q_INVOKABLE void choose(const QString& endpoint, const QString& model);
    // Answers go back to the local engine (a local model was loaded); the choice is forgotten.
    void clearChoice();
    // Chooses again the remote model chosen when the app last ran, if its endpoint is still
    // there; false when there is nothing to restore (then the local model loads).
    bool restoreChoice();
    // The endpoints' metrics URLs, for the dashboard's poller.
    std::vector<MetricsSource> metricsSources() const;

signals:
    void changed();
    void messageChanged();
    void chosenChanged();
    void remoteChosen(const RemoteTarget& target);
    void metricsSourcesChanged();
    // The remote model chosen could not be stored (the model bar's choice): what failed and
    // what to do.
    void error(const QString& message);

private:
    struct Endpoint {
        QString name, url, caFile, metricsUrl;
        bool hasKey = false;
        QStringList models;
        QString status, error, warning;
        bool errorDismissed = false;
    };
    void fail(Endpoint& e, const QString& error);
    // What addEndpoint and editEndpoint check before anything changes: the name, the URL,
    // the metrics URL. False (and `message` says why) when refused.
    bool validate(const QString& name, const QString& url, const QString& metricsUrl);
    // Stores `e` in place of the endpoint named `replacing` (or adds it), saves, lists its
    // models; a chosen model of it is chosen again with the new settings.
    void keep(const QString& replacing, Endpoint e);
    // Writes `key` to the keyring under e.name, then keep(replacing, e) and `after` (the
    // message of success); on a keyring failure nothing changes and `message` says why.
    void keepWithKey(const QString& replacing, Endpoint e, const QString& key, std::function<void()> after);
    Endpoint* find(const QString& name);
    void save();
    void load();
    void say(const QString& message, bool isError);
    // Lists an endpoint's models on a worker thread; `done` gets the models or the error.
    void listModels(const QString& url, const QString& apiKey, const QString& caFile,
                    std::function<void(const QStringList& models, const QString& error)> done);
    void refresh(const QString& name);
    // Keeps `key` for the endpoint's metrics URL when it is on the endpoint's own server.
    void rememberMetricsKey(const Endpoint& e, const QString& key);
    // The endpoint's key from the keyring (empty when it has none), then `then`.
    void withKey(const Endpoint& endpoint, std::function<void(const QString& key, const QString& error)> then);

    powerhouse::store::Store& m_store;
    KeyStore m_keys;
    std::vector<Endpoint> m_endpoints;
    QString m_message;
    bool m_messageIsError = false;
    int m_busy = 0;
    QString m_chosen;  // "model — endpoint", the label the model bar shows
    QString m_chosenEndpoint, m_chosenModel;
    // Keys sent to same-origin metrics URLs, by endpoint name (read from the keyring when the
    // endpoint's models are listed).
    std::map<QString, QString> m_metricsKeys;
    std::map<quint64, std::thread> m_workers;
    quint64 m_nextWorker = 1;
    std::shared_ptr<std::atomic<bool>> m_cancelled = std::make_shared<std::atomic<bool>>(false);
};
