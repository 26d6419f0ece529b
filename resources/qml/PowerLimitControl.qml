// One GPU's power limit (issue 24): the limit set now, the default and the range the driver
// allows, a slider and a field within that range, "Restore default" in one click, and what
// went wrong: a refusal's words and, without the right to set it, the nvidia-smi command to
// run instead with a button that copies it. Shown on the dashboard's GPU card and in
// Settings → GPUs; `info` is one row of PowerController.gpus.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

ColumnLayout {
    id: control

    required property PowerController power
    required property var info
    readonly property bool supported: info !== undefined && info.supported === true
    readonly property int gpu: info !== undefined ? info.gpu : -1

    function w(value) {
        return Math.round(value) + " W"
    }

    spacing: Theme.space1

    RowLayout {
        Layout.fillWidth: true
        spacing: Theme.space2
        Label {
            text: "Power limit"
            color: Theme.textMuted
            font.pixelSize: Theme.smallFontSize
        }
        Label {
            objectName: "powerLimitNow"
            text: control.info.currentW > 0 ? control.w(control.info.currentW) : "—"
            color: Theme.text
            font.pixelSize: Theme.smallFontSize
            font.bold: true
        }
    }
    Label {
        objectName: "powerLimitRange"
        visible: control.supported
        text: "Default " + control.w(control.info.defaultW) + ", range " + control.w(control.info.minW) + " to " + control.w(control.info.maxW)
        color: Theme.textMuted
        font.pixelSize: Theme.smallFontSize
        wrapMode: Text.Wrap
        Layout.fillWidth: true
    }

    Label {
        visible: !control.supported && control.info.error.length === 0
        text: control.info.unsupportedReason !== undefined ? control.info.unsupportedReason : "This GPU does not report a power limit."
        color: Theme.textMuted
        wrapMode: Text.Wrap
        font.pixelSize: Theme.smallFontSize
        Layout.fillWidth: true
    }

    RowLayout {
        visible: control.supported
        Layout.fillWidth: true
        spacing: Theme.space2
        Slider {
            id: slider
            objectName: "powerLimitSlider"
            from: control.info.minW
            to: Math.max(control.info.minW + 1, control.info.maxW)
            stepSize: 5
            value: control.info.currentW
            Accessible.name: "Power limit of GPU " + control.gpu
            Layout.fillWidth: true
            Layout.minimumWidth: 40
            Layout.preferredWidth: 100
            onMoved: field.text = Math.round(value)
            onPressedChanged: if (!pressed) control.power.setLimit(control.gpu, Math.round(value))
        }
        // Beside the slider rather than the label: the narrowest dashboard (220 px) has room
        // for the two only there.
        TextField {
            id: field
            objectName: "powerLimitField"
            text: Math.round(control.info.currentW)
            validator: IntValidator { bottom: 1; top: 100000 }
            horizontalAlignment: TextInput.AlignRight
            selectByMouse: true
            Accessible.name: "Power limit of GPU " + control.gpu + " in watts"
            Layout.preferredWidth: 56
            Layout.maximumWidth: 56
            onAccepted: control.power.setLimit(control.gpu, Number(text))
        }
        Label { text: "W"; color: Theme.textMuted; font.pixelSize: Theme.smallFontSize }
    }
    IconButton {
        objectName: "restorePowerLimit"
        visible: control.supported
        iconName: "edit-undo-symbolic"
        text: "Restore default"
        showText: true
        font.pixelSize: Theme.smallFontSize
        enabled: control.info.currentW !== control.info.defaultW || control.info.settingW > 0
        onClicked: control.power.restoreDefault(control.gpu)
    }

    Label {
        objectName: "powerLimitChanged"
        visible: control.info.changedFromW > 0
        text: "Set by Powerhouse (was " + control.w(control.info.changedFromW) + ")"
              + (control.power.keepLimits ? ": kept after quitting" : ": put back when Powerhouse quits")
        color: Theme.textMuted
        wrapMode: Text.Wrap
        font.pixelSize: Theme.smallFontSize
        Layout.fillWidth: true
    }

    Label {
        objectName: "powerLimitError"
        visible: control.info.error.length > 0
        text: control.info.error
        color: Theme.error
        wrapMode: Text.Wrap
        font.pixelSize: Theme.smallFontSize
        Layout.fillWidth: true
    }
    RowLayout {
        visible: control.info.command.length > 0
        Layout.fillWidth: true
        spacing: Theme.space1
        TextField {
            objectName: "powerLimitCommand"
            text: control.info.command
            readOnly: true
            selectByMouse: true
            font.family: Theme.monoFont
            font.pixelSize: Theme.smallFontSize
            Accessible.name: "Command to set the limit by hand"
            Layout.fillWidth: true
        }
        IconButton {
            objectName: "copyPowerCommand"
            iconName: "edit-copy-symbolic"
            text: "Copy command"
            onClicked: control.power.copyText(control.info.command)
        }
    }
}
