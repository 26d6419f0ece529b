#include "desktop_app.h"

#include <QFileInfo>
#include <QStringList>
#include <QUrl>

#include <chrono>

namespace {
// What the API server's refused requests are told to wait while a sweep runs (a sweep of
// five limits is about a minute a limit on a big model).
constexpr int kSweepRetryAfterSeconds = 60;
}  // namespace

powerhouse::Result<std::unique_ptr<DesktopApp>> DesktopApp::create(const Options& options) {
    auto store = powerhouse::store::Store::open((options.dataDir + "/powerhouse.db").toStdString());
    if (!store) return store.error();
    // Deletions are undoable until the app restarts. Not purged, they stay hidden, and the
    // next start tries again: said once the chat can show it.
    QString purgeError;
    if (auto purged = store->purge_deleted(); !purged) {
        purgeError = tr("The conversations deleted last time could not be removed for good (they stay hidden and "
                        "are tried again at the next start): %1")
                         .arg(QString::fromStdString(purged.error().message));
    }
    auto app = std::unique_ptr<DesktopApp>(new DesktopApp(std::move(*store), options));
    if (!purgeError.isEmpty()) app->m_chat->showError(purgeError);
    return app;
}

DesktopApp::DesktopApp(powerhouse::store::Store store, const Options& options)
    : m_options(options), m_store(std::move(store)) {
    const QString library = m_options.dataDir + "/models";
    m_engine = std::make_unique<EngineClient>();
    m_chat = std::make_unique<ChatController>(m_store, *m_engine);
    const powerhouse::GpuMonitorOptions monitorOptions = powerhouse::options_from_environment();
    // Power limits a crashed run left changed go back before the app's monitor reads them.
    const QString leftovers = PowerController::restoreLeftovers(m_store, monitorOptions);
    m_dashboard = std::make_unique<DashboardController>(monitorOptions);
    m_power = std::make_unique<PowerController>(m_store, m_dashboard->monitor(), leftovers);
    m_costs = std::make_unique<CostsController>(m_store);
    m_settings = std::make_unique<SettingsController>(m_store, m_options.dataDir);
    m_library = std::make_unique<LibraryController>(m_store, *m_settings, library);
    m_downloads = std::make_unique<DownloadController>(m_store, library, m_options.hubEndpoint);
    m_welcome = std::make_unique<WelcomeController>(*m_settings, *m_downloads, m_options.hubEndpoint);
    m_hub = std::make_unique<HubController>(*m_settings, m_options.hubEndpoint);
    m_transfer = std::make_unique<ConversationTransfer>(m_store);
    // The OpenAI API server on the same engine (Settings → Server).
    m_server = std::make_unique<ServerController>(m_store, *m_engine);
    // Remote engines (Settings → Engines).
    m_engines = std::make_unique<EnginesController>(m_store);
    m_sweep = std::make_unique<PowerSweepController>(m_store, *m_engine, *m_dashboard, *m_power, m_options.sweep);
    wire();
}

DesktopApp::~DesktopApp() = default;

void DesktopApp::wire() {
    ChatController& chat = *m_chat;
    DashboardController& dashboard = *m_dashboard;
    SettingsController& settings = *m_settings;
    LibraryController& library = *m_library;
    EngineClient& engine = *m_engine;

    connect(&engine, &EngineClient::loaded, &dashboard, [&dashboard](const QVariantMap& summary) {
        dashboard.setPlacement(summary.value("devices").toList());
    });
    // No model (the engine gave up after a device failed): nowhere to show, nothing running.
    connect(&engine, &EngineClient::unloaded, &dashboard, [&dashboard] { dashboard.setPlacement({}); });
    // A device failed under the model (issue 23). The chat shows the banner itself; a GPU
    // the engine found failing is marked on its card and left out of the settings until
    // restart, and once the model answers again its new place is the dashboard's.
    connect(&engine, &EngineClient::recovery, &dashboard, [&dashboard, &settings](const EngineRecovery& r) {
        if (!r.uuid.isEmpty()) {
            const QString why = tr("%1 failed: %2").arg(r.device.isEmpty() ? tr("The GPU") : r.device, r.cause);
            dashboard.markGpuFailed(r.uuid, why);
            settings.markGpuFailed(r.uuid, why);
        }
        if (r.phase == EngineRecovery::Phase::Recovered) {
            dashboard.setPlacement(r.model.value("devices").toList());
            dashboard.setModelGpus(settings.plannedGpus());
        }
    });
    // The monitor's word (a GPU lost, a fatal Xid) goes to the engine, which moves the model
    // off that GPU if it uses it; the settings leave it out from now on.
    connect(&dashboard, &DashboardController::gpuFailed, &engine,
            [&engine, &settings](const QString& uuid, const QString& text, const QString& cause, bool lost) {
                settings.markGpuFailed(uuid, text);
                engine.deviceFailed(uuid, cause, lost);
            });
    connect(&engine, &EngineClient::schedulerStats, &dashboard, &DashboardController::setSchedulerStats);
    connect(&dashboard, &DashboardController::snapshotApplied, &settings, &SettingsController::setDevices);
    // Power limits: read after every snapshot; the kept ones set again once the GPUs are known.
    connect(&dashboard, &DashboardController::snapshotApplied, m_power.get(), &PowerController::refresh);
    // The plan puts the loaded model on the GPUs in use; the dashboard measures each
    // answer's energy on them.
    connect(&engine, &EngineClient::loaded, &settings, [&settings, &dashboard](const QVariantMap& summary) {
        settings.setModel(summary.value("path").toString());
        dashboard.setModelGpus(settings.plannedGpus());
    });
    connect(&settings, &SettingsController::error, &chat, &ChatController::showError);
    chat.setAnswerObserver([&dashboard](quint64 id) { dashboard.beginAnswer(id); },
                           [&dashboard](quint64 id, powerhouse::store::MessageStats& stats) {
                               const DashboardController::AnswerEnd end = dashboard.endAnswer(id);
                               stats.energy_joules = end.joules;
                               stats.throttle = end.throttle.toStdString();
                           });
    const auto price = [this, &chat, &settings] {
        chat.messages()->setElectricityPrice(settings.electricityPrice());
        m_costs->setElectricityPrice(settings.electricityPrice());
    };
    connect(&settings, &SettingsController::applied, &chat, price);
    price();
    // Costs: the answers' measured energy and speed, the loaded model's bytes per token.
    connect(&chat, &ChatController::answerMeasured, m_costs.get(), &CostsController::recordAnswer);
    connect(&engine, &EngineClient::loaded, m_costs.get(), &CostsController::setModel);
    connect(&engine, &EngineClient::unloaded, m_costs.get(), [this] { m_costs->setModel({}); });
    connect(&engine, &EngineClient::recovery, m_costs.get(), [this](const EngineRecovery& r) {
        if (r.phase == EngineRecovery::Phase::Recovered) m_costs->setModel(r.model);
    });
    // The efficiency sweep runs the model loaded here (not a remote engine's).
    connect(&engine, &EngineClient::loaded, m_sweep.get(), &PowerSweepController::setModel);
    connect(&engine, &EngineClient::unloaded, m_sweep.get(), [this] { m_sweep->setModel({}); });
    connect(&engine, &EngineClient::recovery, m_sweep.get(), [this](const EngineRecovery& r) {
        if (r.phase == EngineRecovery::Phase::Recovered) m_sweep->setModel(r.model);
    });
    // The sweep measures the model alone: the API server's new requests wait it out (503 with
    // the reason and Retry-After), as the chat's composer does.
    connect(m_sweep.get(), &PowerSweepController::stateChanged, m_server.get(), [this] {
        if (m_sweep->running() && m_server->heldReason().isEmpty()) {
            m_server->holdRequests(tr("the desktop app is measuring the GPUs at several power limits (an efficiency "
                                      "sweep), which other requests would skew; try again when it ends"),
                                   kSweepRetryAfterSeconds);
        } else if (!m_sweep->running() && !m_server->heldReason().isEmpty()) {
            m_server->releaseRequests();
        }
    });
    dashboard.start();
    connect(m_power.get(), &PowerController::error, &chat, &ChatController::showError);
    m_power->applySettings();

    connect(&library, &LibraryController::error, &chat, &ChatController::showError);
    // Guessing tokens from the conversation (Settings → General) applies to the next answer.
    chat.setGuessTokens(settings.guessTokens());
    connect(&settings, &SettingsController::guessTokensChanged, &chat,
            [&chat, &settings] { chat.setGuessTokens(settings.guessTokens()); });
    connect(&engine, &EngineClient::loaded, &library,
            [&library](const QVariantMap& summary) { library.setLoadedPath(summary.value("path").toString()); });
    // A model that fails to load says why on its card on the Models page too (where it is
    // chosen again), until it loads or the user dismisses it; the chat's line says it as well.
    connect(&engine, &EngineClient::loadFailed, &library,
            [this, &library](const QString& message) { library.setLoadError(m_current, message); });
    if (m_options.rescan) library.rescan();
    connect(&library, &LibraryController::downloadRequested, m_downloads.get(),
            [this](const QUrl& url) { m_downloads->add(url); });
    // A finished download joins the library first, then may be a suggestion to load.
    connect(m_downloads.get(), &DownloadController::finished, &library, &LibraryController::addDownloaded);
    connect(m_downloads.get(), &DownloadController::error, &chat, &ChatController::showError);
    connect(m_downloads.get(), &DownloadController::finished, m_welcome.get(),
            [this](const QString& path, const QString&) { m_welcome->downloadFinished(path); });
    connect(m_welcome.get(), &WelcomeController::loadRequested, this, [this](const QString& path) { load(path); });
    // Models found on Hugging Face are downloaded like dropped links, each part with the
    // sha256 the Hub lists for it; the search's fit estimates follow the GPUs.
    connect(&dashboard, &DashboardController::snapshotApplied, m_hub.get(), &HubController::setDevices);
    connect(m_hub.get(), &HubController::downloadRequested, m_downloads.get(),
            [this](const QUrl& url, const QString& sha256) { m_downloads->add(url, sha256.toStdString()); });
    // The Hugging Face token (Settings, kept in the keyring) goes with downloads from the Hub too.
    connect(m_hub.get(), &HubController::tokenChanged, m_downloads.get(), &DownloadController::setHubToken);
    m_hub->loadToken();

    // Imported conversations join the list, and the first of them opens.
    // Exports and imports wait for the chat's writes first (they use the store directly).
    m_transfer->setBeforeRead([&chat] { chat.flushWrites(); });
    connect(m_transfer.get(), &ConversationTransfer::imported, &chat, [&chat](qint64 firstId) {
        chat.conversations()->reload();
        if (firstId != 0) chat.selectConversation(firstId);
    });

    m_server->setTelemetry([&dashboard] { return dashboard.latestSnapshot(); });
    // Their metrics URLs feed the dashboard's remote GPUs (read on the poller's thread).
    auto feedMetrics = [this] { m_dashboard->remote()->setSources(m_engines->metricsSources()); };
    connect(m_engines.get(), &EnginesController::metricsSourcesChanged, &dashboard, feedMetrics);
    feedMetrics();
    // Choosing a remote model in the model bar sends the next answers there; loading a
    // local model takes them back.
    connect(m_engines.get(), &EnginesController::remoteChosen, &chat, &ChatController::useRemote);
    connect(m_engines.get(), &EnginesController::error, &chat, &ChatController::showError);
    // A remote answer that could not reach its server marks the endpoint on the Models page too.
    connect(&chat, &ChatController::remoteAnswerFailed, m_engines.get(), &EnginesController::answerFailed);
    connect(&engine, &EngineClient::modelGoing, m_engines.get(), &EnginesController::clearChoice);
    m_engines->refreshModels();

    // Applying the settings reloads the model with them; the Models page loads another.
    connect(&settings, &SettingsController::applied, this, [this] {
        if (!m_current.isEmpty()) load(m_current, true);
    });
    connect(&library, &LibraryController::loadRequested, this, [this](const QString& path) { load(path, true); });
}

QVariantMap DesktopApp::qmlProperties() {
    return {{QStringLiteral("controller"), QVariant::fromValue(m_chat.get())},
            {QStringLiteral("dashboard"), QVariant::fromValue(m_dashboard.get())},
            {QStringLiteral("settings"), QVariant::fromValue(m_settings.get())},
            {QStringLiteral("library"), QVariant::fromValue(m_library.get())},
            {QStringLiteral("downloads"), QVariant::fromValue(m_downloads.get())},
            {QStringLiteral("server"), QVariant::fromValue(m_server.get())},
            {QStringLiteral("engines"), QVariant::fromValue(m_engines.get())},
            {QStringLiteral("welcome"), QVariant::fromValue(m_welcome.get())},
            {QStringLiteral("hub"), QVariant::fromValue(m_hub.get())},
            {QStringLiteral("transfer"), QVariant::fromValue(m_transfer.get())},
            {QStringLiteral("power"), QVariant::fromValue(m_power.get())},
            {QStringLiteral("costs"), QVariant::fromValue(m_costs.get())},
            {QStringLiteral("sweep"), QVariant::fromValue(m_sweep.get())}};
}

void DesktopApp::load(const QString& path, bool fromSettings) {
    powerhouse::ModelOptions options = m_settings->modelOptions();
    if (!fromSettings && m_options.contextOverride > 0) options.n_ctx = m_options.contextOverride;
    if (const auto& fault = m_options.fault) {
        options.fail_device = fault->device;
        options.fail_after = fault->after;
        options.fail_hangs = fault->hangs;
        // A CPU step has no deadline of its own: without one a hung device would hang the app.
        if (fault->hangs) options.step_deadline = std::chrono::seconds(2);
    }
    m_current = path;
    const powerhouse::Result<void> remembered = m_store.set_setting("model_path", path.toStdString());
    m_chat->loadModel(path, options, m_settings->recovery());
    // It loads all the same; only the next start does not know it.
    if (!remembered) {
        m_chat->showError(tr("%1 is loading, but it could not be kept as the model to open at the next start: %2")
                              .arg(QFileInfo(path).fileName(), QString::fromStdString(remembered.error().message)));
    }
}

powerhouse::Result<DesktopApp::Options::FaultInjection> DesktopApp::parseFaultInjection(const QString& text) {
    const QStringList parts = text.split(QLatin1Char(':'));
    Options::FaultInjection fault;
    bool deviceOk = false, afterOk = false;
    if (parts.size() >= 2) {
        fault.device = parts[0].toInt(&deviceOk);
        fault.after = parts[1].toUInt(&afterOk);
    }
    const bool hangOk = parts.size() == 2 || (parts.size() == 3 && parts[2] == QLatin1String("hang"));
    if (!deviceOk || fault.device < 0 || !afterOk || !hangOk) {
        return powerhouse::make_error(
            powerhouse::ErrorCode::invalid_argument,
            QStringLiteral("\"%1\" is not DEVICE:AFTER or DEVICE:AFTER:hang (for example \"0:5\": device 0 fails "
                           "after 5 steps)")
                .arg(text)
                .toStdString());
    }
    fault.hangs = parts.size() == 3;
    return fault;
}

QString DesktopApp::loadAtStart(const QString& given) {
    // A model named on the command line wins; else the remote model chosen when the app last
    // ran, if there was one; else the local model loaded last. With none, nothing loads and
    // the welcome view shows (it offers the small default model when scripts/run fetched it).
    QString model = given;
    if (model.isEmpty()) {
        if (m_engines->restoreChoice()) return {};
        if (auto last = m_store.setting("model_path");
            last && *last && QFileInfo::exists(QString::fromStdString(**last))) {
            model = QString::fromStdString(**last);
        }
    }
    if (!model.isEmpty()) load(model, false);
    return model;
}
