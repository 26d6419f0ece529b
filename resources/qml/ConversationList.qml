// The left column: search, a new-chat button, and the conversations, newest first, each
// with a busy indicator while an answer is generated in it.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

Rectangle {
    id: root

    required property ChatController controller

    function focusSearch() {
        search.forceActiveFocus()
        search.selectAll()
    }

    color: Theme.sidebar

    ColumnLayout {
        anchors.fill: parent
        anchors.margins: Theme.spacing
        spacing: Theme.spacing

        Button {
            text: "New chat"
            Accessible.name: "New chat"
            Layout.fillWidth: true
            onClicked: root.controller.newConversation()
        }

        TextField {
            id: search
            objectName: "searchField"
            Layout.fillWidth: true
            placeholderText: "Search conversations"
            Accessible.name: "Search conversations"
            onTextChanged: root.controller.conversations.filter = text
            Keys.onEscapePressed: text = ""
        }

        ListView {
            id: list
            objectName: "conversationList"
            Layout.fillWidth: true
            Layout.fillHeight: true
            clip: true
            spacing: 2
            model: root.controller.conversations
            ScrollBar.vertical: ScrollBar {}

            delegate: ItemDelegate {
                id: item
                objectName: "conversation" + index

                required property int index
                required property var conversationId
                required property string title
                required property string snippet
                required property bool generating

                width: ListView.view.width
                highlighted: conversationId === root.controller.currentConversationId
                Accessible.name: title + (generating ? ", answering" : "")
                onClicked: root.controller.selectConversation(conversationId)

                background: Rectangle {
                    radius: 6
                    color: item.highlighted ? Theme.selection : item.hovered ? Theme.surfaceHover : "transparent"
                }
                contentItem: RowLayout {
                    spacing: Theme.spacing / 2
                    ColumnLayout {
                        spacing: 2
                        Layout.fillWidth: true
                        Label {
                            text: item.title.length > 0 ? item.title : "Untitled"
                            color: Theme.text
                            elide: Text.ElideRight
                            font.pixelSize: Theme.fontSize
                            Layout.fillWidth: true
                        }
                        Label {
                            visible: item.snippet.length > 0
                            text: item.snippet
                            color: Theme.textMuted
                            elide: Text.ElideRight
                            font.pixelSize: Theme.smallFontSize
                            Layout.fillWidth: true
                        }
                    }
                    // An answer is being generated here (it goes on while another is open).
                    BusyIndicator {
                        objectName: "generatingIndicator"
                        visible: item.generating
                        running: item.generating
                        Layout.preferredWidth: 18
                        Layout.preferredHeight: 18
                        Accessible.name: "Answering"
                    }
                }

                TapHandler {
                    acceptedButtons: Qt.RightButton
                    onTapped: menu.popup()
                }
                Menu {
                    id: menu
                    MenuItem {
                        text: "Rename…"
                        onTriggered: {
                            renameDialog.conversationId = item.conversationId
                            renameDialog.currentTitle = item.title
                            renameDialog.open()
                        }
                    }
                    MenuItem {
                        text: "Delete"
                        onTriggered: root.controller.deleteConversation(item.conversationId)
                    }
                }
            }

            Label {
                anchors.centerIn: parent
                visible: list.count === 0
                text: search.text.length > 0 ? "Nothing found" : "No conversations yet"
                color: Theme.textMuted
            }
        }

        // The last deletion, with its undo.
        RowLayout {
            visible: root.controller.canUndoDelete
            Layout.fillWidth: true
            Label {
                text: "Conversation deleted"
                color: Theme.textMuted
                Layout.fillWidth: true
            }
            Button {
                text: "Undo"
                Accessible.name: "Undo delete"
                onClicked: root.controller.undoDelete()
            }
        }
    }

    Dialog {
        id: renameDialog

        property var conversationId: 0
        property string currentTitle: ""

        title: "Rename conversation"
        modal: true
        anchors.centerIn: Overlay.overlay
        standardButtons: Dialog.Ok | Dialog.Cancel
        onOpened: {
            titleField.text = currentTitle
            titleField.selectAll()
            titleField.forceActiveFocus()
        }
        onAccepted: root.controller.renameConversation(conversationId, titleField.text)

        TextField {
            id: titleField
            width: 320
            Accessible.name: "Title"
            onAccepted: renameDialog.accept()
        }
    }
}
