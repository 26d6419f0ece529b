// One message: the user's on the right in a bubble, the assistant's as Markdown across the
// column, with its statistics and actions (copy, regenerate, edit, delete).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

Item {
    id: root

    required property ChatController controller
    required property bool isLast
    required property int index
    required property var messageId
    required property string role
    required property string content
    required property string messageState
    required property string stats
    required property string error

    readonly property bool fromUser: role === "user"
    readonly property bool streaming: messageState === "streaming"
    property bool editing: false

    implicitHeight: column.implicitHeight

    ColumnLayout {
        id: column
        anchors.left: parent.left
        anchors.right: parent.right
        anchors.leftMargin: root.fromUser ? Math.max(Theme.spacing * 4, parent.width * 0.25) : Theme.spacing * 2
        anchors.rightMargin: Theme.spacing * 2
        spacing: 4

        Rectangle {
            Layout.alignment: root.fromUser ? Qt.AlignRight : Qt.AlignLeft
            Layout.maximumWidth: column.width
            implicitWidth: Math.min(column.width, body.implicitWidth + 2 * Theme.spacing)
            implicitHeight: body.implicitHeight + 2 * Theme.spacing
            radius: Theme.radius
            color: root.fromUser ? Theme.userBubble : "transparent"

            TextEdit {
                id: body
                anchors.fill: parent
                anchors.margins: Theme.spacing
                visible: !root.editing
                readOnly: true
                selectByMouse: true
                wrapMode: TextEdit.Wrap
                color: Theme.text
                selectionColor: Theme.selection
                font.pixelSize: Theme.fontSize
                textFormat: root.fromUser ? TextEdit.PlainText : TextEdit.MarkdownText
                text: root.content.length > 0 || !root.streaming ? root.content : "…"
                Accessible.name: root.fromUser ? "Your message" : "Answer"
            }

            TextArea {
                id: editor
                anchors.fill: parent
                visible: root.editing
                wrapMode: TextEdit.Wrap
                Accessible.name: "Edit message"
                Keys.onReturnPressed: event => {
                    if (event.modifiers & Qt.ShiftModifier) {
                        event.accepted = false
                        return
                    }
                    root.editing = false
                    root.controller.editAndResend(root.messageId, text)
                }
                Keys.onEscapePressed: root.editing = false
            }
        }

        Label {
            visible: root.error.length > 0
            text: root.error
            color: Theme.error
            wrapMode: Text.Wrap
            Layout.fillWidth: true
        }

        RowLayout {
            Layout.alignment: root.fromUser ? Qt.AlignRight : Qt.AlignLeft
            visible: !root.streaming
            spacing: 6

            Label {
                visible: !root.fromUser && root.stats.length > 0
                text: root.stats + (root.messageState === "stopped" ? " · stopped" : root.messageState === "interrupted" ? " · interrupted" : "")
                color: Theme.textMuted
                font.pixelSize: Theme.smallFontSize
            }
            ToolButton {
                text: "Copy"
                font.pixelSize: Theme.smallFontSize
                Accessible.name: "Copy message"
                onClicked: {
                    body.selectAll()
                    body.copy()
                    body.deselect()
                }
            }
            ToolButton {
                visible: root.fromUser
                text: "Edit"
                font.pixelSize: Theme.smallFontSize
                Accessible.name: "Edit and resend"
                enabled: !root.controller.generating
                onClicked: {
                    editor.text = root.content
                    root.editing = true
                    editor.forceActiveFocus()
                }
            }
            ToolButton {
                visible: !root.fromUser && root.isLast
                text: "Regenerate"
                font.pixelSize: Theme.smallFontSize
                Accessible.name: "Regenerate"
                enabled: !root.controller.generating
                onClicked: root.controller.regenerate()
            }
            ToolButton {
                text: "Delete"
                font.pixelSize: Theme.smallFontSize
                Accessible.name: "Delete message"
                enabled: !root.controller.generating
                onClicked: root.controller.deleteMessage(root.messageId)
            }
        }
    }
}
