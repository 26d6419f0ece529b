// Which layers or shards of the model sit on which GPU: one bar across the model, a
// coloured segment per GPU (layer split: its layers, to scale; tensor split, or a mixture of
// experts with experts in system RAM: its share by bytes), with a legend below. The experts
// kept in RAM (gpu -1) are a grey segment of their own.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

ColumnLayout {
    id: root

    // [{gpu, name, part, first, count, tensor, bytes}] (SettingsController.plannedGpus);
    // gpu -1: the experts in system RAM
    property var plan: []
    property int layers: 0
    readonly property var colors: ["#6e9cff", "#f0a24a", "#5cc98a", "#d070d0", "#e0d050", "#50c8d8", "#ff7a7a", "#a0a0ff"]
    readonly property real totalBytes: plan.reduce((sum, p) => sum + p.bytes, 0)

    function colorOf(p) { return p.gpu < 0 ? Theme.textMuted : root.colors[p.gpu % root.colors.length] }
    function nameOf(p) { return p.gpu < 0 ? "RAM" : "GPU " + p.gpu }

    function share(p) {
        if (p.tensor || root.layers <= 0) return root.totalBytes > 0 ? p.bytes / root.totalBytes : 0
        return p.count / root.layers
    }

    spacing: 4
    Accessible.role: Accessible.Chart
    Accessible.name: "Where the model's layers go: " + plan.map(p => root.nameOf(p) + " " + p.part).join("; ")

    Rectangle {
        Layout.fillWidth: true
        implicitHeight: 18
        radius: 4
        color: Theme.surface
        clip: true

        Row {
            anchors.fill: parent
            Repeater {
                model: root.plan
                delegate: Rectangle {
                    required property var modelData
                    required property int index
                    objectName: "segment" + index
                    width: parent.width * root.share(modelData)
                    height: parent.height
                    color: root.colorOf(modelData)
                    border.color: Theme.sidebar
                    border.width: 1
                    Label {
                        anchors.centerIn: parent
                        visible: parent.width > implicitWidth + 6
                        text: root.nameOf(parent.modelData)
                        color: "#101216"
                        font.pixelSize: Theme.smallFontSize - 1
                    }
                }
            }
        }
    }

    Repeater {
        model: root.plan
        delegate: RowLayout {
            required property var modelData
            spacing: 6
            Layout.fillWidth: true
            Rectangle {
                implicitWidth: 10
                implicitHeight: 10
                radius: 2
                color: root.colorOf(modelData)
            }
            Label {
                text: (modelData.gpu < 0 ? "System RAM" : "GPU " + modelData.gpu) + ": " + modelData.part + " · " + (modelData.bytes / 1073741824).toFixed(2) + " GiB"
                color: Theme.textMuted
                font.pixelSize: Theme.smallFontSize
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }
        }
    }
}
