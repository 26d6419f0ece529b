// Where the user writes: Enter sends, Shift+Enter adds a line; Stop while an answer streams.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

Rectangle {
    id: root

    required property ChatController controller

    function send() {
        if (input.text.trim().length === 0 || root.controller.generating)
            return
        root.controller.send(input.text)
        input.text = ""
    }

    function forceActiveFocus() {
        input.forceActiveFocus()
    }

    color: Theme.background
    implicitHeight: row.implicitHeight + 2 * Theme.spacing

    RowLayout {
        id: row
        anchors.fill: parent
        anchors.margins: Theme.spacing
        anchors.leftMargin: Theme.spacing * 2
        anchors.rightMargin: Theme.spacing * 2
        spacing: Theme.spacing

        ScrollView {
            Layout.fillWidth: true
            Layout.maximumHeight: 200
            Layout.preferredHeight: Math.min(200, Math.max(44, input.implicitHeight))

            TextArea {
                id: input
                objectName: "composerInput"
                placeholderText: root.controller.modelState === "ready" ? "Message (Enter sends, Shift+Enter adds a line)"
                                                                        : "Waiting for a model…"
                wrapMode: TextEdit.Wrap
                font.pixelSize: Theme.fontSize
                focus: true
                Accessible.name: "Message"
                background: Rectangle {
                    radius: Theme.radius
                    color: Theme.surface
                    border.color: input.activeFocus ? Theme.accent : Theme.border
                }
                Keys.onReturnPressed: event => {
                    if (event.modifiers & Qt.ShiftModifier) {
                        event.accepted = false
                        return
                    }
                    root.send()
                }
            }
        }

        Button {
            objectName: root.controller.generating ? "stopButton" : "sendButton"
            text: root.controller.generating ? "Stop" : "Send"
            Accessible.name: text
            enabled: root.controller.generating || input.text.trim().length > 0
            onClicked: root.controller.generating ? root.controller.stop() : root.send()
        }
    }
}
