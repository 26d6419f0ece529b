// Settings → Engines (EnginesSettings.qml in the settings dialog), on testEngines of the
// setup in desktop_qml_test.cpp, against the fault-injecting OpenAI server at
// testFaultServer: test a connection (its models, and a 401 said in words), add an endpoint
// and see its models listed, edit it in place (the form fills, Save keeps it, a taken name
// is refused), remove it. No key is typed: the keyring has its own test (keyring_test.sh).
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
            engines: testEngines
        }
    }

    TestCase {
        name: "EnginesSettings"
        when: windowShown

        function openEnginesTab() {
            const dialog = createTemporaryObject(settingsComponent, root)
            dialog.tab = 3
            dialog.open()
            tryVerify(() => dialog.opened)
            tryVerify(() => findChild(dialog.contentItem, "endpointName") !== null)
            return dialog
        }
        function field(dialog, name) {
            return findChild(dialog.contentItem, name)
        }
        // Every item under `item`, Repeater delegates included.
        function all(item, out) {
            out = out || []
            for (let i = 0; i < item.children.length; ++i) {
                out.push(item.children[i])
                all(item.children[i], out)
            }
            return out
        }
        function named(item, name) {
            return all(item).filter(c => c.objectName === name && c.visible)
        }
        // The row's button for an endpoint (the Repeater's children are in no set order). The
        // rows may lie below the scroll view's visible part, so tests press them by their
        // clicked signal rather than by a pointer at their place.
        function button(dialog, name, endpoint) {
            const found = named(dialog.contentItem, name).filter(c => c.Accessible.name.endsWith(" " + endpoint))
            compare(found.length, 1, name + " " + endpoint)
            return found[0]
        }
        function texts(item) {
            return all(item).filter(c => c.visible && typeof c.text === "string" && c.text.length > 0).map(c => c.text)
        }
        function type(dialog, name, text) {
            const f = field(dialog, name)
            f.text = text
        }

        function cleanup() {
            for (const e of testEngines.endpoints)
                testEngines.removeEndpoint(e.name)
        }

        function test_1_test_connection_says_what_the_server_has_or_what_is_wrong() {
            const dialog = openEnginesTab()
            const test = field(dialog, "testConnection")
            verify(!test.enabled, "nothing to test without a URL")
            type(dialog, "endpointUrl", testFaultServer + "/ok/v1")
            verify(test.enabled)
            mouseClick(test)
            const message = field(dialog, "enginesMessage")
            tryVerify(() => !testEngines.busy && message.text.indexOf("Connected") === 0, 20000, message.text)
            verify(message.text.indexOf("test-model") > 0, message.text)
            compare(message.color, Theme.textMuted)

            type(dialog, "endpointUrl", testFaultServer + "/status-401/v1")
            mouseClick(test)
            tryVerify(() => !testEngines.busy && testEngines.messageIsError, 20000)
            verify(message.text.indexOf("needs an API key") >= 0, message.text)
            compare(message.color, Theme.error)
            compare(testEngines.endpoints.length, 0, "a test saves nothing")
        }

        function test_2_add_edit_and_remove_an_endpoint() {
            const dialog = openEnginesTab()
            const add = field(dialog, "addEndpoint")
            compare(add.text, "Add")
            verify(!add.enabled, "a name and a URL are needed")
            type(dialog, "endpointName", "lab")
            type(dialog, "endpointUrl", testFaultServer + "/ok/v1")
            mouseClick(add)
            compare(testEngines.endpoints.length, 1)
            compare(field(dialog, "endpointName").text, "", "the form is cleared for the next one")
            tryVerify(() => testEngines.endpoints[0].status === "ok", 20000)
            tryVerify(() => texts(dialog.contentItem).indexOf("Models: test-model, other-model") >= 0)
            compare(testEngines.remoteModels.length, 2)
            type(dialog, "endpointName", "other")
            type(dialog, "endpointUrl", testFaultServer + "/ok/v1")
            mouseClick(add)
            compare(testEngines.endpoints.length, 2)

            // Edit fills the form with the endpoint; the button saves in place.
            compare(named(dialog.contentItem, "editEndpoint").length, 2)
            button(dialog, "editEndpoint", "lab").clicked()
            compare(field(dialog, "endpointName").text, "lab")
            compare(field(dialog, "endpointUrl").text, testFaultServer + "/ok/v1")
            compare(add.text, "Save")
            verify(field(dialog, "cancelEdit").visible)
            verify(!field(dialog, "forgetKey").visible, "no key to forget")

            // A name another endpoint has is refused, and the form keeps what was typed.
            type(dialog, "endpointName", "other")
            mouseClick(add)
            verify(testEngines.messageIsError)
            verify(testEngines.message.indexOf("exists already") >= 0, testEngines.message)
            compare(add.text, "Save")

            type(dialog, "endpointName", "cluster")
            type(dialog, "endpointUrl", testFaultServer + "/nousage/v1")
            type(dialog, "endpointMetricsUrl", testFaultServer + "/metrics/vllm_v1")
            mouseClick(add)
            verify(!testEngines.messageIsError, testEngines.message)
            compare(add.text, "Add")
            compare(testEngines.endpoints.length, 2)
            compare(testEngines.endpoints[0].name, "cluster")
            compare(testEngines.endpoints[0].url, testFaultServer + "/nousage/v1")
            compare(testEngines.endpoints[0].metricsUrl, testFaultServer + "/metrics/vllm_v1")
            tryVerify(() => testEngines.endpoints[0].status === "ok", 20000)
            tryVerify(() => texts(dialog.contentItem).some(t => t.indexOf("Metrics on the dashboard: ") === 0))

            // Cancel leaves an endpoint as it was.
            button(dialog, "editEndpoint", "other").clicked()
            type(dialog, "endpointUrl", "http://127.0.0.1:1/v1")
            mouseClick(field(dialog, "cancelEdit"))
            compare(field(dialog, "endpointUrl").text, "")
            compare(testEngines.endpoints[1].url, testFaultServer + "/ok/v1")

            // Remove.
            button(dialog, "removeEndpoint", "cluster").clicked()
            compare(testEngines.endpoints.length, 1)
            compare(testEngines.endpoints[0].name, "other")
            tryVerify(() => named(dialog.contentItem, "editEndpoint").length === 1)
        }
    }
}
