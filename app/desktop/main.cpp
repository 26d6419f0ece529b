// powerhouse: the desktop app. Reads the command line, makes the DesktopApp (the store, the
// engine client and the controllers, wired together; no singletons) and hands its
// controllers to the QML window as its properties.
//
//   powerhouse [FILE | --model FILE] [--data-dir DIR] [--ctx N] [--send TEXT] [--screenshot FILE]
//              [--show settings|general|server|engines|conversation|models|costs|sweep] [--suggestions FILE]
//
// --send sends a message as soon as the model is ready. --screenshot renders the window
// once it is idle (the model loaded or failed, no answer streaming), saves it as a PNG and
// quits. --show opens a panel at start: the settings (GPUs, General or Server tab) or the open
// conversation's settings. These are for tests and
// documentation.
//
// Environment for tests: POWERHOUSE_SIMULATE_GPUS (simulated GPUs, which can fail on cue:
// powerhouse/telemetry.h) and POWERHOUSE_FAIL_DEVICE="DEVICE:AFTER[:hang]", a device fault
// injected into every model loaded ("0:5": the model's device 0 fails at its sixth step, as
// a GPU fallen off the bus would; with ":hang" it stops answering instead). CPU devices only:
// on a single "cpu" device the engine loads the model again on the CPU, the fault cleared,
// and the answer goes on, so the device-failure banner and notes can be seen without a GPU.
#include <QCommandLineParser>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QGuiApplication>
#include <QIcon>
#include <QQmlApplicationEngine>
#include <QQuickWindow>
#include <QStandardPaths>
#include <QTimer>
#include <QtQml/QQmlExtensionPlugin>

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <memory>
#include <optional>

#include "build_info.h"
#include "desktop_app.h"
#include "library/hf_url.h"
#include "version_report.h"

Q_IMPORT_QML_PLUGIN(PowerhousePlugin)

namespace {

// Saves the window to `file` once the app is idle (no model loading, no answer streaming,
// the welcome view planned), or after five minutes in any case, then quits.
void screenshotWhenIdle(QQuickWindow* window, DesktopApp& desktop, const QString& file) {
    ChatController& controller = desktop.chat();
    WelcomeController& welcome = desktop.welcome();
    auto busy = [&controller, &welcome] {
        return controller.generatingAny() || controller.modelState() == ChatController::ModelState::Loading || welcome.planning();
    };
    auto shoot = [window, file, busy](bool wait) {
        if (wait && busy()) return;
        const QImage image = window->grabWindow();
        const bool saved = !image.isNull() && image.save(file, "PNG");
        std::fprintf(stderr, saved ? "screenshot saved to %s\n" : "could not save the screenshot to %s\n",
                     qPrintable(file));
        QCoreApplication::exit(saved ? 0 : 1);
    };
    // Let the last frames render; if work started meanwhile, the next idle shoots.
    auto settle = [window, shoot] { QTimer::singleShot(700, window, [shoot] { shoot(true); }); };
    QObject::connect(&controller, &ChatController::idle, window, settle);
    QObject::connect(&welcome, &WelcomeController::planningChanged, window, settle);
    if (!busy()) settle();
    QTimer::singleShot(300000, window, [shoot] { shoot(false); });
}

}  // namespace

// Milliseconds since the process started (its start time in /proc/self/stat, in clock
// ticks since boot, against CLOCK_BOOTTIME): so a cold start includes the dynamic loader
// and the libraries' constructors, not only what main() does. -1 when unreadable.
double msSinceProcessStart() {
    std::FILE* f = std::fopen("/proc/self/stat", "r");
    if (f == nullptr) return -1;
    char buffer[1024] = {};
    const size_t n = std::fread(buffer, 1, sizeof buffer - 1, f);
    std::fclose(f);
    // Field 22 (starttime) counts from after the command name's closing parenthesis.
    const char* p = std::strrchr(buffer, ')');
    if (n == 0 || p == nullptr) return -1;
    unsigned long long start_ticks = 0;
    int field = 2;
    for (const char* c = p + 1; *c != '\0' && field < 22; ++c) {
        if (*c == ' ') ++field;
        if (field == 22) start_ticks = std::strtoull(c + 1, nullptr, 10);
    }
    timespec now{};
    clock_gettime(CLOCK_BOOTTIME, &now);
    const double now_ms = static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
    return now_ms - static_cast<double>(start_ticks) * 1e3 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

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
    const QCommandLineOption suggestionsOption(
        QStringLiteral("suggestions"),
        QStringLiteral("The welcome view's suggested models from this list (the format of resources/models/"
                       "suggested.json) instead of the one built in."),
        QStringLiteral("FILE"));
    const QCommandLineOption showOption(
        QStringLiteral("show"),
        QStringLiteral("Open a panel at start: settings, general, server, engines, conversation, models, costs or sweep."),
        QStringLiteral("PANEL"));
    parser.addOptions(
        {helpOption, versionOption, modelOption, dataOption, ctxOption, sendOption, screenshotOption, showOption,
         suggestionsOption});
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

    // A list of suggestions that cannot be read is a usage error, found before any window.
    std::vector<powerhouse::catalog::SuggestedModel> suggestions;
    if (parser.isSet(suggestionsOption)) {
        QFile file(parser.value(suggestionsOption));
        if (!file.open(QIODevice::ReadOnly)) {
            std::fprintf(stderr, "powerhouse: cannot read %s: %s\n", qPrintable(file.fileName()),
                         qPrintable(file.errorString()));
            return 2;
        }
        auto list = powerhouse::catalog::parse_suggested_models(file.readAll().toStdString());
        if (!list) {
            std::fprintf(stderr, "powerhouse: %s: %s\n", qPrintable(file.fileName()), list.error().message.c_str());
            return 2;
        }
        suggestions = std::move(*list);
    }

    // A fault to inject that cannot be read is a usage error too.
    std::optional<DesktopApp::Options::FaultInjection> fault;
    if (const QString spec = qEnvironmentVariable("POWERHOUSE_FAIL_DEVICE"); !spec.isEmpty()) {
        auto parsed = DesktopApp::parseFaultInjection(spec);
        if (!parsed) {
            std::fprintf(stderr, "powerhouse: POWERHOUSE_FAIL_DEVICE: %s\n", parsed.error().message.c_str());
            return 2;
        }
        fault = *parsed;
    }

    // Qt Quick packs small images (here, the icons) into one texture atlas sized to the window,
    // rounded up to powers of two: 2048x1024 (8 MB) for the default window, 4096x4096 (64 MB)
    // for one opened full-screen at 4K. The views' images are icons of at most 48 px, which
    // 512x512 (1 MB) holds; an image that does not fit gets a texture of its own, as before.
    // Without a GPU driver (Mesa's llvmpipe) the atlas is the app's own private memory.
    if (!qEnvironmentVariableIsSet("QSG_ATLAS_WIDTH")) qputenv("QSG_ATLAS_WIDTH", "512");
    if (!qEnvironmentVariableIsSet("QSG_ATLAS_HEIGHT")) qputenv("QSG_ATLAS_HEIGHT", "512");
    QGuiApplication app(argc, argv);
    QGuiApplication::setApplicationName(QStringLiteral("Powerhouse"));
    QGuiApplication::setOrganizationName(QStringLiteral("Powerhouse"));
    QGuiApplication::setApplicationVersion(QStringLiteral(POWERHOUSE_VERSION));
    QGuiApplication::setDesktopFileName(QStringLiteral("io.github.powerhouse_app.Powerhouse"));
    QGuiApplication::setWindowIcon(QIcon::fromTheme(QStringLiteral("io.github.powerhouse_app.Powerhouse")));
    // The views' icons are freedesktop names ("edit-copy-symbolic") from the packaged Adwaita
    // theme, tinted by the views to the theme's colours; a desktop whose own theme lacks a
    // name falls back to Adwaita, and without a desktop theme Adwaita is the theme.
    // Without a desktop session (a bare X server, offscreen) Qt searches no system folder.
    QStringList iconPaths = QIcon::themeSearchPaths();
    for (const QString& path : QStandardPaths::locateAll(QStandardPaths::GenericDataLocation, QStringLiteral("icons"),
                                                         QStandardPaths::LocateDirectory)) {
        if (!iconPaths.contains(path)) iconPaths << path;
    }
    QIcon::setThemeSearchPaths(iconPaths);
    QIcon::setFallbackThemeName(QStringLiteral("Adwaita"));
    if (QIcon::themeName().isEmpty() || QIcon::themeName() == QLatin1String("hicolor")) {
        QIcon::setThemeName(QStringLiteral("Adwaita"));
    }

    const QString dataDir = parser.isSet(dataOption)
                                ? parser.value(dataOption)
                                : QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) + "/powerhouse";
    DesktopApp::Options options;
    options.dataDir = dataDir;
    // Downloads go into the library folder; Hugging Face's address can be a mirror
    // (HF_ENDPOINT, read as powerhouse-cli pull and search read it: unset or empty is
    // Hugging Face itself).
    options.hubEndpoint = QString::fromStdString(powerhouse::library::hf_endpoint_from_environment());
    options.contextOverride = parser.value(ctxOption).toUInt();
    options.fault = fault;
    auto created = DesktopApp::create(options);
    if (!created) {
        // Nothing can be kept without the store: say why, in a window too (the app may have
        // been started from a menu), and end with an error.
        std::fprintf(stderr, "powerhouse: %s\n", created.error().message.c_str());
        if (parser.isSet(screenshotOption)) return 1;
        QQmlApplicationEngine fallback;
        fallback.setInitialProperties({{QStringLiteral("message"), QString::fromStdString(created.error().message)}});
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
    DesktopApp& desktop = **created;
    if (parser.isSet(suggestionsOption)) desktop.welcome().setModels(std::move(suggestions));
    ChatController& controller = desktop.chat();

    QQmlApplicationEngine qml;
    qml.setInitialProperties(desktop.qmlProperties());
    qml.load(QUrl(QStringLiteral("qrc:/Powerhouse/Main.qml")));
    if (qml.rootObjects().isEmpty()) return 1;
    auto* window = qobject_cast<QQuickWindow*>(qml.rootObjects().first());
    // POWERHOUSE_STARTUP_LOG=1: when the first frame was shown (scripts/app-startup reads it).
    if (qEnvironmentVariableIsSet("POWERHOUSE_STARTUP_LOG") && window != nullptr) {
        const double loaded = msSinceProcessStart();
        // Direct: frameSwapped comes from the render thread, the one thread that sets `once`.
        QObject::connect(
            window, &QQuickWindow::frameSwapped, window,
            [loaded] {
                static bool once = false;
                if (once) return;
                once = true;
                std::fprintf(stderr, "startup: first frame %.0f ms after the process started (QML loaded at %.0f ms)\n",
                             msSinceProcessStart(), loaded);
            },
            Qt::DirectConnection);
    }

    const QString given =
        parser.positionalArguments().isEmpty() ? parser.value(modelOption) : parser.positionalArguments().front();
    desktop.loadAtStart(given);
    if (parser.isSet(sendOption)) {
        const QString text = parser.value(sendOption);
        auto sent = std::make_shared<bool>(false);
        QObject::connect(&controller, &ChatController::modelChanged, &controller, [&controller, text, sent] {
            if (*sent || controller.modelState() != ChatController::ModelState::Ready) return;
            *sent = true;
            controller.newConversation();
            controller.send(text);
        });
    }
    if (parser.isSet(showOption)) {
        const QString panel = parser.value(showOption);
        if (panel != QLatin1String("settings") && panel != QLatin1String("general") &&
            panel != QLatin1String("server") && panel != QLatin1String("engines") &&
            panel != QLatin1String("conversation") && panel != QLatin1String("models") &&
            panel != QLatin1String("costs") && panel != QLatin1String("sweep")) {
            std::fprintf(
                stderr, "powerhouse: --show takes settings, general, server, engines, conversation, models, costs or sweep, not %s\n",
                qPrintable(panel));
            return 2;
        }
        QMetaObject::invokeMethod(window, "openPanel", Q_ARG(QString, panel));
    }
    if (parser.isSet(screenshotOption) && window != nullptr) {
        screenshotWhenIdle(window, desktop, parser.value(screenshotOption));
    }
    return QGuiApplication::exec();
}
