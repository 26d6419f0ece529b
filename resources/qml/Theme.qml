// The visual system of the whole UI, in one place: colour tokens for light and dark, a
// spacing scale, a type scale, radii and icon sizes. Views use these names only, never
// literal colours or sizes. `mode` is the user's choice (system, light or dark); "system"
// follows the desktop's palette.
//
// Icons are freedesktop names from the packaged Adwaita theme ("edit-copy-symbolic", see
// main.cpp), drawn in `text` or `textMuted` so they follow light and dark.
pragma Singleton
import QtQuick

QtObject {
    property string mode: "system"
    readonly property SystemPalette system: SystemPalette {}
    readonly property bool dark: mode === "dark" || (mode !== "light" && system.window.hslLightness < 0.5)

    // Surfaces, from the window's background up.
    readonly property color background: dark ? "#15171c" : "#f6f7f9"
    readonly property color sidebar: dark ? "#1b1e24" : "#eef0f3"
    readonly property color surface: dark ? "#22262e" : "#ffffff"
    readonly property color surfaceHover: dark ? "#2b303a" : "#e6e9ef"
    readonly property color surfaceSunken: dark ? "#121418" : "#eceef2"
    readonly property color selection: dark ? "#2f3b55" : "#d4e0fa"
    readonly property color border: dark ? "#30343f" : "#d8dce3"
    readonly property color borderStrong: dark ? "#464c5a" : "#b9bfca"
    // Text.
    readonly property color text: dark ? "#e8eaf0" : "#1a1d23"
    readonly property color textMuted: dark ? "#9aa1b0" : "#5b6272"
    readonly property color textFaint: dark ? "#6c7382" : "#8a909c"
    // Accent and states.
    readonly property color accent: dark ? "#7aa5ff" : "#2d5fd3"
    readonly property color accentHover: dark ? "#93b6ff" : "#244fb3"
    readonly property color onAccent: dark ? "#0f1420" : "#ffffff"
    readonly property color accentSoft: dark ? "#24324f" : "#e3ebfc"
    readonly property color success: dark ? "#6fcf97" : "#1e7d46"
    readonly property color successSoft: dark ? "#1e3a2a" : "#e2f4e8"
    readonly property color warning: dark ? "#f2c35b" : "#8a5a00"
    readonly property color warningSoft: dark ? "#3d3220" : "#fbf0d9"
    readonly property color error: dark ? "#ff7a7a" : "#b3261e"
    readonly property color errorBackground: dark ? "#4a2328" : "#fbe4e2"
    // The chat.
    readonly property color userBubble: dark ? "#2a3650" : "#dfe8fb"
    readonly property color codeBackground: dark ? "#1a1d24" : "#f0f2f5"

    // Spacing scale (px): 4, 8, 12, 16, 24, 32.
    readonly property int space1: 4
    readonly property int space2: 8
    readonly property int space3: 12
    readonly property int space4: 16
    readonly property int space6: 24
    readonly property int space8: 32
    readonly property int spacing: space3  // the default gap

    // Type scale (px).
    readonly property int captionSize: 12
    readonly property int bodySize: 14
    readonly property int subtitleSize: 16
    readonly property int titleSize: 20
    readonly property int headlineSize: 26
    readonly property int fontSize: bodySize
    readonly property int smallFontSize: captionSize
    readonly property string monoFont: "monospace"

    // Shapes.
    readonly property int radiusSmall: 6
    readonly property int radius: 10
    readonly property int radiusLarge: 14
    readonly property int iconSize: 16
    readonly property int controlHeight: 32

    // The narrowest content column that stays readable, and the widest a line of chat may be.
    readonly property int readableWidth: 820
}
