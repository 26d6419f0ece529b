// One message: the user's on the right in a bubble, the assistant's as Markdown across the
// column, with its statistics and actions (copy, regenerate, edit, delete), and where an
// answer went on after a device failed under it. A reasoning model's thinking is folded above
// its answer (ThinkingPart); Copy copies the answer alone.
import QtQuick
import QtQuick.Controls
import QtQuick.Controls.impl
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
    required property int messageState  // a MessageListModel.State
    required property string stats
    required property string error
    // "Continued on CPU (8 threads) after GPU 1 failed at token 37: ...", a line per
    // recovery; empty for answers no device failure touched.
    required property string recovery
    // The content's blocks: a MessageBlocksModel (any list model with its roles kind, text,
    // language and closed will do; the view tests pass a ListModel). A streaming answer
    // changes only its last rows, so the blocks above keep their delegates.
    required property QtObject blocks
    // A reasoning model's thinking, apart from the content; empty for most answers.
    required property string reasoning
    // The tools an imported answer called, a line per call ("Called get_weather({...})");
    // empty for the app's own answers, which call none.
    required property string toolCalls

    readonly property bool fromUser: role === "user"
    readonly property bool streaming: messageState === MessageListModel.Streaming
    // How an answer ended short, shown with it: "stopped", "interrupted", or "" (in full).
    readonly property string cutShort: fromUser ? "" : messageState === MessageListModel.Stopped ? "stopped"
                                     : messageState === MessageListModel.Interrupted ? "interrupted" : ""
    property bool editing: false

    // The edit ended, sent or cancelled: the view gives the keys back to the composer (the
    // hidden editor would keep them, and typing would go nowhere).
    signal editClosed()

    function closeEditor() {
        root.editing = false
        root.editClosed()
    }

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
            implicitWidth: root.fromUser ? Math.min(column.width, body.implicitWidth + 2 * Theme.spacing) : column.width
            implicitHeight: (root.fromUser ? body.implicitHeight : answer.implicitHeight) + 2 * Theme.spacing
            radius: Theme.radius
            color: root.fromUser ? Theme.userBubble : "transparent"

            // The user's words as typed.
            TextEdit {
                id: body
                anchors.fill: parent
                anchors.margins: Theme.spacing
                visible: root.fromUser && !root.editing
                readOnly: true
                selectByMouse: true
                wrapMode: TextEdit.Wrap
                color: Theme.text
                selectionColor: Theme.selection
                font.pixelSize: Theme.fontSize
                textFormat: TextEdit.PlainText
                text: root.fromUser ? root.content : ""
                Accessible.name: "Your message"
            }

            // The answer: Markdown, with each fenced code block in a frame of its own.
            ColumnLayout {
                id: answer
                anchors.left: parent.left
                anchors.right: parent.right
                anchors.top: parent.top
                anchors.margins: Theme.spacing
                visible: !root.fromUser
                spacing: Theme.spacing * 0.75

                ThinkingPart {
                    objectName: "thinkingPart"
                    visible: !root.fromUser && root.reasoning.length > 0
                    reasoning: root.reasoning
                    thinking: root.streaming && root.content.length === 0
                    Layout.fillWidth: true
                }

                // No text (yet): the dots while it streams (unless "Thinking…" says more); an answer cut short before its
                // first word says so rather than leaving an empty bubble.
                Label {
                    objectName: "emptyAnswer"
                    visible: blockRepeater.count === 0 && !(root.streaming && root.reasoning.length > 0)
                    text: root.streaming ? "…" : root.cutShort.length > 0 && root.content.length === 0
                          ? root.cutShort.charAt(0).toUpperCase() + root.cutShort.slice(1) + " before any text came."
                          : ""
                    color: root.streaming ? Theme.text : Theme.textMuted
                    font.italic: !root.streaming
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
                Repeater {
                    id: blockRepeater
                    model: root.fromUser ? null : root.blocks
                    delegate: Loader {
                        id: blockLoader
                        // The loaded frame binds to these roles, so a block that grows is
                        // updated in place rather than made again.
                        required property int kind
                        required property string text
                        required property string language
                        required property bool closed
                        Layout.fillWidth: true
                        sourceComponent: kind === MessageBlocksModel.Code ? codeBlock : textBlock
                        onLoaded: item.block = blockLoader
                    }
                }
            }

            // Copies the whole message as written (the Markdown source), not its reasoning: what
            // the model said is what gets pasted. Its text is set only when copying: bound to
            // the content, it would lay out the whole answer again at every streamed update.
            TextEdit {
                id: copier
                visible: false
                textFormat: TextEdit.PlainText
            }

            TextArea {
                id: editor
                objectName: "editor"
                anchors.fill: parent
                visible: root.editing
                wrapMode: TextEdit.Wrap
                Accessible.name: "Edit message"
                // Enter resends from the main keys and the keypad alike.
                Keys.onReturnPressed: event => enterPressed(event)
                Keys.onEnterPressed: event => enterPressed(event)
                function enterPressed(event) {
                    if (event.modifiers & Qt.ShiftModifier) {
                        event.accepted = false
                        return
                    }
                    // Refused (no model ready: the chat says why), the edit stays open to send
                    // again. Sent, this delegate is gone before editAndResend returns.
                    const edited = text
                    root.closeEditor()
                    if (!root.controller.editAndResend(root.messageId, edited)) {
                        root.editing = true
                        editor.forceActiveFocus()
                    }
                }
                Keys.onEscapePressed: root.closeEditor()
                // Esc also stops an answer (the window's shortcut): while the edit is open it
                // cancels the edit, and the answer goes on. (Closed, the editor has given the
                // keys back to the composer: there Esc stops the answer again.)
                Keys.onShortcutOverride: event => event.accepted = event.key === Qt.Key_Escape && root.editing
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
            objectName: "recoveryNote"
            visible: !root.fromUser && root.recovery.length > 0
            spacing: Theme.space2
            Layout.fillWidth: true
            Layout.leftMargin: Theme.spacing

            IconImage {
                name: "dialog-warning-symbolic"
                color: Theme.warning
                sourceSize: Qt.size(Theme.iconSize, Theme.iconSize)
                Layout.preferredWidth: Theme.iconSize
                Layout.preferredHeight: Theme.iconSize
                Layout.alignment: Qt.AlignTop
            }
            Label {
                objectName: "recoveryNoteText"
                text: root.recovery
                color: Theme.textMuted
                font.pixelSize: Theme.smallFontSize
                wrapMode: Text.Wrap
                Accessible.name: text
                Layout.fillWidth: true
            }
        }

        // What an imported answer did besides its text: the tools it called.
        Label {
            objectName: "toolCallsNote"
            visible: !root.fromUser && root.toolCalls.length > 0
            text: root.toolCalls
            color: Theme.textMuted
            font.family: Theme.monoFont
            font.pixelSize: Theme.smallFontSize
            wrapMode: Text.Wrap
            Accessible.name: text
            Layout.fillWidth: true
            Layout.leftMargin: Theme.spacing
        }

        // Statistics and actions; they wrap onto a second line when the column is narrow.
        Flow {
            id: actions
            Layout.fillWidth: true
            layoutDirection: root.fromUser ? Qt.RightToLeft : Qt.LeftToRight
            visible: !root.streaming
            spacing: Theme.space1

            Label {
                id: statsLabel
                objectName: "statsLabel"
                // Never wider than the column: in a narrow window the figures wrap instead of
                // running past its edge ("· stopped" last of all). Measured apart: a wrapped
                // label's own implicitWidth moves by a pixel with its width (a binding loop).
                width: Math.min(Math.ceil(statsWidth.advanceWidth) + 1, actions.width)
                height: Math.max(32, implicitHeight)
                wrapMode: Text.Wrap
                verticalAlignment: Text.AlignVCenter
                visible: !root.fromUser && text.length > 0
                // Without figures (nothing generated, or a server that sent no usage), how it
                // ended alone, unless the empty answer above says it already.
                text: root.stats.length > 0 ? root.stats + (root.cutShort.length > 0 ? " · " + root.cutShort : "")
                      : root.content.length > 0 ? root.cutShort : ""
                color: Theme.textMuted
                font.pixelSize: Theme.smallFontSize
                TextMetrics {
                    id: statsWidth
                    font: statsLabel.font
                    text: statsLabel.text
                }
            }
            IconButton {
                objectName: "copyMessage"
                iconName: "edit-copy-symbolic"
                tint: Theme.textMuted
                text: "Copy"
                Accessible.name: "Copy message"
                onClicked: {
                    copier.text = root.content
                    copier.selectAll()
                    copier.copy()
                    copier.deselect()
                    copier.clear()
                }
            }
            IconButton {
                visible: root.fromUser
                objectName: "editButton"
                iconName: "document-edit-symbolic"
                tint: Theme.textMuted
                text: "Edit"
                Accessible.name: "Edit and resend"
                enabled: !root.controller.generating
                onClicked: {
                    editor.text = root.content
                    root.editing = true
                    editor.forceActiveFocus()
                }
            }
            IconButton {
                visible: !root.fromUser && root.isLast
                objectName: "regenerateButton"
                iconName: "view-refresh-symbolic"
                tint: Theme.textMuted
                text: "Regenerate"
                Accessible.name: "Regenerate"
                enabled: !root.controller.generating
                onClicked: root.controller.regenerate()
            }
            IconButton {
                iconName: "user-trash-symbolic"
                tint: Theme.textMuted
                text: "Delete"
                Accessible.name: "Delete message"
                enabled: !root.controller.generating
                onClicked: root.controller.deleteMessage(root.messageId)
            }
        }
    }

    Component {
        id: textBlock
        TextEdit {
            property Loader block
            objectName: "markdownText"
            readOnly: true
            selectByMouse: true
            wrapMode: TextEdit.Wrap
            color: Theme.text
            selectionColor: Theme.selection
            font.pixelSize: Theme.fontSize
            textFormat: TextEdit.MarkdownText
            text: block ? block.text : ""
            Accessible.name: "Answer"
        }
    }

    Component {
        id: codeBlock
        Rectangle {
            id: frame
            property Loader block
            implicitHeight: codeHeader.implicitHeight + code.implicitHeight + Theme.spacing
            radius: 6
            color: Theme.codeBackground
            border.color: Theme.border

            RowLayout {
                id: codeHeader
                anchors.left: parent.left
                anchors.right: parent.right
                anchors.leftMargin: Theme.spacing
                Label {
                    text: frame.block && frame.block.language.length > 0 ? frame.block.language : "code"
                    color: Theme.textMuted
                    font.pixelSize: Theme.smallFontSize
                    Layout.fillWidth: true
                }
                ToolButton {
                    id: copyCode
                    objectName: "copyCode"
                    property bool copied: false
                    text: copied ? "Copied" : "Copy"
                    font.pixelSize: Theme.smallFontSize
                    Accessible.name: "Copy code"
                    onClicked: {
                        code.selectAll()
                        code.copy()
                        code.deselect()
                        copied = true
                        copiedTimer.restart()
                    }
                    Timer {
                        id: copiedTimer
                        interval: 1500
                        onTriggered: copyCode.copied = false
                    }
                }
            }
            TextEdit {
                id: code
                objectName: "codeText"
                anchors.top: codeHeader.bottom
                anchors.left: parent.left
                anchors.right: parent.right
                anchors.leftMargin: Theme.spacing
                anchors.rightMargin: Theme.spacing
                readOnly: true
                selectByMouse: true
                wrapMode: TextEdit.WrapAnywhere
                color: Theme.text
                selectionColor: Theme.selection
                font.family: Theme.monoFont
                font.pixelSize: Theme.fontSize - 1
                textFormat: TextEdit.PlainText
                text: frame.block ? frame.block.text : ""
                Accessible.name: "Code" + (frame.block && frame.block.language.length > 0 ? " in " + frame.block.language : "")
            }
        }
    }
}
