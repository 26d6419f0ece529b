// One GPU as a card: a header line (its index and name, and chips for SIMULATED, FAILED,
// throttled or not responding), the key figures now in an aligned grid with their units
// (load, memory with its bar, temperature, power against the limit, clocks, link), and the
// load and temperature of the last two minutes as two sparklines of one size. A GPU that
// failed (lost, a fatal Xid, or the engine found it failing) is marked failed, with why, for
// the rest of the run. A local GPU also has its power limit, folded behind a "Power limit"
// disclosure, to set or restore.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

Rectangle {
    id: card

    required property int index
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
    readonly property int gpuIndex: powerInfo !== null ? powerInfo.gpu : index
    // The chips sit beside the name while that leaves the name 120 px, else under it.
    readonly property bool chipsBeside: width - 2 * Theme.space3 - chips.chipsWidth - Theme.space2 >= 120

    function gib(bytes) {
        return (bytes / 1073741824).toFixed(1)
    }

    // A figure's name, in the muted caption style.
    component FigureName: Label {
        color: Theme.textMuted
        font.pixelSize: Theme.captionSize
        Layout.alignment: Qt.AlignLeft | Qt.AlignVCenter
    }
    // A figure's value, right-aligned so that the units line up.
    component FigureValue: Label {
        color: Theme.text
        font.pixelSize: Theme.captionSize
        font.weight: Font.Medium
        horizontalAlignment: Text.AlignRight
        elide: Text.ElideLeft
        Layout.fillWidth: true
        Layout.alignment: Qt.AlignRight | Qt.AlignVCenter
    }
    // A thin bar of `value` out of `to`.
    component Meter: Rectangle {
        property real value: 0
        property real to: 1
        property color fill: Theme.accent
        implicitHeight: 6
        radius: 3
        color: Theme.surfaceSunken
        Rectangle {
            width: parent.width * Math.min(1, Math.max(0, parent.value / Math.max(1e-9, parent.to)))
            height: parent.height
            radius: parent.radius
            color: parent.fill
        }
    }

    radius: Theme.radius
    color: Theme.surface
    border.color: card.responding && !card.failed ? Theme.border : Theme.error
    border.width: card.failed ? 2 : 1
    implicitHeight: layout.implicitHeight + 2 * Theme.space3
    Accessible.name: "GPU " + name + (card.failed ? ", failed: " + card.failure : "")

    ColumnLayout {
        id: layout
        anchors.fill: parent
        anchors.margins: Theme.space3
        spacing: Theme.space2

        // The header: index and name, then the chips (beside them, or under them where the
        // card is too narrow for both).
        GridLayout {
            columns: card.chipsBeside ? 2 : 1
            columnSpacing: Theme.space2
            rowSpacing: Theme.space1
            Layout.fillWidth: true
            ColumnLayout {
                spacing: 0
                Layout.fillWidth: true
                Label {
                    text: "GPU " + card.gpuIndex
                    color: Theme.textMuted
                    font.pixelSize: Theme.captionSize
                    font.capitalization: Font.AllUppercase
                    font.letterSpacing: 0.6
                }
                Label {
                    objectName: "gpuName"
                    text: card.name
                    color: Theme.text
                    font.pixelSize: Theme.bodySize
                    font.weight: Font.DemiBold
                    elide: Text.ElideRight
                    Layout.fillWidth: true
                }
            }
            Flow {
                id: chips
                readonly property real chipsWidth: {
                    let sum = 0
                    for (let i = 0; i < children.length; ++i) {
                        if (children[i].visible) sum += children[i].implicitWidth + (sum > 0 ? spacing : 0)
                    }
                    return sum
                }
                visible: card.failed || card.simulated || card.throttle.length > 0 || !card.responding
                spacing: Theme.space1
                Layout.alignment: Qt.AlignRight | Qt.AlignTop
                Layout.fillWidth: !card.chipsBeside
                Layout.preferredWidth: chipsWidth
                Chip {
                    objectName: "failedChip"
                    visible: card.failed
                    text: "FAILED"
                    tint: Theme.error
                    fill: Theme.errorBackground
                    font.weight: Font.DemiBold
                }
                Chip {
                    objectName: "simulatedChip"
                    visible: card.simulated && !card.failed
                    text: "SIMULATED"
                    tint: Theme.warning
                    fill: Theme.warningSoft
                    font.weight: Font.DemiBold
                }
                Chip {
                    objectName: "throttledChip"
                    visible: card.throttle.length > 0 && !card.failed
                    text: "THROTTLED"
                    tint: Theme.warning
                    fill: Theme.warningSoft
                    font.weight: Font.DemiBold
                }
                Chip {
                    visible: !card.responding && !card.failed
                    text: "NO READINGS"
                    tint: Theme.error
                    fill: Theme.errorBackground
                    font.weight: Font.DemiBold
                }
            }
        }

        Label {
            objectName: "failureText"
            visible: card.failed
            text: card.failure + ". Nothing runs on it until Powerhouse restarts."
            color: Theme.error
            wrapMode: Text.Wrap
            font.pixelSize: Theme.captionSize
            Layout.fillWidth: true
        }
        Label {
            visible: !card.responding && !card.failed
            text: card.problem
            color: Theme.error
            wrapMode: Text.Wrap
            font.pixelSize: Theme.captionSize
            Layout.fillWidth: true
        }

        // The figures now: name on the left, value with its unit on the right.
        GridLayout {
            objectName: "gpuFigures"
            columns: 2
            columnSpacing: Theme.space3
            rowSpacing: Theme.space1
            Layout.fillWidth: true

            FigureName { text: "Load" }
            FigureValue { objectName: "gpuLoad"; text: card.load >= 0 ? card.load + " %" : "—" }

            FigureName { text: "Memory" }
            // Remote exporters may not give the total (then "—").
            FigureValue {
                objectName: "gpuMemory"
                text: card.memoryTotal > 0 ? card.gib(card.memoryUsed) + " GiB / " + card.gib(card.memoryTotal) + " GiB" : "—"
            }
            ProgressBar {
                id: memoryBar
                visible: card.memoryTotal > 0
                from: 0
                to: Math.max(1, card.memoryTotal)
                value: card.memoryUsed
                Accessible.name: "Memory used"
                Layout.columnSpan: 2
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
                        width: memoryBar.visualPosition * parent.width
                        height: parent.height
                        radius: 3
                        color: memoryBar.visualPosition > 0.9 ? Theme.warning : Theme.accent
                    }
                }
            }

            FigureName { text: "Temperature" }
            FigureValue {
                objectName: "gpuTemperature"
                text: card.temperature >= 0 ? card.temperature + " °C" : "—"
                color: card.temperature >= 85 ? Theme.error : Theme.text
            }

            FigureName { text: "Power" }
            FigureValue {
                objectName: "gpuPower"
                text: card.power >= 0 ? card.power.toFixed(0) + (card.powerLimit > 0 ? " / " + card.powerLimit.toFixed(0) : "") + " W" : "—"
            }
            Meter {
                visible: card.power >= 0 && card.powerLimit > 0
                value: card.power
                to: card.powerLimit
                fill: card.power >= 0.95 * card.powerLimit ? Theme.warning : Theme.success
                Layout.columnSpan: 2
                Layout.fillWidth: true
            }

            FigureName { text: "Clocks"; visible: card.clocks.length > 0 }
            FigureValue { text: card.clocks; visible: card.clocks.length > 0 }
            FigureName { text: "Link"; visible: card.link.length > 0 }
            FigureValue { text: card.link; visible: card.link.length > 0 }
            FigureName { text: "Throttled"; visible: card.throttle.length > 0 }
            FigureValue { text: card.throttle; color: Theme.warning; visible: card.throttle.length > 0; elide: Text.ElideRight }
        }

        // The last two minutes: two charts of one size, each with its name and value now.
        GridLayout {
            columns: 2
            columnSpacing: Theme.space3
            rowSpacing: 2
            Layout.fillWidth: true
            Layout.topMargin: Theme.space1

            FigureName { text: "Load, last two minutes" }
            FigureValue { text: card.load >= 0 ? card.load + " %" : ""; color: Theme.textMuted; font.weight: Font.Normal }
            Sparkline {
                values: card.loadHistory
                maximum: 100
                Layout.columnSpan: 2
                Layout.fillWidth: true
                Layout.preferredHeight: 32
            }
            FigureName { text: "Temperature" }
            FigureValue { text: card.temperature >= 0 ? card.temperature + " °C" : ""; color: Theme.textMuted; font.weight: Font.Normal }
            Sparkline {
                values: card.temperatureHistory
                maximum: 100
                lineColor: Theme.warning
                Layout.columnSpan: 2
                Layout.fillWidth: true
                Layout.preferredHeight: 32
            }
        }

        Rectangle {
            visible: card.powerInfo !== null
            implicitHeight: 1
            color: Theme.border
            Layout.fillWidth: true
        }
        PowerLimitControl {
            visible: card.powerInfo !== null
            collapsible: true
            power: card.powerControl
            info: card.powerInfo !== null ? card.powerInfo : ({gpu: -1, supported: false, error: "", command: "", currentW: 0, changedFromW: 0})
            Layout.fillWidth: true
        }
    }
}
