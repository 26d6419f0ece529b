// The Models page in the whole window (Main.qml): a model file dropped anywhere on the
// window is imported and listed with its fit; a file that is not a model is refused with the
// reason. The drops are the drag enter/move/drop events a file manager sends (testDrop).
// Imports run on the library's worker thread: the page shows them once they are done.
// What failed shows beside what it concerns: a model's load on its card, a remote engine on
// its row above the list, a failed refresh of the library above the list, each until
// dismissed (the refresh also until one succeeds). An embedding model says so on its card,
// and, loaded, in the chat, whose send stays disabled.
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
                downloads: testDownloads, engines: testEngines
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

        function test_3_failures_show_beside_what_they_concern_until_dismissed() {
            const window = mainWindow()
            window.modelsVisible = true
            const page = findChild(window.contentItem, "modelList")
            tryVerify(() => findChild(page, "model0") !== null)
            const card = findChild(page, "model0")
            // A model that failed to load: on its card, with a Dismiss.
            testModel.failLoad(testLibrary, card.path, "the file is cut short")
            const loadError = findChild(card, "loadError")
            verify(loadError.visible)
            compare(findChild(loadError, "errorWords").text, "Could not be loaded: the file is cut short")
            const dismissLoad = findAll(loadError, "Dismiss")[0]
            dismissLoad.clicked()
            verify(!loadError.visible)

            // A remote engine that cannot be reached: its row above the list, until dismissed.
            verify(testEngines.addEndpoint("down", "http://127.0.0.1:9/v1", "", ""))
            tryVerify(() => findChild(window.contentItem, "engineError_down") !== null, 20000)
            const row = findChild(window.contentItem, "engineError_down")
            verify(row.visible)
            const words = findChild(row, "errorWords").text
            verify(words.indexOf("Remote engine down (http://127.0.0.1:9/v1): ") === 0, words)
            compare(findAll(row, "Retry").length, 1)
            findAll(row, "Dismiss")[0].clicked()
            tryVerify(() => findChild(window.contentItem, "engineError_down") === null)
            testEngines.removeEndpoint("down")
        }

        // The library that could not be refreshed (the store refuses the models' records):
        // said above the list until a refresh succeeds, or until dismissed.
        function test_4_a_failed_refresh_shows_above_the_list() {
            const window = mainWindow()
            window.modelsVisible = true
            tryVerify(() => !testLibrary.scanning, 5000)
            const box = findChild(window.contentItem, "libraryError")
            verify(!box.visible)
            const file = testLibrary.libraryFolder + "/refused.gguf"
            testFiles.spoil(file, "a file the refresh lists")
            testFiles.refuseModelWrites("disk full")
            testLibrary.rescan()
            tryVerify(() => box.visible, 20000)
            const words = findChild(box, "errorWords").text
            verify(words.indexOf("The library could not be refreshed, so the models listed may be out of date: ") === 0,
                   words)
            verify(words.indexOf("disk full") > 0, words)
            // Taken again: the next refresh lists it, and the error goes.
            testFiles.allowModelWrites()
            testLibrary.rescan()
            tryVerify(() => !box.visible && !testLibrary.scanning, 20000)
            // Refused once more (the file changed): Dismiss hides it.
            testFiles.spoil(file, "a file the refresh lists, changed")
            testFiles.refuseModelWrites("disk full")
            testLibrary.rescan()
            tryVerify(() => box.visible, 20000)
            testFiles.allowModelWrites()
            findAll(box, "Dismiss")[0].clicked()
            verify(!box.visible)
            testFiles.remove(file)
            testLibrary.rescan()
            tryVerify(() => !testLibrary.scanning, 20000)
        }

        // An embedding model (a synthetic bge-small) in the library: its card says what it is
        // for, and offers no chat template or draft model; the chat model's card says nothing
        // of it. Loaded (its summary says embeddingOnly), the chat view says it cannot chat
        // and the send button stays disabled, with the reason as the composer's placeholder.
        function test_5_an_embedding_model_says_so_on_its_card_and_in_the_chat() {
            const window = mainWindow()
            window.modelsVisible = true
            const file = testFiles.synthesizeEmbeddingModel("bge-small.gguf")
            verify(file.length > 0, "the synthetic model was made")
            testLibrary.rescan()
            tryVerify(() => !testLibrary.scanning, 20000)
            const page = findChild(window.contentItem, "modelList")
            const cardOf = wanted => {
                for (let i = 0; i < testLibrary.models.count; ++i) {
                    const card = findChild(page, "model" + i)
                    if (card !== null && card.path === wanted) return card
                }
                return null
            }
            tryVerify(() => cardOf(file) !== null, 5000)
            const card = cardOf(file)
            verify(card.usable, card.problem)
            verify(card.embeddingOnly)
            const note = findChild(card, "embeddingNote")
            verify(note.visible)
            compare(note.text, "Embedding model: makes embeddings for the API server's /v1/embeddings; it does not chat")
            verify(!findChild(card, "chatTemplate").parent.visible, "no chat template for a model that does not chat")
            verify(!findChild(card, "draftModel").parent.visible, "no draft model either")
            for (let i = 0; i < testLibrary.models.count; ++i) {
                const other = findChild(page, "model" + i)
                if (other === null || other.path === file) continue
                verify(!other.embeddingOnly, other.path)
                verify(!findChild(other, "embeddingNote").visible, other.path)
            }

            // Loaded for the API server: the chat says it cannot chat, and will not send.
            window.modelsVisible = false
            testModel.announceLoaded({displayName: "bge small en v1.5", device: "CPU", embeddingOnly: true})
            const reason = testController.cannotChatReason
            verify(reason.indexOf("bge small en v1.5 is an embedding model: ") === 0, reason)
            const box = findChild(window.contentItem, "cannotChat")
            tryVerify(() => box.visible)
            compare(findChild(box, "cannotChatWords").text, reason)
            const input = findChild(window.contentItem, "composerInput")
            compare(input.placeholderText, reason)
            input.text = "Hello"
            const send = findChild(window.contentItem, "sendButton")
            verify(!send.enabled, "the send button is disabled")
            // A chat model loaded again: the note goes and sending is possible.
            testModel.announceLoaded({displayName: "Plain", device: "CPU"})
            compare(testController.cannotChatReason, "")
            verify(!box.visible)
            verify(send.enabled)
            input.text = ""

            testFiles.remove(file)
            testLibrary.rescan()
            tryVerify(() => !testLibrary.scanning, 20000)
        }

        // The buttons under `item` whose text is `text`.
        function findAll(item, text) {
            let out = []
            if (item.text === text && item.clicked !== undefined) out.push(item)
            for (let i = 0; i < item.children.length; ++i) out = out.concat(findAll(item.children[i], text))
            return out
        }
    }
}
