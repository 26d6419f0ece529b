// The open conversation's system prompt, sampling settings and the chat template's switches
// (thinking, reasoning effort: offered only where the template of the conversation's model
// reads them). Save keeps them with the
// conversation (a new chat keeps them until its first message creates it); "Defaults"
// goes back to the app's. An out-of-range value is refused with the reason, shown in the
// dialog under the field's row (the chat behind may be covered) until the next Save, Cancel
// or opening.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

Dialog {
    id: dialog

    required property ChatController controller
    // The refused field (the controller's sampling key; "" for none or for no one field) and why.
    property string problemField: ""
    property string problemText: ""

    function clearProblem() {
        problemField = ""
        problemText = ""
    }

    // Reads the controller's values into the fields each time the dialog opens.
    function load() {
        const s = controller.sampling
        prompt.text = controller.systemPrompt
        temperature.text = s.temperature.toFixed(2)
        topK.value = s.topK
        topP.text = s.topP.toFixed(2)
        minP.text = s.minP.toFixed(2)
        repeatPenalty.text = s.repeatPenalty.toFixed(2)
        presencePenalty.text = s.presencePenalty.toFixed(2)
        frequencyPenalty.text = s.frequencyPenalty.toFixed(2)
        maxTokens.value = s.maxTokens
        fixedSeed.checked = s.seed >= 0
        seed.value = Math.max(0, s.seed)
        thinking.checked = s.thinking
        effort.currentIndex = Math.max(0, efforts.indexOf(s.reasoningEffort))
    }

    // The effort choice's values, in its list's order ("": the model's default, nothing sent).
    readonly property var efforts: ["", "low", "medium", "high"]

    title: "Conversation settings"
    modal: true
    width: Math.min(parent ? parent.width - 80 : 560, 560)
    anchors.centerIn: Overlay.overlay
    onAboutToShow: {
        clearProblem()
        load()
    }
    onClosed: clearProblem()

    // Keeps the fields; the dialog closes only if the controller took them. A refused value's
    // reason shows beside its field, which takes the focus.
    function save() {
        // An emptied field goes as "" (Number("") would be 0): refused beside it, with its default.
        const number = field => field.text.trim().length > 0 ? Number(field.text) : ""
        const sampling = {
            temperature: number(temperature), topK: topK.value, topP: number(topP),
            minP: number(minP), repeatPenalty: number(repeatPenalty),
            presencePenalty: number(presencePenalty), frequencyPenalty: number(frequencyPenalty),
            maxTokens: maxTokens.value, seed: fixedSeed.checked ? seed.value : -1,
            // Kept as they were when hidden: another model may read them again.
            thinking: thinking.checked, reasoningEffort: efforts[effort.currentIndex]
        }
        const problem = controller.conversationSettingsProblem(sampling)
        if (problem.message !== undefined) {
            problemField = problem.field
            problemText = problem.message
            const fields = {temperature: temperature, topK: topK, topP: topP, minP: minP, repeatPenalty: repeatPenalty,
                            presencePenalty: presencePenalty, frequencyPenalty: frequencyPenalty, maxTokens: maxTokens}
            if (fields[problemField] !== undefined) fields[problemField].forceActiveFocus()
            return
        }
        clearProblem()
        if (controller.setConversationSettings(prompt.text, sampling)) close()
    }

    footer: DialogButtonBox {
        Button {
            text: "Defaults"
            Accessible.name: "Back to the default settings"
            DialogButtonBox.buttonRole: DialogButtonBox.ResetRole
            onClicked: {
                dialog.controller.resetConversationSettings()
                dialog.clearProblem()
                dialog.load()
            }
        }
        Button {
            objectName: "saveButton"
            text: "Save"
            highlighted: true
            DialogButtonBox.buttonRole: DialogButtonBox.ActionRole
            onClicked: dialog.save()
        }
        Button {
            text: "Cancel"
            DialogButtonBox.buttonRole: DialogButtonBox.RejectRole
        }
    }

    // The refusal, under the row of the field at fault (hidden, it takes no row of the grid).
    component FieldProblem: Label {
        required property var fields
        objectName: "problem_" + fields.join("_")
        visible: dialog.problemText.length > 0 && fields.indexOf(dialog.problemField) >= 0
        text: dialog.problemText
        color: Theme.error
        wrapMode: Text.Wrap
        Accessible.role: Accessible.AlertMessage
        Accessible.name: text
        Layout.columnSpan: 4
        Layout.fillWidth: true
    }

    component NumberField: TextField {
        validator: DoubleValidator { bottom: -100; top: 100; decimals: 3; notation: DoubleValidator.StandardNotation }
        inputMethodHints: Qt.ImhFormattedNumbersOnly
        Layout.preferredWidth: 90
    }

    ColumnLayout {
        anchors.fill: parent
        spacing: Theme.spacing

        Label { text: "System prompt"; color: Theme.text }
        ScrollView {
            Layout.fillWidth: true
            Layout.preferredHeight: 90
            TextArea {
                id: prompt
                objectName: "systemPrompt"
                wrapMode: TextEdit.Wrap
                placeholderText: "How the assistant should answer (optional)"
                Accessible.name: "System prompt"
            }
        }

        GridLayout {
            columns: 4
            columnSpacing: Theme.spacing
            rowSpacing: 6

            Label { text: "Temperature"; color: Theme.text }
            NumberField { id: temperature; objectName: "temperature"; Accessible.name: "Temperature" }
            Label { text: "Top-k (0: off)"; color: Theme.text }
            SpinBox { id: topK; from: 0; to: 1000; editable: true; Accessible.name: "Top k" }
            FieldProblem { fields: ["temperature", "topK"] }

            Label { text: "Top-p"; color: Theme.text }
            NumberField { id: topP; Accessible.name: "Top p" }
            Label { text: "Min-p"; color: Theme.text }
            NumberField { id: minP; Accessible.name: "Min p" }
            FieldProblem { fields: ["topP", "minP"] }

            Label { text: "Repeat penalty"; color: Theme.text }
            NumberField { id: repeatPenalty; Accessible.name: "Repeat penalty" }
            Label { text: "Presence penalty"; color: Theme.text }
            NumberField { id: presencePenalty; Accessible.name: "Presence penalty" }
            FieldProblem { fields: ["repeatPenalty", "presencePenalty"] }

            Label { text: "Frequency penalty"; color: Theme.text }
            NumberField { id: frequencyPenalty; Accessible.name: "Frequency penalty" }
            Label { text: "Max tokens"; color: Theme.text }
            SpinBox { id: maxTokens; objectName: "maxTokens"; from: 1; to: 131072; stepSize: 256; editable: true; Accessible.name: "Maximum answer tokens" }
            FieldProblem { fields: ["frequencyPenalty", "maxTokens"] }

            CheckBox {
                id: fixedSeed
                objectName: "fixedSeed"
                text: "Fixed seed"
                Accessible.name: "Use a fixed seed"
                ToolTip.visible: hovered
                ToolTip.text: "The same seed gives the same answer; without one, every answer (and Regenerate) differs."
            }
            SpinBox { id: seed; from: 0; to: 2147483647; editable: true; enabled: fixedSeed.checked; Accessible.name: "Seed" }
            FieldProblem { fields: [""] }  // no one field at fault
        }
        Label {
            text: "Temperature 0 always picks the most likely token."
            color: Theme.textMuted
            font.pixelSize: Theme.smallFontSize
        }

        // The chat template's switches, shown as the template of the conversation's model reads
        // them (the model loaded now for a new chat); the note says when the loaded model is another.
        Switch {
            id: thinking
            objectName: "thinkingSwitch"
            visible: dialog.controller.thinkingSwitch
            text: "Think before answering"
            Accessible.name: "Think before answering"
            ToolTip.visible: hovered
            ToolTip.text: "Off: the model answers at once, without thinking first (enable_thinking false)."
        }
        RowLayout {
            visible: dialog.controller.reasoningEffortChoice
            spacing: Theme.spacing
            Label { text: "Reasoning effort"; color: Theme.text }
            ComboBox {
                id: effort
                objectName: "reasoningEffort"
                model: ["Default", "Low", "Medium", "High"]
                Accessible.name: "Reasoning effort"
            }
        }
        Label {
            objectName: "templateSwitchesNote"
            visible: text.length > 0
            text: dialog.controller.templateSwitchesNote
            color: Theme.textMuted
            font.pixelSize: Theme.smallFontSize
            wrapMode: Text.Wrap
            Layout.fillWidth: true
            Accessible.role: Accessible.StaticText
            Accessible.name: text
        }
    }
}
