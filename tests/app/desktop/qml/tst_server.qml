// Settings → Server (ServerSettings.qml in the settings dialog), on testServer of the setup in
// desktop_qml_test.cpp: a ServerController whose engine has no model, so it never listens.
// The switch and the fields drive the controller, the status says why it does not run, the
// address and the examples follow the port, and a public address asks for a key, shown once.
import QtQuick
import QtQuick.Controls
import QtTest
import Powerhouse

Item {
    id: root
    width: 1000
    height: 760

    Component {
        id: settingsComponent
        SettingsDialog {
            settings: testSettings
            server: testServer
        }
    }

    TestCase {
        name: "ServerSettings"
        when: windowShown

        function openServerTab() {
            const dialog = createTemporaryObject(settingsComponent, root)
            dialog.tab = 2
            dialog.open()
            tryVerify(() => dialog.opened)
            tryVerify(() => findChild(dialog.contentItem, "serverSwitch") !== null)
            return dialog
        }

        // The text shown in a copyable box (address, key, examples).
        function shownText(dialog, name) {
            return findChild(findChild(dialog.contentItem, name), "text")
        }

        function cleanup() {
            testServer.enabled = false
            testServer.host = "127.0.0.1"
            testServer.port = 8080
            testServer.removeApiKey()
        }

        function test_1_the_switch_drives_the_controller_and_the_status_says_why_it_waits() {
            const dialog = openServerTab()
            const toggle = findChild(dialog.contentItem, "serverSwitch")
            verify(toggle.visible && toggle.width > 0 && toggle.height > 0)
            compare(toggle.text, "Serve the loaded model over the OpenAI API")
            verify(!toggle.checked)
            compare(testServer.state, "off")
            mouseClick(toggle)
            verify(testServer.enabled)
            verify(toggle.checked)
            compare(testServer.state, "no_model")
            verify(!testServer.running)
            const status = findChild(dialog.contentItem, "serverStatus")
            compare(status.text, testServer.statusText)
            verify(status.text.indexOf("load a model first") >= 0, status.text)
            // From the keyboard: Space on the focused switch turns it off again.
            toggle.forceActiveFocus()
            verify(toggle.activeFocus)
            keyClick(Qt.Key_Space)
            verify(!testServer.enabled)
            verify(!toggle.checked)
            compare(status.text, "Stopped.")
        }

        function test_2_the_address_and_the_examples_follow_the_port() {
            const dialog = openServerTab()
            compare(testServer.address, "http://127.0.0.1:8080")
            const address = shownText(dialog, "serverAddress")
            compare(address.text, "http://127.0.0.1:8080")
            const curl = shownText(dialog, "curlExample")
            verify(curl.text.indexOf("curl http://127.0.0.1:8080/v1/chat/completions") === 0, curl.text)
            verify(curl.text.indexOf("\"messages\"") >= 0, curl.text)
            verify(curl.text.indexOf("Authorization") < 0, "no key, no header")
            const python = shownText(dialog, "pythonExample")
            verify(python.text.indexOf("base_url=\"http://127.0.0.1:8080/v1\"") >= 0, python.text)
            verify(python.text.indexOf("client.chat.completions.create(") >= 0, python.text)

            const port = findChild(dialog.contentItem, "serverPort")
            compare(port.value, 8080)
            port.forceActiveFocus()
            keyClick(Qt.Key_Up)
            compare(testServer.port, 8081)
            compare(address.text, "http://127.0.0.1:8081")
            verify(curl.text.indexOf("curl http://127.0.0.1:8081/v1/chat/completions") === 0, curl.text)
            verify(python.text.indexOf("http://127.0.0.1:8081/v1") >= 0, python.text)

            const copy = findChild(findChild(dialog.contentItem, "curlExample"), "copy")
            compare(copy.text, "Copy")
            compare(copy.Accessible.name, "Copy the curl example")
            mouseClick(copy)
            compare(copy.text, "Copied")
        }

        function test_3_a_public_address_asks_for_a_key_shown_once() {
            const dialog = openServerTab()
            testServer.enabled = true
            const host = findChild(dialog.contentItem, "serverHost")
            host.forceActiveFocus()
            host.selectAll()
            for (const c of "0.0.0.0") keyClick(c)
            keyClick(Qt.Key_Return)
            compare(testServer.host, "0.0.0.0")
            verify(testServer.keyRequired)
            compare(testServer.state, "error")
            const status = findChild(dialog.contentItem, "serverStatus")
            verify(status.text.indexOf("generate an API key") >= 0, status.text)
            compare(findChild(dialog.contentItem, "keyState").text, "None yet: this address needs one.")
            verify(!findChild(dialog.contentItem, "newKey").visible)

            const generate = findChild(dialog.contentItem, "generateKey")
            compare(generate.text, "Generate a key")
            mouseClick(generate)
            verify(testServer.hasApiKey)
            compare(testServer.state, "no_model")
            verify(findChild(dialog.contentItem, "newKey").visible)
            const key = shownText(dialog, "apiKey")
            compare(key.text.length, 64)
            compare(key.text, testServer.shownApiKey)
            compare(generate.text, "New key")
            // The examples send the key from the environment, never the key itself.
            const curl = shownText(dialog, "curlExample")
            verify(curl.text.indexOf("Bearer $POWERHOUSE_API_KEY") >= 0, curl.text)
            verify(curl.text.indexOf(key.text) < 0)

            // Closed and opened again: the key is not shown any more.
            dialog.close()
            tryVerify(() => !dialog.visible)
            compare(testServer.shownApiKey, "")
            verify(testServer.hasApiKey)
            dialog.open()
            tryVerify(() => dialog.opened)
            verify(!findChild(dialog.contentItem, "newKey").visible)
        }
    }
}
