// The efficiency sweep (issue 24), opened from the dashboard: the loaded model runs the same
// greedy answer at several power limits; each limit's tokens/s, watts, tokens per joule and
// peak temperature are shown, the most efficient limit and the knee marked, and either can be
// applied as the GPUs' setting. The chat waits while it runs; the limits go back at its end.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

Dialog {
    id: dialog

    required property PowerSweepController sweep
    readonly property bool running: sweep.running

    function fixed(value, digits) {
        return value.toFixed(digits)
    }

    title: "Efficiency sweep"
    header: Label {
        text: dialog.title
        font.bold: true
        font.pixelSize: Theme.titleSize
        leftPadding: Theme.spacing
        topPadding: Theme.spacing
        bottomPadding: Theme.spacing / 2
    }
    modal: true
    standardButtons: Dialog.Close
    parent: Overlay.overlay
    anchors.centerIn: parent
    width: Math.min(parent ? parent.width - 2 * Theme.space4 : 720, 760)
    height: Math.min(parent ? parent.height - 2 * Theme.space4 : 620, implicitHeight)

    ScrollView {
        id: scroll
        anchors.fill: parent
        contentWidth: availableWidth
        clip: true

        ColumnLayout {
            width: scroll.availableWidth
            spacing: Theme.spacing

            Label {
                text: "Runs the loaded model's answer at several power limits (the default down to 60% of it) "
                      + "and measures its speed, power and tokens per joule at each. Chat waits while it runs; "
                      + "the limits are set back at the end."
                color: Theme.textMuted
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }

            RowLayout {
                spacing: Theme.space2
                Button {
                    objectName: "startSweep"
                    visible: !dialog.running
                    text: dialog.sweep.rows.length > 0 ? "Run again" : "Start the sweep"
                    icon.name: "media-playback-start-symbolic"
                    icon.color: Theme.text
                    enabled: dialog.sweep.whyNot.length === 0
                    onClicked: dialog.sweep.start()
                }
                Button {
                    objectName: "cancelSweep"
                    visible: dialog.running
                    enabled: dialog.sweep.state === PowerSweepController.Running
                    text: "Cancel"
                    icon.name: "process-stop-symbolic"
                    icon.color: Theme.text
                    onClicked: dialog.sweep.cancel()
                }
                Label {
                    objectName: "sweepWhyNot"
                    visible: !dialog.running && dialog.sweep.whyNot.length > 0
                    text: dialog.sweep.whyNot
                    color: Theme.textMuted
                    wrapMode: Text.Wrap
                    font.pixelSize: Theme.smallFontSize
                    Layout.fillWidth: true
                }
            }

            ColumnLayout {
                visible: dialog.running
                spacing: Theme.space1
                Layout.fillWidth: true
                ProgressBar {
                    objectName: "sweepProgress"
                    from: 0
                    to: 1
                    value: dialog.sweep.progress
                    Layout.fillWidth: true
                }
                Label {
                    objectName: "sweepProgressText"
                    text: dialog.sweep.progressText
                    color: Theme.textMuted
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
            }

            Label {
                objectName: "sweepMessage"
                visible: text.length > 0
                text: dialog.sweep.message
                color: dialog.sweep.messageIsError ? Theme.error : Theme.textMuted
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }

            Label {
                objectName: "sweepLabel"
                visible: text.length > 0 && dialog.sweep.rows.length > 0
                text: dialog.sweep.label
                color: Theme.warning
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }
            Label {
                objectName: "sweepAbout"
                visible: dialog.sweep.rows.length > 0
                text: dialog.sweep.about
                color: Theme.textMuted
                wrapMode: Text.Wrap
                font.pixelSize: Theme.smallFontSize
                Layout.fillWidth: true
            }

            // The table: a row per limit, in the order run.
            ColumnLayout {
                objectName: "sweepTable"
                visible: dialog.sweep.rows.length > 0
                spacing: 0
                Layout.fillWidth: true

                component Cell: Label {
                    property bool strong: false
                    horizontalAlignment: Text.AlignRight
                    elide: Text.ElideRight
                    color: Theme.text
                    font.bold: strong
                    Layout.fillWidth: true
                    Layout.preferredWidth: 1
                }

                RowLayout {
                    spacing: Theme.space2
                    Layout.fillWidth: true
                    Layout.bottomMargin: Theme.space1
                    Cell { text: "Limit"; horizontalAlignment: Text.AlignLeft; color: Theme.textMuted }
                    Cell { text: "tokens/s"; color: Theme.textMuted }
                    Cell { text: "of fastest"; color: Theme.textMuted }
                    Cell { text: "Power"; color: Theme.textMuted }
                    Cell { text: "tokens/J"; color: Theme.textMuted }
                    Cell { text: "Peak"; color: Theme.textMuted }
                }
                Repeater {
                    objectName: "sweepRows"
                    model: dialog.sweep.rows
                    delegate: Rectangle {
                        id: rowItem
                        required property var modelData
                        required property int index
                        readonly property var row: modelData
                        objectName: "sweepRow" + index
                        color: row.mostEfficient ? Theme.successSoft : row.knee ? Theme.accentSoft : "transparent"
                        radius: Theme.radiusSmall
                        implicitHeight: rowLayout.implicitHeight + 2 * Theme.space1
                        Layout.fillWidth: true
                        ColumnLayout {
                            id: rowLayout
                            anchors.fill: parent
                            anchors.margins: Theme.space1
                            spacing: 0
                            RowLayout {
                                spacing: Theme.space2
                                Layout.fillWidth: true
                                Cell { text: rowItem.row.limit; horizontalAlignment: Text.AlignLeft; strong: rowItem.row.mostEfficient || rowItem.row.knee }
                                Cell { text: dialog.fixed(rowItem.row.tokensPerSecond, 1) }
                                Cell { text: Math.round(rowItem.row.speedShare * 100) + "%" }
                                Cell { text: rowItem.row.hasPower ? dialog.fixed(rowItem.row.averageW, 0) + " W" : "—" }
                                Cell { text: rowItem.row.hasPower ? dialog.fixed(rowItem.row.tokensPerJoule, 3) : "—" }
                                Cell { text: rowItem.row.hasTemperature ? dialog.fixed(rowItem.row.peakTemperatureC, 0) + " °C" : "—" }
                            }
                            Label {
                                visible: text.length > 0
                                text: [rowItem.row.mostEfficient ? "most efficient" : "", rowItem.row.knee ? "knee" : "",
                                       rowItem.row.slowdown.length > 0 ? "slowed: " + rowItem.row.slowdown : ""]
                                      .filter(s => s.length > 0).join(" · ")
                                color: rowItem.row.slowdown.length > 0 ? Theme.warning : Theme.textMuted
                                font.pixelSize: Theme.smallFontSize
                                wrapMode: Text.Wrap
                                Layout.fillWidth: true
                            }
                        }
                    }
                }
            }

            Label {
                objectName: "sweepSummary"
                visible: text.length > 0 && dialog.sweep.rows.length > 0
                text: dialog.sweep.summary
                color: Theme.text
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }

            Flow {
                visible: dialog.sweep.rows.length > 0 && !dialog.running
                spacing: Theme.space2
                Layout.fillWidth: true
                Button {
                    objectName: "applyMostEfficient"
                    visible: dialog.sweep.mostEfficient >= 0
                    text: visible ? "Apply the most efficient (" + dialog.sweep.rows[dialog.sweep.mostEfficient].limit + ")" : ""
                    onClicked: dialog.sweep.apply(dialog.sweep.mostEfficient)
                }
                Button {
                    objectName: "applyKnee"
                    visible: dialog.sweep.knee >= 0 && dialog.sweep.knee !== dialog.sweep.mostEfficient
                    text: visible ? "Apply the knee (" + dialog.sweep.rows[dialog.sweep.knee].limit + ")" : ""
                    onClicked: dialog.sweep.apply(dialog.sweep.knee)
                }
            }
        }
    }
}
