// The banner above the chat when a device fails under the model (ChatController.recovery):
// busy while the model is loaded again, a warning once it answers again elsewhere (the
// engine's words: which device failed, why, where it goes on and how fast), an error when
// it cannot go on, with the way to other devices (Settings). The answers under way keep
// streaming below it. It is the window's, so it stays while conversations are switched,
// until it is dismissed or another model is loaded.
import QtQuick
import QtQuick.Controls
import QtQuick.Controls.impl
import QtQuick.Layouts
import Powerhouse

Rectangle {
    id: banner

    required property ChatController controller
    // "Choose devices…": the settings' GPUs, to load the model on others.
    signal openSettings()

    readonly property int phase: controller.recovery
    readonly property bool reloading: phase === ChatController.Reloading
    readonly property bool failed: phase === ChatController.Failed
    readonly property string iconName: failed ? "dialog-error-symbolic" : "dialog-warning-symbolic"
    readonly property string title: reloading ? "A device failed: loading the model again…"
                                    : failed ? "A device failed and the model stopped"
                                    : "A device failed: the answers go on"

    visible: phase !== ChatController.None
    color: reloading ? Theme.accentSoft : failed ? Theme.errorBackground : Theme.warningSoft
    implicitHeight: row.implicitHeight + 2 * Theme.space2
    Accessible.role: Accessible.AlertMessage
    Accessible.name: title + ". " + controller.recoveryText

    // A line of the theme's border under it, as the bars above the chat have.
    Rectangle {
        anchors.left: parent.left
        anchors.right: parent.right
        anchors.bottom: parent.bottom
        height: 1
        color: Theme.border
    }

    RowLayout {
        id: row
        anchors.fill: parent
        anchors.leftMargin: Theme.space4
        anchors.rightMargin: Theme.space2
        anchors.topMargin: Theme.space2
        anchors.bottomMargin: Theme.space2
        spacing: Theme.space3

        BusyIndicator {
            objectName: "recoveryBusy"
            visible: banner.reloading
            running: banner.reloading
            implicitWidth: Theme.iconSize * 2
            implicitHeight: Theme.iconSize * 2
            Layout.alignment: Qt.AlignTop
        }
        IconImage {
            objectName: "recoveryIcon"
            visible: !banner.reloading
            name: banner.iconName
            color: banner.failed ? Theme.error : Theme.warning
            sourceSize: Qt.size(Theme.iconSize, Theme.iconSize)
            Layout.preferredWidth: Theme.iconSize
            Layout.preferredHeight: Theme.iconSize
            Layout.alignment: Qt.AlignTop
            Layout.topMargin: 2
        }

        ColumnLayout {
            spacing: Theme.space1
            Layout.fillWidth: true

            Label {
                objectName: "recoveryTitle"
                text: banner.title
                color: banner.failed ? Theme.error : Theme.text
                font.bold: true
                font.pixelSize: Theme.bodySize
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }
            Label {
                objectName: "recoveryText"
                text: banner.controller.recoveryText
                color: banner.failed ? Theme.error : Theme.text
                font.pixelSize: Theme.bodySize
                wrapMode: Text.Wrap
                Accessible.name: text
                Layout.fillWidth: true
            }
        }

        Button {
            objectName: "recoverySettings"
            visible: banner.failed
            text: "Choose devices…"
            Accessible.name: "Choose other devices in Settings"
            onClicked: banner.openSettings()
            Layout.alignment: Qt.AlignTop
        }
        IconButton {
            objectName: "recoveryDismiss"
            iconName: "window-close-symbolic"
            tint: Theme.textMuted
            text: "Dismiss"
            Accessible.name: "Dismiss the device failure banner"
            onClicked: banner.controller.dismissRecovery()
            Layout.alignment: Qt.AlignTop
        }
    }
}
