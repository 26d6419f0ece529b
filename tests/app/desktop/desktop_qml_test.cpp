// Qt Quick Tests of the views (tests/app/desktop/qml/tst_*.qml), offscreen, on the real
// controllers, each with a store in a temporary folder: testController has no model
// loaded (the views' behaviour without one is part of what is tested), testChat has the
// SmolLM2 test model (greedy, short answers); testSettings and testDashboard see two
// simulated GPUs, and the dashboard shows the batching of testChat's engine; testServer is
// the API server's controller on testController's engine (no model, so it never listens);
// testWelcome plans the suggested models on testSettings' GPUs (its downloads would go to
// a closed port: the QML tests never start one); testHub searches the loopback Hub
// (tests/app/library/hub_test_server.py) and hands its downloads to testDownloads;
// testRemote holds remote machines read from the DCGM exporter's and vLLM's sample files
// (tests/data/remote) and a source that failed, applied without a network; testEngines is
// Settings → Engines' controller on its own store, with testFaultServer the base URL of the
// fault-injecting OpenAI server (tests/app/remote/openai_fault_server.py) on 127.0.0.1.
// testRecovery stands in for the engine and the GPU monitor in the device-failure views: a
// recovery phase as testController's engine client reports it, a GPU found failing on
// testDashboard and testSettings. testPower sets testDashboard's GPUs' power limits (GPU 1
// refuses, as without root); testCosts holds one measured answer and a model. testLocked
// has settings and a chat on a store of their own that lock() holds from a second
// connection, as another program would.
// The setup hands them to the tests as context properties of the test engine (tests only;
// the app passes them as required properties of its window).
#include <QCoreApplication>
#include <QDropEvent>
#include <QMimeData>
#include <QQmlContext>
#include <QQmlEngine>
#include <QQuickWindow>
#include <QTemporaryDir>
#include <QtQml/QQmlExtensionPlugin>
#include <QtQuickTest>

#include <SQLiteCpp/SQLiteCpp.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "chat_controller.h"
#include "costs_controller.h"
#include "dashboard_controller.h"
#include "download_controller.h"
#include "engine_client.h"
#include "engines_controller.h"
#include "http_test_server.h"
#include "hub_controller.h"
#include "hub_test_server.h"
#include "library_controller.h"
#include "power_controller.h"
#include "power_sweep_controller.h"
#include "powerhouse/synth.h"
#include "remote/prometheus.h"
#include "remote_gpu_model.h"
#include "server_controller.h"
#include "settings_controller.h"
#include "store/store.h"
#include "support/test_support.h"
#include "welcome_controller.h"

Q_IMPORT_QML_PLUGIN(PowerhousePlugin)

// Drops files on a window as a file manager does: drag enter, move and drop events carrying
// a uri-list, sent to the window (QML's own Drag attached property carries no data for
// drags inside the window, and a system drag would need a real pointer).
class DropHelper : public QObject {
    Q_OBJECT

public:
    // The action the window accepted (0: ignored).
    Q_INVOKABLE int drop(QObject* target, qreal x, qreal y, const QList<QUrl>& urls) {
        auto* window = qobject_cast<QQuickWindow*>(target);
        if (window == nullptr) return -1;
        QMimeData data;
        data.setUrls(urls);
        const QPointF at(x, y);
        const Qt::DropActions actions = Qt::CopyAction | Qt::LinkAction;
        QDragEnterEvent enter(at.toPoint(), actions, &data, Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(window, &enter);
        QDragMoveEvent move(at.toPoint(), actions, &data, Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(window, &move);
        QDropEvent dropped(at, actions, &data, Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(window, &dropped);
        return dropped.isAccepted() ? static_cast<int>(dropped.dropAction()) : 0;
    }
};

// What a device failure looks like to the views, without one: EngineClient's recovery
// signal (emitted as its reader would), and the failing GPU as the dashboard and the
// settings hear of it.
class RecoveryHelper : public QObject {
    Q_OBJECT

public:
    void use(EngineClient* engine, DashboardController* dashboard, SettingsController* settings) {
        m_engine = engine;
        m_dashboard = dashboard;
        m_settings = settings;
    }
    // phase: 0 reloading, 1 recovered, 2 gave up, 3 stopped (EngineRecovery::Phase's order).
    Q_INVOKABLE void announce(int phase, const QString& message, const QString& device) {
        EngineRecovery r;
        r.phase = static_cast<EngineRecovery::Phase>(phase);
        r.message = message;
        r.model = {{QStringLiteral("device"), device}};
        emit m_engine->recovery(r);
    }
    Q_INVOKABLE void failGpu(const QString& uuid, const QString& why) {
        m_dashboard->markGpuFailed(uuid, why);
        m_settings->markGpuFailed(uuid, why);
    }

private:
    EngineClient* m_engine = nullptr;
    DashboardController* m_dashboard = nullptr;
    SettingsController* m_settings = nullptr;
};

// What a loaded model's summary tells the views, without one: EngineClient's loaded signal
// (emitted as its reader would) with the fields the test gives, such as the chat template's
// switches (hasThinkingSwitch, hasReasoningEffort).
class ModelHelper : public QObject {
    Q_OBJECT

public:
    void use(EngineClient* engine) { m_engine = engine; }
    Q_INVOKABLE void announceLoaded(const QVariantMap& summary) { emit m_engine->loaded(summary); }
    // What DesktopApp does when a load fails: the model's card says why.
    Q_INVOKABLE void failLoad(LibraryController* library, const QString& path, const QString& message) {
        library->setLoadError(path, message);
    }

private:
    EngineClient* m_engine = nullptr;
};

// Files in testLibrary's folder and its store's model records, for the Models page's tests:
// a copy of the test model, a synthetic embedding model, a file spoilt in place (the same row, no longer usable), and
// the store refusing the models' records (a refresh that fails), as another program's trigger or a full disk would.
class FilesHelper : public QObject {
    Q_OBJECT

public:
    void use(const QString& folder, const QString& database) {
        m_folder = folder;
        m_database = database.toStdString();
    }
    // The test model copied into the library folder as `name`; its path.
    Q_INVOKABLE QString copyModel(const QString& name) {
        std::filesystem::create_directories(m_folder.toStdString());
        const std::filesystem::path to = std::filesystem::path(m_folder.toStdString()) / name.toStdString();
        std::filesystem::remove(to);
        std::filesystem::copy_file(powerhouse::test::test_model_path(), to);
        return QString::fromStdString(to.string());
    }
    // A synthetic embedding model (bge-small, a BERT encoder, 2 layers) in the library
    // folder as `name`; its path ("" if it could not be made: the test then fails on it).
    Q_INVOKABLE QString synthesizeEmbeddingModel(const QString& name) {
        std::filesystem::create_directories(m_folder.toStdString());
        powerhouse::SynthOptions so;
        so.preset = "bge-small";
        so.type = "q8_0";
        so.n_layer = 2;
        so.threads = 2;
        so.overwrite = true;
        so.output = std::filesystem::path(m_folder.toStdString()) / name.toStdString();
        if (auto made = powerhouse::synthesize_model(so); !made) {
            qWarning("synthesize_model: %s", made.error().message.c_str());
            return {};
        }
        return QString::fromStdString(so.output.string());
    }
    // The file at `path` replaced by a few bytes that are no model.
    Q_INVOKABLE void spoil(const QString& path, const QString& text) {
        std::filesystem::create_directories(std::filesystem::path(path.toStdString()).parent_path());
        std::filesystem::remove(path.toStdString());
        powerhouse::test::write_file(path.toStdString(), text.toStdString());
    }
    Q_INVOKABLE void remove(const QString& path) { std::filesystem::remove(path.toStdString()); }
    Q_INVOKABLE void refuseModelWrites(const QString& why) {
        SQLite::Database db(m_database, SQLite::OPEN_READWRITE);
        for (const char* op : {"INSERT", "UPDATE"}) {
            db.exec(std::string("CREATE TRIGGER IF NOT EXISTS refuse_") + op + "_models BEFORE " + op +
                    " ON models BEGIN SELECT RAISE(ABORT, '" + why.toStdString() + "'); END");
        }
    }
    Q_INVOKABLE void allowModelWrites() {
        SQLite::Database db(m_database, SQLite::OPEN_READWRITE);
        db.exec("DROP TRIGGER IF EXISTS refuse_INSERT_models");
        db.exec("DROP TRIGGER IF EXISTS refuse_UPDATE_models");
    }

private:
    QString m_folder;
    std::string m_database;
};

// Another program holding the database's write lock (a second Powerhouse, powerhouse-cli, a
// database browser), for the views' errors: a store of its own with a short busy timeout,
// the settings and a chat on it (one conversation, "Before the lock"), and lock()/unlock()
// taking and dropping the lock from a second connection.
class LockHelper : public QObject {
    Q_OBJECT
    Q_PROPERTY(SettingsController* settings READ settings CONSTANT)
    Q_PROPERTY(ChatController* chat READ chat CONSTANT)

public:
    void open(const QString& folder, EngineClient& engine) {
        m_chat.reset();
        m_settings.reset();
        m_store.reset();
        m_path = (folder + "/locked.db").toStdString();
        powerhouse::store::StoreOptions options;
        options.busy_timeout_ms = 100;
        auto store = powerhouse::store::Store::open(m_path, options);
        if (!store) qFatal("store: %s", store.error().message.c_str());
        m_store = std::make_unique<powerhouse::store::Store>(std::move(store).value());
        if (!m_store->create_conversation("Before the lock")) qFatal("could not create a conversation");
        m_settings = std::make_unique<SettingsController>(*m_store, folder);
        m_chat = std::make_unique<ChatController>(*m_store, engine);
    }
    void close() {
        m_lock.reset();
        m_chat.reset();
        m_settings.reset();
        m_store.reset();
    }
    SettingsController* settings() const { return m_settings.get(); }
    ChatController* chat() const { return m_chat.get(); }
    Q_INVOKABLE void lock() {
        m_lock = std::make_unique<SQLite::Database>(m_path, SQLite::OPEN_READWRITE);
        m_lock->exec("BEGIN IMMEDIATE");
    }
    Q_INVOKABLE void unlock() {
        if (m_lock) m_lock->exec("ROLLBACK");
        m_lock.reset();
    }

private:
    std::string m_path;
    std::unique_ptr<powerhouse::store::Store> m_store;
    std::unique_ptr<SettingsController> m_settings;
    std::unique_ptr<ChatController> m_chat;
    std::unique_ptr<SQLite::Database> m_lock;
};

class Setup : public QObject {
    Q_OBJECT

public slots:
    void qmlEngineAvailable(QQmlEngine* engine) {
        engine->addImportPath(QStringLiteral("qrc:/"));  // the Powerhouse module's QML files
        // Called once per test file: the server's controller of the last file goes before the
        // engine client it hooks into is replaced.
        m_server.reset();
        m_sweep.reset();  // before the engine, dashboard and power controller it uses
        m_power.reset();  // before the dashboard whose monitor it sets limits on is replaced
        m_welcome.reset();  // before the settings and downloads it plans with are replaced
        m_hub.reset();
        m_hubDownloads.reset();
        m_locked.close();  // before the engine client its chat listens to is replaced
        auto store = powerhouse::store::Store::open((m_dir.path() + "/powerhouse.db").toStdString());
        if (!store) qFatal("store: %s", store.error().message.c_str());
        m_store = std::make_unique<powerhouse::store::Store>(std::move(store).value());
        m_engine = std::make_unique<EngineClient>();
        m_chat = std::make_unique<ChatController>(*m_store, *m_engine);
        auto chatStore = powerhouse::store::Store::open((m_dir.path() + "/chat.db").toStdString());
        if (!chatStore) qFatal("store: %s", chatStore.error().message.c_str());
        m_chatStore = std::make_unique<powerhouse::store::Store>(std::move(chatStore).value());
        m_chatEngine = std::make_unique<EngineClient>();
        m_loaded = std::make_unique<ChatController>(*m_chatStore, *m_chatEngine);
        powerhouse::GenerationSettings generation;
        generation.max_tokens = 48;
        generation.sampling.temperature = 0;
        m_loaded->setGenerationSettings(generation);
        powerhouse::ModelOptions options;
        options.n_ctx = 2048;
        options.n_threads = 2;
        m_loaded->loadModel(QString::fromStdString(powerhouse::test::test_model_path().string()), options);
        powerhouse::GpuMonitorOptions gpus;
        gpus.simulate = "RTX 4090:24;RTX 4090:24:power=denied";
        m_dashboard = std::make_unique<DashboardController>(gpus);
        connect(m_chatEngine.get(), &EngineClient::schedulerStats, m_dashboard.get(),
                &DashboardController::setSchedulerStats);
        m_settings = std::make_unique<SettingsController>(*m_store, m_dir.path());
        connect(m_dashboard.get(), &DashboardController::snapshotApplied, m_settings.get(),
                &SettingsController::setDevices);
        m_dashboard->start();
        // Power limits and costs (issue 24): GPU 1 refuses limits as without root; the costs
        // start from one measured answer (500 tokens at 50 tokens/s, 3000 J) and a model
        // reading 1 GB a token.
        m_power = std::make_unique<PowerController>(*m_store, m_dashboard->monitor());
        connect(m_dashboard.get(), &DashboardController::snapshotApplied, m_power.get(), &PowerController::refresh);
        m_costs = std::make_unique<CostsController>(*m_store);
        m_costs->recordAnswer(500, 50, 3000);
        m_costs->setElectricityPrice(0.30);
        m_costs->setModel({{"weightBytes", 1e9}});
        engine->rootContext()->setContextProperty(QStringLiteral("testPower"), m_power.get());
        engine->rootContext()->setContextProperty(QStringLiteral("testCosts"), m_costs.get());
        // The efficiency sweep runs testChat's model at 450, 300 and 200 W on GPU 0 as its
        // stand-in (GPU 1 refuses limits), one short answer per limit.
        PowerSweepController::Options sweep;
        sweep.secondsPerLimit = 0;
        sweep.tokensPerAnswer = 8;
        sweep.limitsW = {450, 300, 200};
        sweep.gpus = {0};
        m_sweep = std::make_unique<PowerSweepController>(*m_chatStore, *m_chatEngine, *m_dashboard, *m_power, sweep);
        connect(m_chatEngine.get(), &EngineClient::loaded, m_sweep.get(), &PowerSweepController::setModel);
        engine->rootContext()->setContextProperty(QStringLiteral("testSweep"), m_sweep.get());
        m_settings->setModel(QString::fromStdString(powerhouse::test::test_model_path().string()));
        m_library = std::make_unique<LibraryController>(*m_store, *m_settings, m_dir.path() + "/models");
        m_library->rescan();
        m_downloads = std::make_unique<DownloadController>(*m_store, m_dir.path() + "/models");
        m_welcome = std::make_unique<WelcomeController>(*m_settings, *m_downloads, QStringLiteral("http://127.0.0.1:9"));
        engine->rootContext()->setContextProperty(QStringLiteral("testWelcome"), m_welcome.get());
        // The Models page's Hugging Face tab against the loopback Hub (started once).
        if (!m_hubServer) m_hubServer = std::make_unique<powerhouse::test::HubTestServer>();
        if (!m_hubServer->running()) qFatal("the loopback Hub did not start");
        m_hub = std::make_unique<HubController>(*m_settings, QString::fromStdString(m_hubServer->endpoint()));
        // Its downloads go to a folder of their own, outside testLibrary's.
        m_hubDownloads = std::make_unique<DownloadController>(*m_store, m_dir.path() + "/hub-downloads",
                                                              QString::fromStdString(m_hubServer->endpoint()));
        connect(m_hub.get(), &HubController::downloadRequested, m_hubDownloads.get(),
                [this](const QUrl& url, const QString& sha256) { m_hubDownloads->add(url, sha256.toStdString()); });
        engine->rootContext()->setContextProperty(QStringLiteral("testHub"), m_hub.get());
        engine->rootContext()->setContextProperty(QStringLiteral("testHubDownloads"), m_hubDownloads.get());
        m_server = std::make_unique<ServerController>(*m_store, *m_engine);
        engine->rootContext()->setContextProperty(QStringLiteral("testController"), m_chat.get());
        engine->rootContext()->setContextProperty(QStringLiteral("testChat"), m_loaded.get());
        engine->rootContext()->setContextProperty(QStringLiteral("testDashboard"), m_dashboard.get());
        engine->rootContext()->setContextProperty(QStringLiteral("testSettings"), m_settings.get());
        engine->rootContext()->setContextProperty(QStringLiteral("testDataFolder"), m_dir.path());
        engine->rootContext()->setContextProperty(QStringLiteral("testLibrary"), m_library.get());
        engine->rootContext()->setContextProperty(QStringLiteral("testDrop"), &m_drop);
        engine->rootContext()->setContextProperty(QStringLiteral("testDownloads"), m_downloads.get());
        engine->rootContext()->setContextProperty(QStringLiteral("testServer"), m_server.get());
        m_locked.open(m_dir.path(), *m_engine);
        engine->rootContext()->setContextProperty(QStringLiteral("testLocked"), &m_locked);
        m_recovery.use(m_engine.get(), m_dashboard.get(), m_settings.get());
        engine->rootContext()->setContextProperty(QStringLiteral("testRecovery"), &m_recovery);
        m_model.use(m_engine.get());
        engine->rootContext()->setContextProperty(QStringLiteral("testModel"), &m_model);
        m_files.use(m_dir.path() + "/models", m_dir.path() + "/powerhouse.db");
        engine->rootContext()->setContextProperty(QStringLiteral("testFiles"), &m_files);
        m_engines.reset();
        auto enginesStore = powerhouse::store::Store::open((m_dir.path() + "/engines.db").toStdString());
        if (!enginesStore) qFatal("store: %s", enginesStore.error().message.c_str());
        m_enginesStore = std::make_unique<powerhouse::store::Store>(std::move(enginesStore).value());
        m_engines = std::make_unique<EnginesController>(*m_enginesStore);
        if (!m_faults) {
            m_faults = std::make_unique<powerhouse::test::HttpTestServer>(
                POWERHOUSE_REMOTE_TEST_DIR "/openai_fault_server.py",
                std::vector<std::string>{"--fixtures", (powerhouse::test::data_dir() / "remote").string()});
            if (!m_faults->running()) qFatal("the fault server did not start");
        }
        engine->rootContext()->setContextProperty(QStringLiteral("testEngines"), m_engines.get());
        engine->rootContext()->setContextProperty(QStringLiteral("testFaultServer"),
                                                  QString::fromStdString(m_faults->url("")));
        m_remote = std::make_unique<RemoteGpuModel>(std::chrono::milliseconds(0));
        feedRemote(*m_remote);
        engine->rootContext()->setContextProperty(QStringLiteral("testRemote"), m_remote.get());
        engine->rootContext()->setContextProperty(
            QStringLiteral("testModelUrl"),
            QUrl::fromLocalFile(QString::fromStdString(powerhouse::test::test_model_path().string())));
        // A small model of another family, offered as a draft model on the Models page.
        engine->rootContext()->setContextProperty(
            QStringLiteral("testOtherModelUrl"),
            QUrl::fromLocalFile(
                QString::fromStdString((powerhouse::test::data_dir() / "arch" / "qwen2-f32.gguf").string())));
    }

    void cleanupTestCase() {
        m_locked.close();
        m_engines.reset();
        m_enginesStore.reset();
        m_faults.reset();
        m_remote.reset();
        m_server.reset();
        m_welcome.reset();
        m_hub.reset();
        m_hubDownloads.reset();
        m_hubServer.reset();
        m_downloads.reset();
        m_library.reset();
        m_settings.reset();
        m_costs.reset();
        m_sweep.reset();
        m_power.reset();
        m_dashboard.reset();
        m_chat.reset();
        m_engine.reset();
        m_loaded.reset();
        m_chatEngine.reset();
        m_chatStore.reset();
        m_store.reset();
    }

private:
    static void feedRemote(RemoteGpuModel& remote) {
        const std::vector<MetricsSource> sources = {{"cluster", "http://10.0.0.9:9400/metrics", "", ""},
                                                    {"vllm", "http://10.0.0.7:8000/metrics", "", ""},
                                                    {"down", "http://10.0.0.8:9400/metrics", "", ""}};
        remote.setSources(sources);
        const char* files[] = {"dcgm_exporter.prom", "vllm_v1.prom"};
        for (int i = 0; i < 2; ++i) {
            std::ifstream in(powerhouse::test::data_dir() / "remote" / files[i]);
            std::stringstream text;
            text << in.rdbuf();
            for (double time : {1.0, 3.0}) {  // two readings: a history of two points
                MetricsReading reading{sources[static_cast<size_t>(i)],
                                       sources[static_cast<size_t>(i)].url,
                                       powerhouse::remote::parse_prometheus(text.str()),
                                       {},
                                       time};
                remote.apply(reading);
            }
        }
        remote.apply(MetricsReading{sources[2], sources[2].url, std::nullopt,
                                    "could not connect to 10.0.0.8:9400: connection refused", 3.0});
    }

    QTemporaryDir m_dir;
    std::unique_ptr<RemoteGpuModel> m_remote;
    std::unique_ptr<powerhouse::store::Store> m_store;
    std::unique_ptr<EngineClient> m_engine;
    std::unique_ptr<ChatController> m_chat;
    std::unique_ptr<powerhouse::store::Store> m_chatStore;
    std::unique_ptr<EngineClient> m_chatEngine;
    std::unique_ptr<ChatController> m_loaded;
    std::unique_ptr<DashboardController> m_dashboard;
    std::unique_ptr<PowerController> m_power;
    std::unique_ptr<CostsController> m_costs;
    std::unique_ptr<PowerSweepController> m_sweep;
    std::unique_ptr<SettingsController> m_settings;
    std::unique_ptr<LibraryController> m_library;
    DropHelper m_drop;
    RecoveryHelper m_recovery;
    ModelHelper m_model;
    FilesHelper m_files;
    LockHelper m_locked;
    std::unique_ptr<DownloadController> m_downloads;
    std::unique_ptr<WelcomeController> m_welcome;
    std::unique_ptr<HubController> m_hub;
    std::unique_ptr<DownloadController> m_hubDownloads;
    std::unique_ptr<powerhouse::test::HubTestServer> m_hubServer;
    std::unique_ptr<ServerController> m_server;
    std::unique_ptr<powerhouse::store::Store> m_enginesStore;
    std::unique_ptr<EnginesController> m_engines;
    std::unique_ptr<powerhouse::test::HttpTestServer> m_faults;
};

QUICK_TEST_MAIN_WITH_SETUP(desktop_qml_tests, Setup)

#include "desktop_qml_test.moc"
