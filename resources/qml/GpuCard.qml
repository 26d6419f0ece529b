// One GPU: load, temperature, memory, power and clocks now, and their last two minutes; a
// GPU that failed (lost, a fatal Xid, or the engine found it failing) is marked failed, with
// why, for the rest of the run. A local GPU also shows its power limit, to set or restore.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

Rectangle {
    id: card

    required property string name
    required property bool simulated
    required property bool responding
    required property string problem
    required property int load
    required property real memoryUsed
    required property real memoryTotal
    required property int temperature
    required property real power
    required property real powerLimit
    required property string clocks
    required property string link
    required property string throttle
    required property var loadHistory
    required property var temperatureHistory
    required property var memoryHistory
    required property bool failed
    required property string failure
    required property string uuid
    // Local GPUs: their power limits (PowerController); null for remote ones.
    property PowerController powerControl: null
    readonly property var powerInfo: {
        if (card.powerControl === null) return null
        const rows = card.powerControl.gpus
        for (let i = 0; i < rows.length; ++i) {
            if (rows[i].uuid === card.uuid) return rows[i]
        }
        return null
    }

    function gib(bytes) {
        return (bytes / 1073741824).toFixed(1) + " GiB"
    }

    radius: Theme.radius
    color: Theme.surface
    border.color: card.responding && !card.failed ? Theme.border : Theme.error
    border.width: card.failed ? 2 : 1
    implicitHeight: layout.implicitHeight + 2 * Theme.spacing
    Accessible.name: "GPU " + name + (card.failed ? ", failed: " + card.failure : "")

    ColumnLayout {
        id: layout
        anchors.fill: parent
        anchors.margins: Theme.spacing
        spacing: 6

        RowLayout {
            Layout.fillWidth: true
            Label {
                text: card.name
                color: Theme.text
                font.bold: true
                elide: Text.ElideRight
                Layout.fillWidth: true
            }
            Chip {
                objectName: "failedChip"
                visible: card.failed
                text: "FAILED"
                tint: Theme.error
                fill: Theme.errorBackground
                font.bold: true
            }
            Label {
                visible: card.simulated
                text: "SIMULATED"
                color: Theme.background
                font.pixelSize: Theme.smallFontSize - 2
                font.bold: true
                padding: 3
                background: Rectangle {
                    radius: 3
                    color: "#e0b050"
                }
            }
        }

        Label {
            objectName: "failureText"
            visible: card.failed
            text: card.failure + ". Nothing runs on it until Powerhouse restarts."
            color: Theme.error
            wrapMode: Text.Wrap
            Layout.fillWidth: true
        }
        Label {
            visible: !card.responding && !card.failed
            text: card.problem
            color: Theme.error
            wrapMode: Text.Wrap
            Layout.fillWidth: true
        }

        GridLayout {
            columns: 2
            columnSpacing: Theme.spacing
            rowSpacing: 2
            Layout.fillWidth: true

            Label { text: "Load"; color: Theme.textMuted; font.pixelSize: Theme.smallFontSize }
            Label { text: card.load >= 0 ? card.load + " %" : "—"; color: Theme.text; font.pixelSize: Theme.smallFontSize }
            Label { text: "Temperature"; color: Theme.textMuted; font.pixelSize: Theme.smallFontSize }
            Label {
                text: card.temperature >= 0 ? card.temperature + " °C" : "—"
                color: card.temperature >= 85 ? Theme.error : Theme.text
                font.pixelSize: Theme.smallFontSize
            }
            Label { text: "Memory"; color: Theme.textMuted; font.pixelSize: Theme.smallFontSize }
            Label {
                // Remote exporters may not give the total (then "—").
                text: card.memoryTotal > 0 ? card.gib(card.memoryUsed) + " / " + card.gib(card.memoryTotal) : "—"
                color: Theme.text
                font.pixelSize: Theme.smallFontSize
            }
            Label { text: "Power"; color: Theme.textMuted; font.pixelSize: Theme.smallFontSize }
            Label {
                text: card.power >= 0 ? card.power.toFixed(0) + " W" + (card.powerLimit > 0 ? " / " + card.powerLimit.toFixed(0) + " W" : "") : "—"
                color: Theme.text
                font.pixelSize: Theme.smallFontSize
            }
            Label { text: "Clocks"; color: Theme.textMuted; font.pixelSize: Theme.smallFontSize; visible: card.clocks.length > 0 }
            Label { text: card.clocks; color: Theme.text; font.pixelSize: Theme.smallFontSize; visible: card.clocks.length > 0 }
            Label { text: "Link"; color: Theme.textMuted; font.pixelSize: Theme.smallFontSize; visible: card.link.length > 0 }
            Label { text: card.link; color: Theme.text; font.pixelSize: Theme.smallFontSize; visible: card.link.length > 0 }
            Label { text: "Throttled"; color: Theme.textMuted; font.pixelSize: Theme.smallFontSize; visible: card.throttle.length > 0 }
            Label { text: card.throttle; color: Theme.error; font.pixelSize: Theme.smallFontSize; visible: card.throttle.length > 0 }
        }

        PowerLimitControl {
            visible: card.powerInfo !== null
            power: card.powerControl
            info: card.powerInfo !== null ? card.powerInfo : ({gpu: -1, supported: false, error: "", command: "", currentW: 0, changedFromW: 0})
            Layout.fillWidth: true
        }

        ProgressBar {
            from: 0
            to: Math.max(1, card.memoryTotal)
            value: card.memoryUsed
            Accessible.name: "Memory used"
            Layout.fillWidth: true
        }

        Label { text: "Load, last two minutes"; color: Theme.textMuted; font.pixelSize: Theme.smallFontSize - 1 }
        Sparkline {
            values: card.loadHistory
            maximum: 100
            Layout.fillWidth: true
        }
        Label { text: "Temperature"; color: Theme.textMuted; font.pixelSize: Theme.smallFontSize - 1 }
        Sparkline {
            values: card.temperatureHistory
            maximum: 100
            lineColor: "#ff9f5a"
            Layout.fillWidth: true
        }
    }
}
