// The left column: search, a new-chat button, and the conversations, newest first, each
// with a busy indicator while an answer is generated in it.
import QtQuick
import QtQuick.Controls
import QtQuick.Controls.impl
import QtQuick.Dialogs
import QtQuick.Layouts
import Powerhouse

Rectangle {
    id: root

    required property ChatController controller
    // Export and import (the menu beside "New chat", and each conversation's own menu);
    // null in views tested without it.
    property ConversationTransfer transfer: null

    // The user chose a conversation, or New chat: the window shows the chat (from the Models
    // page too, where the choice would otherwise seem to do nothing).
    signal conversationChosen()

    // Asks where to save `ids` (empty: every conversation) as `format` ("md" or "json").
    function exportConversations(ids, format) {
        saveDialog.ids = ids
        saveDialog.format = format
        saveDialog.selectedFile = root.transfer.suggestedFileName(ids, format)
        saveDialog.open()
    }

    function focusSearch() {
        search.forceActiveFocus()
        search.selectAll()
    }

    color: Theme.sidebar

    ColumnLayout {
        anchors.fill: parent
        anchors.margins: Theme.spacing
        spacing: Theme.spacing

        RowLayout {
            Layout.fillWidth: true
            spacing: Theme.space2
            Button {
                objectName: "newChatButton"
                text: "New chat"
                Accessible.name: "New chat"
                icon.name: "document-new-symbolic"
                icon.color: Theme.text
                Layout.fillWidth: true
                ToolTip.visible: hovered
                ToolTip.text: "New chat (Ctrl+N)"
                ToolTip.delay: 600
                onClicked: {
                    root.controller.newConversation()
                    root.conversationChosen()
                }
            }
            IconButton {
                objectName: "conversationsMenuButton"
                visible: root.transfer !== null
                iconName: "view-more-symbolic"
                text: "Export and import conversations"
                onClicked: listMenu.popup()
                Menu {
                    id: listMenu
                    MenuItem {
                        text: "Export all as Markdown…"
                        onTriggered: root.exportConversations([], "md")
                    }
                    MenuItem {
                        text: "Export all as JSON…"
                        onTriggered: root.exportConversations([], "json")
                    }
                    MenuSeparator {}
                    MenuItem {
                        text: "Import from JSON…"
                        onTriggered: openDialog.open()
                    }
                }
            }
        }

        // What the last export or import did.
        Label {
            objectName: "transferMessage"
            visible: root.transfer !== null && root.transfer.message.length > 0
            text: root.transfer ? root.transfer.message : ""
            color: root.transfer && root.transfer.failed ? Theme.error : Theme.textMuted
            font.pixelSize: Theme.captionSize
            wrapMode: Text.Wrap
            Layout.fillWidth: true
        }

        TextField {
            id: search
            objectName: "searchField"
            Layout.fillWidth: true
            leftPadding: Theme.space2 + Theme.iconSize + Theme.space2
            placeholderText: "Search conversations"
            Accessible.name: "Search conversations"
            onTextChanged: root.controller.conversations.filter = text
            Keys.onEscapePressed: text = ""
            // Esc also stops an answer (the window's shortcut): with words here, it clears them.
            Keys.onShortcutOverride: event => event.accepted = event.key === Qt.Key_Escape && text.length > 0
            IconImage {
                anchors.left: parent.left
                anchors.leftMargin: Theme.space2
                anchors.verticalCenter: parent.verticalCenter
                width: Theme.iconSize
                height: Theme.iconSize
                sourceSize: Qt.size(Theme.iconSize, Theme.iconSize)
                name: "edit-find-symbolic"
                color: Theme.textMuted
            }
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
                focusPolicy: Qt.StrongFocus
                // Rename, export and delete without a mouse: the menu key or Shift+F10 on the
                // row or its menu button, or the button itself (Tab reaches both).
                function openMenu(from) {
                    menu.popup(from, 0, from.height)
                    menu.currentIndex = 0
                }
                function isMenuKey(event) {
                    return event.key === Qt.Key_Menu || (event.key === Qt.Key_F10 && (event.modifiers & Qt.ShiftModifier))
                }
                Keys.onPressed: event => {
                    if (!isMenuKey(event)) return
                    openMenu(item)
                    event.accepted = true
                }
                onClicked: {
                    root.controller.selectConversation(conversationId)
                    root.conversationChosen()
                }

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
                    IconButton {
                        id: menuButton
                        objectName: "conversationMenuButton"
                        iconName: "view-more-symbolic"
                        text: "Rename, export or delete"
                        Accessible.name: "Menu of " + (item.title.length > 0 ? item.title : "Untitled")
                        focusPolicy: Qt.StrongFocus
                        onClicked: item.openMenu(menuButton)
                        Keys.onPressed: event => {
                            if (!item.isMenuKey(event)) return
                            item.openMenu(menuButton)
                            event.accepted = true
                        }
                    }
                }

                TapHandler {
                    acceptedButtons: Qt.RightButton
                    onTapped: menu.popup()
                }
                Menu {
                    id: menu
                    objectName: "conversationMenu"
                    MenuItem {
                        text: "Rename…"
                        onTriggered: {
                            renameDialog.conversationId = item.conversationId
                            renameDialog.currentTitle = item.title
                            renameDialog.open()
                        }
                    }
                    MenuItem {
                        text: "Export as Markdown…"
                        enabled: root.transfer !== null
                        onTriggered: root.exportConversations([item.conversationId], "md")
                    }
                    MenuItem {
                        text: "Export as JSON…"
                        enabled: root.transfer !== null
                        onTriggered: root.exportConversations([item.conversationId], "json")
                    }
                    MenuSeparator {}
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
        objectName: "renameDialog"

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

    FileDialog {
        id: saveDialog
        property var ids: []
        property string format: "md"
        title: "Export conversations"
        fileMode: FileDialog.SaveFile
        nameFilters: format === "md" ? ["Markdown (*.md)"] : ["JSON (*.json)"]
        onAccepted: root.transfer.exportConversations(ids, format, selectedFile)
    }
    FileDialog {
        id: openDialog
        title: "Import conversations"
        fileMode: FileDialog.OpenFile
        nameFilters: ["Powerhouse or OpenAI-style JSON (*.json)", "All files (*)"]
        onAccepted: root.transfer.importConversations(selectedFile)
    }
}
