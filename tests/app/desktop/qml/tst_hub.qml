// The Models page's Hugging Face tab in the whole window (Main.qml), against the loopback Hub
// (testHub): a search by name lists repositories, opening one lists its GGUF models by
// quantization with their size and a fit estimate, and Download hands the file to the
// downloads. And the page at the smallest window the app allows, at the default size and
// at 4K: its actions stay inside the window.
import QtQuick
import QtQuick.Controls
import QtTest
import Powerhouse

Item {
    id: root
    width: 400
    height: 300

    TestCase {
        name: "Hub"
        when: windowShown

        function mainWindow(width, height) {
            const component = Qt.createComponent("qrc:/Powerhouse/Main.qml")
            verify(component.status === Component.Ready, component.errorString())
            const window = createTemporaryObject(component, null, {
                controller: testController, dashboard: testDashboard, settings: testSettings, library: testLibrary,
                downloads: testHubDownloads, hub: testHub, width: width, height: height
            })
            verify(window)
            tryVerify(() => window.visible)
            window.modelsVisible = true
            return window
        }

        // Every function: no binding loop (the repository's name over its files once looped on
        // its height).
        function init() {
            failOnWarning(/Binding loop detected/)
        }

        // Whether `item` lies wholly inside `area`, horizontally (not cut off by its edge).
        function inside(area, item) {
            const at = item.mapToItem(area, 0, 0)
            return at.x >= 0 && at.x + item.width <= area.width + 0.5
        }

        function test_search_open_a_repository_and_download() {
            const window = mainWindow(1180, 760)
            const tab = findChild(window.contentItem, "hubTab")
            verify(tab)
            mouseClick(tab)
            const query = findChild(window.contentItem, "hubQuery")
            tryVerify(() => query !== null && query.visible)
            query.forceActiveFocus()
            query.text = "smollm2"
            mouseClick(findChild(window.contentItem, "hubSearch"))
            tryVerify(() => !testHub.searching && testHub.results.count > 0, 15000, testHub.error)
            const results = findChild(window.contentItem, "hubResults")
            tryVerify(() => findChild(results, "hubResult0") !== null)
            const first = findChild(results, "hubResult0")
            compare(first.repoId, "smol-org/SmolLM2-135M-Instruct-GGUF")
            mouseClick(first)
            tryVerify(() => !testHub.listing && testHub.files.count > 0, 15000, testHub.error)
            compare(testHub.repository, "smol-org/SmolLM2-135M-Instruct-GGUF")
            const files = findChild(window.contentItem, "hubFiles")
            // The repository's name heads its files, whole.
            const name = findChild(files, "hubRepositoryName")
            verify(name && name.visible)
            compare(name.text, testHub.repository)
            tryVerify(() => name.height > 0 && files.headerItem.height >= name.height)
            let q41 = null
            tryVerify(() => {
                for (let i = 0; i < testHub.files.count; ++i) {
                    const row = findChild(files, "hubFile" + i)
                    if (row && row.quantization === "Q4_1") q41 = row
                }
                return q41 !== null
            }, 5000)
            verify(q41.sizeText.indexOf("MiB") > 0, q41.sizeText)
            verify(q41.fit.indexOf("stimate") >= 0, "the fit says it is an estimate: " + q41.fit)
            const before = testHubDownloads.count
            mouseClick(findChild(q41, "hubDownload" + q41.index))
            tryCompare(testHubDownloads, "count", before + 1)
            // Its row on the Models page, in a typed state (DownloadController.State).
            let row = null
            tryVerify(() => (row = findChild(window.contentItem, "download" + testHubDownloads.count)) !== null)
            verify([DownloadController.Queued, DownloadController.Listing, DownloadController.Downloading,
                    DownloadController.Done].indexOf(row.downloadState) >= 0, "state " + row.downloadState)
            verify(DownloadController.Failed !== DownloadController.Done)
        }

        function test_gated_repositories_are_marked_and_the_token_field_is_in_settings() {
            const window = mainWindow(1180, 760)
            mouseClick(findChild(window.contentItem, "hubTab"))
            testHub.search("gguf")
            tryVerify(() => !testHub.searching && testHub.results.count > 1, 15000, testHub.error)
            const results = findChild(window.contentItem, "hubResults")
            tryVerify(() => findChild(results, "hubGated1") !== null)
            verify(findChild(results, "hubGated1").visible, "gated-org/Gated-Model-GGUF is marked")
            verify(!findChild(results, "hubGated0").visible, "an open repository is not")
            // Settings, General: the token field, nothing saved in this test's run.
            window.openPanel("settings")
            const field = findChild(window.contentItem.Window.window.overlay, "hubTokenField")
                          || findChild(window, "hubTokenField")
            verify(field, "the Hugging Face token field")
            compare(field.echoMode, TextInput.Password)
            const status = findChild(window, "hubTokenStatus")
            verify(status)
            verify(status.text.indexOf("No token") === 0 || status.text.indexOf("Saved") === 0, status.text)
        }

        function test_the_page_fits_the_window_from_the_smallest_size_to_4k() {
            for (const size of [[640, 420], [1180, 760], [3840, 2160]]) {
                const window = mainWindow(size[0], size[1])
                window.dashboardVisible = size[0] > 640
                wait(50)
                const page = findChild(window.contentItem, "modelsPage")
                verify(page)
                for (const name of ["rescanButton", "downloadButton"]) {
                    const item = findChild(page, name)
                    verify(item, name)
                    tryVerify(() => inside(page, item), 2000, name + " is cut off at " + size[0] + "×" + size[1])
                }
                for (const name of ["settingsButton", "modelsButton"]) {
                    const item = findChild(window.header, name)
                    verify(item, name)
                    tryVerify(() => inside(window.header, item), 2000,
                              name + " is cut off at " + size[0] + "×" + size[1])
                }
                window.destroy()
            }
        }
    }
}
