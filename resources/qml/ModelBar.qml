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

    RowLayout {
        anchors.fill: parent
        anchors.leftMargin: Theme.spacing
        anchors.rightMargin: Theme.spacing
        spacing: Theme.spacing

        Label {
            text: "Powerhouse"
            font.bold: true
            font.pixelSize: Theme.fontSize + 2
            color: Theme.text
        }
        Rectangle {
            width: 1
            height: 20
            color: Theme.border
        }
        Label {
            Accessible.name: "Model"
            color: Theme.text
            font.pixelSize: Theme.fontSize
            text: {
                switch (bar.controller.modelState) {
                case "ready": return bar.controller.modelName
                case "loading": return "Loading " + bar.controller.modelName + "…"
                case "failed": return "No model (loading failed)"
                default: return "No model loaded"
                }
            }
        }
        Label {
            visible: bar.controller.modelState === "ready"
            text: bar.controller.modelDevice
            color: Theme.textMuted
            font.pixelSize: Theme.smallFontSize
        }
        ProgressBar {
            visible: bar.controller.modelState === "loading"
            Accessible.name: "Loading progress"
            from: 0
            to: 1
            value: bar.controller.loadProgress
            Layout.preferredWidth: 180
        }
        Label {
            visible: bar.controller.modelState === "loading"
            text: bar.controller.loadStage
            color: Theme.textMuted
            font.pixelSize: Theme.smallFontSize
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
            Layout.preferredWidth: 260
            onActivated: index => {
                const choice = bar.engines.remoteModels[index]
                bar.engines.choose(choice.endpoint, choice.model)
            }
        }
        Item {
            Layout.fillWidth: true
        }
        ToolButton {
            objectName: "modelsButton"
            text: bar.modelsVisible ? "Back to the chat" : "Models"
            Accessible.name: bar.modelsVisible ? "Back to the chat (Ctrl+M)" : "Models: add, download and load (Ctrl+M)"
            onClicked: bar.toggleModels()
        }
        ToolButton {
            text: "Settings"
            Accessible.name: "Settings: GPUs, split, context, theme (Ctrl+,)"
            onClicked: bar.openSettings()
        }
        ToolButton {
            text: bar.dashboardVisible ? "Hide GPUs" : "Show GPUs"
            Accessible.name: "Show or hide the GPU dashboard (Ctrl+G)"
            onClicked: bar.toggleDashboard()
        }
    }
}
