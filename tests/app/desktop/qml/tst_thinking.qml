// A reasoning model's thinking on an answer (MessageDelegate's ThinkingPart): folded at
// first, opened and folded again with a click or from the keyboard (reached with Tab; Space,
// Enter and Return), "Thinking…" while the model still thinks with its thoughts streaming in,
// no part on an answer without reasoning, and Copy copying the answer alone.
import QtQuick
import QtQuick.Controls
import QtTest
import Powerhouse

Item {
    id: root
    width: 800
    height: 600

    Component {
        id: answerComponent
        MessageDelegate {
            width: 600
            controller: testController
            isLast: true
            index: 0
            messageId: 1
            role: "assistant"
            messageState: MessageListModel.Complete
            stats: "10.0 tokens/s · 5 ms to first token · 30 tokens"
            error: ""
            recovery: ""
            toolCalls: ""
            content: "Hello there!"
            reasoning: "The user greets me; greet them back."
            // The roles of the app's MessageBlocksModel, which QML cannot make.
            blocks: ListModel {
                ListElement { kind: MessageBlocksModel.Text; text: "Hello there!"; language: ""; closed: true }
            }
        }
    }
    ListModel { id: noBlocks }
    // Where Copy's text is pasted back, to read the clipboard.
    TextEdit {
        id: pasted
        y: 560
        width: 200
        height: 20
        textFormat: TextEdit.PlainText
    }

    TestCase {
        name: "Thinking"
        when: windowShown

        function test_1_folded_at_first_and_opened_by_a_click() {
            const message = createTemporaryObject(answerComponent, root)
            verify(message)
            verify(findChild(message, "thinkingPart").visible)
            const toggle = findChild(message, "thinkingToggle")
            const title = findChild(message, "thinkingTitle")
            const text = findChild(message, "thinkingText")
            compare(title.text, "Thinking")
            verify(!text.visible)
            compare(text.text, "", "folded, the thoughts are not even laid out")
            compare(toggle.Accessible.name, "The model's thinking")
            compare(toggle.Accessible.checked, false)
            // The answer itself shows below, whatever the part above does.
            compare(findChild(message, "markdownText").text.trim(), "Hello there!")
            mouseClick(toggle)
            verify(text.visible)
            compare(text.text, "The user greets me; greet them back.")
            compare(toggle.Accessible.checked, true)
            waitForRendering(message)
            verify(text.height > 0)
            mouseClick(toggle)
            verify(!text.visible)
        }

        function test_2_the_keyboard_reaches_and_toggles_it() {
            const message = createTemporaryObject(answerComponent, root)
            const toggle = findChild(message, "thinkingToggle")
            const text = findChild(message, "thinkingText")
            verify(toggle.activeFocusOnTab)
            // Tab from the item before it in the window's focus chain lands on it.
            const before = toggle.nextItemInFocusChain(false)
            verify(before)
            before.forceActiveFocus()
            keyClick(Qt.Key_Tab)
            verify(toggle.activeFocus)
            keyClick(Qt.Key_Space)
            verify(text.visible)
            keyClick(Qt.Key_Return)
            verify(!text.visible)
            keyClick(Qt.Key_Enter, Qt.KeypadModifier)
            verify(text.visible)
            compare(text.text, "The user greets me; greet them back.")
        }

        function test_3_thinking_while_the_model_still_thinks() {
            const message = createTemporaryObject(answerComponent, root, {
                messageState: MessageListModel.Streaming, content: "", reasoning: "The user", stats: "",
                blocks: noBlocks
            })
            const title = findChild(message, "thinkingTitle")
            const text = findChild(message, "thinkingText")
            compare(title.text, "Thinking…")
            verify(!findChild(message, "emptyAnswer").visible, "\"Thinking…\" says more than the dots")
            compare(findChild(message, "thinkingToggle").Accessible.name, "Thinking…: the model's thoughts so far")
            verify(!text.visible)
            // Opened, the thoughts stream in.
            mouseClick(findChild(message, "thinkingToggle"))
            compare(text.text, "The user")
            message.reasoning += " greets me"
            compare(text.text, "The user greets me")
            // The answer's first words end the thinking; the part stays as the user left it.
            message.content = "Hello"
            compare(title.text, "Thinking")
            verify(text.visible)
            message.messageState = MessageListModel.Complete
            compare(title.text, "Thinking")
            // Stopped before the answer began: the thoughts stay, and the note says so.
            const stopped = createTemporaryObject(answerComponent, root, {
                messageState: MessageListModel.Stopped, content: "", reasoning: "Half a thought", stats: "",
                blocks: noBlocks
            })
            compare(findChild(stopped, "thinkingTitle").text, "Thinking")
            compare(findChild(stopped, "emptyAnswer").text, "Stopped before any text came.")
        }

        function test_4_no_part_without_reasoning() {
            const plain = createTemporaryObject(answerComponent, root, {reasoning: ""})
            verify(!findChild(plain, "thinkingPart").visible)
            const user = createTemporaryObject(answerComponent, root, {role: "user", content: "hi", reasoning: ""})
            verify(!findChild(user, "thinkingPart").visible)
        }

        function test_5_copy_copies_the_answer_alone() {
            const message = createTemporaryObject(answerComponent, root)
            mouseClick(findChild(message, "thinkingToggle"))  // open or not, the thoughts stay out
            mouseClick(findChild(message, "copyMessage"))
            pasted.text = ""
            pasted.paste()
            compare(pasted.text, "Hello there!")
        }
    }
}
