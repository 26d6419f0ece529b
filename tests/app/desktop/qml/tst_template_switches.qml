// The chat template's switches in a conversation's settings: "Think before answering" for a
// model whose template reads enable_thinking, "Reasoning effort" for one that reads
// reasoning_effort, neither (with a line saying why) for one that reads none; each reached
// with Tab and changed from the keyboard, and kept by Save. testModel stands in for the
// engine's word on the loaded model (desktop_qml_test.cpp).
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
    }
}
