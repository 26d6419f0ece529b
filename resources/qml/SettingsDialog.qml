// Settings. GPUs: which to use, shares, memory to keep free, split mode and main GPU, with
// the planner's live preview of where the model would go and whether it fits, before
// anything is loaded (a GPU that failed in this run shown unticked, with why). General:
// context length, KV cache type and size, conversations generated at once, CPU threads,
// theme, electricity price, what to do when a GPU fails, data folder, the Hugging Face
// token (saved in the system keyring at once, never in the database). Apply saves and
// reloads the model; Close forgets what was not applied (the theme applies at once).
// Server: the OpenAI API server (ServerSettings.qml), whose settings apply at once.
// Engines: remote OpenAI-compatible servers (EnginesSettings.qml), also at once.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

Dialog {
    id: dialog

    required property SettingsController settings
    // Power limits per GPU (issue 24); null in views tested without them.
    property PowerController power: null
    // The API server's controller; null where there is none (views tested without it).
    property ServerController server: null
    // Remote engines' controller; null where there is none.
    property EnginesController engines: null
    // The Hugging Face search, whose token the General tab sets; null where there is none.
    property HubController hub: null
    property alias tab: tabs.currentIndex

    title: "Settings"
    modal: true
    width: Math.min(parent ? parent.width - 80 : 720, 720)
    anchors.centerIn: Overlay.overlay
    standardButtons: Dialog.Apply | Dialog.Close
    onApplied: if (settings.apply()) close()
    onRejected: settings.revert()
    // A new API key is shown once: not again when the dialog opens next.
    onClosed: if (server) server.hideApiKey()

    // A header of our own replaces the dialog's title bar: the title goes above the tabs.
    header: ColumnLayout {
        spacing: 0

        Label {
            objectName: "settingsTitle"
            text: dialog.title
            font.bold: true
            font.pixelSize: Theme.fontSize + 4
            leftPadding: Theme.spacing
            topPadding: Theme.spacing
            bottomPadding: Theme.spacing / 2
            Layout.fillWidth: true
        }

        TabBar {
            id: tabs
            Layout.fillWidth: true
            TabButton { text: "GPUs"; Accessible.name: "GPU settings" }
            TabButton { text: "General"; Accessible.name: "General settings" }
            TabButton { text: "Server"; Accessible.name: "API server settings" }
            TabButton { text: "Engines"; Accessible.name: "Remote engines" }
        }
    }

    StackLayout {
        anchors.fill: parent
        currentIndex: tabs.currentIndex

        ColumnLayout {
            spacing: Theme.spacing

            Label {
                visible: dialog.settings.gpus.length === 0
                text: "No GPU found: models run on the CPU."
                color: Theme.textMuted
            }

            Repeater {
                model: dialog.settings.gpus
                delegate: RowLayout {
                    id: gpuRow
                    required property int index
                    required property var modelData
                    Layout.fillWidth: true
                    spacing: Theme.spacing

                    ColumnLayout {
                        spacing: 0
                        Layout.fillWidth: true
                        CheckBox {
                            objectName: "useGpu" + gpuRow.index
                            checked: gpuRow.modelData.use
                            // A GPU that failed stays out until the app restarts.
                            enabled: !gpuRow.modelData.failed
                            text: "GPU " + gpuRow.index + ": " + gpuRow.modelData.name + " (" + gpuRow.modelData.totalGiB.toFixed(0) + " GiB)"
                            Accessible.name: "Use GPU " + gpuRow.index
                            onToggled: dialog.settings.setGpuUse(gpuRow.index, checked)
                            Layout.fillWidth: true
                        }
                        PowerLimitControl {
                            readonly property var row: {
                                if (dialog.power === null) return null
                                const rows = dialog.power.gpus
                                for (let i = 0; i < rows.length; ++i) {
                                    if (rows[i].uuid === gpuRow.modelData.uuid) return rows[i]
                                }
                                return null
                            }
                            objectName: "settingsPowerLimit" + gpuRow.index
                            visible: row !== null
                            power: dialog.power
                            info: row !== null ? row : ({gpu: -1, supported: false, error: "", command: "", currentW: 0, changedFromW: 0})
                            Layout.fillWidth: true
                            Layout.leftMargin: Theme.space8
                        }
                        Label {
                            objectName: "gpuFailure" + gpuRow.index
                            visible: gpuRow.modelData.failed
                            text: gpuRow.modelData.failure + ". Not used until Powerhouse restarts."
                            color: Theme.error
                            wrapMode: Text.Wrap
                            font.pixelSize: Theme.smallFontSize
                            Layout.fillWidth: true
                            Layout.leftMargin: Theme.space8
                        }
                    }
                    Label { text: "share"; color: Theme.textMuted }
                    SpinBox {
                        from: 1
                        to: 100
                        value: Math.round(gpuRow.modelData.ratio)
                        editable: true
                        enabled: gpuRow.modelData.use
                        Accessible.name: "Share of the model on GPU " + gpuRow.index
                        onValueModified: dialog.settings.setGpuRatio(gpuRow.index, value)
                    }
                    Label { text: "keep free (MiB)"; color: Theme.textMuted }
                    SpinBox {
                        from: 0
                        to: 65536
                        stepSize: 256
                        value: gpuRow.modelData.reserveMiB
                        editable: true
                        enabled: gpuRow.modelData.use
                        Accessible.name: "Memory to keep free on GPU " + gpuRow.index
                        onValueModified: dialog.settings.setGpuReserve(gpuRow.index, value)
                    }
                }
            }

            RowLayout {
                spacing: Theme.spacing
                Label { text: "Split"; color: Theme.text }
                ComboBox {
                    objectName: "splitMode"
                    model: ["auto", "single", "layer", "tensor"]
                    currentIndex: Math.max(0, model.indexOf(dialog.settings.splitMode))
                    Accessible.name: "Split mode"
                    onActivated: dialog.settings.splitMode = currentText
                }
                Label { text: "Experts in RAM"; color: Theme.text }
                ComboBox {
                    objectName: "expertsInRam"
                    // Mixture-of-experts models: the layers whose experts stay in system RAM.
                    editable: true
                    model: ["auto", "all", "0", "4", "8", "12", "16", "24", "32", "48"]
                    currentIndex: model.indexOf(dialog.settings.expertsInRam)
                    editText: dialog.settings.expertsInRam
                    Accessible.name: "Layers whose experts stay in system RAM (mixture-of-experts models)"
                    ToolTip.visible: hovered
                    ToolTip.text: "Mixture-of-experts models: auto keeps as few layers' experts in RAM as the GPUs need; all keeps every layer's; a number keeps those of the first layers"
                    onActivated: dialog.settings.expertsInRam = currentText
                    onAccepted: dialog.settings.expertsInRam = editText
                }
                Label { text: "Main GPU"; color: Theme.text }
                SpinBox {
                    from: 0
                    to: Math.max(0, dialog.settings.gpus.length - 1)
                    value: dialog.settings.mainGpu
                    Accessible.name: "Main GPU"
                    onValueModified: dialog.settings.mainGpu = value
                }
            }

            Rectangle {
                Layout.fillWidth: true
                implicitHeight: previewText.implicitHeight + 2 * Theme.spacing
                radius: Theme.radius
                color: dialog.settings.fits ? Theme.surface : Theme.errorBackground

                Label {
                    id: previewText
                    objectName: "planPreview"
                    anchors.fill: parent
                    anchors.margins: Theme.spacing
                    text: dialog.settings.preview
                    color: dialog.settings.fits ? Theme.text : Theme.error
                    wrapMode: Text.Wrap
                    Accessible.name: "Plan preview"
                }
            }

            Label {
                text: "Apply reloads the model on the GPUs in use, as previewed. Simulated GPUs are planned on only; without a real GPU in use the model runs on the CPU."
                color: Theme.textMuted
                wrapMode: Text.Wrap
                font.pixelSize: Theme.smallFontSize
                Layout.fillWidth: true
            }
        }

        GridLayout {
            columns: 2
            columnSpacing: Theme.spacing
            rowSpacing: Theme.spacing

            Label { text: "Context length (tokens)"; color: Theme.text }
            SpinBox {
                from: 256
                to: 131072
                stepSize: 1024
                editable: true
                value: dialog.settings.contextLength
                Accessible.name: "Context length"
                onValueModified: dialog.settings.contextLength = value
            }

            Label { text: "KV cache"; color: Theme.text }
            ComboBox {
                readonly property var values: ["f16", "q8_0"]
                model: ["F16 (exact)", "Q8_0 (half the memory)"]
                currentIndex: Math.max(0, values.indexOf(dialog.settings.kvCacheType))
                Accessible.name: "KV cache type"
                onActivated: dialog.settings.kvCacheType = values[currentIndex]
                Layout.preferredWidth: 240
            }

            Label { text: "KV cache size (tokens, 0 = context length)"; color: Theme.text }
            SpinBox {
                objectName: "kvCacheTokens"
                from: 0
                to: 1048576
                stepSize: 1024
                editable: true
                value: dialog.settings.kvCacheTokens
                Accessible.name: "KV cache size in tokens"
                ToolTip.visible: hovered
                ToolTip.text: "Positions the KV cache holds for all conversations together; finished conversations stay in it, so that going back to one does not read its history again"
                onValueModified: dialog.settings.kvCacheTokens = value
            }

            Label { text: "Conversations at once"; color: Theme.text }
            SpinBox {
                objectName: "maxSequences"
                from: 1
                to: 16
                editable: true
                value: dialog.settings.maxSequences
                Accessible.name: "Conversations generated at once"
                ToolTip.visible: hovered
                ToolTip.text: "Answers generated together; more wait their turn"
                onValueModified: dialog.settings.maxSequences = value
            }

            Label { text: "CPU threads (0: all " + dialog.settings.cpuCores + " cores)"; color: Theme.text }
            SpinBox {
                from: 0
                to: 256
                editable: true
                value: dialog.settings.cpuThreads
                Accessible.name: "CPU threads"
                onValueModified: dialog.settings.cpuThreads = value
            }

            Label { text: "Theme"; color: Theme.text }
            ComboBox {
                objectName: "theme"
                readonly property var values: ["system", "light", "dark"]
                model: ["Follow the system", "Light", "Dark"]
                currentIndex: Math.max(0, values.indexOf(dialog.settings.theme))
                Accessible.name: "Theme"
                onActivated: dialog.settings.theme = values[currentIndex]
                Layout.preferredWidth: 240
            }

            Label { text: "Electricity price per kWh (0: not shown)"; color: Theme.text }
            TextField {
                text: dialog.settings.electricityPrice > 0 ? dialog.settings.electricityPrice.toString() : "0"
                validator: DoubleValidator { bottom: 0; top: 1000; decimals: 4; notation: DoubleValidator.StandardNotation }
                inputMethodHints: Qt.ImhFormattedNumbersOnly
                Accessible.name: "Electricity price per kilowatt-hour"
                onEditingFinished: dialog.settings.electricityPrice = Number(text)
                Layout.preferredWidth: 120
            }

            Label { text: "When a GPU fails"; color: Theme.text }
            ComboBox {
                objectName: "recoveryPolicy"
                readonly property var values: ["replan", "retry", "stop"]
                model: ["Continue on the other devices", "Load again on the same GPUs", "Stop the answer"]
                currentIndex: Math.max(0, values.indexOf(dialog.settings.recoveryPolicy))
                Accessible.name: "When a GPU fails"
                ToolTip.visible: hovered
                ToolTip.text: "Continue: the answer goes on from its last word on the GPUs left, else the CPU and RAM. Load again: the same GPUs, for a fault a reload clears. Stop: the answer ends with the error."
                onActivated: dialog.settings.recoveryPolicy = values[currentIndex]
                Layout.preferredWidth: 280
            }

            Label { text: "Hugging Face token"; color: Theme.text; visible: dialog.hub !== null }
            RowLayout {
                visible: dialog.hub !== null
                spacing: Theme.spacing / 2
                Layout.fillWidth: true
                TextField {
                    id: hubToken
                    objectName: "hubTokenField"
                    echoMode: TextInput.Password
                    placeholderText: dialog.hub && dialog.hub.tokenSaved ? "A token is saved in the keyring" : "hf_…, for gated and private models"
                    Accessible.name: "Hugging Face token"
                    Layout.fillWidth: true
                }
                Button {
                    objectName: "hubTokenSave"
                    text: "Save"
                    enabled: hubToken.text.trim().length > 0 && dialog.hub !== null && !dialog.hub.tokenBusy
                    onClicked: { dialog.hub.saveToken(hubToken.text); hubToken.text = "" }
                }
                Button {
                    objectName: "hubTokenClear"
                    text: "Forget"
                    enabled: dialog.hub !== null && dialog.hub.tokenSaved && !dialog.hub.tokenBusy
                    Accessible.name: "Forget the Hugging Face token"
                    onClicked: dialog.hub.clearToken()
                }
            }
            Item { width: 1; height: 1; visible: hubTokenNote.visible }
            Label {
                id: hubTokenNote
                objectName: "hubTokenStatus"
                visible: dialog.hub !== null
                text: !dialog.hub ? "" : dialog.hub.tokenError.length > 0 ? dialog.hub.tokenError
                      : dialog.hub.tokenSaved ? "Saved in the system keyring; sent to Hugging Face only."
                      : "No token: gated and private repositories cannot be listed or downloaded."
                color: dialog.hub && dialog.hub.tokenError.length > 0 ? Theme.error : Theme.textMuted
                font.pixelSize: Theme.smallFontSize
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }

            Label { text: "Data folder"; color: Theme.text }
            Label {
                text: dialog.settings.dataFolder
                color: Theme.textMuted
                elide: Text.ElideMiddle
                Layout.fillWidth: true
                Accessible.name: "Data folder"
                ToolTip.visible: dataHover.hovered
                ToolTip.text: "Conversations and settings live here (powerhouse.db). Start with --data-dir to use another folder."
                HoverHandler { id: dataHover }
            }
        }

        Loader {
            objectName: "serverTab"
            sourceComponent: dialog.server !== null ? serverSettings : noServer

            Component {
                id: serverSettings
                ServerSettings {
                    server: dialog.server
                }
            }
            Component {
                id: noServer
                Label {
                    text: "This window has no API server."
                    color: Theme.textMuted
                }
            }
        }

        Loader {
            objectName: "enginesTab"
            sourceComponent: dialog.engines !== null ? enginesSettings : noEngines

            Component {
                id: enginesSettings
                EnginesSettings {
                    engines: dialog.engines
                }
            }
            Component {
                id: noEngines
                Label {
                    text: "This window has no remote engines."
                    color: Theme.textMuted
                }
            }
        }
    }
}
