// A reasoning model's thinking, folded above its answer (MessageDelegate): a "Thinking" line
// that opens the thoughts, closed until asked for, since they are the model's working and
// not what it said. While the model still thinks (streaming, no text of the answer yet) the
// line says "Thinking…" and, opened, shows the thoughts as they come. No duration is shown:
// the time spent thinking is not measured. Reached with Tab; Space, Enter or a click opens
// and folds it.
import QtQuick
import QtQuick.Controls
import QtQuick.Controls.impl
import QtQuick.Layouts
import Powerhouse

ColumnLayout {
    id: part

    required property string reasoning
    // Still thinking: the answer streams and none of its text has come.
    property bool thinking: false
    property bool expanded: false
    readonly property string title: thinking ? "Thinking…" : "Thinking"

    function toggle() {
        part.expanded = !part.expanded
    }

    spacing: Theme.space1

    AbstractButton {
        id: toggle
        objectName: "thinkingToggle"
        focusPolicy: Qt.StrongFocus
        // Space clicks any button; Enter and Return (main keys and keypad) do here too.
        onClicked: part.toggle()
        Keys.onReturnPressed: part.toggle()
        Keys.onEnterPressed: part.toggle()
        Accessible.role: Accessible.Button
        Accessible.name: part.thinking ? "Thinking…: the model's thoughts so far" : "The model's thinking"
        Accessible.description: part.expanded ? "Shown; press to fold" : "Folded; press to show"
        Accessible.checkable: true
        Accessible.checked: part.expanded
        Layout.fillWidth: true
        implicitHeight: Math.max(headRow.implicitHeight, 24)
        background: Rectangle {
            radius: Theme.radiusSmall
            color: toggle.hovered ? Theme.surfaceHover : "transparent"
            border.width: toggle.visualFocus ? 1 : 0
            border.color: Theme.accent
        }
        contentItem: RowLayout {
            id: headRow
            spacing: Theme.space2
            IconImage {
                name: part.expanded ? "pan-down-symbolic" : "pan-end-symbolic"
                color: Theme.textMuted
                sourceSize: Qt.size(Theme.iconSize, Theme.iconSize)
                Layout.preferredWidth: Theme.iconSize
                Layout.preferredHeight: Theme.iconSize
            }
            Label {
                objectName: "thinkingTitle"
                text: part.title
                color: Theme.textMuted
                font.pixelSize: Theme.smallFontSize
                font.italic: part.thinking
                Layout.fillWidth: true
            }
        }
    }

    // The thoughts as written, plain text, set off by a rule. Bound only while open: folded,
    // a long streaming chain of thought is not laid out again at every frame.
    RowLayout {
        visible: part.expanded
        spacing: Theme.space2
        Layout.fillWidth: true
        Layout.leftMargin: Theme.iconSize / 2

        Rectangle {
            color: Theme.border
            Layout.preferredWidth: 2
            Layout.fillHeight: true
        }
        TextEdit {
            objectName: "thinkingText"
            readOnly: true
            selectByMouse: true
            wrapMode: TextEdit.Wrap
            color: Theme.textMuted
            selectionColor: Theme.selection
            font.pixelSize: Theme.smallFontSize
            textFormat: TextEdit.PlainText
            text: part.expanded ? part.reasoning : ""
            Accessible.name: "The model's thinking"
            Layout.fillWidth: true
        }
    }
}
