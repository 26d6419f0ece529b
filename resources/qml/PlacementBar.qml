// Which layers or shards of the model sit on which GPU: one bar across the model, a
// coloured segment per GPU (layer split: its layers, to scale; tensor split: its share of
// every layer, by bytes), with a legend below.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

ColumnLayout {
    id: root

    // [{gpu, name, part, first, count, tensor, bytes}] (SettingsController.plannedGpus)
    property var plan: []
    property int layers: 0
    readonly property var colors: ["#6e9cff", "#f0a24a", "#5cc98a", "#d070d0", "#e0d050", "#50c8d8", "#ff7a7a", "#a0a0ff"]
    readonly property real totalBytes: plan.reduce((sum, p) => sum + p.bytes, 0)

    function share(p) {
        if (p.tensor || root.layers <= 0) return root.totalBytes > 0 ? p.bytes / root.totalBytes : 0
        return p.count / root.layers
    }

    spacing: 4
    Accessible.role: Accessible.Chart
    Accessible.name: "Where the model's layers go: " + plan.map(p => "GPU " + p.gpu + " " + p.part).join("; ")

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
                    color: root.colors[modelData.gpu % root.colors.length]
                    border.color: Theme.sidebar
                    border.width: 1
                    Label {
                        anchors.centerIn: parent
                        visible: parent.width > implicitWidth + 6
                        text: "GPU " + parent.modelData.gpu
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
                color: root.colors[modelData.gpu % root.colors.length]
            }
            Label {
                text: "GPU " + modelData.gpu + ": " + modelData.part + " · " + (modelData.bytes / 1073741824).toFixed(2) + " GiB"
                color: Theme.textMuted
                font.pixelSize: Theme.smallFontSize
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }
        }
    }
}
