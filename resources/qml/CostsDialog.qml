// Costs (issue 24), opened from the dashboard: what tokens cost at home over a day, a week and
// a month (the answers' measured speed and energy, the electricity price of Settings, and the
// hardware written off if its price is given) beside what the same tokens would cost on a GPU
// rented by the hour at the speed the planner's bandwidth estimate gives it. Every field is
// kept as it is edited; amounts carry the user's currency label, never an assumed symbol.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

Dialog {
    id: dialog

    required property CostsController costs

    function amount(value) {
        if (value === undefined || value === null) return "—"
        const digits = value >= 100 ? 0 : (value >= 1 ? 2 : 3)
        return value.toFixed(digits) + (dialog.costs.currency.length > 0 ? " " + dialog.costs.currency : "")
    }
    function count(value) {
        if (value === undefined || value === null) return "—"
        if (value >= 1e9) return (value / 1e9).toFixed(2) + " G"
        if (value >= 1e6) return (value / 1e6).toFixed(2) + " M"
        if (value >= 1e3) return (value / 1e3).toFixed(1) + " k"
        return value.toFixed(0)
    }
    readonly property string unit: costs.currency.length > 0 ? costs.currency : "unit"

    title: "Costs"
    header: Label {
        text: dialog.title
        font.bold: true
        font.pixelSize: Theme.fontSize + 4
        leftPadding: Theme.spacing
        topPadding: Theme.spacing
        bottomPadding: Theme.spacing / 2
    }
    modal: true
    standardButtons: Dialog.Close
    parent: Overlay.overlay
    anchors.centerIn: parent
    width: Math.min(parent ? parent.width - 2 * Theme.space4 : 720, 820)
    height: Math.min(parent ? parent.height - 2 * Theme.space4 : 620, implicitHeight)

    ScrollView {
        id: scroll
        anchors.fill: parent
        contentWidth: availableWidth
        clip: true

        ColumnLayout {
            width: scroll.availableWidth
            spacing: Theme.spacing

            Label {
                objectName: "costsMeasured"
                text: dialog.costs.answersMeasured > 0
                      ? "Measured over the last " + dialog.costs.answersMeasured + (dialog.costs.answersMeasured === 1 ? " answer: " : " answers: ")
                        + dialog.costs.tokensPerSecond.toFixed(1) + " tokens/s at " + dialog.costs.watts.toFixed(0) + " W ("
                        + dialog.costs.joulesPerToken.toFixed(2) + " J/token)"
                      : dialog.costs.problem
                color: dialog.costs.answersMeasured > 0 ? Theme.text : Theme.textMuted
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }

            GridLayout {
                columns: dialog.width > 560 ? 4 : 2
                columnSpacing: Theme.spacing
                rowSpacing: Theme.space1
                Layout.fillWidth: true

                Label { text: "Currency"; color: Theme.textMuted }
                TextField {
                    objectName: "costCurrency"
                    text: dialog.costs.currency
                    placeholderText: "EUR, USD, CHF…"
                    Accessible.name: "Currency"
                    Layout.fillWidth: true
                    onEditingFinished: dialog.costs.currency = text
                }
                Label { text: "Electricity per kWh"; color: Theme.textMuted }
                Label {
                    objectName: "costElectricity"
                    text: dialog.costs.electricityPrice > 0 ? dialog.amount(dialog.costs.electricityPrice) : "not set (Settings → General)"
                    color: Theme.text
                    Layout.fillWidth: true
                }
                Label { text: "Hours a day generating"; color: Theme.textMuted }
                TextField {
                    objectName: "costHours"
                    text: dialog.costs.hoursPerDay
                    validator: DoubleValidator { bottom: 0; top: 24 }
                    Accessible.name: "Hours a day generating"
                    Layout.fillWidth: true
                    onEditingFinished: dialog.costs.hoursPerDay = Number(text)
                }
                Label { text: ""; visible: dialog.width > 560 }
                Label { text: ""; visible: dialog.width > 560 }
                Label { text: "Hardware price"; color: Theme.textMuted }
                TextField {
                    objectName: "costHardware"
                    text: dialog.costs.hardwarePrice > 0 ? dialog.costs.hardwarePrice : ""
                    placeholderText: "not counted"
                    validator: DoubleValidator { bottom: 0 }
                    Accessible.name: "Hardware price"
                    Layout.fillWidth: true
                    onEditingFinished: dialog.costs.hardwarePrice = text.length > 0 ? Number(text) : 0
                }
                Label { text: "Written off over (months)"; color: Theme.textMuted }
                TextField {
                    objectName: "costMonths"
                    text: dialog.costs.writeOffMonths
                    validator: DoubleValidator { bottom: 0 }
                    Accessible.name: "Months to write the hardware off over"
                    Layout.fillWidth: true
                    onEditingFinished: dialog.costs.writeOffMonths = Number(text)
                }
                Label { text: "Rented GPU"; color: Theme.textMuted }
                TextField {
                    objectName: "costCloudGpu"
                    text: dialog.costs.cloudGpu
                    Accessible.name: "Rented GPU"
                    Layout.fillWidth: true
                    onEditingFinished: dialog.costs.cloudGpu = text
                }
                Label { text: "Price per hour"; color: Theme.textMuted }
                TextField {
                    objectName: "costCloudPrice"
                    text: dialog.costs.cloudPricePerHour
                    validator: DoubleValidator { bottom: 0 }
                    Accessible.name: "Rented GPU's price per hour"
                    Layout.fillWidth: true
                    onEditingFinished: dialog.costs.cloudPricePerHour = Number(text)
                }
            }

            // A change the store refused: the fields show the stored figures again.
            Label {
                objectName: "costsError"
                visible: text.length > 0
                text: dialog.costs.error
                color: Theme.error
                wrapMode: Text.Wrap
                Accessible.role: Accessible.AlertMessage
                Accessible.name: text
                Layout.fillWidth: true
            }

            Label {
                objectName: "costCloudSpeed"
                text: dialog.costs.cloudTokensPerSecond > 0
                      ? dialog.costs.cloudGpu + " would reach about " + dialog.costs.cloudTokensPerSecond.toFixed(0)
                        + " tokens/s on this model (the planner's bandwidth estimate, its best case)"
                      : dialog.costs.cloudProblem
                visible: text.length > 0
                color: Theme.textMuted
                wrapMode: Text.Wrap
                font.pixelSize: Theme.smallFontSize
                Layout.fillWidth: true
            }

            GridLayout {
                objectName: "costsTable"
                visible: dialog.costs.periods.length > 0
                columns: 6
                columnSpacing: Theme.spacing
                rowSpacing: Theme.space1
                Layout.fillWidth: true

                Label { text: "Period"; color: Theme.textMuted; font.bold: true }
                Label { text: "Tokens"; color: Theme.textMuted; font.bold: true; Layout.alignment: Qt.AlignRight }
                Label { text: "At home"; color: Theme.textMuted; font.bold: true; Layout.alignment: Qt.AlignRight }
                Label { text: "Tokens/" + dialog.unit; color: Theme.textMuted; font.bold: true; Layout.alignment: Qt.AlignRight }
                Label { text: "Rented"; color: Theme.textMuted; font.bold: true; Layout.alignment: Qt.AlignRight; Layout.fillWidth: true; horizontalAlignment: Text.AlignRight; elide: Text.ElideRight }
                Label { text: "Tokens/" + dialog.unit; color: Theme.textMuted; font.bold: true; Layout.alignment: Qt.AlignRight }

                Repeater {
                    model: dialog.costs.periods
                    delegate: Label {
                        required property var modelData
                        required property int index
                        Layout.row: 1 + index
                        Layout.column: 0
                        text: modelData.name
                        color: Theme.text
                    }
                }
                Repeater {
                    model: dialog.costs.periods
                    delegate: Label {
                        required property var modelData
                        required property int index
                        Layout.row: 1 + index
                        Layout.column: 1
                        Layout.alignment: Qt.AlignRight
                        text: dialog.count(modelData.tokens)
                        color: Theme.text
                    }
                }
                Repeater {
                    model: dialog.costs.periods
                    delegate: Label {
                        required property var modelData
                        required property int index
                        Layout.row: 1 + index
                        Layout.column: 2
                        Layout.alignment: Qt.AlignRight
                        text: dialog.amount(modelData.localCost)
                        color: Theme.text
                    }
                }
                Repeater {
                    model: dialog.costs.periods
                    delegate: Label {
                        required property var modelData
                        required property int index
                        Layout.row: 1 + index
                        Layout.column: 3
                        Layout.alignment: Qt.AlignRight
                        text: dialog.count(modelData.localTokensPerUnit)
                        color: Theme.text
                    }
                }
                Repeater {
                    model: dialog.costs.periods
                    delegate: Label {
                        required property var modelData
                        required property int index
                        Layout.row: 1 + index
                        Layout.column: 4
                        Layout.alignment: Qt.AlignRight
                        text: modelData.cloudCost !== undefined ? dialog.amount(modelData.cloudCost) : "—"
                        color: Theme.text
                    }
                }
                Repeater {
                    model: dialog.costs.periods
                    delegate: Label {
                        required property var modelData
                        required property int index
                        Layout.row: 1 + index
                        Layout.column: 5
                        Layout.alignment: Qt.AlignRight
                        text: dialog.count(modelData.cloudTokensPerUnit)
                        color: Theme.text
                    }
                }
            }

            Label {
                text: "At home: the electricity for the hours a day at the measured power, plus the hardware's price spread over "
                      + "its months, every day. Rented: the same tokens at the rented GPU's speed, billed only while generating."
                color: Theme.textMuted
                wrapMode: Text.Wrap
                font.pixelSize: Theme.smallFontSize
                Layout.fillWidth: true
            }
        }
    }
}
