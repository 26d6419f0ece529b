// Settings. GPUs: which to use, shares, memory to keep free, split mode and main GPU, with
// the planner's live preview of where the model would go and whether it fits, before
// anything is loaded (a GPU that failed in this run shown unticked, with why). General:
// context length, KV cache type and size, conversations generated at once, CPU threads,
// whether answers guess tokens from the conversation (speculative decoding, at once), theme,
// electricity price, what to do when a GPU fails, data folder, the Hugging Face
// token (saved in the system keyring at once, never in the database). Apply saves and
// reloads the model; Close forgets what was not applied (the theme and the guessing apply
// at once).
// Server: the OpenAI API server (ServerSettings.qml), whose settings apply at once.
// Engines: remote OpenAI-compatible servers (EnginesSettings.qml), also at once.
// The look: a form of rows (a label column and a control column, helper text under the
// control in the muted caption style) grouped under section headings, each GPU a card; the
// GPUs and General tabs scroll, so that the dialog fits the smallest window (640×420).
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
    // The form's label column: a third of the dialog, at most 200 px.
    readonly property int labelWidth: Math.min(200, Math.round(dialog.availableWidth / 3))

    // A row's label, in the label column, level with its control's first line.
    component FormLabel: Label {
        color: Theme.text
        font.pixelSize: Theme.bodySize
        wrapMode: Text.Wrap
        topPadding: 6
        Layout.preferredWidth: dialog.labelWidth
        Layout.maximumWidth: dialog.labelWidth
        Layout.alignment: Qt.AlignLeft | Qt.AlignTop
    }
    // Helper text under a control: the muted caption style.
    component Helper: Label {
        color: Theme.textMuted
        font.pixelSize: Theme.captionSize
        wrapMode: Text.Wrap
        Layout.fillWidth: true
    }
    // A group's heading: small capitals, as on the dashboard and the welcome view.
    component SectionTitle: Label {
        color: Theme.textMuted
        font.pixelSize: Theme.captionSize
        font.weight: Font.DemiBold
        font.capitalization: Font.AllUppercase
        font.letterSpacing: 0.6
        Layout.fillWidth: true
        Layout.columnSpan: 2
        Layout.topMargin: Theme.space4
    }
    // The control column of a row: the control, and helper text under it.
    component FormField: ColumnLayout {
        spacing: 2
        Layout.fillWidth: true
        Layout.alignment: Qt.AlignTop
    }
    // A tab of the dialog's bar: its text, underlined in the accent colour when current.
    component SettingsTab: TabButton {
        id: tabButton
        font.pixelSize: Theme.bodySize
        font.weight: checked ? Font.DemiBold : Font.Normal
        topPadding: Theme.space2
        bottomPadding: Theme.space2
        contentItem: Label {
            text: tabButton.text
            font: tabButton.font
            color: tabButton.checked ? Theme.text : Theme.textMuted
            horizontalAlignment: Text.AlignHCenter
            elide: Text.ElideRight
        }
        background: Rectangle {
            color: tabButton.hovered && !tabButton.checked ? Theme.surfaceHover : "transparent"
            radius: Theme.radiusSmall
            Rectangle {
                anchors.bottom: parent.bottom
                anchors.horizontalCenter: parent.horizontalCenter
                width: Math.min(parent.width - 2 * Theme.space2, tabButton.contentItem.implicitWidth + 2 * Theme.space2)
                height: 3
                radius: 1.5
                color: Theme.accent
                visible: tabButton.checked
            }
        }
    }

    title: "Settings"
    modal: true
    width: Math.min(parent ? parent.width - 2 * Theme.space6 : 760, 760)
    // Never taller than the window: the tabs scroll instead.
    height: Math.min(implicitHeight, parent ? parent.height - 2 * Theme.space4 : implicitHeight)
    anchors.centerIn: Overlay.overlay
    padding: Theme.space6
    topPadding: Theme.space4
    bottomPadding: Theme.space2
    standardButtons: Dialog.Apply | Dialog.Close
    // Why the last Apply was refused (the store could not keep the settings: another program
    // holds the file, ...), shown in the dialog: the chat's error line, where the settings'
    // errors also go, is behind this modal dialog, and Apply looked as if it did nothing.
    property string applyError: ""
    onAboutToShow: applyError = ""
    onApplied: {
        applyError = ""
        if (settings.apply()) close()
    }
    onRejected: settings.revert()
    Connections {
        target: dialog.settings
        function onError(message) {
            dialog.applyError = message
        }
    }
    // A new API key is shown once: not again when the dialog opens next.
    onClosed: if (server) server.hideApiKey()

    background: Rectangle {
        color: Theme.surface
        radius: Theme.radiusLarge
        border.color: Theme.border
    }

    // Apply and Close at the right, on the dialog's own surface (Dialog fills in the buttons).
    footer: DialogButtonBox {
        objectName: "settingsButtons"
        alignment: Qt.AlignRight
        spacing: Theme.space2
        leftPadding: Theme.space6
        rightPadding: Theme.space6
        topPadding: Theme.space3
        bottomPadding: Theme.space4
        background: Rectangle {
            color: "transparent"
            Rectangle {
                width: parent.width
                height: 1
                color: Theme.border
            }
        }
    }

    // A header of our own replaces the dialog's title bar: the title goes above the tabs.
    header: ColumnLayout {
        spacing: 0

        Label {
            objectName: "settingsTitle"
            text: dialog.title
            color: Theme.text
            font.weight: Font.DemiBold
            font.pixelSize: Theme.titleSize
            leftPadding: Theme.space6
            rightPadding: Theme.space6
            topPadding: Theme.space4
            bottomPadding: Theme.space2
            Layout.fillWidth: true
        }

        TabBar {
            id: tabs
            spacing: Theme.space1
            leftPadding: Theme.space4
            rightPadding: Theme.space4
            Layout.fillWidth: true
            background: Rectangle {
                color: "transparent"
                Rectangle {
                    anchors.bottom: parent.bottom
                    width: parent.width
                    height: 1
                    color: Theme.border
                }
            }
            SettingsTab { text: "GPUs"; Accessible.name: "GPU settings" }
            SettingsTab { text: "General"; Accessible.name: "General settings" }
            SettingsTab { text: "Server"; Accessible.name: "API server settings" }
            SettingsTab { text: "Engines"; Accessible.name: "Remote engines" }
        }

        Label {
            objectName: "applyError"
            visible: dialog.applyError.length > 0
            text: "The settings were not applied: " + dialog.applyError
            color: Theme.error
            font.pixelSize: Theme.bodySize
            wrapMode: Text.Wrap
            leftPadding: Theme.space6
            rightPadding: Theme.space6
            topPadding: Theme.space2
            bottomPadding: Theme.space2
            Accessible.role: Accessible.AlertMessage
            Accessible.name: text
            Layout.fillWidth: true
        }
    }

    StackLayout {
        anchors.fill: parent
        currentIndex: tabs.currentIndex

        ScrollView {
            id: gpuTab
            objectName: "gpuTab"
            contentWidth: availableWidth
            implicitHeight: Math.min(gpuForm.implicitHeight, 460)
            clip: true

            ColumnLayout {
                id: gpuForm
                width: gpuTab.availableWidth
                spacing: Theme.space3

                Helper {
                    visible: dialog.settings.gpus.length === 0
                    text: "No GPU found: models run on the CPU."
                    font.pixelSize: Theme.bodySize
                }

                Repeater {
                    model: dialog.settings.gpus
                    delegate: Rectangle {
                        id: gpuRow
                        required property int index
                        required property var modelData
                        objectName: "gpuCard" + index
                        radius: Theme.radius
                        color: Theme.background
                        border.color: gpuRow.modelData.failed ? Theme.error : Theme.border
                        implicitHeight: gpuColumn.implicitHeight + 2 * Theme.space3
                        Layout.fillWidth: true

                        ColumnLayout {
                            id: gpuColumn
                            anchors.fill: parent
                            anchors.margins: Theme.space3
                            spacing: Theme.space2

                            RowLayout {
                                spacing: Theme.space2
                                Layout.fillWidth: true
                                CheckBox {
                                    objectName: "useGpu" + gpuRow.index
                                    checked: gpuRow.modelData.use
                                    // A GPU that failed stays out until the app restarts.
                                    enabled: !gpuRow.modelData.failed
                                    text: "GPU " + gpuRow.index + ": " + gpuRow.modelData.name + " (" + gpuRow.modelData.totalGiB.toFixed(0) + " GiB)"
                                    font.weight: Font.DemiBold
                                    Accessible.name: "Use GPU " + gpuRow.index
                                    onToggled: dialog.settings.setGpuUse(gpuRow.index, checked)
                                    Layout.fillWidth: true
                                }
                                Chip {
                                    visible: gpuRow.modelData.failed
                                    text: "FAILED"
                                    tint: Theme.error
                                    fill: Theme.errorBackground
                                    font.weight: Font.DemiBold
                                }
                            }
                            Label {
                                objectName: "gpuFailure" + gpuRow.index
                                visible: gpuRow.modelData.failed
                                text: gpuRow.modelData.failure + ". Not used until Powerhouse restarts."
                                color: Theme.error
                                wrapMode: Text.Wrap
                                font.pixelSize: Theme.captionSize
                                Layout.fillWidth: true
                            }

                            GridLayout {
                                columns: 2
                                columnSpacing: Theme.space4
                                rowSpacing: Theme.space2
                                Layout.fillWidth: true

                                FormLabel { text: "Share of the model" }
                                FormField {
                                    SpinBox {
                                        from: 1
                                        to: 100
                                        value: Math.round(gpuRow.modelData.ratio)
                                        editable: true
                                        enabled: gpuRow.modelData.use
                                        Accessible.name: "Share of the model on GPU " + gpuRow.index
                                        onValueModified: dialog.settings.setGpuRatio(gpuRow.index, value)
                                    }
                                    Helper { text: "Relative to the other GPUs' shares" }
                                }
                                FormLabel { text: "Memory to keep free" }
                                FormField {
                                    RowLayout {
                                        spacing: Theme.space2
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
                                        Label { text: "MiB"; color: Theme.textMuted }
                                    }
                                }
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
                            }
                        }
                    }
                }

                GridLayout {
                    columns: 2
                    columnSpacing: Theme.space4
                    rowSpacing: Theme.space2
                    Layout.fillWidth: true

                    SectionTitle { text: "Placement" }
                    FormLabel { text: "Split" }
                    ComboBox {
                        objectName: "splitMode"
                        model: ["auto", "single", "layer", "tensor"]
                        currentIndex: Math.max(0, model.indexOf(dialog.settings.splitMode))
                        Accessible.name: "Split mode"
                        onActivated: dialog.settings.splitMode = currentText
                        Layout.preferredWidth: 200
                    }
                    FormLabel { text: "Experts in RAM" }
                    FormField {
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
                            Layout.preferredWidth: 200
                        }
                        Helper { text: "Mixture-of-experts models: the layers whose experts stay in system RAM" }
                    }
                    FormLabel { text: "Main GPU" }
                    SpinBox {
                        from: 0
                        to: Math.max(0, dialog.settings.gpus.length - 1)
                        value: dialog.settings.mainGpu
                        Accessible.name: "Main GPU"
                        onValueModified: dialog.settings.mainGpu = value
                    }
                    SectionTitle { text: "Where the model would go" }
                }

                Rectangle {
                    Layout.fillWidth: true
                    implicitHeight: previewText.implicitHeight + 2 * Theme.space3
                    radius: Theme.radius
                    color: dialog.settings.fits ? Theme.background : Theme.errorBackground
                    border.color: dialog.settings.fits ? Theme.border : Theme.error

                    Label {
                        id: previewText
                        objectName: "planPreview"
                        anchors.fill: parent
                        anchors.margins: Theme.space3
                        text: dialog.settings.preview
                        color: dialog.settings.fits ? Theme.text : Theme.error
                        wrapMode: Text.Wrap
                        Accessible.name: "Plan preview"
                    }
                }

                Helper {
                    text: "Apply reloads the model on the GPUs in use, as previewed. Simulated GPUs are planned on only; without a real GPU in use the model runs on the CPU."
                }
            }
        }

        ScrollView {
            id: generalTab
            objectName: "generalTab"
            contentWidth: availableWidth
            implicitHeight: Math.min(generalForm.implicitHeight, 460)
            clip: true

            GridLayout {
                id: generalForm
                width: generalTab.availableWidth
                columns: 2
                columnSpacing: Theme.space4
                rowSpacing: Theme.space2

                SectionTitle { text: "Model"; Layout.topMargin: 0 }
                FormLabel { text: "Context length" }
                FormField {
                    SpinBox {
                        from: 256
                        to: 131072
                        stepSize: 1024
                        editable: true
                        value: dialog.settings.contextLength
                        Accessible.name: "Context length"
                        onValueModified: dialog.settings.contextLength = value
                    }
                    Helper { text: "Tokens a conversation may hold" }
                }

                FormLabel { text: "KV cache" }
                ComboBox {
                    readonly property var values: ["f16", "q8_0"]
                    model: ["F16 (exact)", "Q8_0 (half the memory)"]
                    currentIndex: Math.max(0, values.indexOf(dialog.settings.kvCacheType))
                    Accessible.name: "KV cache type"
                    onActivated: dialog.settings.kvCacheType = values[currentIndex]
                    Layout.preferredWidth: 240
                    Layout.maximumWidth: generalForm.width - dialog.labelWidth - Theme.space4
                }

                FormLabel { text: "KV cache size" }
                FormField {
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
                    Helper { text: "Tokens for all conversations together; 0: the context length" }
                }

                FormLabel { text: "Conversations at once" }
                FormField {
                    SpinBox {
                        objectName: "maxSequences"
                        from: 1
                        to: 16
                        editable: true
                        value: dialog.settings.maxSequences
                        Accessible.name: "Conversations generated at once"
                        onValueModified: dialog.settings.maxSequences = value
                    }
                    Helper { text: "Answers generated together; more wait their turn" }
                }

                FormLabel { text: "CPU threads" }
                FormField {
                    SpinBox {
                        from: 0
                        to: 256
                        editable: true
                        value: dialog.settings.cpuThreads
                        Accessible.name: "CPU threads"
                        onValueModified: dialog.settings.cpuThreads = value
                    }
                    Helper { text: "0: all " + dialog.settings.cpuCores + " cores" }
                }

                FormLabel { text: "When a GPU fails" }
                FormField {
                    ComboBox {
                        objectName: "recoveryPolicy"
                        readonly property var values: ["replan", "retry", "stop"]
                        model: ["Continue on the other devices", "Load again on the same GPUs", "Stop the answer"]
                        currentIndex: Math.max(0, values.indexOf(dialog.settings.recoveryPolicy))
                        Accessible.name: "When a GPU fails"
                        onActivated: dialog.settings.recoveryPolicy = values[currentIndex]
                        Layout.preferredWidth: 280
                        Layout.maximumWidth: generalForm.width - dialog.labelWidth - Theme.space4
                    }
                    Helper {
                        text: "Continue: the answer goes on from its last word on the GPUs left, else the CPU and RAM. Load again: the same GPUs, for a fault a reload clears. Stop: the answer ends with the error."
                    }
                }

                FormLabel { text: "Speculative decoding" }
                FormField {
                    Switch {
                        objectName: "guessTokens"
                        text: "Guess tokens from the conversation"
                        checked: dialog.settings.guessTokens
                        Accessible.name: "Guess tokens from the conversation (speculative decoding)"
                        onToggled: dialog.settings.guessTokens = checked
                    }
                    Helper {
                        text: "The same answer, faster on a GPU when it repeats earlier text (code being edited); it can be slower on a CPU. Applies to the next answer."
                    }
                }

                SectionTitle { text: "Appearance and costs" }
                FormLabel { text: "Theme" }
                ComboBox {
                    objectName: "theme"
                    readonly property var values: ["system", "light", "dark"]
                    model: ["Follow the system", "Light", "Dark"]
                    currentIndex: Math.max(0, values.indexOf(dialog.settings.theme))
                    Accessible.name: "Theme"
                    onActivated: dialog.settings.theme = values[currentIndex]
                    Layout.preferredWidth: 240
                    Layout.maximumWidth: generalForm.width - dialog.labelWidth - Theme.space4
                }

                FormLabel { text: "Electricity price" }
                FormField {
                    TextField {
                        text: dialog.settings.electricityPrice > 0 ? dialog.settings.electricityPrice.toString() : "0"
                        validator: DoubleValidator { bottom: 0; top: 1000; decimals: 4; notation: DoubleValidator.StandardNotation }
                        inputMethodHints: Qt.ImhFormattedNumbersOnly
                        Accessible.name: "Electricity price per kilowatt-hour"
                        onEditingFinished: dialog.settings.electricityPrice = Number(text)
                        Layout.preferredWidth: 120
                    }
                    Helper { text: "Per kWh, for the Costs view; 0: not shown" }
                }

                SectionTitle { text: "Hugging Face"; visible: dialog.hub !== null }
                FormLabel { text: "Token"; visible: dialog.hub !== null }
                FormField {
                    visible: dialog.hub !== null
                    RowLayout {
                        spacing: Theme.space2
                        Layout.fillWidth: true
                        TextField {
                            id: hubToken
                            objectName: "hubTokenField"
                            echoMode: TextInput.Password
                            placeholderText: dialog.hub && dialog.hub.tokenSaved ? "A token is saved in the keyring" : "hf_…, for gated and private models"
                            Accessible.name: "Hugging Face token"
                            Layout.fillWidth: true
                            Layout.minimumWidth: 80
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
                    Helper {
                        id: hubTokenNote
                        objectName: "hubTokenStatus"
                        text: !dialog.hub ? "" : dialog.hub.tokenError.length > 0 ? dialog.hub.tokenError
                              : dialog.hub.tokenSaved ? "Saved in the system keyring; sent to Hugging Face only."
                              : "No token: gated and private repositories cannot be listed or downloaded."
                        color: dialog.hub && dialog.hub.tokenError.length > 0 ? Theme.error : Theme.textMuted
                    }
                }

                SectionTitle { text: "Storage" }
                FormLabel { text: "Data folder" }
                FormField {
                    Label {
                        text: dialog.settings.dataFolder
                        color: Theme.text
                        font.family: Theme.monoFont
                        font.pixelSize: Theme.captionSize
                        elide: Text.ElideMiddle
                        topPadding: 6
                        Layout.fillWidth: true
                        Accessible.name: "Data folder"
                        ToolTip.visible: dataHover.hovered
                        ToolTip.text: dialog.settings.dataFolder
                        HoverHandler { id: dataHover }
                    }
                    Helper { text: "Conversations and settings live here (powerhouse.db). Start with --data-dir to use another folder." }
                }
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
