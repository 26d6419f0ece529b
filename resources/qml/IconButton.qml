// A tool button with an icon from the icon theme (a freedesktop name, tinted to the theme)
// and, when `showText` is set, its text beside it; the text is always the tooltip and the
// accessible name, so an icon alone is never unlabelled.
import QtQuick
import QtQuick.Controls
import Powerhouse

ToolButton {
    id: button

    property string iconName: ""
    property bool showText: false
    property color tint: Theme.text

    icon.name: iconName
    icon.color: enabled ? tint : Theme.textFaint
    icon.width: Theme.iconSize
    icon.height: Theme.iconSize
    display: showText || iconName.length === 0 ? AbstractButton.TextBesideIcon : AbstractButton.IconOnly
    font.pixelSize: Theme.bodySize
    Accessible.name: text
    ToolTip.visible: hovered && (!showText || ToolTip.text !== text)
    ToolTip.text: text
    ToolTip.delay: 600
    palette.buttonText: tint
}
