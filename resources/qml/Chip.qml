// A small rounded label: a quantization, a size, a source.
import QtQuick
import QtQuick.Controls
import Powerhouse

Label {
    id: chip

    property color tint: Theme.textMuted
    property color fill: Theme.surfaceSunken

    leftPadding: Theme.space2
    rightPadding: Theme.space2
    topPadding: 2
    bottomPadding: 2
    color: tint
    font.pixelSize: Theme.captionSize
    background: Rectangle {
        radius: height / 2
        color: chip.fill
        border.color: Theme.border
    }
}
