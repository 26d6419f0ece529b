// Where the user writes: Enter sends, Shift+Enter adds a line; Stop while an answer streams.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

Rectangle {
    id: root

    required property ChatController controller
    // Why nothing can be sent now ("" when it can): an efficiency sweep holds the model.
    property string blockedReason: ""

    function send() {
        if (input.text.trim().length === 0 || root.controller.generating || root.blockedReason.length > 0)
            return
        // Refused (no model yet, still loading, a failed save): the words stay to send again.
        if (root.controller.send(input.text))
            input.text = ""
    }

    function forceActiveFocus() {
        input.forceActiveFocus()
    }

    color: Theme.background
    implicitHeight: box.implicitHeight + 2 * Theme.space3

    // One box: the text, and the send (or stop) button inside it, as chat apps draw it.
    Rectangle {
        id: box
        anchors.fill: parent
        anchors.topMargin: Theme.space2
        anchors.bottomMargin: Theme.space4
        anchors.leftMargin: Theme.space6
        anchors.rightMargin: Theme.space6
        implicitHeight: row.implicitHeight + 2 * Theme.space2
        radius: Theme.radiusLarge
        color: Theme.surface
        border.color: input.activeFocus ? Theme.accent : Theme.border
        border.width: input.activeFocus ? 2 : 1

        RowLayout {
            id: row
            anchors.fill: parent
            anchors.margins: Theme.space2
            anchors.leftMargin: Theme.space3
            spacing: Theme.space2

            ScrollView {
                Layout.fillWidth: true
                Layout.maximumHeight: 200
                Layout.preferredHeight: Math.min(200, Math.max(36, input.implicitHeight))

                TextArea {
                    id: input
                    objectName: "composerInput"
                    placeholderText: root.blockedReason.length > 0 ? root.blockedReason
                                     : root.controller.modelState === ChatController.Ready ? "Message (Enter sends, Shift+Enter adds a line)"
                                                                                           : "Waiting for a model…"
                    wrapMode: TextEdit.Wrap
                    font.pixelSize: Theme.bodySize
                    focus: true
                    Accessible.name: "Message"
                    background: null
                    // The words not sent yet are the controller's, kept across restarts.
                    Component.onCompleted: text = root.controller.draft
                    onTextChanged: root.controller.draft = text
                    // Enter sends from the main keys and the keypad alike.
                    Keys.onReturnPressed: event => enterPressed(event)
                    Keys.onEnterPressed: event => enterPressed(event)
                    function enterPressed(event) {
                        if (event.modifiers & Qt.ShiftModifier) {
                            event.accepted = false
                            return
                        }
                        root.send()
                    }
                }
            }

            RoundButton {
                objectName: root.controller.generating ? "stopButton" : "sendButton"
                text: root.controller.generating ? "Stop" : "Send"
                display: AbstractButton.IconOnly
                icon.name: root.controller.generating ? "media-playback-stop-symbolic" : "go-up-symbolic"
                icon.color: enabled ? Theme.onAccent : Theme.textFaint
                highlighted: true
                Accessible.name: text
                ToolTip.visible: hovered
                ToolTip.text: root.controller.generating ? "Stop the answer (Esc)" : "Send (Enter)"
                enabled: root.controller.generating || (input.text.trim().length > 0 && root.blockedReason.length === 0)
                Layout.alignment: Qt.AlignBottom
                onClicked: root.controller.generating ? root.controller.stop() : root.send()
            }
        }
    }
}
