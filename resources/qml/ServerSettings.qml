// Settings → Server: serve the loaded model over the OpenAI API (ServerController). A switch,
// the address and port to listen on, the API key (generated here, shown once), the address
// clients use, what the server is doing, and examples to copy (curl and Python's `openai`).
// Everything here takes effect at once; Apply and Close concern the other tabs.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

ScrollView {
    id: view

    required property ServerController server

    implicitHeight: Math.min(content.implicitHeight, 460)
    contentWidth: availableWidth
    clip: true

    // Read-only text with a Copy button: the address, the key, the examples.
    component CopyableText: Rectangle {
        id: box
        property string text
        property string what  // what is copied, for screen readers: "address", "curl example"
        Layout.fillWidth: true
        implicitHeight: Math.max(copyButton.implicitHeight, shown.implicitHeight) + Theme.spacing
        radius: Theme.radius / 2
        color: Theme.codeBackground

        TextEdit {
            id: shown
            objectName: "text"
            anchors.left: parent.left
            anchors.right: copyButton.left
            anchors.verticalCenter: parent.verticalCenter
            anchors.leftMargin: Theme.spacing / 2
            readOnly: true
            selectByMouse: true
            selectByKeyboard: true
            activeFocusOnTab: true
            wrapMode: TextEdit.WrapAtWordBoundaryOrAnywhere
            textFormat: TextEdit.PlainText
            color: Theme.text
            selectionColor: Theme.selection
            font.family: Theme.monoFont
            font.pixelSize: Theme.fontSize - 1
            text: box.text
            Accessible.name: box.what
        }
        ToolButton {
            id: copyButton
            objectName: "copy"
            property bool copied: false
            anchors.right: parent.right
            anchors.top: parent.top
            text: copied ? "Copied" : "Copy"
            font.pixelSize: Theme.smallFontSize
            Accessible.name: "Copy the " + box.what
            onClicked: {
                shown.selectAll()
                shown.copy()
                shown.deselect()
                copied = true
                copiedTimer.restart()
            }
            Timer {
                id: copiedTimer
                interval: 1500
                onTriggered: copyButton.copied = false
            }
        }
    }

    ColumnLayout {
        id: content
        width: view.availableWidth
        spacing: Theme.spacing

        Switch {
            objectName: "serverSwitch"
            text: "Serve the loaded model over the OpenAI API"
            checked: view.server.enabled
            Accessible.name: "Serve the loaded model over the OpenAI API"
            onToggled: view.server.enabled = checked
        }

        Label {
            text: "Changes here take effect at once; Apply is for the other tabs."
            color: Theme.textMuted
            font.pixelSize: Theme.smallFontSize
            wrapMode: Text.Wrap
            Layout.fillWidth: true
        }

        Label {
            objectName: "serverStatus"
            text: view.server.statusText
            color: view.server.state === "error" ? Theme.error
                 : view.server.state === "running" ? Theme.text : Theme.textMuted
            wrapMode: Text.Wrap
            Layout.fillWidth: true
            Accessible.name: "Server status: " + text
        }

        GridLayout {
            columns: 2
            columnSpacing: Theme.spacing
            rowSpacing: Theme.spacing
            Layout.fillWidth: true

            Label { text: "Listen on"; color: Theme.text }
            RowLayout {
                spacing: Theme.spacing
                TextField {
                    objectName: "serverHost"
                    text: view.server.host
                    placeholderText: "127.0.0.1"
                    Accessible.name: "Address to listen on"
                    ToolTip.visible: hovered
                    ToolTip.text: "127.0.0.1: this computer only. 0.0.0.0: every network (needs an API key)."
                    onEditingFinished: view.server.host = text
                    Layout.preferredWidth: 200
                }
                Label { text: "port"; color: Theme.textMuted }
                SpinBox {
                    objectName: "serverPort"
                    from: 0
                    to: 65535
                    editable: true
                    value: view.server.port
                    // No thousands separator in a port.
                    textFromValue: function(value, locale) { return value.toString() }
                    valueFromText: function(text, locale) { return Number(text) }
                    Accessible.name: "Port"
                    ToolTip.visible: hovered
                    ToolTip.text: "0 picks any free port"
                    onValueModified: view.server.port = value
                }
            }

            Label { text: "API key"; color: Theme.text }
            RowLayout {
                spacing: Theme.spacing
                Label {
                    objectName: "keyState"
                    text: view.server.hasApiKey ? "Set: clients send it as a bearer token."
                        : view.server.keyRequired ? "None yet: this address needs one."
                        : "None: only programs on this computer can connect."
                    color: !view.server.hasApiKey && view.server.keyRequired ? Theme.error : Theme.textMuted
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
                Button {
                    objectName: "generateKey"
                    text: view.server.hasApiKey ? "New key" : "Generate a key"
                    Accessible.name: view.server.hasApiKey ? "Replace the API key with a new one" : "Generate an API key"
                    onClicked: view.server.generateApiKey()
                }
                Button {
                    objectName: "removeKey"
                    visible: view.server.hasApiKey
                    text: "Remove"
                    Accessible.name: "Remove the API key"
                    onClicked: view.server.removeApiKey()
                }
            }
        }

        // The new key, once: it is kept, but never shown again.
        ColumnLayout {
            objectName: "newKey"
            visible: view.server.shownApiKey.length > 0
            spacing: Theme.spacing / 2
            Layout.fillWidth: true

            Label {
                text: "Copy the new key now: it is not shown again. Clients send it as \"Authorization: Bearer KEY\"; the examples read it from POWERHOUSE_API_KEY."
                color: Theme.text
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }
            RowLayout {
                spacing: Theme.spacing
                Layout.fillWidth: true
                CopyableText {
                    objectName: "apiKey"
                    text: view.server.shownApiKey
                    what: "API key"
                }
                Button {
                    text: "Done"
                    Accessible.name: "Hide the API key"
                    onClicked: view.server.hideApiKey()
                }
            }
        }

        Label {
            text: "Address"
            color: Theme.text
            visible: view.server.address.length > 0
        }
        CopyableText {
            objectName: "serverAddress"
            visible: view.server.address.length > 0
            text: view.server.address
            what: "server address"
        }
        Label {
            visible: view.server.host === "0.0.0.0" || view.server.host === "::"
            text: "Other computers reach it at this computer's network address instead of " + (view.server.host === "::" ? "[::1]" : "127.0.0.1") + "."
            color: Theme.textMuted
            wrapMode: Text.Wrap
            font.pixelSize: Theme.smallFontSize
            Layout.fillWidth: true
        }
        Label {
            objectName: "requestsServed"
            visible: view.server.running
            text: view.server.requestsServed === 1 ? "1 request answered since the app started."
                : view.server.requestsServed + " requests answered since the app started."
            color: Theme.textMuted
            font.pixelSize: Theme.smallFontSize
        }

        Label {
            text: "Try it with curl"
            color: Theme.text
        }
        CopyableText {
            objectName: "curlExample"
            text: view.server.curlExample
            what: "curl example"
        }
        Label {
            text: "or with Python's openai package"
            color: Theme.text
        }
        CopyableText {
            objectName: "pythonExample"
            text: view.server.pythonExample
            what: "Python example"
        }
        Label {
            text: "Chat answers and the server's requests share the model: the settings' \"Conversations at once\" counts both."
            color: Theme.textMuted
            wrapMode: Text.Wrap
            font.pixelSize: Theme.smallFontSize
            Layout.fillWidth: true
        }
    }
}
