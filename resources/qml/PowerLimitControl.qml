// One GPU's power limit (issue 24): the limit set now, the default and the range the driver
// allows, a slider and a field within that range, "Restore default" in one click, and what
// went wrong: a refusal's words and, without the right to set it, the nvidia-smi command to
// run instead with a button that copies it. Shown on the dashboard's GPU card and in
// Settings → GPUs; `info` is one row of PowerController.gpus. On the card it is `collapsible`:
// a "Power limit  450 W" line that opens the rest, and opens by itself on a refusal.
import QtQuick
import QtQuick.Controls
import QtQuick.Controls.impl
import QtQuick.Layouts
import Powerhouse

ColumnLayout {
    id: control

    required property PowerController power
    required property var info
    readonly property bool supported: info !== undefined && info.supported === true
    readonly property int gpu: info !== undefined ? info.gpu : -1
    // On the dashboard's card the details fold behind the first line; in Settings they show.
    property bool collapsible: false
    property bool expanded: false
    readonly property int indent: collapsible ? Theme.iconSize + Theme.space2 : 0
    readonly property bool showDetails: !collapsible || expanded || info.error.length > 0 || info.command.length > 0
    // Why the limit cannot be changed now (an efficiency sweep runs on this GPU); "" when it can.
    readonly property string held: info !== undefined && info.held !== undefined ? info.held : ""

    function w(value) {
        return Math.round(value) + " W"
    }

    spacing: Theme.space1

    // The first line: the limit now; on the card, the disclosure that opens the rest.
    AbstractButton {
        id: toggle
        objectName: "powerLimitToggle"
        enabled: control.collapsible
        checkable: control.collapsible
        checked: control.expanded
        onToggled: control.expanded = checked
        Accessible.role: control.collapsible ? Accessible.Button : Accessible.StaticText
        Accessible.name: "Power limit of GPU " + control.gpu + ": " + limitNow.text
        Layout.fillWidth: true
        implicitHeight: Math.max(headRow.implicitHeight, control.collapsible ? 24 : 0)
        background: Rectangle {
            radius: Theme.radiusSmall
            color: toggle.hovered && control.collapsible ? Theme.surfaceHover : "transparent"
        }
        contentItem: RowLayout {
            id: headRow
            spacing: Theme.space2
            IconImage {
                visible: control.collapsible
                name: control.showDetails ? "pan-down-symbolic" : "pan-end-symbolic"
                color: Theme.textMuted
                sourceSize: Qt.size(Theme.iconSize, Theme.iconSize)
                Layout.preferredWidth: Theme.iconSize
                Layout.preferredHeight: Theme.iconSize
            }
            Label {
                text: "Power limit"
                color: Theme.textMuted
                font.pixelSize: Theme.captionSize
                Layout.fillWidth: true
            }
            Label {
                id: limitNow
                objectName: "powerLimitNow"
                text: control.info.currentW > 0 ? control.w(control.info.currentW) : "—"
                color: Theme.text
                font.pixelSize: Theme.captionSize
                font.weight: Font.DemiBold
            }
        }
    }
    Label {
        Layout.leftMargin: control.indent
        objectName: "powerLimitRange"
        visible: control.supported && control.showDetails
        text: "Default " + control.w(control.info.defaultW) + ", range " + control.w(control.info.minW) + " to " + control.w(control.info.maxW)
        color: Theme.textMuted
        font.pixelSize: Theme.captionSize
        wrapMode: Text.Wrap
        Layout.fillWidth: true
    }

    Label {
        Layout.leftMargin: control.indent
        visible: !control.supported && control.info.error.length === 0 && control.showDetails
        text: control.info.unsupportedReason !== undefined ? control.info.unsupportedReason : "This GPU does not report a power limit."
        color: Theme.textMuted
        wrapMode: Text.Wrap
        font.pixelSize: Theme.captionSize
        Layout.fillWidth: true
    }

    RowLayout {
        Layout.leftMargin: control.indent
        visible: control.supported && control.showDetails
        enabled: control.held.length === 0
        Layout.fillWidth: true
        spacing: Theme.space2
        Slider {
            id: slider
            objectName: "powerLimitSlider"
            from: control.info.minW || 0
            to: Math.max((control.info.minW || 0) + 1, control.info.maxW || 0)
            stepSize: 5
            value: control.info.currentW || 0
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
        Label { text: "W"; color: Theme.textMuted; font.pixelSize: Theme.captionSize }
    }
    IconButton {
        Layout.leftMargin: control.indent
        objectName: "restorePowerLimit"
        visible: control.supported && control.showDetails
        iconName: "edit-undo-symbolic"
        text: "Restore default"
        showText: true
        font.pixelSize: Theme.captionSize
        enabled: control.held.length === 0 && (control.info.currentW !== control.info.defaultW || control.info.settingW > 0)
        onClicked: control.power.restoreDefault(control.gpu)
    }
    Label {
        Layout.leftMargin: control.indent
        objectName: "powerLimitHeld"
        visible: control.held.length > 0 && control.showDetails
        text: control.held
        color: Theme.warning
        wrapMode: Text.Wrap
        font.pixelSize: Theme.captionSize
        Layout.fillWidth: true
        Accessible.role: Accessible.StaticText
        Accessible.name: text
    }

    Label {
        Layout.leftMargin: control.indent
        objectName: "powerLimitChanged"
        visible: control.info.changedFromW > 0 && control.showDetails
        text: "Set by Powerhouse (was " + control.w(control.info.changedFromW) + ")"
              + (control.power !== null && control.power.keepLimits ? ": kept after quitting" : ": put back when Powerhouse quits")
        color: Theme.textMuted
        wrapMode: Text.Wrap
        font.pixelSize: Theme.captionSize
        Layout.fillWidth: true
    }

    Label {
        Layout.leftMargin: control.indent
        objectName: "powerLimitError"
        visible: control.info.error.length > 0
        text: control.info.error
        color: Theme.error
        wrapMode: Text.Wrap
        font.pixelSize: Theme.captionSize
        Layout.fillWidth: true
    }
    RowLayout {
        Layout.leftMargin: control.indent
        visible: control.info.command.length > 0
        Layout.fillWidth: true
        spacing: Theme.space1
        TextField {
            objectName: "powerLimitCommand"
            text: control.info.command
            readOnly: true
            selectByMouse: true
            font.family: Theme.monoFont
            font.pixelSize: Theme.captionSize
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
