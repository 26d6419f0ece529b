// A small line chart of recent values (oldest first), scaled from 0 to `maximum`.
import QtQuick
import Powerhouse

Canvas {
    id: chart

    property var values: []
    property real maximum: 100
    property color lineColor: Theme.accent

    implicitHeight: 36
    onValuesChanged: requestPaint()
    onWidthChanged: requestPaint()

    onPaint: {
        const ctx = getContext("2d")
        ctx.reset()
        ctx.fillStyle = Theme.surface
        ctx.fillRect(0, 0, width, height)
        const n = values.length
        if (n < 2 || maximum <= 0)
            return
        const step = width / (n - 1)
        ctx.beginPath()
        for (let i = 0; i < n; ++i) {
            const y = height - 1 - Math.min(1, Math.max(0, values[i] / maximum)) * (height - 2)
            if (i === 0)
                ctx.moveTo(0, y)
            else
                ctx.lineTo(i * step, y)
        }
        ctx.lineWidth = 1.5
        ctx.strokeStyle = chart.lineColor
        ctx.stroke()
    }
}
