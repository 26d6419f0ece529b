// The chat: the messages of the open conversation, errors, the device-failure banner, and
// the composer.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

Rectangle {
    id: root

    required property ChatController controller
    // Why the composer cannot send now ("" when it can).
    property string sendBlockedReason: ""
    // The device-failure banner's "Choose devices…": the window opens the settings.
    signal openSettings()

    function focusComposer() {
        composer.forceActiveFocus()
    }

    // The dialog is built when first opened, then kept (built at start, it held about 0.8 MB
    // at idle).
    function openConversationSettings() {
        conversationSettings.active = true
        conversationSettings.item.open()
    }

    Loader {
        id: conversationSettings
        // The dialog sizes itself from its parent, this Loader: the chat view, as before.
        anchors.fill: parent
        active: false
        sourceComponent: ConversationSettingsDialog {
            objectName: "conversationSettings"
            controller: root.controller
        }
    }

    color: Theme.background

    ColumnLayout {
        anchors.fill: parent
        spacing: 0

        // The conversation's title, and its settings.
        RowLayout {
            Layout.fillWidth: true
            Layout.leftMargin: Theme.spacing * 2
            Layout.rightMargin: Theme.spacing
            Label {
                text: root.controller.currentTitle.length > 0 ? root.controller.currentTitle : "New chat"
                color: Theme.textMuted
                elide: Text.ElideRight
                Layout.fillWidth: true
            }
            ToolButton {
                text: root.controller.systemPrompt.length > 0 ? "Chat settings · system prompt set" : "Chat settings"
                font.pixelSize: Theme.smallFontSize
                Accessible.name: "Conversation settings: system prompt and sampling (Ctrl+Shift+S)"
                onClicked: root.openConversationSettings()
            }
        }

        // Errors, in words, with what to do; dismissable.
        Rectangle {
            visible: root.controller.errorText.length > 0
            color: Theme.errorBackground
            Layout.fillWidth: true
            implicitHeight: errorRow.implicitHeight + 2 * Theme.spacing

            RowLayout {
                id: errorRow
                anchors.fill: parent
                anchors.margins: Theme.spacing
                Label {
                    objectName: "errorText"
                    text: root.controller.errorText
                    color: Theme.error
                    wrapMode: Text.Wrap
                    Accessible.name: "Error"
                    Layout.fillWidth: true
                }
                Button {
                    text: "Dismiss"
                    onClicked: root.controller.dismissError()
                }
            }
        }

        // The loaded model makes embeddings (for the API server), not chat answers: said
        // plainly here, and the composer's send is disabled with the same words.
        Rectangle {
            objectName: "cannotChat"
            visible: root.controller.cannotChatReason.length > 0
            color: Theme.surface
            Layout.fillWidth: true
            implicitHeight: cannotChatWords.implicitHeight + 2 * Theme.spacing
            Label {
                id: cannotChatWords
                objectName: "cannotChatWords"
                anchors.fill: parent
                anchors.margins: Theme.spacing
                text: root.controller.cannotChatReason
                color: Theme.text
                wrapMode: Text.Wrap
                Accessible.name: "This model cannot chat"
            }
        }

        // A device failed under the model: what happened, and what goes on.
        RecoveryBanner {
            objectName: "recoveryBanner"
            controller: root.controller
            Layout.fillWidth: true
            onOpenSettings: root.openSettings()
        }

        ListView {
            id: messages
            objectName: "messageList"
            Layout.fillWidth: true
            Layout.fillHeight: true
            clip: true
            spacing: Theme.spacing
            topMargin: Theme.spacing * 2
            bottomMargin: Theme.spacing * 2
            model: root.controller.messages
            ScrollBar.vertical: ScrollBar {}

            // Follow the streaming answer unless the user scrolled up to read.
            property bool following: true
            onMovementEnded: following = atYEnd
            onCountChanged: if (following) Qt.callLater(positionViewAtEnd)
            onContentHeightChanged: if (following) Qt.callLater(positionViewAtEnd)

            delegate: MessageDelegate {
                objectName: "message" + index
                width: ListView.view.width
                controller: root.controller
                isLast: index === ListView.view.count - 1
                onEditClosed: root.focusComposer()
            }

            Label {
                anchors.centerIn: parent
                visible: messages.count === 0
                text: root.controller.modelState === ChatController.Ready
                      && root.controller.cannotChatReason.length === 0 ? "Ask anything." : ""
                color: Theme.textMuted
                font.pixelSize: Theme.fontSize + 4
            }
        }

        Composer {
            id: composer
            controller: root.controller
            blockedReason: root.sendBlockedReason.length > 0 ? root.sendBlockedReason : root.controller.cannotChatReason
            Layout.fillWidth: true
        }
    }
}
