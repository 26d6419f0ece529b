#include "server_controller.h"

#include <QMetaObject>
#include <QRandomGenerator>
#include <QVariantMap>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <utility>

#include "api_server.h"
#include "engine_client.h"

using powerhouse::server::ApiServer;

namespace {

constexpr const char* kEnabledKey = "server_enabled";
constexpr const char* kHostKey = "server_host";
constexpr const char* kPortKey = "server_port";
constexpr const char* kApiKeyKey = "server_api_key";

// 0.0.0.0 and :: listen on every network: this computer reaches them on its loopback address.
bool isWildcard(const QString& host) {
    return host == QLatin1String("0.0.0.0") || host == QLatin1String("::");
}

// Why listening on host:port would fail (an errno, or -1: not an address), 0 when it would
// not. The probe binds as a listener that shares nothing would, so a port that another program
// listens on is found even when that program allows port sharing (as cpp-httplib does).
int bindProblem(const QString& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    if (getaddrinfo(host.toStdString().c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr) return -1;
    int problem = -1;
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            problem = errno;
            continue;
        }
        const int yes = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // connections closing on it are no obstacle
        const bool bound = bind(fd, a->ai_addr, a->ai_addrlen) == 0;
        problem = bound ? 0 : errno;
        close(fd);
        if (bound) break;
    }
    freeaddrinfo(found);
    return problem;
}

// A string as a JSON (and Python) string literal.
QString quoted(const QString& text) {
    QString out = QStringLiteral("\"");
    for (const QChar c : text) {
        if (c == QLatin1Char('"') || c == QLatin1Char('\\')) {
            out += QLatin1Char('\\');
            out += c;
        } else if (c.unicode() < 0x20) {
            out += QStringLiteral("\\u%1").arg(static_cast<uint>(c.unicode()), 4, 16, QLatin1Char('0'));
        } else {
            out += c;
        }
    }
    out += QLatin1Char('"');
    return out;
}

// The request id an event belongs to (0: none, as for scheduler and load events).
uint64_t requestOf(const powerhouse::EngineEvent& event) {
    if (const auto* t = std::get_if<powerhouse::TokenEvent>(&event)) return t->request_id;
    if (const auto* d = std::get_if<powerhouse::DoneEvent>(&event)) return d->request_id;
    if (const auto* e = std::get_if<powerhouse::ErrorEvent>(&event)) return e->request_id;
    if (const auto* m = std::get_if<powerhouse::EmbeddingsEvent>(&event)) return m->request_id;
    return 0;
}

}  // namespace

ServerController::ServerController(powerhouse::store::Store& store, EngineClient& engine, QObject* parent)
    : QObject(parent), m_store(store), m_engine(engine), m_shared(std::make_shared<Shared>()) {
    const auto text = [this](const char* key) -> QString {
        auto value = m_store.setting(key);
        return value && *value ? QString::fromStdString(**value) : QString();
    };
    m_enabled = text(kEnabledKey) == QLatin1String("1");
    const QString host = text(kHostKey).trimmed();
    if (!host.isEmpty()) m_host = host;
    bool ok = false;
    const int port = text(kPortKey).toInt(&ok);
    if (ok && port >= 0 && port <= 65535) m_port = port;
    m_apiKey = text(kApiKeyKey);

    m_stopTimer.setSingleShot(true);
    connect(&m_stopTimer, &QTimer::timeout, this, &ServerController::retryStop);

    // The model the server would serve. A load or unload stops the server before it is
    // submitted, so that the server's requests never meet the next model.
    connect(&m_engine, &EngineClient::modelGoing, this, [this](const QString& next) {
        m_model = next.isEmpty() ? Model::none : Model::loading;
        m_modelPath = next;
        m_modelId = next.isEmpty() ? QString()
                                   : QString::fromStdString(std::filesystem::path(next.toStdString()).stem().string());
        m_nCtx = 0;
        m_nVocab = 0;
        m_error.clear();  // the next model gets a fresh start
        update();
    });
    connect(&m_engine, &EngineClient::loaded, this, [this](const QVariantMap& summary) {
        m_model = Model::ready;
        m_modelPath = summary.value("path").toString();
        // The file's name without .gguf, as `powerhouse-cli serve` names it.
        m_modelId = QString::fromStdString(std::filesystem::path(m_modelPath.toStdString()).stem().string());
        m_nCtx = summary.value("nCtx").toUInt();
        m_nVocab = summary.value("nVocab").toUInt();
        // From the template the model chats with, which a chosen template file replaces.
        m_toolFormat = static_cast<powerhouse::ToolCallFormat>(summary.value("toolFormat").toInt());
        m_error.clear();  // a new model: try again
        update();
    });
    connect(&m_engine, &EngineClient::loadFailed, this, [this] {
        m_model = Model::none;
        m_modelPath.clear();
        m_modelId.clear();
        update();
    });
    connect(&m_engine, &EngineClient::unloaded, this, [this] {
        m_model = Model::none;
        m_modelPath.clear();
        m_modelId.clear();
        update();
    });

    // Runs on EngineClient's reader thread, for every event: a server request's event goes to
    // the server (or is dropped when its server is gone) and never to the chat.
    std::shared_ptr<Shared> shared = m_shared;
    m_engine.setEventHook([shared, this](const powerhouse::EngineEvent& event) {
        std::shared_ptr<ApiServer> server;
        {
            const std::lock_guard lock(shared->mutex);
            server = shared->server;
        }
        if (server ? !server->deliver(event) : !ApiServer::owns_request(requestOf(event))) return false;
        if (server && (std::holds_alternative<powerhouse::DoneEvent>(event) ||
                       std::holds_alternative<powerhouse::ErrorEvent>(event) ||
                       std::holds_alternative<powerhouse::EmbeddingsEvent>(event))) {
            ++shared->served;
            QMetaObject::invokeMethod(
                this, [this] { emit requestsServedChanged(); }, Qt::QueuedConnection);
        }
        return true;
    });
}

ServerController::~ServerController() {
    if (m_run) {
        // The requests in flight are cancelled and get their last events from EngineClient's
        // reader thread, so the server's thread ends within a step or two of the engine.
        m_run->server->stop();
        int waitedMs = 0;
        while (!m_run->ended) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            waitedMs += 10;
            if (waitedMs % 200 == 0) m_run->server->stop();  // a stop that came before it listened
        }
        finishRun();
    }
    m_engine.setEventHook({});  // waits for a call in progress; none after
}

bool ServerController::keyRequired() const {
    return !powerhouse::server::is_loopback(m_host.toStdString());
}

QString ServerController::state() const {
    if (m_run) {
        if (m_run->stopping) return QStringLiteral("stopping");
        return m_run->listening ? QStringLiteral("running") : QStringLiteral("starting");
    }
    if (!m_enabled) return QStringLiteral("off");
    if (!error().isEmpty()) return QStringLiteral("error");
    if (m_model == Model::loading) return QStringLiteral("loading");
    if (m_model == Model::none) return QStringLiteral("no_model");
    return QStringLiteral("off");
}

bool ServerController::running() const {
    return m_run && m_run->listening && !m_run->stopping;
}

QString ServerController::statusText() const {
    const QString s = state();
    if (s == QLatin1String("running")) {
        return tr("Running: serving %1 at %2.").arg(m_modelId, address());
    }
    if (s == QLatin1String("starting")) return tr("Starting…");
    if (s == QLatin1String("stopping")) return tr("Stopping: ending the requests in flight…");
    if (s == QLatin1String("error")) return error();
    if (s == QLatin1String("loading")) return tr("Not running: waiting for the model to finish loading.");
    if (s == QLatin1String("no_model"))
        return tr("Not running: load a model first. The server serves the loaded model.");
    return tr("Stopped.");
}

QString ServerController::error() const {
    const QString problem = settingsProblem();
    return problem.isEmpty() ? m_error : problem;
}

int ServerController::boundPort() const {
    return m_run && m_run->listening ? m_run->port : 0;
}

QString ServerController::address() const {
    QString host = m_run ? m_run->config.host : m_host;
    const int port = m_run && m_run->listening ? m_run->port : (m_run ? m_run->config.port : m_port);
    if (port == 0 || host.isEmpty()) return {};
    if (isWildcard(host)) host = host == QLatin1String("::") ? QStringLiteral("::1") : QStringLiteral("127.0.0.1");
    if (host.contains(QLatin1Char(':'))) host = QStringLiteral("[%1]").arg(host);
    return QStringLiteral("http://%1:%2").arg(host).arg(port);
}

QString ServerController::curlExample() const {
    const QString base = address().isEmpty() ? QStringLiteral("http://127.0.0.1:PORT") : address();
    const QString model = m_modelId.isEmpty() ? QStringLiteral("MODEL") : m_modelId;
    QString body =
        QStringLiteral(R"({"model": %1, "messages": [{"role": "user", "content": "Hello!"}]})").arg(quoted(model));
    body.replace(u'\'', QStringLiteral("'\\''"));  // inside the shell's single quotes
    QString out =
        QStringLiteral("curl %1/v1/chat/completions \\\n  -H \"Content-Type: application/json\" \\\n").arg(base);
    if (hasApiKey()) out += QStringLiteral("  -H \"Authorization: Bearer $POWERHOUSE_API_KEY\" \\\n");
    return out + QStringLiteral("  -d '%1'").arg(body);
}

QString ServerController::pythonExample() const {
    const QString base = address().isEmpty() ? QStringLiteral("http://127.0.0.1:PORT") : address();
    const QString model = m_modelId.isEmpty() ? QStringLiteral("MODEL") : m_modelId;
    QString out;
    if (hasApiKey()) out += QStringLiteral("import os\n");
    out += QStringLiteral("from openai import OpenAI\n\n");
    // The openai package wants a key even where none is needed.
    const QString key = hasApiKey() ? QStringLiteral("os.environ[\"POWERHOUSE_API_KEY\"]") : QStringLiteral("\"none\"");
    out += QStringLiteral("client = OpenAI(base_url=%1, api_key=%2)\n").arg(quoted(base + QStringLiteral("/v1")), key);
    out += QStringLiteral(
               "reply = client.chat.completions.create(\n    model=%1,\n"
               "    messages=[{\"role\": \"user\", \"content\": \"Hello!\"}],\n)\n"
               "print(reply.choices[0].message.content)")
               .arg(quoted(model));
    return out;
}

int ServerController::requestsServed() const {
    return m_shared->served.load();
}

void ServerController::setEnabled(bool enabled) {
    if (enabled == m_enabled) return;
    m_enabled = enabled;
    m_error.clear();
    save(kEnabledKey, enabled ? QStringLiteral("1") : QStringLiteral("0"));
    update();
}

void ServerController::setHost(const QString& host) {
    const QString h = host.trimmed();
    if (h == m_host) return;
    m_host = h;
    m_error.clear();
    save(kHostKey, h);
    update();
}

void ServerController::setPort(int port) {
    if (port == m_port || port < 0 || port > 65535) return;
    m_port = port;
    m_error.clear();
    save(kPortKey, QString::number(port));
    update();
}

void ServerController::generateApiKey() {
    quint32 words[8];  // 32 bytes
    QRandomGenerator::system()->fillRange(words);
    m_apiKey = QString::fromLatin1(QByteArray(reinterpret_cast<const char*>(words), sizeof words).toHex());
    m_shownKey = m_apiKey;
    m_error.clear();
    save(kApiKeyKey, m_apiKey);
    update();
}

void ServerController::removeApiKey() {
    if (m_apiKey.isEmpty()) return;
    m_apiKey.clear();
    m_shownKey.clear();
    m_error.clear();
    save(kApiKeyKey, {});
    update();
}

void ServerController::hideApiKey() {
    if (m_shownKey.isEmpty()) return;
    m_shownKey.clear();
    emit changed();
}

void ServerController::save(const char* key, const QString& value) {
    // The message names the setting, never its value (the key is never logged).
    if (auto saved = m_store.set_setting(key, value.toStdString()); !saved) {
        m_error = tr("The server's settings could not be saved: %1").arg(QString::fromStdString(saved.error().message));
    }
}

ServerController::Config ServerController::config() const {
    return Config{m_host, m_port, m_apiKey, m_modelPath, m_nCtx};
}

QString ServerController::settingsProblem() const {
    if (!m_enabled) return {};
    if (m_host.isEmpty()) {
        return tr("Give an address to listen on: 127.0.0.1 for this computer only, or 0.0.0.0 for every network.");
    }
    if (keyRequired() && m_apiKey.isEmpty()) {
        return tr("Serving on %1 lets other computers use the model: generate an API key first, or serve on "
                  "127.0.0.1 (this computer only).")
            .arg(m_host);
    }
    return {};
}

QString ServerController::bindError() const {
    switch (const int problem = bindProblem(m_host, m_port)) {
        case 0:
            return {};
        case EADDRINUSE:
            return tr("Port %1 is in use by another program. Choose another port (0 picks a free one), or quit the "
                      "program that uses it.")
                .arg(m_port);
        case EADDRNOTAVAIL:
            return tr("%1 is not an address of this computer. Use 127.0.0.1 (this computer only) or 0.0.0.0 (every "
                      "network).")
                .arg(m_host);
        case EACCES:
            return tr("Ports below 1024 need administrator rights: choose a port from 1024 up, such as 8080.");
        case -1:
            return tr("%1 is not an address this computer can listen on. Use 127.0.0.1 (this computer only) or "
                      "0.0.0.0 (every network).")
                .arg(m_host);
        default:
            return tr("Cannot listen on %1 port %2: %3.")
                .arg(m_host)
                .arg(m_port)
                .arg(QString::fromLocal8Bit(std::strerror(problem)));
    }
}

void ServerController::update() {
    const bool wanted = m_enabled && m_model == Model::ready && m_error.isEmpty() && settingsProblem().isEmpty();
    if (m_run) {
        // Stopped or restarted with the new settings; onEnded() comes back here.
        if (!m_run->stopping && (!wanted || !(m_run->config == config()))) stop();
    } else if (wanted) {
        m_error = bindError();
        if (m_error.isEmpty()) start();
    }
    emit changed();
}

void ServerController::start() {
    powerhouse::server::ServerOptions options;
    options.host = m_host.toStdString();
    options.port = m_port;
    options.api_key = m_apiKey.toStdString();
    options.model_id = m_modelId.toStdString();
    options.n_vocab = m_nVocab;
    options.tool_format = m_toolFormat;
    options.telemetry = m_telemetry;
    options.read_engine_events = false;  // EngineClient reads them and hands them over (the hook)
    m_run = std::make_unique<Run>();
    Run& run = *m_run;
    run.id = m_nextRun++;
    run.config = config();
    run.server = std::make_shared<ApiServer>(m_engine.engine(), m_nCtx, std::move(options));
    if (!m_held.isEmpty()) run.server->hold(m_held.toStdString(), std::chrono::seconds(m_heldRetrySeconds));
    {
        const std::lock_guard lock(m_shared->mutex);
        m_shared->server = run.server;
    }
    run.thread = std::thread([this, id = run.id, server = run.server, ended = &run.ended] {
        powerhouse::Result<void> served = server->serve([this, id](int port) {
            QMetaObject::invokeMethod(
                this, [this, id, port] { onListening(id, port); }, Qt::QueuedConnection);
        });
        const QString error = served ? QString() : QString::fromStdString(served.error().message);
        *ended = true;
        QMetaObject::invokeMethod(
            this, [this, id, error] { onEnded(id, error); }, Qt::QueuedConnection);
    });
}

void ServerController::stop() {
    m_run->stopping = true;
    m_run->server->stop();
    m_run->stopDelayMs = 100;
    m_stopTimer.start(m_run->stopDelayMs);
}

// A stop() that came between the server binding and accepting is lost (cpp-httplib only
// stops a server that runs): ask again, less and less often, until the thread ends.
void ServerController::retryStop() {
    if (!m_run || m_run->ended) return;
    m_run->server->stop();
    m_run->stopDelayMs = std::min(m_run->stopDelayMs * 2, 2000);
    m_stopTimer.start(m_run->stopDelayMs);
}

void ServerController::holdRequests(const QString& reason, int retryAfterSeconds) {
    m_held = reason;
    m_heldRetrySeconds = retryAfterSeconds;
    if (m_run) m_run->server->hold(reason.toStdString(), std::chrono::seconds(retryAfterSeconds));
}

void ServerController::releaseRequests() {
    m_held.clear();
    if (m_run) m_run->server->release();
}

void ServerController::onListening(quint64 run, int port) {
    if (!m_run || m_run->id != run) return;
    m_run->listening = true;
    m_run->port = port;
    emit changed();
}

void ServerController::onEnded(quint64 run, const QString& error) {
    if (!m_run || m_run->id != run) return;
    const bool stopping = m_run->stopping;
    finishRun();
    if (!error.isEmpty() && !stopping) m_error = tr("The server could not start: %1").arg(error);
    update();
}

void ServerController::finishRun() {
    m_stopTimer.stop();
    m_run->thread.join();
    {
        const std::lock_guard lock(m_shared->mutex);
        m_shared->server.reset();
    }
    m_run.reset();
}
