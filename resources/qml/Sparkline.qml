// A small line chart of recent values (oldest first), scaled from 0 to `maximum`: the line
// over a faint fill, on a sunken band with a baseline, so that charts side by side read alike.
import QtQuick
import Powerhouse

Canvas {
    id: chart

    property var values: []
    property real maximum: 100
    property color lineColor: Theme.accent

    implicitHeight: 32
    onValuesChanged: requestPaint()
    onWidthChanged: requestPaint()
    onHeightChanged: requestPaint()
    onLineColorChanged: requestPaint()

    onPaint: {
        const ctx = getContext("2d")
        ctx.reset()
        ctx.fillStyle = Theme.surfaceSunken
        ctx.fillRect(0, 0, width, height)
        ctx.fillStyle = Theme.border
        ctx.fillRect(0, height - 1, width, 1)
        const n = values.length
        if (n < 2 || maximum <= 0)
            return
        const step = width / (n - 1)
        const yOf = v => height - 1 - Math.min(1, Math.max(0, v / maximum)) * (height - 3)
        ctx.beginPath()
        ctx.moveTo(0, yOf(values[0]))
        for (let i = 1; i < n; ++i)
            ctx.lineTo(i * step, yOf(values[i]))
        ctx.lineWidth = 1.5
        ctx.strokeStyle = chart.lineColor
        ctx.stroke()
        ctx.lineTo(width, height)
        ctx.lineTo(0, height)
        ctx.closePath()
        ctx.globalAlpha = 0.18
        ctx.fillStyle = chart.lineColor
        ctx.fill()
    }
}
