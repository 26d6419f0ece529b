// The open conversation's system prompt and sampling settings. Save keeps them with the
// conversation (a new chat keeps them until its first message creates it); "Defaults"
// goes back to the app's. Out-of-range values are refused with the reason.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

Dialog {
    id: dialog

    required property ChatController controller

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
    }

    title: "Conversation settings"
    modal: true
    width: Math.min(parent ? parent.width - 80 : 560, 560)
    anchors.centerIn: Overlay.overlay
    onAboutToShow: load()

    // Keeps the fields; the dialog closes only if the controller took them.
    function save() {
        const ok = controller.setConversationSettings(prompt.text, {
            temperature: Number(temperature.text), topK: topK.value, topP: Number(topP.text),
            minP: Number(minP.text), repeatPenalty: Number(repeatPenalty.text),
            presencePenalty: Number(presencePenalty.text), frequencyPenalty: Number(frequencyPenalty.text),
            maxTokens: maxTokens.value, seed: fixedSeed.checked ? seed.value : -1
        })
        if (ok) close()
    }

    footer: DialogButtonBox {
        Button {
            text: "Defaults"
            Accessible.name: "Back to the default settings"
            DialogButtonBox.buttonRole: DialogButtonBox.ResetRole
            onClicked: {
                dialog.controller.resetConversationSettings()
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

            Label { text: "Top-p"; color: Theme.text }
            NumberField { id: topP; Accessible.name: "Top p" }
            Label { text: "Min-p"; color: Theme.text }
            NumberField { id: minP; Accessible.name: "Min p" }

            Label { text: "Repeat penalty"; color: Theme.text }
            NumberField { id: repeatPenalty; Accessible.name: "Repeat penalty" }
            Label { text: "Presence penalty"; color: Theme.text }
            NumberField { id: presencePenalty; Accessible.name: "Presence penalty" }

            Label { text: "Frequency penalty"; color: Theme.text }
            NumberField { id: frequencyPenalty; Accessible.name: "Frequency penalty" }
            Label { text: "Max tokens"; color: Theme.text }
            SpinBox { id: maxTokens; objectName: "maxTokens"; from: 1; to: 131072; stepSize: 256; editable: true; Accessible.name: "Maximum answer tokens" }

            CheckBox {
                id: fixedSeed
                text: "Fixed seed"
                Accessible.name: "Use a fixed seed"
                ToolTip.visible: hovered
                ToolTip.text: "The same seed gives the same answer; without one, every answer (and Regenerate) differs."
            }
            SpinBox { id: seed; from: 0; to: 2147483647; editable: true; enabled: fixedSeed.checked; Accessible.name: "Seed" }
        }
        Label {
            text: "Temperature 0 always picks the most likely token."
            color: Theme.textMuted
            font.pixelSize: Theme.smallFontSize
        }
    }
}
