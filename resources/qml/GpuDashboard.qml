// The right panel: where the model sits on the GPUs (a bar), a card per GPU, remote machines' GPUs by host (with their engines' figures), the NVLink
// topology, the devices the engine runs the model on now, and the engine's batching (the
// answers generated together, the KV cache blocks they and the cached conversations hold).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

Rectangle {
    id: root

    required property DashboardController dashboard
    // The local GPUs' power limits; null in views tested without them.
    property PowerController power: null
    // The Costs view's figures; null in views tested without them.
    property CostsController costs: null
    // The efficiency sweep; null in views tested without it.
    property PowerSweepController sweep: null
    // Remote machines (the metrics URLs of Settings → Engines), grouped by host.
    property RemoteGpuModel remote: dashboard.remote
    // The settings' plan for the loaded model on the GPUs, and its number of layers.
    property var plan: []
    property int layers: 0

    // "costs" opens the Costs view, "sweep" the efficiency sweep (Main.qml's openPanel,
    // --show costs|sweep).
    function openPanel(name: string) {
        if (name === "costs" && costsLoader.item !== null) costsLoader.item.open()
        if (name === "sweep" && sweepLoader.item !== null) sweepLoader.item.open()
    }

    function mib(bytes) {
        return (bytes / 1048576).toFixed(0) + " MiB"
    }

    color: Theme.sidebar

    ScrollView {
        anchors.fill: parent
        contentWidth: availableWidth

        ColumnLayout {
            width: parent.width
            spacing: Theme.spacing

            Label {
                text: "GPUs"
                color: Theme.text
                font.bold: true
                font.pixelSize: Theme.fontSize + 2
                Layout.topMargin: Theme.spacing
                Layout.leftMargin: Theme.spacing
            }
            Label {
                objectName: "sourceNote"
                visible: root.dashboard.source.length > 0
                text: root.dashboard.simulated ? "Simulated GPUs (POWERHOUSE_SIMULATE_GPUS): readings are not real"
                                               : root.dashboard.source
                color: root.dashboard.simulated ? "#e0b050" : Theme.textMuted
                wrapMode: Text.Wrap
                font.pixelSize: Theme.smallFontSize
                Layout.fillWidth: true
                Layout.leftMargin: Theme.spacing
                Layout.rightMargin: Theme.spacing
            }
            Label {
                visible: root.dashboard.gpus.count === 0
                text: "No GPU: " + (root.dashboard.status.length > 0 ? root.dashboard.status : "none found")
                      + ". Models run on the CPU."
                color: Theme.textMuted
                wrapMode: Text.Wrap
                Layout.fillWidth: true
                Layout.leftMargin: Theme.spacing
                Layout.rightMargin: Theme.spacing
            }

            Label {
                visible: root.plan.length > 0
                text: "The model on the GPUs"
                color: Theme.text
                font.bold: true
                Layout.leftMargin: Theme.spacing
                Layout.topMargin: Theme.spacing
            }
            PlacementBar {
                visible: root.plan.length > 0
                plan: root.plan
                layers: root.layers
                Layout.fillWidth: true
                Layout.leftMargin: Theme.spacing
                Layout.rightMargin: Theme.spacing
            }

            Label {
                objectName: "answerThrottle"
                visible: root.dashboard.answerThrottle.length > 0
                text: root.dashboard.answerThrottle
                color: Theme.warning
                wrapMode: Text.Wrap
                font.pixelSize: Theme.smallFontSize
                Layout.fillWidth: true
                Layout.leftMargin: Theme.spacing
                Layout.rightMargin: Theme.spacing
            }

            Repeater {
                model: root.dashboard.gpus
                delegate: GpuCard {
                    powerControl: root.power
                    Layout.fillWidth: true
                    Layout.maximumWidth: root.width - 2 * Theme.spacing
                    Layout.leftMargin: Theme.spacing
                    Layout.rightMargin: Theme.spacing
                }
            }

            Flow {
                visible: root.costs !== null || root.sweep !== null
                spacing: Theme.space2
                Layout.fillWidth: true
                Layout.leftMargin: Theme.spacing
                Layout.rightMargin: Theme.spacing
                Button {
                    objectName: "openCosts"
                    text: "Costs…"
                    icon.name: "accessories-calculator-symbolic"
                    icon.color: Theme.text
                    Accessible.name: "Costs"
                    visible: root.costs !== null
                    onClicked: costsLoader.item.open()
                }
                Button {
                    objectName: "openSweep"
                    text: root.sweep !== null && root.sweep.running ? "Sweep running…" : "Efficiency sweep…"
                    icon.name: "power-profile-balanced-symbolic"
                    icon.color: Theme.text
                    Accessible.name: "Efficiency sweep"
                    visible: root.sweep !== null && root.dashboard.gpus.count > 0
                    ToolTip.visible: hovered
                    ToolTip.text: "Run the model at several power limits and find the most efficient"
                    onClicked: sweepLoader.item.open()
                }
            }
            Loader {
                id: costsLoader
                active: root.costs !== null
                sourceComponent: CostsDialog {
                    costs: root.costs
                }
            }
            Loader {
                id: sweepLoader
                active: root.sweep !== null
                sourceComponent: PowerSweepDialog {
                    sweep: root.sweep
                }
            }

            Rectangle {
                objectName: "powerStartupNote"
                visible: root.power !== null && root.power.startupNote.length > 0
                radius: Theme.radiusSmall
                color: Theme.warningSoft
                implicitHeight: noteRow.implicitHeight + 2 * Theme.space2
                Layout.fillWidth: true
                Layout.leftMargin: Theme.spacing
                Layout.rightMargin: Theme.spacing
                RowLayout {
                    id: noteRow
                    anchors.fill: parent
                    anchors.margins: Theme.space2
                    Label {
                        text: root.power !== null ? root.power.startupNote : ""
                        color: Theme.warning
                        wrapMode: Text.Wrap
                        font.pixelSize: Theme.smallFontSize
                        Layout.fillWidth: true
                    }
                    IconButton {
                        iconName: "window-close-symbolic"
                        text: "Dismiss"
                        onClicked: root.power.dismissStartupNote()
                    }
                }
            }
            CheckBox {
                objectName: "keepPowerLimits"
                visible: root.power !== null && root.power.gpus.length > 0
                text: "Keep my power limits after quitting"
                checked: root.power !== null && root.power.keepLimits
                font.pixelSize: Theme.smallFontSize
                onToggled: root.power.keepLimits = checked
                Layout.leftMargin: Theme.spacing
                Layout.rightMargin: Theme.spacing
            }

            Label {
                visible: root.dashboard.topology.length > 0
                text: root.dashboard.topology
                color: Theme.textMuted
                wrapMode: Text.Wrap
                font.pixelSize: Theme.smallFontSize
                Layout.fillWidth: true
                Layout.leftMargin: Theme.spacing
                Layout.rightMargin: Theme.spacing
            }

            Label {
                visible: root.remote !== null && root.remote.count > 0
                text: "Remote machines"
                color: Theme.text
                font.bold: true
                font.pixelSize: Theme.fontSize + 2
                Layout.topMargin: Theme.spacing
                Layout.leftMargin: Theme.spacing
            }
            Repeater {
                objectName: "remoteHosts"
                model: root.remote
                delegate: ColumnLayout {
                    id: host
                    required property string title
                    required property string error
                    required property bool simulated
                    required property GpuListModel gpus
                    required property int gpuCount
                    required property var engines
                    objectName: "remoteHost"
                    spacing: Theme.spacing / 2
                    Layout.fillWidth: true
                    Layout.leftMargin: Theme.spacing
                    Layout.rightMargin: Theme.spacing
                    Label {
                        objectName: "remoteHostTitle"
                        text: host.title
                        color: Theme.text
                        font.bold: true
                        wrapMode: Text.Wrap
                        Layout.fillWidth: true
                    }
                    Label {
                        visible: host.simulated
                        text: "Simulated GPUs on that machine: readings are not real"
                        color: "#e0b050"
                        wrapMode: Text.Wrap
                        font.pixelSize: Theme.smallFontSize
                        Layout.fillWidth: true
                    }
                    Label {
                        objectName: "remoteError"
                        visible: host.error.length > 0
                        text: host.error
                        color: Theme.error
                        wrapMode: Text.Wrap
                        font.pixelSize: Theme.smallFontSize
                        Layout.fillWidth: true
                    }
                    Repeater {
                        model: host.gpus
                        delegate: GpuCard {
                            Layout.fillWidth: true
                        }
                    }
                    Repeater {
                        model: host.engines
                        delegate: Label {
                            required property var modelData
                            objectName: "remoteEngine"
                            text: modelData.summary
                            color: Theme.text
                            wrapMode: Text.Wrap
                            font.pixelSize: Theme.smallFontSize
                            Layout.fillWidth: true
                        }
                    }
                }
            }

            Label {
                visible: root.dashboard.placement.length > 0
                text: "Where the model runs now"
                color: Theme.text
                font.bold: true
                Layout.leftMargin: Theme.spacing
                Layout.topMargin: Theme.spacing
            }
            Repeater {
                model: root.dashboard.placement
                delegate: ColumnLayout {
                    required property var modelData
                    spacing: 0
                    Layout.fillWidth: true
                    Layout.leftMargin: Theme.spacing
                    Layout.rightMargin: Theme.spacing
                    Label {
                        text: modelData.name + ": " + modelData.part
                        color: Theme.text
                        wrapMode: Text.Wrap
                        font.pixelSize: Theme.smallFontSize
                        Layout.fillWidth: true
                    }
                    Label {
                        text: "weights " + root.mib(modelData.weightBytes) + " · KV cache " + root.mib(modelData.kvCacheBytes)
                              + (modelData.ramWeightBytes > 0 ? " · experts in system RAM " + root.mib(modelData.ramWeightBytes) : "")
                        color: Theme.textMuted
                        font.pixelSize: Theme.smallFontSize
                    }
                }
            }
            Label {
                visible: root.dashboard.hasBatching
                text: "Generation"
                color: Theme.text
                font.bold: true
                Layout.leftMargin: Theme.spacing
                Layout.topMargin: Theme.spacing
            }
            ColumnLayout {
                visible: root.dashboard.hasBatching
                spacing: 0
                Layout.fillWidth: true
                Layout.leftMargin: Theme.spacing
                Layout.rightMargin: Theme.spacing
                Label {
                    objectName: "batchingSequences"
                    text: "Answers: " + root.dashboard.sequencesRunning + " generating together · "
                          + root.dashboard.sequencesWaiting + " waiting"
                    color: Theme.text
                    font.pixelSize: Theme.smallFontSize
                }
                Label {
                    objectName: "batchingKv"
                    text: "KV cache: " + root.dashboard.kvBlocksUsed + " of " + root.dashboard.kvBlocksTotal
                          + " blocks in use (" + root.mib(root.dashboard.kvBytesUsed) + " of "
                          + root.mib(root.dashboard.kvBytesTotal) + ")"
                    color: Theme.textMuted
                    wrapMode: Text.Wrap
                    font.pixelSize: Theme.smallFontSize
                    Layout.fillWidth: true
                }
                Label {
                    objectName: "batchingPrefixes"
                    text: "Prompt cache: " + root.dashboard.cachedPrefixes
                          + (root.dashboard.cachedPrefixes === 1 ? " finished answer" : " finished answers") + " kept for reuse"
                    color: Theme.textMuted
                    font.pixelSize: Theme.smallFontSize
                }
            }
            Item {
                Layout.preferredHeight: Theme.spacing
            }
        }
    }
}
