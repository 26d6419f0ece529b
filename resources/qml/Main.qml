// The main window: conversations on the left, the chat in the middle, the model bar on top.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

ApplicationWindow {
    id: window

    required property ChatController controller
    required property DashboardController dashboard
    required property SettingsController settings
    required property LibraryController library
    required property DownloadController downloads
    // The OpenAI API server (Settings → Server); null in views tested without one.
    property ServerController server: null
    // Remote engines (Settings → Engines, the model bar); null in views tested without them.
    property EnginesController engines: null
    // The first run's suggestions; null in views tested without them.
    property WelcomeController welcome: null
    // Hugging Face search on the Models page; null in views tested without it.
    property HubController hub: null
    // Conversations out and in (the conversation list's menu); null in views tested without it.
    property ConversationTransfer transfer: null
    // Power limits, the efficiency sweep and costs (issue 24); null in views tested without them.
    property PowerController power: null
    property CostsController costs: null
    property PowerSweepController sweep: null
    // With no model to answer and nothing in the open conversation, the welcome view shows.
    readonly property bool welcomeVisible: welcome !== null && controller.modelState !== ChatController.Ready
                                           && controller.modelState !== ChatController.Loading && controller.messages.count === 0
    property bool modelsVisible: false
    // The GPU dashboard, as the user last asked for it in a wide window. Below
    // `dashboardBesideWidth` the conversations, the chat and the dashboard do not fit side by
    // side at their minimum widths (the dashboard was squeezed to a sliver): there it folds
    // away, and showing it (`narrowDashboard`) puts it in the conversation list's place.
    property bool dashboardVisible: true
    property bool narrowDashboard: false
    readonly property int dashboardBesideWidth: 190 + 360 + 220 + 20  // minimum widths, handles
    readonly property bool dashboardShown: width >= dashboardBesideWidth ? dashboardVisible : narrowDashboard

    function toggleDashboard() {
        if (width >= dashboardBesideWidth) dashboardVisible = !dashboardVisible
        else narrowDashboard = !narrowDashboard
    }
    function showDashboard() {
        if (width >= dashboardBesideWidth) dashboardVisible = true
        else narrowDashboard = true
    }

    width: 1180
    height: 760
    minimumWidth: 640
    minimumHeight: 420
    visible: true
    color: Theme.background
    // Controls take their colours from the palette: the theme's, not the system's.
    palette.window: Theme.sidebar
    palette.windowText: Theme.text
    palette.base: Theme.surface
    palette.alternateBase: Theme.surfaceHover
    palette.text: Theme.text
    palette.button: Theme.surface
    palette.buttonText: Theme.text
    palette.highlight: Theme.accent
    palette.highlightedText: Theme.background
    palette.placeholderText: Theme.textMuted
    palette.mid: Theme.border
    palette.light: Theme.surfaceHover
    palette.dark: Theme.border
    palette.toolTipBase: Theme.surface
    palette.toolTipText: Theme.text
    title: controller.currentTitle.length > 0 ? controller.currentTitle + " — Powerhouse" : "Powerhouse"

    header: ModelBar {
        controller: window.controller
        engines: window.engines
        dashboardVisible: window.dashboardShown
        dashboardNarrow: window.width < window.dashboardBesideWidth
        onToggleDashboard: window.toggleDashboard()
        onOpenSettings: window.openSettings()
        modelsVisible: window.modelsVisible
        onToggleModels: window.modelsVisible = !window.modelsVisible
    }

    // Opens a panel by name: "settings" (GPUs), "general" (settings' second tab), "server"
    // (the third) or "conversation" (the open conversation's settings).
    function openPanel(name: string) {
        if (name === "models") {
            window.modelsVisible = true
            return
        }
        if (name === "conversation") {
            chatView.openConversationSettings()
            return
        }
        if (name === "costs" || name === "sweep") {
            window.showDashboard()
            gpuDashboard.openPanel(name)
            return
        }
        window.openSettings(name === "general" ? 1 : name === "server" ? 2 : name === "engines" ? 3 : 0)
    }

    // Opens the settings at `tab`, or at the tab shown last when it is left out. The dialog
    // is built when first opened, then kept: built at start and never opened, its tabs held
    // about 3 MB at idle.
    function openSettings(tab = -1) {
        settingsLoader.active = true
        if (tab >= 0) settingsLoader.item.tab = tab
        settingsLoader.item.open()
    }

    // The suggestions are planned only while the welcome view shows.
    Binding {
        target: window.welcome
        when: window.welcome !== null
        property: "active"
        value: window.welcomeVisible
    }

    Loader {
        id: settingsLoader
        // The dialog sizes itself from its parent, this Loader: the window's content, as before.
        anchors.fill: parent
        active: false
        sourceComponent: SettingsDialog {
            settings: window.settings
            power: window.power
            server: window.server
            engines: window.engines
            hub: window.hub
        }
    }

    Binding {
        target: Theme
        property: "mode"
        value: window.settings.theme
    }

    SplitView {
        anchors.fill: parent
        orientation: Qt.Horizontal

        ConversationList {
            id: conversationList
            objectName: "conversationsPanel"
            // In a narrow window the dashboard, when shown, takes its place.
            visible: window.width >= window.dashboardBesideWidth || !window.narrowDashboard
            controller: window.controller
            transfer: window.transfer
            SplitView.preferredWidth: 270
            SplitView.minimumWidth: 190
            onConversationChosen: window.modelsVisible = false
        }

        StackLayout {
            SplitView.fillWidth: true
            SplitView.minimumWidth: 360
            currentIndex: window.modelsVisible ? 1 : window.welcomeVisible ? 2 : 0

            ChatView {
                id: chatView
                controller: window.controller
                sendBlockedReason: window.sweep !== null && window.sweep.running
                                   ? "An efficiency sweep is running the model (see the dashboard)" : ""
                onOpenSettings: window.openPanel("settings")
            }
            ModelsPage {
                objectName: "modelsPage"
                library: window.library
                downloads: window.downloads
                hub: window.hub
                engines: window.engines
                onLoaded: window.modelsVisible = false
            }
            // Made while it shows only: an app that opens on a model never builds it.
            Loader {
                active: window.welcome !== null && window.welcomeVisible
                sourceComponent: WelcomeView {
                    objectName: "welcomeView"
                    welcome: window.welcome
                    downloads: window.downloads
                    library: window.library
                    onOpenModels: window.modelsVisible = true
                }
            }
        }

        GpuDashboard {
            id: gpuDashboard
            objectName: "gpuDashboard"
            visible: window.dashboardShown
            dashboard: window.dashboard
            power: window.power
            costs: window.costs
            sweep: window.sweep
            plan: window.settings.plannedGpus
            layers: window.settings.modelLayers
            // In a narrow window, no wider than it must be: the chat keeps its minimum beside it.
            SplitView.preferredWidth: window.width >= window.dashboardBesideWidth ? 300 : 220
            SplitView.minimumWidth: 220
        }
    }

    Shortcut {
        sequence: StandardKey.New
        onActivated: {
            window.controller.newConversation()
            window.modelsVisible = false  // the new chat shows, from the Models page too
            chatView.focusComposer()
        }
    }
    Shortcut {
        sequence: StandardKey.Find
        onActivated: conversationList.focusSearch()
    }
    // Models and web addresses dropped anywhere on the window are imported or downloaded;
    // the Models page shows what became of them.
    DropArea {
        id: drop
        objectName: "windowDropArea"
        anchors.fill: parent
        keys: ["text/uri-list"]
        onDropped: event => {
            window.modelsVisible = true
            window.library.importUrls(event.urls)
            event.acceptProposedAction()
        }
        Rectangle {
            anchors.fill: parent
            visible: drop.containsDrag
            color: Qt.rgba(0.43, 0.61, 1.0, 0.15)
            border.color: Theme.accent
            border.width: 3
            Label {
                anchors.centerIn: parent
                text: "Drop .gguf models or download links"
                color: Theme.text
                font.pixelSize: Theme.fontSize + 6
            }
        }
    }

    Shortcut {
        sequence: "Ctrl+M"
        onActivated: window.modelsVisible = !window.modelsVisible
    }
    Shortcut {
        sequence: "Ctrl+Shift+S"
        onActivated: chatView.openConversationSettings()
    }
    Shortcut {
        sequence: "Ctrl+,"
        onActivated: window.openSettings()
    }
    Shortcut {
        sequence: "Ctrl+G"
        onActivated: window.toggleDashboard()
    }
    Shortcut {
        sequence: "Esc"
        enabled: window.controller.generating
        onActivated: window.controller.stop()
    }
}
