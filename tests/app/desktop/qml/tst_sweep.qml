// The efficiency sweep in the views (issue 24), on the real controllers of desktop_qml_test.cpp
// (testSweep runs testChat's model at 450, 300 and 200 W on simulated stand-ins): the
// dashboard's button opens it, Start runs it while the composer refuses to send, the table
// shows a row per limit with the most efficient marked and the simulated label, everything
// inside the dialog at the app's smallest window, and "Apply" sets that limit on the GPU card.
// The functions run in name order.
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
        sweep: testSweep
        width: 220
        height: parent.height
    }
    Composer {
        id: composer
        controller: testChat
        blockedReason: testSweep.running ? "An efficiency sweep is running the model" : ""
        anchors.bottom: parent.bottom
        x: 240
        width: 380
    }

    TestCase {
        name: "Sweep"
        when: windowShown

        function findAll(item, name, out) {
            if (item.objectName === name) out.push(item)
            const kids = item.children
            if (kids) {
                for (let i = 0; i < kids.length; ++i) findAll(kids[i], name, out)
            }
            if (item.contentItem && item.contentItem !== item && kids && Array.prototype.indexOf.call(kids, item.contentItem) < 0)
                findAll(item.contentItem, name, out)
            return out
        }
        function one(name) {
            const found = findAll(Overlay.overlay, name, []).concat(findAll(root, name, [])).filter(i => i.visible)
            verify(found.length === 1, name + ": " + found.length + " visible")
            return found[0]
        }
        function insideDialog(item, dialogItem) {
            const p = item.mapToItem(dialogItem, 0, 0)
            return p.x >= -1 && p.x + item.width <= dialogItem.width + 1
        }

        function test_a_the_button_opens_the_dialog_and_waits_for_the_model() {
            tryVerify(() => testDashboard.gpus.count === 2)
            const open = one("openSweep")
            compare(open.text, "Efficiency sweep…")
            open.clicked()  // below the fold of the narrow dashboard: clicked as the keyboard would
            const start = one("startSweep")
            compare(start.text, "Start the sweep")
            // Enabled once testChat's model is loaded and nothing runs on it.
            tryVerify(() => testSweep.whyNot === "", 60000, testSweep.whyNot)
            tryVerify(() => start.enabled)
        }

        function test_b_a_sweep_runs_and_fills_the_table() {
            const input = findAll(composer, "composerInput", [])[0]
            input.text = "Hello"
            const start = one("startSweep")
            tryVerify(() => start.enabled, 60000, testSweep.whyNot)
            // Clicked as the keyboard would: a mouse click at the button's place once found
            // nothing under load in CI (no sweep, no message), the centred dialog moving as the
            // window's layout settled. A refusal would still say why (start() checks whyNot).
            start.clicked()
            verify(testSweep.running, "message: '" + testSweep.message + "', why not: '" + testSweep.whyNot + "'")
            // The composer refuses to send while the sweep holds the model.
            compare(findAll(composer, "sendButton", [])[0].enabled, false)
            compare(input.placeholderText, "An efficiency sweep is running the model")
            // The swept GPU's power limit cannot be changed on its card meanwhile (the sweep's
            // end would undo it), and the card says why; the other GPU's can.
            verify(testPower.gpus[0].held.indexOf("efficiency sweep") >= 0, testPower.gpus[0].held)
            compare(testPower.gpus[1].held, "")
            compare(findAll(dashboard, "powerLimitHeld", []).filter(l => l.text === testPower.gpus[0].held).length, 1)
            compare(findAll(dashboard, "powerLimitSlider", []).filter(s => !s.enabled).length, 1)
            tryVerify(() => !testSweep.running, 120000)
            compare(testSweep.state, PowerSweepController.Done, testSweep.message)
            compare(findAll(composer, "sendButton", [])[0].enabled, true)
            compare(testPower.gpus[0].held, "")
            compare(findAll(dashboard, "powerLimitSlider", []).filter(s => !s.enabled).length, 0)
            input.text = ""

            const rows = [one("sweepRow0"), one("sweepRow1"), one("sweepRow2")]
            compare(testSweep.rows.length, 3)
            compare(testSweep.rows[0].limit, "450 W")
            compare(testSweep.rows[2].limit, "200 W")
            verify(testSweep.rows[0].tokensPerSecond > 0)
            verify(testSweep.mostEfficient >= 0)
            verify(testSweep.rows[testSweep.mostEfficient].mostEfficient)
            verify(one("sweepLabel").text.length > 0, "simulated figures are labelled")
            verify(one("sweepSummary").text.indexOf("Most efficient: ") === 0, one("sweepSummary").text)
            compare(one("sweepMessage").text, "The power limits are back at 450 W, as before the sweep.")
            compare(one("startSweep").text, "Run again")
            // Everything inside the dialog at the smallest window.
            const dialogItem = one("sweepTable").parent
            waitForItemPolished(dialogItem)
            for (const item of rows.concat([one("sweepSummary"), one("applyMostEfficient"), one("sweepLabel")]))
                tryVerify(() => insideDialog(item, dialogItem), 5000, item.objectName + " overflows")
        }

        function test_c_applying_sets_the_limit_on_the_card() {
            const best = testSweep.rows[testSweep.mostEfficient]
            const apply = one("applyMostEfficient")
            compare(apply.text, "Apply the most efficient (" + best.limit + ")")
            apply.clicked()  // below the fold of the dialog at this window size
            tryVerify(() => testPower.gpus[0].currentW === best.totalLimitW)
            verify(one("sweepMessage").text.indexOf(best.limit + " applied to GPU 0") === 0, one("sweepMessage").text)
            verify(testPower.restoreDefault(0))
        }
    }
}
