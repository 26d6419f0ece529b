// The Models page in the whole window (Main.qml): a model file dropped anywhere on the
// window is imported and listed with its fit; a file that is not a model is refused with the
// reason. The drops are the drag enter/move/drop events a file manager sends (testDrop).
// Imports run on the library's worker thread: the page shows them once they are done.
import QtQuick
import QtQuick.Controls
import QtTest
import Powerhouse

Item {
    id: root
    width: 400
    height: 300

    TestCase {
        name: "Models"
        when: windowShown

        function mainWindow() {
            const component = Qt.createComponent("qrc:/Powerhouse/Main.qml")
            verify(component.status === Component.Ready, component.errorString())
            const window = createTemporaryObject(component, null, {
                controller: testController, dashboard: testDashboard, settings: testSettings, library: testLibrary,
                downloads: testDownloads
            })
            verify(window)
            tryVerify(() => window.visible)
            return window
        }

        function dropOn(window, urls) {
            return testDrop.drop(window, 500, 300, urls)
        }

        function test_1_dropping_a_model_file_imports_it() {
            const window = mainWindow()
            tryVerify(() => !testLibrary.scanning)
            compare(testLibrary.models.count, 0)
            verify(!window.modelsVisible)
            const action = dropOn(window, [testModelUrl])
            verify(action > 0, "the window accepted the drop")
            verify(window.modelsVisible, "the Models page opens to show it")
            tryCompare(testLibrary.models, "count", 1)
            tryVerify(() => testLibrary.message.indexOf("Added SmolLM2-135M-Instruct.Q4_1.gguf") === 0, 5000,
                      testLibrary.message)
            const page = findChild(window.contentItem, "modelList")
            tryVerify(() => findChild(page, "model0") !== null)
            const card = findChild(page, "model0")
            verify(card.usable)
            verify(card.details.indexOf("Q4_1") >= 0, card.details)
            // Two simulated RTX 4090s: it fits, and the card says where.
            verify(card.fits, card.fit)
            verify(card.fit.indexOf("GPU 0 (RTX 4090)") >= 0, card.fit)
        }

        function test_2_dropping_something_else_says_why_not() {
            const window = mainWindow()
            dropOn(window, ["file://" + testDataFolder + "/powerhouse.db"])
            tryVerify(() => testLibrary.message.indexOf("powerhouse.db is not a GGUF model") === 0, 5000,
                      testLibrary.message)
            compare(testLibrary.models.count, 1)
            const message = findChild(window.contentItem, "libraryMessage")
            verify(message.visible)
            compare(message.text, testLibrary.message)
        }
    }
}
