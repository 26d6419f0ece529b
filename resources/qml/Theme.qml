// Colours, sizes and fonts of the whole UI, in one place.
pragma Singleton
import QtQuick

QtObject {
    readonly property color background: "#16181d"
    readonly property color sidebar: "#1d2027"
    readonly property color surface: "#242832"
    readonly property color surfaceHover: "#2c313d"
    readonly property color selection: "#34405a"
    readonly property color border: "#323744"
    readonly property color text: "#e6e8ee"
    readonly property color textMuted: "#9aa1b2"
    readonly property color accent: "#6e9cff"
    readonly property color userBubble: "#2f3a52"
    readonly property color error: "#ff7a7a"
    readonly property color errorBackground: "#4a2328"
    readonly property int radius: 10
    readonly property int spacing: 12
    readonly property int fontSize: 14
    readonly property int smallFontSize: 12
    readonly property string monoFont: "monospace"
}
