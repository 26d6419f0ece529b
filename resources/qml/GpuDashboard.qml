// The right panel, in sections under headings of the type scale: GPUs (a card per GPU, see
// GpuCard.qml), Power (the Costs view, the efficiency sweep, "keep my power limits"), Model
// placement (where the model sits on the GPUs: a bar, and the devices the engine runs it on
// now), Generation (the engine's batching: the answers generated together, the KV cache
// blocks they and the cached conversations hold), Interconnect (the NVLink topology) and
// remote machines' GPUs by host (with their engines' figures). It fits the panel from its
// narrowest (220 px) up.
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

    // A section's heading: small capitals in the muted caption style, as on the welcome view.
    component SectionHeading: Label {
        color: Theme.textMuted
        font.pixelSize: Theme.captionSize
        font.weight: Font.DemiBold
        font.capitalization: Font.AllUppercase
        font.letterSpacing: 0.6
        elide: Text.ElideRight
        Layout.fillWidth: true
        Layout.topMargin: Theme.space3
    }
    // A section's box: the surface of a card, its content padded inside.
    component SectionCard: Rectangle {
        default property alias content: inner.data
        radius: Theme.radius
        color: Theme.surface
        border.color: Theme.border
        implicitHeight: inner.implicitHeight + 2 * Theme.space3
        Layout.fillWidth: true
        ColumnLayout {
            id: inner
            anchors.fill: parent
            anchors.margins: Theme.space3
            spacing: Theme.space2
        }
    }
    // Small text in a section: muted, wrapped.
    component Note: Label {
        color: Theme.textMuted
        wrapMode: Text.Wrap
        font.pixelSize: Theme.captionSize
        Layout.fillWidth: true
    }

    color: Theme.sidebar

    ScrollView {
        id: scroll
        anchors.fill: parent
        contentWidth: availableWidth

        ColumnLayout {
            // The panel's content: padded on both sides, never wider than the panel.
            x: Theme.space3
            width: scroll.availableWidth - 2 * Theme.space3
            spacing: Theme.space2

            RowLayout {
                spacing: Theme.space2
                Layout.fillWidth: true
                Layout.topMargin: Theme.space3
                Label {
                    text: "GPUs"
                    color: Theme.text
                    font.pixelSize: Theme.titleSize
                    font.weight: Font.DemiBold
                    Layout.fillWidth: true
                }
                Chip {
                    visible: root.dashboard.gpus.count > 0
                    text: root.dashboard.gpus.count
                    Accessible.name: root.dashboard.gpus.count + " GPUs"
                }
            }
            Rectangle {
                visible: root.dashboard.source.length > 0
                radius: Theme.radiusSmall
                color: root.dashboard.simulated ? Theme.warningSoft : "transparent"
                implicitHeight: sourceNote.implicitHeight + (root.dashboard.simulated ? 2 * Theme.space2 : 0)
                Layout.fillWidth: true
                Label {
                    id: sourceNote
                    objectName: "sourceNote"
                    anchors.fill: parent
                    anchors.margins: root.dashboard.simulated ? Theme.space2 : 0
                    text: root.dashboard.simulated ? "Simulated GPUs (POWERHOUSE_SIMULATE_GPUS): readings are not real"
                                                   : root.dashboard.source
                    color: root.dashboard.simulated ? Theme.warning : Theme.textMuted
                    wrapMode: Text.Wrap
                    font.pixelSize: Theme.captionSize
                }
            }
            Note {
                visible: root.dashboard.gpus.count === 0
                text: "No GPU: " + (root.dashboard.status.length > 0 ? root.dashboard.status : "none found")
                      + ". Models run on the CPU."
                font.pixelSize: Theme.bodySize
            }

            Label {
                objectName: "answerThrottle"
                visible: root.dashboard.answerThrottle.length > 0
                text: root.dashboard.answerThrottle
                color: Theme.warning
                wrapMode: Text.Wrap
                font.pixelSize: Theme.captionSize
                Layout.fillWidth: true
            }

            Repeater {
                model: root.dashboard.gpus
                delegate: GpuCard {
                    powerControl: root.power
                    Layout.fillWidth: true
                }
            }

            // Power: what the answers cost, the sweep for the most efficient limit, and
            // whether the limits set here outlive the app.
            SectionHeading {
                visible: powerCard.visible
                text: "Power"
            }
            SectionCard {
                id: powerCard
                visible: root.costs !== null || (root.sweep !== null && root.dashboard.gpus.count > 0)
                         || (root.power !== null && (root.power.gpus.length > 0 || root.power.startupNote.length > 0))

                Rectangle {
                    objectName: "powerStartupNote"
                    visible: root.power !== null && root.power.startupNote.length > 0
                    radius: Theme.radiusSmall
                    color: Theme.warningSoft
                    implicitHeight: noteRow.implicitHeight + 2 * Theme.space2
                    Layout.fillWidth: true
                    RowLayout {
                        id: noteRow
                        anchors.fill: parent
                        anchors.margins: Theme.space2
                        Label {
                            text: root.power !== null ? root.power.startupNote : ""
                            color: Theme.warning
                            wrapMode: Text.Wrap
                            font.pixelSize: Theme.captionSize
                            Layout.fillWidth: true
                        }
                        IconButton {
                            iconName: "window-close-symbolic"
                            text: "Dismiss"
                            onClicked: root.power.dismissStartupNote()
                        }
                    }
                }
                Flow {
                    visible: root.costs !== null || root.sweep !== null
                    spacing: Theme.space2
                    Layout.fillWidth: true
                    Button {
                        objectName: "openCosts"
                        text: "Costs…"
                        icon.name: "accessories-calculator-symbolic"
                        icon.color: Theme.text
                        font.pixelSize: Theme.captionSize
                        Accessible.name: "Costs"
                        visible: root.costs !== null
                        onClicked: costsLoader.item.open()
                    }
                    Button {
                        objectName: "openSweep"
                        text: root.sweep !== null && root.sweep.running ? "Sweep running…" : "Efficiency sweep…"
                        icon.name: "power-profile-balanced-symbolic"
                        icon.color: Theme.text
                        font.pixelSize: Theme.captionSize
                        Accessible.name: "Efficiency sweep"
                        visible: root.sweep !== null && root.dashboard.gpus.count > 0
                        ToolTip.visible: hovered
                        ToolTip.text: "Run the model at several power limits and find the most efficient"
                        onClicked: sweepLoader.item.open()
                    }
                }
                CheckBox {
                    objectName: "keepPowerLimits"
                    visible: root.power !== null && root.power.gpus.length > 0
                    text: "Keep my power limits after quitting"
                    checked: root.power !== null && root.power.keepLimits
                    font.pixelSize: Theme.captionSize
                    // The box then shows what is stored: a refused write (the error line says why)
                    // leaves it as it was.
                    onToggled: {
                        root.power.keepLimits = checked
                        checked = Qt.binding(() => root.power !== null && root.power.keepLimits)
                    }
                    Layout.fillWidth: true
                    contentItem: Label {
                        leftPadding: parent.indicator.width + parent.spacing
                        text: parent.text
                        font: parent.font
                        color: Theme.text
                        wrapMode: Text.Wrap
                        verticalAlignment: Text.AlignVCenter
                    }
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

            // Model placement: the settings' plan as a bar, and the devices it runs on now.
            SectionHeading {
                visible: placementCard.visible
                text: "Model placement"
            }
            SectionCard {
                id: placementCard
                visible: root.plan.length > 0 || root.dashboard.placement.length > 0

                PlacementBar {
                    visible: root.plan.length > 0
                    plan: root.plan
                    layers: root.layers
                    Layout.fillWidth: true
                }
                Label {
                    visible: root.dashboard.placement.length > 0
                    text: "Where the model runs now"
                    color: Theme.text
                    font.pixelSize: Theme.captionSize
                    font.weight: Font.DemiBold
                    Layout.topMargin: root.plan.length > 0 ? Theme.space1 : 0
                }
                Repeater {
                    model: root.dashboard.placement
                    delegate: ColumnLayout {
                        required property var modelData
                        spacing: 0
                        Layout.fillWidth: true
                        Label {
                            text: modelData.name + ": " + modelData.part
                            color: Theme.text
                            wrapMode: Text.Wrap
                            font.pixelSize: Theme.captionSize
                            Layout.fillWidth: true
                        }
                        Note {
                            text: "weights " + root.mib(modelData.weightBytes) + " · KV cache " + root.mib(modelData.kvCacheBytes)
                                  + (modelData.ramWeightBytes > 0 ? " · experts in system RAM " + root.mib(modelData.ramWeightBytes) : "")
                        }
                    }
                }
            }

            // Generation: the engine's batching now.
            SectionHeading {
                visible: root.dashboard.hasBatching
                text: "Generation"
            }
            SectionCard {
                visible: root.dashboard.hasBatching
                Label {
                    objectName: "batchingSequences"
                    text: "Answers: " + root.dashboard.sequencesRunning + " generating together · "
                          + root.dashboard.sequencesWaiting + " waiting"
                    color: Theme.text
                    wrapMode: Text.Wrap
                    font.pixelSize: Theme.captionSize
                    Layout.fillWidth: true
                }
                ProgressBar {
                    id: kvBar
                    from: 0
                    to: Math.max(1, root.dashboard.kvBlocksTotal)
                    value: root.dashboard.kvBlocksUsed
                    Accessible.name: "KV cache blocks in use"
                    Layout.fillWidth: true
                    implicitHeight: 6
                    background: Rectangle {
                        implicitHeight: 6
                        radius: 3
                        color: Theme.surfaceSunken
                    }
                    contentItem: Item {
                        implicitHeight: 6
                        Rectangle {
                            width: kvBar.visualPosition * parent.width
                            height: parent.height
                            radius: 3
                            color: Theme.accent
                        }
                    }
                }
                Note {
                    objectName: "batchingKv"
                    text: "KV cache: " + root.dashboard.kvBlocksUsed + " of " + root.dashboard.kvBlocksTotal
                          + " blocks in use (" + root.mib(root.dashboard.kvBytesUsed) + " of "
                          + root.mib(root.dashboard.kvBytesTotal) + ")"
                }
                Note {
                    objectName: "batchingPrefixes"
                    text: "Prompt cache: " + root.dashboard.cachedPrefixes
                          + (root.dashboard.cachedPrefixes === 1 ? " finished answer" : " finished answers") + " kept for reuse"
                }
            }

            SectionHeading {
                visible: root.dashboard.topology.length > 0
                text: "Interconnect"
            }
            Note {
                visible: root.dashboard.topology.length > 0
                text: root.dashboard.topology
            }

            Label {
                visible: root.remote !== null && root.remote.count > 0
                text: "Remote machines"
                color: Theme.text
                font.pixelSize: Theme.titleSize
                font.weight: Font.DemiBold
                elide: Text.ElideRight
                Layout.fillWidth: true
                Layout.topMargin: Theme.space4
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
                    spacing: Theme.space2
                    Layout.fillWidth: true
                    Label {
                        objectName: "remoteHostTitle"
                        text: host.title
                        color: Theme.textMuted
                        font.pixelSize: Theme.captionSize
                        font.weight: Font.DemiBold
                        font.capitalization: Font.AllUppercase
                        font.letterSpacing: 0.6
                        wrapMode: Text.Wrap
                        Layout.fillWidth: true
                        Layout.topMargin: Theme.space2
                    }
                    Label {
                        visible: host.simulated
                        text: "Simulated GPUs on that machine: readings are not real"
                        color: Theme.warning
                        wrapMode: Text.Wrap
                        font.pixelSize: Theme.captionSize
                        Layout.fillWidth: true
                    }
                    Label {
                        objectName: "remoteError"
                        visible: host.error.length > 0
                        text: host.error
                        color: Theme.error
                        wrapMode: Text.Wrap
                        font.pixelSize: Theme.captionSize
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
                            font.pixelSize: Theme.captionSize
                            Layout.fillWidth: true
                        }
                    }
                }
            }
            Item {
                Layout.preferredHeight: Theme.space3
            }
        }
    }
}
