// Settings → Engines: remote engines (OpenAI-compatible servers: vLLM, SGLang, llama.cpp's
// server, another Powerhouse) by URL, with a display name, an optional API key (kept only in
// the system keyring) and an optional CA file. Test connection lists the server's models or
// says what went wrong; the endpoints' models appear in the model bar. Edit puts an endpoint
// back in the form (its key stays in the keyring unless a new one is typed or "Forget the
// stored key" is ticked). Everything here takes effect at once; Apply and Close concern the
// other tabs.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

ScrollView {
    id: view

    required property EnginesController engines
    // The name of the endpoint being edited; "": the form adds a new one.
    property string editing: ""
    property bool editingHasKey: false

    function clearForm() {
        editing = ""
        editingHasKey = false
        nameField.text = ""
        urlField.text = ""
        keyField.text = ""
        caField.text = ""
        metricsField.text = ""
        forgetKey.checked = false
    }
    function edit(endpoint) {
        editing = endpoint.name
        editingHasKey = endpoint.hasKey
        nameField.text = endpoint.name
        urlField.text = endpoint.url
        keyField.text = ""
        caField.text = endpoint.caFile
        metricsField.text = endpoint.metricsUrl
        forgetKey.checked = false
        nameField.forceActiveFocus()
    }

    implicitHeight: Math.min(content.implicitHeight, 460)
    contentWidth: availableWidth
    clip: true

    ColumnLayout {
        id: content
        width: view.availableWidth
        spacing: Theme.spacing

        Label {
            text: "Add an OpenAI-compatible server (vLLM, SGLang, llama.cpp's server, another Powerhouse). Its models appear in the model bar."
            wrapMode: Text.Wrap
            color: Theme.textMuted
            Layout.fillWidth: true
        }

        GridLayout {
            columns: 2
            columnSpacing: Theme.spacing
            rowSpacing: Theme.spacing / 2
            Layout.fillWidth: true

            Label { text: "Name"; color: Theme.text }
            TextField {
                id: nameField
                objectName: "endpointName"
                placeholderText: "cluster"
                Accessible.name: "Endpoint name"
                Layout.fillWidth: true
            }
            Label { text: "URL"; color: Theme.text }
            TextField {
                id: urlField
                objectName: "endpointUrl"
                placeholderText: "https://gpu-node:8000/v1"
                Accessible.name: "Endpoint URL"
                Layout.fillWidth: true
            }
            Label { text: "API key"; color: Theme.text }
            TextField {
                id: keyField
                objectName: "endpointKey"
                placeholderText: view.editingHasKey && !forgetKey.checked ? "leave empty to keep the stored key"
                                                                          : "optional; kept in the system keyring"
                echoMode: TextInput.Password
                Accessible.name: "API key (optional, kept in the system keyring)"
                Layout.fillWidth: true
            }
            Item { visible: view.editingHasKey; implicitWidth: 1; implicitHeight: 1 }
            CheckBox {
                id: forgetKey
                objectName: "forgetKey"
                visible: view.editingHasKey
                text: "Forget the stored key"
            }
            Label { text: "CA file"; color: Theme.text }
            TextField {
                id: caField
                objectName: "endpointCaFile"
                placeholderText: "optional: PEM certificate of a private CA"
                Accessible.name: "CA certificate file (optional)"
                Layout.fillWidth: true
            }
            Label { text: "Metrics URL"; color: Theme.text }
            TextField {
                id: metricsField
                objectName: "endpointMetricsUrl"
                placeholderText: "optional: http://gpu-node:9400/metrics (DCGM exporter) or the engine's /metrics"
                Accessible.name: "Metrics URL (optional): its GPUs and figures on the dashboard"
                Layout.fillWidth: true
            }
        }

        RowLayout {
            spacing: Theme.spacing
            Button {
                objectName: "testConnection"
                text: "Test connection"
                enabled: urlField.text.length > 0 && !view.engines.busy
                onClicked: view.engines.testConnection(urlField.text, keyField.text, caField.text)
            }
            Button {
                objectName: "addEndpoint"
                text: view.editing.length > 0 ? "Save" : "Add"
                enabled: nameField.text.length > 0 && urlField.text.length > 0 && !view.engines.busy
                onClicked: {
                    const done = view.editing.length > 0
                        ? view.engines.editEndpoint(view.editing, nameField.text, urlField.text, keyField.text,
                                                    caField.text, metricsField.text, forgetKey.checked)
                        : view.engines.addEndpoint(nameField.text, urlField.text, keyField.text, caField.text,
                                                   metricsField.text)
                    if (done)
                        view.clearForm()
                }
            }
            Button {
                objectName: "cancelEdit"
                visible: view.editing.length > 0
                text: "Cancel"
                onClicked: view.clearForm()
            }
            BusyIndicator {
                running: view.engines.busy
                visible: running
                Layout.preferredHeight: 24
                Layout.preferredWidth: 24
            }
        }

        Label {
            objectName: "enginesMessage"
            visible: text.length > 0
            text: view.engines.message
            color: view.engines.messageIsError ? Theme.error : Theme.textMuted
            wrapMode: Text.Wrap
            Layout.fillWidth: true
        }

        Rectangle {
            height: 1
            color: Theme.border
            Layout.fillWidth: true
        }

        Label {
            visible: view.engines.endpoints.length === 0
            text: "No remote engine yet."
            color: Theme.textMuted
        }

        Repeater {
            objectName: "endpointList"
            model: view.engines.endpoints
            delegate: ColumnLayout {
                id: row
                required property var modelData
                Layout.fillWidth: true
                spacing: 2

                RowLayout {
                    Layout.fillWidth: true
                    Label {
                        text: row.modelData.name + (row.modelData.hasKey ? "  (key in keyring)" : "")
                        font.bold: true
                        color: Theme.text
                    }
                    Label {
                        text: row.modelData.url
                        color: Theme.textMuted
                        elide: Text.ElideMiddle
                        Layout.fillWidth: true
                    }
                    Button {
                        objectName: "editEndpoint"
                        text: "Edit"
                        Accessible.name: "Edit the endpoint " + row.modelData.name
                        onClicked: view.edit(row.modelData)
                    }
                    Button {
                        objectName: "removeEndpoint"
                        text: "Remove"
                        Accessible.name: "Remove the endpoint " + row.modelData.name
                        onClicked: {
                            if (view.editing === row.modelData.name)
                                view.clearForm()
                            view.engines.removeEndpoint(row.modelData.name)
                        }
                    }
                }
                Label {
                    text: row.modelData.status === "listing" ? "Listing models…"
                        : row.modelData.status === "error" ? row.modelData.error
                        : row.modelData.models.length > 0 ? "Models: " + row.modelData.models.join(", ") : ""
                    visible: text.length > 0
                    color: row.modelData.status === "error" ? Theme.error : Theme.textMuted
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
                Label {
                    visible: row.modelData.metricsUrl.length > 0
                    text: "Metrics on the dashboard: " + row.modelData.metricsUrl
                    color: Theme.textMuted
                    elide: Text.ElideMiddle
                    Layout.fillWidth: true
                }
                Label {
                    visible: row.modelData.warning.length > 0
                    text: row.modelData.warning
                    color: Theme.error
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
            }
        }
    }
}
