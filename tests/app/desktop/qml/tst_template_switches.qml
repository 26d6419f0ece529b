// The chat template's switches in a conversation's settings: "Think before answering" for a
// model whose template reads enable_thinking, "Reasoning effort" for one that reads
// reasoning_effort, neither (with a line saying why) for one that reads none; each reached
// with Tab and changed from the keyboard, and kept by Save. testModel stands in for the
// engine's word on the loaded model (desktop_qml_test.cpp).
// And a model's own chat template or one from a file on its Models page card (the file's
// text kept by testLibrary), with the model bar saying whose template the loaded model uses.
import QtQuick
import QtQuick.Controls
import QtTest
import Powerhouse

Item {
    id: root
    width: 800
    height: 700

    Component {
        id: chatViewComponent
        ChatView {
            anchors.fill: parent
            controller: testController
        }
    }

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

    TestCase {
        name: "TemplateSwitches"
        when: windowShown

        function openSettings(chat) {
            chat.openConversationSettings()
            const dialog = findChild(chat, "conversationSettings")
            tryVerify(() => dialog.opened)
            return dialog
        }

        function close(dialog) {
            dialog.save()
            tryVerify(() => !dialog.visible)
        }

        function test_switches_follow_the_model_and_the_keyboard() {
            const chat = createTemporaryObject(chatViewComponent, root)

            // A model whose template reads enable_thinking: the switch, on (the model's own
            // default), reached with Tab from the control before it and turned off with Space.
            testModel.announceLoaded({displayName: "Thinker", device: "CPU", hasThinkingSwitch: true})
            let dialog = openSettings(chat)
            const thinking = findChild(dialog, "thinkingSwitch")
            const effort = findChild(dialog, "reasoningEffort")
            const note = findChild(dialog, "templateSwitchesNote")
            verify(thinking.visible, "the switch is offered")
            verify(!effort.visible, "no effort for this template")
            verify(!note.visible)
            compare(thinking.Accessible.name, "Think before answering")
            verify(thinking.checked)
            const seed = findChild(dialog, "fixedSeed")
            seed.forceActiveFocus()
            keyClick(Qt.Key_Tab)
            verify(thinking.activeFocus, "Tab reaches the switch")
            keyClick(Qt.Key_Space)
            verify(!thinking.checked)
            close(dialog)
            compare(testController.sampling.thinking, false)
            dialog = openSettings(chat)
            verify(!thinking.checked, "opened again, as saved")
            dialog.reject()
            tryVerify(() => !dialog.visible)

            // One that reads reasoning_effort: the choice (Default first), changed with the
            // arrow keys; the hidden switch keeps what was chosen for it.
            testModel.announceLoaded({displayName: "Reasoner", device: "CPU", hasReasoningEffort: true})
            dialog = openSettings(chat)
            verify(!thinking.visible)
            verify(effort.visible, "the effort is offered")
            compare(effort.Accessible.name, "Reasoning effort")
            compare(effort.currentIndex, 0)
            seed.forceActiveFocus()
            keyClick(Qt.Key_Tab)
            verify(effort.activeFocus, "Tab reaches the effort")
            keyClick(Qt.Key_Down)
            keyClick(Qt.Key_Down)
            compare(effort.currentText, "Medium")
            close(dialog)
            compare(testController.sampling.reasoningEffort, "medium")
            compare(testController.sampling.thinking, false, "kept while another model answers")

            // One that reads neither: no control, and a line saying why, for the screen reader too.
            testModel.announceLoaded({displayName: "Plain", device: "CPU"})
            dialog = openSettings(chat)
            verify(!thinking.visible)
            verify(!effort.visible)
            verify(note.visible, "why nothing is offered")
            compare(note.text, "This model's chat template has no switch for thinking or reasoning effort.")
            compare(note.Accessible.name, note.text)
            dialog.reject()
            tryVerify(() => !dialog.visible)
            testController.resetConversationSettings()
            compare(testController.sampling.thinking, true)
            compare(testController.sampling.reasoningEffort, "")
        }

        function test_a_models_chat_template_from_a_file() {
            // (The store and library folder are shared with the other files' tests: the model
            // may be listed already, and a scan may list the cards again, so they are found anew.)
            tryVerify(() => !testLibrary.scanning, 5000)
            testLibrary.importUrls([testModelUrl])
            tryVerify(() => testLibrary.models.count >= 1 && !testLibrary.scanning, 5000)
            const page = createTemporaryObject(modelsComponent, root)
            const card = () => {
                for (let i = 0; i < testLibrary.models.count; ++i) {
                    const c = findChild(page, "model" + i)
                    if (c && c.fileName === "SmolLM2-135M-Instruct.Q4_1.gguf") return c
                }
                return null
            }
            tryVerify(() => card() !== null)
            const part = name => findChild(card(), name)
            const path = card().path
            compare(part("chatTemplate").text, "Chat template: the model's own")
            verify(part("chatTemplateFromFile").visible)
            verify(part("chatTemplateFromFile").activeFocusOnTab, "reached with Tab")
            verify(part("chatTemplateFromFile").Accessible.name.indexOf("Chat template for ") === 0,
                   part("chatTemplateFromFile").Accessible.name)
            verify(!part("chatTemplateOwn").visible)

            // A file that is not there: refused with the reason, nothing kept.
            const refused = signalSpy.createObject(root, {target: testLibrary, signalName: "error"})
            verify(!testLibrary.setChatTemplateFile(path, "file://" + testDataFolder + "/missing.jinja"))
            compare(refused.count, 1)
            verify(refused.signalArguments[0][0].indexOf("cannot open") >= 0, refused.signalArguments[0][0])
            compare(part("chatTemplate").text, "Chat template: the model's own")

            // Chosen (the dialog's file): the card names it, and the model's own comes back
            // from the keyboard.
            verify(testLibrary.setChatTemplateFile(path, Qt.resolvedUrl("tst_template_switches.qml")))
            tryVerify(() => part("chatTemplate").text.indexOf("Chat template: from ") === 0)
            verify(part("chatTemplate").text.indexOf("tst_template_switches.qml") > 0, part("chatTemplate").text)
            verify(part("chatTemplateOwn").visible)
            compare(part("chatTemplateOwn").Accessible.name, "Use the model's own chat template for " + card().name)
            // (Tried again if a scan listed the cards anew between the focus and the key: a new
            // card has no focus.)
            tryVerify(() => {
                part("chatTemplateOwn").forceActiveFocus()
                keyClick(Qt.Key_Space)
                return part("chatTemplate").text === "Chat template: the model's own"
            })
            verify(!part("chatTemplateOwn").visible)

            // The loaded model's note, on the model bar for the screen reader too.
            const bar = createTemporaryObject(barComponent, root)
            const note = findChild(bar, "templateNote")
            testModel.announceLoaded({displayName: "Plain", device: "CPU"})
            verify(!note.visible)
            testModel.announceLoaded({displayName: "Given", device: "CPU",
                                      templateNote: "using the chat template given instead of the model's own"})
            verify(note.visible)
            compare(note.Accessible.name, "Chat template: using the chat template given instead of the model's own")
        }
    }

    Component {
        id: signalSpy
        SignalSpy {}
    }
}
