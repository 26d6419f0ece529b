// Another program holding the database (a second Powerhouse, powerhouse-cli, a database
// browser), as the views show it, on testLocked's settings and chat (a store of their own
// with a short busy timeout, and one conversation, "Before the lock"): a refused Apply says
// why in the settings dialog, which stays open with what was chosen; a refused rename leaves
// the conversation's title as it is stored, in the window and the list alike; a refused
// delete leaves the conversation listed and open, with no Undo. Each goes through once the
// lock is gone.
import QtQuick
import QtQuick.Controls
import QtTest
import Powerhouse

Item {
    id: root
    width: 1100
    height: 700

    ConversationList {
        id: list
        controller: testLocked.chat
        width: 260
        height: parent.height
    }
    ChatView {
        id: chat
        controller: testLocked.chat
        x: 260
        width: 840
        height: parent.height
    }
    Component {
        id: settingsComponent
        SettingsDialog {
            settings: testLocked.settings
        }
    }

    TestCase {
        name: "Locked"
        when: windowShown

        function cleanup() {
            testLocked.unlock()
            testLocked.chat.dismissError()
        }

        function test_a_refused_apply_says_why_in_the_dialog() {
            const dialog = createTemporaryObject(settingsComponent, root)
            dialog.open()
            dialog.tab = 1
            tryVerify(() => dialog.opened)
            testLocked.settings.maxSequences = 8
            const problem = findChild(dialog.header, "applyError")
            verify(problem !== null)
            verify(!problem.visible)
            testLocked.lock()
            mouseClick(dialog.standardButton(Dialog.Apply))
            verify(dialog.opened, "refused, the dialog stays open")
            verify(problem.visible, "the refusal shows in the dialog, not only in the chat behind it")
            verify(problem.text.indexOf("close that program and try again") >= 0, problem.text)
            compare(testLocked.settings.maxSequences, 8, "what was chosen is still there to apply again")
            testLocked.unlock()
            mouseClick(dialog.standardButton(Dialog.Apply))
            verify(!problem.visible)
            tryVerify(() => !dialog.opened)
        }

        function test_a_refused_delete_keeps_the_conversation() {
            const chatController = testLocked.chat
            const id = chatController.currentConversationId
            const listed = chatController.conversations.count  // one more per test file run before
            verify(listed >= 1)
            testLocked.lock()
            chatController.deleteConversation(id)
            verify(chatController.errorText.indexOf("close that program and try again") >= 0, chatController.errorText)
            compare(chatController.conversations.count, listed, "a refused delete looks done")
            verify(findChild(list, "conversation0") !== null)
            verify(!chatController.canUndoDelete, "Undo is offered for a delete that did not happen")
            compare(chatController.currentConversationId, id, "the conversation stays open")
            testLocked.unlock()
            chatController.dismissError()
            chatController.deleteConversation(id)
            compare(chatController.errorText, "")
            compare(chatController.conversations.count, listed - 1)
            verify(chatController.canUndoDelete)
            chatController.undoDelete()
            compare(chatController.conversations.count, listed)
            compare(chatController.currentConversationId, id)
        }

        function test_a_refused_rename_keeps_the_stored_title() {
            const id = testLocked.chat.currentConversationId
            compare(testLocked.chat.currentTitle, "Before the lock")
            testLocked.lock()
            testLocked.chat.renameConversation(id, "After the lock")
            tryVerify(() => testLocked.chat.errorText.length > 0)
            verify(testLocked.chat.errorText.indexOf("close that program and try again") >= 0, testLocked.chat.errorText)
            compare(testLocked.chat.currentTitle, "Before the lock", "the window shows a title that was not stored")
            compare(findChild(list, "conversation0").title, "Before the lock")
            testLocked.unlock()
            testLocked.chat.renameConversation(id, "After the lock")
            tryCompare(testLocked.chat, "currentTitle", "After the lock")
            tryVerify(() => findChild(list, "conversation0") !== null && findChild(list, "conversation0").title === "After the lock")
        }
    }
}
