// Colours, sizes and fonts of the whole UI, in one place. `mode` is the user's choice
// (system, light or dark); "system" follows the desktop's palette.
pragma Singleton
import QtQuick

QtObject {
    property string mode: "system"
    readonly property SystemPalette system: SystemPalette {}
    readonly property bool dark: mode === "dark" || (mode !== "light" && system.window.hslLightness < 0.5)

    readonly property color background: dark ? "#16181d" : "#f7f8fa"
    readonly property color sidebar: dark ? "#1d2027" : "#eceef2"
    readonly property color surface: dark ? "#242832" : "#ffffff"
    readonly property color surfaceHover: dark ? "#2c313d" : "#e3e7ee"
    readonly property color selection: dark ? "#34405a" : "#c9d7f5"
    readonly property color border: dark ? "#323744" : "#d3d7df"
    readonly property color text: dark ? "#e6e8ee" : "#1b1e24"
    readonly property color textMuted: dark ? "#9aa1b2" : "#5d6475"
    readonly property color accent: dark ? "#6e9cff" : "#2f62d8"
    readonly property color userBubble: dark ? "#2f3a52" : "#dce6fb"
    readonly property color codeBackground: dark ? "#1b1e25" : "#eef0f4"
    readonly property color error: dark ? "#ff7a7a" : "#b3261e"
    readonly property color errorBackground: dark ? "#4a2328" : "#fbe4e2"
    readonly property int radius: 10
    readonly property int spacing: 12
    readonly property int fontSize: 14
    readonly property int smallFontSize: 12
    readonly property string monoFont: "monospace"
}
