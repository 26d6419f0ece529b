// powerhouse: the desktop app. Wires the store, the engine client and the chat controller
// together (no singletons) and hands the controller to the QML window as its required
// property.
//
//   powerhouse [FILE | --model FILE] [--data-dir DIR] [--ctx N] [--send TEXT] [--screenshot FILE]
//              [--show settings|general|server|engines|conversation|models]
//
// --send sends a message as soon as the model is ready. --screenshot renders the window
// once it is idle (the model loaded or failed, no answer streaming), saves it as a PNG and
// quits. --show opens a panel at start: the settings (GPUs, General or Server tab) or the open
// conversation's settings. These are for tests and
// documentation.
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QGuiApplication>
#include <QIcon>
#include <QQmlApplicationEngine>
#include <QQuickWindow>
#include <QStandardPaths>
#include <QTimer>
#include <QtQml/QQmlExtensionPlugin>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "build_info.h"
#include "chat_controller.h"
#include "dashboard_controller.h"
#include "download_controller.h"
#include "engine_client.h"
#include "engines_controller.h"
#include "library_controller.h"
#include "server_controller.h"
#include "settings_controller.h"
#include "store/store.h"
#include "version_report.h"

Q_IMPORT_QML_PLUGIN(PowerhousePlugin)

namespace {

// The model to open: --model, else the last one used, else the default model that
// scripts/run sets up (SmolLM2-135M-Instruct), when it is there.
QString modelToOpen(const QString& given, powerhouse::store::Store& store) {
    if (!given.isEmpty()) return given;
    if (auto last = store.setting("model_path"); last && *last && QFileInfo::exists(QString::fromStdString(**last))) {
        return QString::fromStdString(**last);
    }
    const QString fallback = QString::fromStdString(powerhouse::setup_model_path().string());
    return !fallback.isEmpty() && QFileInfo::exists(fallback) ? fallback : QString();
}

// Saves the window to `file` once the app is idle (or after five minutes in any case), then
// quits.
void screenshotWhenIdle(QQuickWindow* window, ChatController& controller, const QString& file) {
    auto shoot = [window, file, &controller](bool wait) {
        if (wait && (controller.generatingAny() || controller.modelState() == QLatin1String("loading"))) return;
        const QImage image = window->grabWindow();
        const bool saved = !image.isNull() && image.save(file, "PNG");
        std::fprintf(stderr, saved ? "screenshot saved to %s\n" : "could not save the screenshot to %s\n",
                     qPrintable(file));
        QCoreApplication::exit(saved ? 0 : 1);
    };
    // Let the last frames render; if work started meanwhile, the next idle shoots.
    auto settle = [window, shoot] { QTimer::singleShot(700, window, [shoot] { shoot(true); }); };
    QObject::connect(&controller, &ChatController::idle, window, settle);
    if (controller.modelState() != QLatin1String("loading")) settle();
    QTimer::singleShot(300000, window, [shoot] { shoot(false); });
}

}  // namespace

int main(int argc, char* argv[]) {
    // The command line is read before the GUI starts, so that --version and --help work
    // without a display (in a terminal, over ssh, in a package's test).
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Local multi-GPU LLM chat"));
    const QCommandLineOption helpOption({QStringLiteral("h"), QStringLiteral("help")},
                                        QStringLiteral("Show this help and quit."));
    const QCommandLineOption versionOption(
        {QStringLiteral("v"), QStringLiteral("version")},
        QStringLiteral("Show the version, the commit and the CUDA/driver versions found."));
    parser.addPositionalArgument(QStringLiteral("file"), QStringLiteral("Model file (.gguf) to open."),
                                 QStringLiteral("[FILE]"));
    const QCommandLineOption modelOption(QStringLiteral("model"), QStringLiteral("Model file (.gguf) to load."),
                                         QStringLiteral("FILE"));
    const QCommandLineOption dataOption(
        QStringLiteral("data-dir"), QStringLiteral("Folder for conversations and settings."), QStringLiteral("DIR"));
    const QCommandLineOption ctxOption(QStringLiteral("ctx"),
                                       QStringLiteral("Context length (default: the one in the settings, else 4096)."),
                                       QStringLiteral("N"));
    const QCommandLineOption sendOption(
        QStringLiteral("send"), QStringLiteral("Send this message once the model is ready."), QStringLiteral("TEXT"));
    const QCommandLineOption screenshotOption(QStringLiteral("screenshot"),
                                              QStringLiteral("Save the window as a PNG once idle, then quit."),
                                              QStringLiteral("FILE"));
    const QCommandLineOption showOption(
        QStringLiteral("show"),
        QStringLiteral("Open a panel at start: settings, general, server, engines, conversation or models."),
        QStringLiteral("PANEL"));
    parser.addOptions(
        {helpOption, versionOption, modelOption, dataOption, ctxOption, sendOption, screenshotOption, showOption});
    QStringList arguments;
    for (int i = 0; i < argc; ++i) arguments << QString::fromLocal8Bit(argv[i]);
    if (!parser.parse(arguments)) {
        std::fprintf(stderr, "powerhouse: %s\n(see powerhouse --help)\n", qPrintable(parser.errorText()));
        return 2;
    }
    if (parser.isSet(versionOption)) {
        std::fputs(powerhouse::version_report("powerhouse").c_str(), stdout);
        return 0;
    }
    if (parser.isSet(helpOption)) {
        // Without an application object yet, Qt cannot name the program: do it here.
        std::fputs(
            qPrintable(parser.helpText().replace(QStringLiteral("<executable_name>"), QStringLiteral("powerhouse"))),
            stdout);
        return 0;
    }
    if (parser.positionalArguments().size() > 1) {
        std::fprintf(stderr, "powerhouse: one model file at a time, not %lld\n",
                     static_cast<long long>(parser.positionalArguments().size()));
        return 2;
    }

    QGuiApplication app(argc, argv);
    QGuiApplication::setApplicationName(QStringLiteral("Powerhouse"));
    QGuiApplication::setOrganizationName(QStringLiteral("Powerhouse"));
    QGuiApplication::setApplicationVersion(QStringLiteral(POWERHOUSE_VERSION));
    QGuiApplication::setDesktopFileName(QStringLiteral("io.github.powerhouse_app.Powerhouse"));
    QGuiApplication::setWindowIcon(QIcon::fromTheme(QStringLiteral("io.github.powerhouse_app.Powerhouse")));

    const QString dataDir = parser.isSet(dataOption)
                                ? parser.value(dataOption)
                                : QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) + "/powerhouse";
    auto store = powerhouse::store::Store::open((dataDir + "/powerhouse.db").toStdString());
    if (!store) {
        // Nothing can be kept without the store: say why, in a window too (the app may have
        // been started from a menu), and end with an error.
        std::fprintf(stderr, "powerhouse: %s\n", store.error().message.c_str());
        if (parser.isSet(screenshotOption)) return 1;
        QQmlApplicationEngine fallback;
        fallback.setInitialProperties({{QStringLiteral("message"), QString::fromStdString(store.error().message)}});
        fallback.loadData(R"(
            import QtQuick
            import QtQuick.Controls
            ApplicationWindow {
                required property string message
                visible: true; width: 560; height: 200; title: "Powerhouse cannot start"
                Label { anchors.fill: parent; anchors.margins: 20; wrapMode: Text.Wrap; text: message }
            })");
        QGuiApplication::exec();
        return 1;
    }
    (void)store->purge_deleted();  // deletions are undoable until the app restarts

    EngineClient engine;
    ChatController controller(*store, engine);
    DashboardController dashboard(powerhouse::options_from_environment());
    QObject::connect(&engine, &EngineClient::loaded, &dashboard, [&dashboard](const QVariantMap& summary) {
        dashboard.setPlacement(summary.value("devices").toList());
    });
    QObject::connect(&engine, &EngineClient::schedulerStats, &dashboard, &DashboardController::setSchedulerStats);
    SettingsController settings(*store, dataDir);
    QObject::connect(&dashboard, &DashboardController::snapshotApplied, &settings, &SettingsController::setDevices);
    // The plan puts the loaded model on GPUs (simulated ones stand in for the CUDA backend
    // until it lands); the dashboard measures each answer's energy on them.
    QObject::connect(&engine, &EngineClient::loaded, &settings, [&settings, &dashboard](const QVariantMap& summary) {
        settings.setModel(summary.value("path").toString());
        dashboard.setModelGpus(settings.plannedGpus());
    });
    QObject::connect(&settings, &SettingsController::error, &controller, &ChatController::showError);
    controller.setAnswerObserver([&dashboard](quint64 id) { dashboard.beginAnswer(id); },
                                 [&dashboard](quint64 id) { return dashboard.endAnswer(id); });
    const auto price = [&controller, &settings] {
        controller.messages()->setElectricityPrice(settings.electricityPrice());
    };
    QObject::connect(&settings, &SettingsController::applied, &controller, price);
    price();
    dashboard.start();

    LibraryController library(*store, settings, dataDir + "/models");
    QObject::connect(&library, &LibraryController::error, &controller, &ChatController::showError);
    QObject::connect(&engine, &EngineClient::loaded, &library, [&library](const QVariantMap& summary) {
        library.setLoadedPath(summary.value("path").toString());
    });
    library.rescan();
    // Downloads go into the library folder; Hugging Face's address can be a mirror
    // (HF_ENDPOINT, as huggingface_hub reads it).
    const QString endpoint = qEnvironmentVariable("HF_ENDPOINT", QStringLiteral("https://huggingface.co"));
    DownloadController downloads(*store, dataDir + "/models", endpoint);
    QObject::connect(&library, &LibraryController::downloadRequested, &downloads,
                     [&downloads](const QUrl& url) { downloads.add(url); });
    QObject::connect(&downloads, &DownloadController::finished, &library, &LibraryController::addDownloaded);
    // The OpenAI API server on the same engine (Settings → Server); destroyed before the
    // engine client, it stops and joins its thread at quit.
    ServerController server(*store, engine);
    server.setTelemetry([&dashboard] { return dashboard.latestSnapshot(); });
    // Remote engines (Settings → Engines): choosing one of their models in the model bar
    // sends the next answers there; loading a local model takes them back.
    EnginesController engines(*store);
    // Their metrics URLs feed the dashboard's remote GPUs (read on the poller's thread).
    auto feedMetrics = [&engines, &dashboard] { dashboard.remote()->setSources(engines.metricsSources()); };
    QObject::connect(&engines, &EnginesController::metricsSourcesChanged, &dashboard, feedMetrics);
    feedMetrics();
    QObject::connect(&engines, &EnginesController::remoteChosen, &controller, &ChatController::useRemote);
    QObject::connect(&engine, &EngineClient::modelGoing, &engines, &EnginesController::clearChoice);
    engines.refreshModels();

    QQmlApplicationEngine qml;
    qml.setInitialProperties({{QStringLiteral("controller"), QVariant::fromValue(&controller)},
                              {QStringLiteral("dashboard"), QVariant::fromValue(&dashboard)},
                              {QStringLiteral("settings"), QVariant::fromValue(&settings)},
                              {QStringLiteral("library"), QVariant::fromValue(&library)},
                              {QStringLiteral("downloads"), QVariant::fromValue(&downloads)},
                              {QStringLiteral("server"), QVariant::fromValue(&server)},
                              {QStringLiteral("engines"), QVariant::fromValue(&engines)}});
    qml.load(QUrl(QStringLiteral("qrc:/Powerhouse/Main.qml")));
    if (qml.rootObjects().isEmpty()) return 1;
    auto* window = qobject_cast<QQuickWindow*>(qml.rootObjects().first());

    const QString given =
        parser.positionalArguments().isEmpty() ? parser.value(modelOption) : parser.positionalArguments().front();
    const QString model = modelToOpen(given, *store);
    // The model is loaded with the applied settings; --ctx overrides the context at start.
    const uint32_t ctx = parser.value(ctxOption).toUInt();
    auto current = std::make_shared<QString>();  // the model loaded last
    const auto load = [&controller, &settings, &store, ctx, current](const QString& path, bool fromSettings) {
        powerhouse::ModelOptions options = settings.modelOptions();
        if (!fromSettings && ctx > 0) options.n_ctx = ctx;
        *current = path;
        (void)store->set_setting("model_path", path.toStdString());
        controller.loadModel(path, options);
    };
    // A model named on the command line wins; else the remote model chosen when the app last
    // ran, if there was one; else the local model loaded last.
    const bool restored = given.isEmpty() && engines.restoreChoice();
    if (!model.isEmpty() && !restored) load(model, false);
    // Applying the settings reloads the model with them; the Models page loads another.
    QObject::connect(&settings, &SettingsController::applied, &controller, [load, current] {
        if (!current->isEmpty()) load(*current, true);
    });
    QObject::connect(&library, &LibraryController::loadRequested, &controller,
                     [load](const QString& path) { load(path, true); });
    if (parser.isSet(sendOption)) {
        const QString text = parser.value(sendOption);
        auto sent = std::make_shared<bool>(false);
        QObject::connect(&controller, &ChatController::modelChanged, &controller, [&controller, text, sent] {
            if (*sent || controller.modelState() != QLatin1String("ready")) return;
            *sent = true;
            controller.newConversation();
            controller.send(text);
        });
    }
    if (parser.isSet(showOption)) {
        const QString panel = parser.value(showOption);
        if (panel != QLatin1String("settings") && panel != QLatin1String("general") &&
            panel != QLatin1String("server") && panel != QLatin1String("engines") &&
            panel != QLatin1String("conversation") && panel != QLatin1String("models")) {
            std::fprintf(
                stderr, "powerhouse: --show takes settings, general, server, engines, conversation or models, not %s\n",
                qPrintable(panel));
            return 2;
        }
        QMetaObject::invokeMethod(window, "openPanel", Q_ARG(QString, panel));
    }
    if (parser.isSet(screenshotOption) && window != nullptr) {
        screenshotWhenIdle(window, controller, parser.value(screenshotOption));
    }
    return QGuiApplication::exec();
}
