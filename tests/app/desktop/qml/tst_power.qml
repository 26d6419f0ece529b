// Power and money in the views (issue 24), on the real controllers of desktop_qml_test.cpp:
// the power limit on each GPU card (the limit, and behind its disclosure the default and range; set from the field; GPU 1
// refusing with the nvidia-smi command and its copy button; "Restore default"), the "keep my
// power limits" box, and the Costs view's figures, at the app's smallest window (the dashboard
// at its narrowest) and at 4K. The functions run in name order.
import QtQuick
import QtQuick.Controls
import QtTest
import Powerhouse

Item {
    id: root
    width: 640
    height: 420

    GpuDashboard {
        id: dashboard
        dashboard: testDashboard
        power: testPower
        costs: testCosts
        width: 220
        height: parent.height
    }
    CostsDialog {
        id: costsDialog
        costs: testCosts
    }

    TestCase {
        name: "Power"
        when: windowShown

        function findAll(item, name, out) {
            if (item.objectName === name) out.push(item)
            const kids = item.children
            if (kids) {
                for (let i = 0; i < kids.length; ++i) findAll(kids[i], name, out)
            }
            return out
        }
        function visibleOnes(name) {
            return findAll(dashboard, name, []).filter(i => i.visible)
        }
        function insideWidth(item, width) {
            const p = item.mapToItem(root, 0, 0)
            return p.x >= -1 && p.x + item.width <= width + 1
        }

        function test_a_limits_range_and_setting() {
            tryVerify(() => testPower.gpus.length === 2)
            tryVerify(() => visibleOnes("powerLimitNow").length === 2)
            const now = visibleOnes("powerLimitNow")
            compare(now[0].text, "450 W")
            // The details fold behind each card's "Power limit" line, opened with a click.
            compare(visibleOnes("powerLimitField").length, 0)
            root.height = 1400  // the first card's foot in view, to be clicked
            mouseClick(visibleOnes("powerLimitToggle")[0])
            tryVerify(() => visibleOnes("powerLimitField").length === 1)
            root.height = 420
            compare(visibleOnes("powerLimitRange")[0].text, "Default 450 W, range 150 W to 600 W")
            // Typed into the field and confirmed: set, and said to go back when Powerhouse quits.
            const field = visibleOnes("powerLimitField")[0]
            field.forceActiveFocus()
            field.selectAll()
            keyClick(Qt.Key_Delete)
            keyClick("3")
            keyClick("0")
            keyClick("0")
            keyClick(Qt.Key_Return)
            tryCompare(now[0], "text", "300 W")
            const changed = visibleOnes("powerLimitChanged")
            compare(changed.length, 1)
            verify(changed[0].text.indexOf("was 450 W") >= 0, changed[0].text)
            verify(changed[0].text.indexOf("put back when Powerhouse quits") >= 0, changed[0].text)
            // The controls stay inside the narrowest dashboard (the field overflowed by 24 px).
            for (const name of ["restorePowerLimit", "powerLimitField", "powerLimitSlider", "powerLimitRange"]) {
                for (const item of visibleOnes(name)) {
                    const p = item.mapToItem(root, 0, 0)
                    verify(insideWidth(item, dashboard.width), name + " at " + p.x + " + " + item.width)
                }
            }
        }

        function test_b_a_refusal_gives_the_command() {
            verify(!testPower.setLimit(1, 300))
            tryVerify(() => visibleOnes("powerLimitCommand").length === 1)
            compare(visibleOnes("powerLimitCommand")[0].text, "sudo nvidia-smi -i 1 -pl 300")
            verify(visibleOnes("powerLimitError")[0].text.indexOf("sudo nvidia-smi -i 1 -pl 300") >= 0)
            compare(visibleOnes("copyPowerCommand").length, 1)
        }

        function test_c_restore_default_in_one_click() {
            root.height = 1400  // every card in view, to be clicked
            const restore = visibleOnes("restorePowerLimit")[0]
            mouseClick(restore)
            tryCompare(visibleOnes("powerLimitNow")[0], "text", "450 W")
            compare(testPower.gpus[0].changedFromW, 0)
            verify(!visibleOnes("restorePowerLimit")[0].enabled)
        }

        function test_d_keep_limits_box() {
            const keep = visibleOnes("keepPowerLimits")[0]
            verify(!keep.checked)
            mouseClick(keep)
            verify(testPower.keepLimits)
            mouseClick(keep)
            verify(!testPower.keepLimits)
        }

        function test_e_costs_at_the_smallest_window() {
            costsDialog.open()
            tryVerify(() => costsDialog.opened)
            const table = findAll(costsDialog.contentItem, "costsTable", [])[0]
            verify(table.visible)
            const measured = findAll(costsDialog.contentItem, "costsMeasured", [])[0]
            compare(measured.text, "Measured over the last 1 answer: 50.0 tokens/s at 300 W (6.00 J/token)")
            const speed = findAll(costsDialog.contentItem, "costCloudSpeed", [])[0]
            verify(speed.text.indexOf("about 2039 tokens/s") >= 0, speed.text)
            // A day: 1.44 M tokens for 0.72 (no currency label: none assumed).
            const labels = findAll(table, "", []).filter(i => i.text !== undefined).map(i => i.text)
            verify(labels.indexOf("1.44 M") >= 0, labels)
            verify(labels.indexOf("0.720") >= 0, labels)
            verify(costsDialog.width <= root.width)
            costsDialog.close()
            tryVerify(() => !costsDialog.visible)
        }

        function test_f_currency_label_and_4k() {
            root.width = 3840
            root.height = 2160
            dashboard.width = 600
            testCosts.currency = "EUR"
            costsDialog.open()
            tryVerify(() => costsDialog.opened)
            const table = findAll(costsDialog.contentItem, "costsTable", [])[0]
            const labels = findAll(table, "", []).filter(i => i.text !== undefined).map(i => i.text)
            verify(labels.indexOf("0.720 EUR") >= 0, labels)
            verify(labels.indexOf("Tokens/EUR") >= 0, labels)
            verify(table.width <= costsDialog.width, table.width + " > " + costsDialog.width)
            costsDialog.close()
            for (const name of ["powerLimitField", "restorePowerLimit"]) {
                for (const item of visibleOnes(name)) verify(insideWidth(item, dashboard.width), name + " at " + item.mapToItem(root, 0, 0).x + " width " + item.width)
            }
            testCosts.currency = ""
            root.width = 640
            root.height = 420
        }
    }
}
