// Speculative decoding in the views: a model's draft model on its Models page card ("None",
// or another model of the library, never the model itself), chosen from the keyboard and
// kept by testLibrary, with a failed load shown beside it; the model bar naming the draft
// the loaded model runs with; and Settings → General's switch for guessing tokens from the
// conversation, which applies at once. testModel stands in for the engine's word on the
// loaded model (desktop_qml_test.cpp).
import QtQuick
import QtQuick.Controls
import QtTest
import Powerhouse

Item {
    id: root
    width: 800
    height: 700

    Component {
        id: modelsComponent
        ModelsPage {
            anchors.fill: parent
            library: testLibrary
            downloads: testDownloads
        }
    }
    Component {
        id: barComponent
        ModelBar {
            width: 1200
            controller: testController
        }
    }
    Component {
        id: settingsComponent
        SettingsDialog {
            settings: testSettings
        }
    }

    TestCase {
        name: "Speculative"
        when: windowShown

        function test_a_models_draft_model_on_its_card() {
            // (The store and library folder are shared with the other files' tests: a scan may
            // list the cards again, so they are found anew by file name.)
            tryVerify(() => !testLibrary.scanning, 5000)
            testLibrary.importUrls([testModelUrl, testOtherModelUrl])
            tryVerify(() => testLibrary.models.count >= 2 && !testLibrary.scanning, 5000)
            const page = createTemporaryObject(modelsComponent, root)
            const card = file => {
                for (let i = 0; i < testLibrary.models.count; ++i) {
                    const c = findChild(page, "model" + i)
                    if (c && c.fileName === file) return c
                }
                return null
            }
            const smol = () => card("SmolLM2-135M-Instruct.Q4_1.gguf")
            const other = () => card("qwen2-f32.gguf")
            tryVerify(() => smol() !== null && other() !== null)
            const combo = () => findChild(smol(), "draftModel")
            const path = smol().path
            const otherPath = other().path
            const otherName = other().name
            verify(combo().visible)
            compare(combo().currentText, "None")
            compare(combo().Accessible.name, "Draft model for " + smol().name)
            verify(combo().activeFocusOnTab, "reached with Tab")
            verify(combo().find(otherName) > 0, "another model of the library is offered")
            verify(combo().find(smol().name) < 0, "not the model itself")

            // Chosen from the keyboard: kept for the model, and shown when the card is read again.
            tryVerify(() => {
                if (combo().currentText !== otherName) {
                    combo().forceActiveFocus()
                    keyClick(Qt.Key_Down)
                }
                return testLibrary.draftModel(path) === otherPath
            })
            compare(combo().currentText, otherName)

            // Its load failed (DesktopApp puts the engine's word on the card): shown beside it.
            const why = "the draft model qwen2-f32.gguf cannot guess for SmolLM2: their vocabularies differ (token 3)"
            testModel.failLoad(testLibrary, path, why)
            const error = findChild(smol(), "loadError")
            verify(error.visible)
            compare(error.text, "Could not be loaded: " + why)

            // None again, from the keyboard: the model loads alone.
            tryVerify(() => {
                if (combo().currentText !== "None") {
                    combo().forceActiveFocus()
                    keyClick(Qt.Key_Up)
                }
                return testLibrary.draftModel(path) === ""
            })
            compare(combo().currentText, "None")
            testLibrary.dismissLoadError(path)
            testLibrary.forget(otherPath)
            tryVerify(() => other() === null && !testLibrary.scanning, 5000)
        }

        // The draft models offered follow the library's usable models even when the list keeps
        // its length: a model spoilt in place (a file overwritten, a download gone bad) is no
        // longer offered, and offered again once whole.
        function test_a_draft_that_turns_unusable_is_no_longer_offered() {
            tryVerify(() => !testLibrary.scanning, 5000)
            testLibrary.importUrls([testModelUrl])
            const spare = testFiles.copyModel("spare-draft.gguf")
            testLibrary.rescan()
            const page = createTemporaryObject(modelsComponent, root)
            const card = file => {
                for (let i = 0; i < testLibrary.models.count; ++i) {
                    const c = findChild(page, "model" + i)
                    if (c && c.fileName === file) return c
                }
                return null
            }
            tryVerify(() => !testLibrary.scanning && card("SmolLM2-135M-Instruct.Q4_1.gguf") !== null
                      && card("spare-draft.gguf") !== null, 10000)
            const combo = () => findChild(card("SmolLM2-135M-Instruct.Q4_1.gguf"), "draftModel")
            const offered = () => combo().model.some(c => c.path === spare)
            verify(offered(), "a usable copy is offered as a draft")
            const count = testLibrary.models.count

            testFiles.spoil(spare, "no longer a model")
            testLibrary.rescan()
            tryVerify(() => !testLibrary.scanning && !card("spare-draft.gguf").usable, 10000)
            compare(testLibrary.models.count, count, "the same rows")
            verify(!offered(), "an unusable file is no longer offered")

            testFiles.remove(spare)
            testFiles.copyModel("spare-draft.gguf")
            testLibrary.rescan()
            tryVerify(() => !testLibrary.scanning && card("spare-draft.gguf") !== null
                      && card("spare-draft.gguf").usable, 10000)
            verify(offered(), "whole again: offered again")

            testLibrary.forget(spare)
            testFiles.remove(spare)
            testLibrary.rescan()
            tryVerify(() => card("spare-draft.gguf") === null && !testLibrary.scanning, 10000)
        }

        function test_the_model_bar_names_the_draft_model() {
            const bar = createTemporaryObject(barComponent, root)
            const draft = findChild(bar, "draftModel")
            testModel.announceLoaded({displayName: "Qwen3 8B", device: "CPU", draftName: "Qwen3 0.6B"})
            verify(draft.visible)
            compare(draft.text, "draft: Qwen3 0.6B")
            compare(draft.Accessible.name, "Draft model: Qwen3 0.6B")
            testModel.announceLoaded({displayName: "Qwen3 8B", device: "CPU"})
            verify(!draft.visible, "loaded without one")
        }

        function test_guessing_tokens_is_a_setting_that_applies_at_once() {
            const dialog = createTemporaryObject(settingsComponent, root)
            dialog.open()
            dialog.tab = 1
            tryVerify(() => dialog.opened)
            const guess = findChild(dialog.contentItem, "guessTokens")
            verify(guess.visible)
            verify(!guess.checked, "off by default")
            compare(guess.Accessible.name, "Guess tokens from the conversation (speculative decoding)")
            guess.forceActiveFocus()
            keyClick(Qt.Key_Space)
            verify(guess.checked)
            verify(testSettings.guessTokens)
            dialog.reject()
            verify(testSettings.guessTokens, "Close keeps it: it applied at once")
            testSettings.guessTokens = false
        }
    }
}
