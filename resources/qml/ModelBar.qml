// The top bar: which model is loaded, where it runs, and loading progress.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

ToolBar {
    id: bar

    required property ChatController controller
    // Remote engines' models, chosen here like a local file; null: none offered.
    property EnginesController engines: null
    property bool dashboardVisible: true
    // The window is too narrow for the dashboard beside the conversations: shown, it takes
    // their place.
    property bool dashboardNarrow: false

    property bool modelsVisible: false

    signal toggleDashboard()
    signal openSettings()
    signal toggleModels()

    background: Rectangle {
        color: Theme.sidebar
        Rectangle {
            anchors.bottom: parent.bottom
            width: parent.width
            height: 1
            color: Theme.border
        }
    }

    // Below this width the buttons show their icons only (their names stay as tooltips).
    readonly property bool compact: width < 980

    RowLayout {
        anchors.fill: parent
        anchors.leftMargin: Theme.space4
        anchors.rightMargin: Theme.space2
        spacing: Theme.space3

        Label {
            text: "Powerhouse"
            font.weight: Font.DemiBold
            font.pixelSize: Theme.subtitleSize
            color: Theme.text
        }
        Rectangle {
            implicitWidth: 1
            implicitHeight: 20
            color: Theme.border
        }
        // The model: its name as a person writes it, and where it runs.
        Rectangle {
            objectName: "modelChip"
            implicitHeight: 28
            implicitWidth: modelRow.implicitWidth + 2 * Theme.space3
            Layout.maximumWidth: bar.width * 0.5
            radius: height / 2
            color: bar.controller.modelState === ChatController.Failed ? Theme.errorBackground : Theme.surface
            border.color: Theme.border
            RowLayout {
                id: modelRow
                anchors.fill: parent
                anchors.leftMargin: Theme.space3
                anchors.rightMargin: Theme.space3
                spacing: Theme.space2
                Rectangle {
                    implicitWidth: 8
                    implicitHeight: 8
                    radius: 4
                    color: bar.controller.modelState === ChatController.Ready ? Theme.success
                         : bar.controller.modelState === ChatController.Loading ? Theme.warning
                         : bar.controller.modelState === ChatController.Failed ? Theme.error : Theme.textFaint
                }
                Label {
                    // Read out whole: "Model: SmolLM2 135M Instruct · Q4_1".
                    Accessible.name: "Model: " + text
                    color: Theme.text
                    font.pixelSize: Theme.bodySize
                    elide: Text.ElideRight
                    Layout.fillWidth: true
                    text: {
                        switch (bar.controller.modelState) {
                        case ChatController.Ready: return bar.controller.modelName
                        case ChatController.Loading: return "Loading " + bar.controller.modelName + "…"
                        // The model stopped when a device failed (the chat's banner says why), or did not load.
                        case ChatController.Failed: return bar.controller.recovery === ChatController.Failed
                                                           ? "No model (a device failed)" : "No model (loading failed)"
                        default: return "No model loaded"
                        }
                    }
                }
                Label {
                    visible: bar.controller.modelState === ChatController.Ready && !bar.compact
                    text: bar.controller.modelDevice
                    color: Theme.textMuted
                    font.pixelSize: Theme.captionSize
                }
                // The draft model it was loaded with (speculative decoding), if any.
                Label {
                    objectName: "draftModel"
                    visible: bar.controller.modelState === ChatController.Ready && !bar.compact
                             && bar.controller.draftModelName.length > 0
                    text: "draft: " + bar.controller.draftModelName
                    color: Theme.textMuted
                    font.pixelSize: Theme.captionSize
                    elide: Text.ElideRight
                    Layout.maximumWidth: 240
                    Accessible.name: "Draft model: " + bar.controller.draftModelName
                }
                // Whose chat template the model chats with, when not its own.
                Label {
                    objectName: "templateNote"
                    visible: bar.controller.modelState === ChatController.Ready && !bar.compact
                             && text.length > 0
                    text: bar.controller.templateNote
                    color: Theme.textMuted
                    font.pixelSize: Theme.captionSize
                    elide: Text.ElideRight
                    Layout.maximumWidth: 320
                    Accessible.name: "Chat template: " + text
                }
            }
        }
        ProgressBar {
            visible: bar.controller.modelState === ChatController.Loading
            Accessible.name: "Loading progress"
            from: 0
            to: 1
            value: bar.controller.loadProgress
            Layout.preferredWidth: 140
        }
        Label {
            visible: bar.controller.modelState === ChatController.Loading && !bar.compact
            text: bar.controller.loadStage
            color: Theme.textMuted
            font.pixelSize: Theme.captionSize
        }
        ComboBox {
            id: remoteModels
            objectName: "remoteModels"
            visible: bar.engines !== null && bar.engines.remoteModels.length > 0
            model: bar.engines ? bar.engines.remoteModels : []
            textRole: "label"
            currentIndex: -1
            displayText: bar.engines && bar.engines.chosen.length > 0 ? bar.engines.chosen : "Remote model…"
            Accessible.name: "Answer with a remote engine's model"
            Layout.preferredWidth: bar.compact ? 160 : 240
            onActivated: index => {
                const choice = bar.engines.remoteModels[index]
                bar.engines.choose(choice.endpoint, choice.model)
            }
        }
        Item {
            Layout.fillWidth: true
        }
        IconButton {
            objectName: "modelsButton"
            iconName: bar.modelsVisible ? "go-previous-symbolic" : "drive-harddisk-symbolic"
            showText: !bar.compact
            text: bar.modelsVisible ? "Back to the chat" : "Models"
            ToolTip.text: bar.modelsVisible ? "Back to the chat (Ctrl+M)" : "Models: find, add, download and load (Ctrl+M)"
            Accessible.name: bar.modelsVisible ? "Back to the chat (Ctrl+M)" : "Models: add, download and load (Ctrl+M)"
            onClicked: bar.toggleModels()
        }
        IconButton {
            objectName: "settingsButton"
            iconName: "emblem-system-symbolic"
            showText: !bar.compact
            text: "Settings"
            ToolTip.text: "Settings: GPUs, split, context, theme (Ctrl+,)"
            Accessible.name: "Settings: GPUs, split, context, theme (Ctrl+,)"
            onClicked: bar.openSettings()
        }
        IconButton {
            objectName: "dashboardButton"
            iconName: "sidebar-show-symbolic"
            showText: !bar.compact
            text: bar.dashboardVisible ? "Hide GPUs" : "Show GPUs"
            ToolTip.text: bar.dashboardNarrow
                          ? "Show or hide the GPU dashboard (Ctrl+G); the window is too narrow for it beside the conversations, so it takes their place"
                          : "Show or hide the GPU dashboard (Ctrl+G)"
            Accessible.name: ToolTip.text
            onClicked: bar.toggleDashboard()
        }
    }
}
