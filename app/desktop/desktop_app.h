// The desktop app's composition root: the store, the engine client and every controller,
// and the connections between them, in one object that main.cpp and the tests both make,
// so the wiring itself is tested. main.cpp keeps what belongs to a process: the command
// line, the QGuiApplication, the QML engine, --send and --screenshot.
//
// Construction order is destruction order reversed: the server stops and joins before the
// engine client goes, downloads and planning workers join before the store closes.
//
// Thread-safety: GUI thread only.
#pragma once

#include <QObject>
#include <QString>
#include <QVariantMap>

#include <memory>
#include <optional>

#include "chat_controller.h"
#include "conversation_transfer.h"
#include "costs_controller.h"
#include "dashboard_controller.h"
#include "download_controller.h"
#include "engine_client.h"
#include "engines_controller.h"
#include "hub_controller.h"
#include "library_controller.h"
#include "power_controller.h"
#include "power_sweep_controller.h"
#include "powerhouse/result.h"
#include "server_controller.h"
#include "settings_controller.h"
#include "store/store.h"
#include "welcome_controller.h"

class DesktopApp : public QObject {
    Q_OBJECT

public:
    struct Options {
        QString dataDir;  // conversations, settings and the library folder (<dataDir>/models)
        QString hubEndpoint = QStringLiteral("https://huggingface.co");  // or a mirror, or a test server
        uint32_t contextOverride = 0;  // --ctx: the context of the first load (0: the settings')
        bool rescan = true;            // scan the library at start (the tests of other parts skip it)
        // A device fault injected into every model loaded (tests of what the app does when a
        // device fails: POWERHOUSE_FAIL_DEVICE, see parseFaultInjection). CPU devices only.
        struct FaultInjection {
            int device = 0;      // of the model's devices (ModelOptions::fail_device)
            uint32_t after = 0;  // it fails its (after + 1)-th step (ModelOptions::fail_after)
            bool hangs = false;  // it never answers instead, until a 2 s step deadline
        };
        std::optional<FaultInjection> fault;
        PowerSweepController::Options sweep;  // the dashboard's efficiency sweep (tests shorten it)
    };
    // "DEVICE:AFTER" or "DEVICE:AFTER:hang" (POWERHOUSE_FAIL_DEVICE), e.g. "0:5": device 0
    // fails at its sixth step. An error says what is wrong with the text.
    static powerhouse::Result<Options::FaultInjection> parseFaultInjection(const QString& text);

    // Opens the store (an error says why it cannot be opened) and builds everything on it.
    static powerhouse::Result<std::unique_ptr<DesktopApp>> create(const Options& options);
    ~DesktopApp() override;

    // What Main.qml takes as its properties.
    QVariantMap qmlProperties();

    // The model to open at start: `given` (the command line), else the remote model chosen
    // when the app last ran, else the local model loaded last. With none, the welcome view
    // shows. Returns the path loaded ("" for none).
    QString loadAtStart(const QString& given);
    // Loads `path` and remembers it as the model to open next time.
    void load(const QString& path, bool fromSettings = true);

    powerhouse::store::Store& store() { return m_store; }
    EngineClient& engine() { return *m_engine; }
    ChatController& chat() { return *m_chat; }
    DashboardController& dashboard() { return *m_dashboard; }
    SettingsController& settings() { return *m_settings; }
    LibraryController& library() { return *m_library; }
    DownloadController& downloads() { return *m_downloads; }
    ServerController& server() { return *m_server; }
    EnginesController& engines() { return *m_engines; }
    WelcomeController& welcome() { return *m_welcome; }
    HubController& hub() { return *m_hub; }
    ConversationTransfer& transfer() { return *m_transfer; }
    PowerController& power() { return *m_power; }
    CostsController& costs() { return *m_costs; }
    PowerSweepController& sweep() { return *m_sweep; }

private:
    DesktopApp(powerhouse::store::Store store, const Options& options);
    void wire();

    Options m_options;
    powerhouse::store::Store m_store;
    std::unique_ptr<EngineClient> m_engine;
    std::unique_ptr<ChatController> m_chat;
    std::unique_ptr<DashboardController> m_dashboard;
    std::unique_ptr<SettingsController> m_settings;
    std::unique_ptr<LibraryController> m_library;
    std::unique_ptr<DownloadController> m_downloads;
    std::unique_ptr<WelcomeController> m_welcome;
    std::unique_ptr<HubController> m_hub;
    std::unique_ptr<ConversationTransfer> m_transfer;
    std::unique_ptr<ServerController> m_server;
    std::unique_ptr<EnginesController> m_engines;
    std::unique_ptr<CostsController> m_costs;
    std::unique_ptr<PowerController> m_power;  // after the dashboard: restores before its monitor goes
    // Last: a sweep under way ends (its limits set back) while the engine, the dashboard's
    // monitor and the power controller are still there.
    std::unique_ptr<PowerSweepController> m_sweep;
    QString m_current;  // the model loaded last
};
