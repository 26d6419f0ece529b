// A chat as a user has it, with the real SmolLM2 model (testChat, greedy, at most 48 tokens
// an answer): send and watch the answer stream in, stop, regenerate, edit and resend, switch
// conversations and search them, an answer going on while another conversation is open, the
// dashboard's batching, Esc in fields, choosing a conversation from the Models page, and a
// conversation's menu from the keyboard. The functions run in name order, on one store.
import QtQuick
import QtQuick.Controls
import QtTest
import Powerhouse

Item {
    id: root
    width: 1400
    height: 760

    ConversationList {
        id: list
        controller: testChat
        width: 260
        height: parent.height
    }
    ChatView {
        id: chat
        controller: testChat
        x: 260
        width: 840
        height: parent.height
    }
    GpuDashboard {
        id: dashboard
        dashboard: testDashboard
        x: 1100
        width: 300
        height: parent.height
    }
    SignalSpy {
        id: streamed
        target: testChat.messages
        signalName: "dataChanged"
    }

    TestCase {
        name: "Chat"
        when: windowShown

        function message(i) {
            return findChild(chat, "message" + i)
        }

        function type(text) {
            chat.focusComposer()
            const input = findChild(chat, "composerInput")
            input.text = text
            keyClick(Qt.Key_Return)
        }

        function waitIdle() {
            tryCompare(testChat, "generating", false, 120000)
        }

        function initTestCase() {
            tryCompare(testChat, "modelState", ChatController.Ready, 60000)
        }

        // Every function: no binding loop (an answer's statistics once looped on their width
        // when it stopped).
        function init() {
            failOnWarning(/Binding loop detected/)
        }

        function test_1_an_answer_streams_in() {
            streamed.clear()
            type("Write a Python function that reverses a string.")
            verify(testChat.generating)
            compare(findChild(chat, "composerInput").text, "", "the composer empties on send")
            waitIdle()
            verify(streamed.count > 1, "the answer came in " + streamed.count + " pieces")
            tryVerify(() => message(1) !== null)
            compare(message(0).content, "Write a Python function that reverses a string.")
            compare(message(1).messageState, MessageListModel.Complete)
            // The greedy answer opens with a Python code block, framed with its own Copy button.
            const code = findChild(message(1), "codeText")
            verify(code !== null, message(1).content)
            verify(code.text.indexOf("def ") >= 0, code.text)
            verify(findChild(message(1), "statsLabel").text.indexOf("tokens/s") > 0)
            compare(testChat.conversations.count, 1)
        }

        function test_2_stop_keeps_what_was_written() {
            testChat.newConversation()
            type("Write a very long story about a dragon who learns to cook.")
            tryVerify(() => message(1) !== null && message(1).content.length > 0, 60000)
            mouseClick(findChild(chat, "stopButton"))
            waitIdle()
            compare(message(1).messageState, MessageListModel.Stopped)
            verify(message(1).content.length > 0)
            verify(findChild(message(1), "statsLabel").text.indexOf("stopped") > 0)
        }

        function test_3_regenerate_answers_again() {
            const button = findChild(message(1), "regenerateButton")
            verify(button.visible && button.enabled)
            mouseClick(button)
            verify(testChat.generating)
            waitIdle()
            tryCompare(message(1), "messageState", MessageListModel.Complete)
            compare(testChat.messages.count, 2)
        }

        function test_4_edit_and_resend_replaces_the_rest() {
            const input = findChild(chat, "composerInput")
            // Cancelled with Esc, the edit gives the keys back to the composer: typing goes
            // there, not into the hidden editor.
            mouseClick(findChild(message(0), "editButton"))
            let editor = findChild(message(0), "editor")
            tryVerify(() => editor.visible && editor.activeFocus)
            keyClick(Qt.Key_Escape)
            verify(!editor.visible)
            verify(!editor.activeFocus, "the hidden editor kept the keys")
            verify(input.activeFocus, "the composer has the keys after a cancelled edit")
            keyClick("h")
            compare(input.text, "h")
            input.text = ""

            mouseClick(findChild(message(0), "editButton"))
            editor = findChild(message(0), "editor")
            tryVerify(() => editor.visible && editor.activeFocus)
            compare(editor.text, "Write a very long story about a dragon who learns to cook.")
            editor.selectAll()
            keyClick(Qt.Key_Delete)
            editor.insert(0, "Say hello in French.")
            keyClick(Qt.Key_Return)
            // Sent, the edited message's row is made again: the composer has the keys.
            verify(input.activeFocus, "the composer has the keys after an edit is sent")
            waitIdle()
            tryCompare(testChat.messages, "count", 2)
            compare(message(0).content, "Say hello in French.")
            compare(message(1).messageState, MessageListModel.Complete)
            keyClick("h")
            compare(input.text, "h")
            input.text = ""
        }

        function test_5_switch_and_search_conversations() {
            compare(testChat.conversations.count, 2)
            const search = findChild(list, "searchField")
            search.forceActiveFocus()
            search.text = "reverses"
            tryCompare(testChat.conversations, "count", 1)
            mouseClick(findChild(list, "conversation0"))
            compare(testChat.currentTitle, "Write a Python function that reverses a string.")
            tryVerify(() => message(0) !== null && message(0).content === testChat.currentTitle)
            // Searching the answers' words finds the other conversation too.
            search.text = ""
            tryCompare(testChat.conversations, "count", 2)
            mouseClick(findChild(list, "conversation0"))  // the newest
            compare(message(0).content, "Say hello in French.")
        }

        function generatingIndicator(row) {
            const item = findChild(list, "conversation" + row)
            return item ? findChild(item, "generatingIndicator") : null
        }

        function test_6_an_answer_goes_on_while_another_conversation_is_open() {
            testChat.newConversation()
            // A long answer, to outlast the clicks below.
            verify(testChat.setConversationSettings("", {maxTokens: 2000}))
            type("Write a very long story about a dragon who learns to cook.")
            verify(testChat.generating)
            const story = testChat.currentConversationId
            mouseClick(findChild(list, "conversation1"))  // an older conversation
            verify(testChat.currentConversationId !== story)
            verify(!testChat.generating, "the open conversation is not the one answering")
            compare(findChild(chat, "sendButton").text, "Send")
            // The list marks the conversation that answers (the newest, at the top), not the open one.
            tryVerify(() => generatingIndicator(0) !== null && generatingIndicator(0).visible)
            verify(!generatingIndicator(1).visible)
            // Back to it: what has come so far is there, and more keeps coming.
            mouseClick(findChild(list, "conversation0"))
            compare(testChat.currentConversationId, story)
            tryVerify(() => message(1) !== null && message(1).content.length > 0, 60000)
            const shown = message(1).content.length
            verify(testChat.generating)
            tryVerify(() => message(1).content.length > shown, 60000)
            mouseClick(findChild(chat, "stopButton"))
            waitIdle()
            compare(message(1).messageState, MessageListModel.Stopped)
            tryVerify(() => !generatingIndicator(0).visible)
        }

        function test_7_the_dashboard_shows_the_batching() {
            tryVerify(() => testDashboard.hasBatching)
            const sequences = findChild(dashboard, "batchingSequences")
            verify(sequences.visible)
            tryCompare(sequences, "text", "Answers: 0 generating together · 0 waiting")
            verify(testDashboard.kvBlocksTotal > 0)
            const kv = findChild(dashboard, "batchingKv")
            verify(kv.text.indexOf(" of " + testDashboard.kvBlocksTotal + " blocks in use") > 0, kv.text)
            // Finished conversations stay cached for their next turn.
            verify(testDashboard.cachedPrefixes > 0)
            const prefixes = findChild(dashboard, "batchingPrefixes").text
            verify(prefixes.indexOf("Prompt cache: " + testDashboard.cachedPrefixes + " finished answer") === 0, prefixes)
        }

        // Esc stops the answer (the window's shortcut), except where a field uses it itself:
        // in the search, it clears the search and the answer goes on.
        function test_8_escape_in_the_search_clears_it_and_leaves_the_answer() {
            const component = Qt.createComponent("qrc:/Powerhouse/Main.qml")
            verify(component.status === Component.Ready, component.errorString())
            const window = createTemporaryObject(component, null, {
                controller: testChat, dashboard: testDashboard, settings: testSettings, library: testLibrary,
                downloads: testDownloads
            })
            tryVerify(() => window.visible)
            window.requestActivate()
            tryVerify(() => window.active)
            testChat.newConversation()
            verify(testChat.setConversationSettings("", {maxTokens: 2000}))
            verify(testChat.send("Write a very long story about a dragon who learns to cook."))
            verify(testChat.generating)
            const search = findChild(window.contentItem, "searchField")
            search.forceActiveFocus()
            search.text = "dragon"
            keyClick(Qt.Key_Escape)
            compare(search.text, "", "Esc clears the search")
            verify(testChat.generating, "the answer goes on")
            // With nothing to clear, Esc stops the answer.
            keyClick(Qt.Key_Escape)
            waitIdle()
            search.text = ""
        }

        // In the editor of a message (opened before Regenerate started an answer), Esc cancels
        // the edit and the answer goes on; with the editor closed, Esc stops the answer.
        function test_9_escape_in_the_message_editor_cancels_the_edit_and_leaves_the_answer() {
            const component = Qt.createComponent("qrc:/Powerhouse/Main.qml")
            verify(component.status === Component.Ready, component.errorString())
            const window = createTemporaryObject(component, null, {
                controller: testChat, dashboard: testDashboard, settings: testSettings, library: testLibrary,
                downloads: testDownloads
            })
            tryVerify(() => window.visible)
            window.requestActivate()
            tryVerify(() => window.active)
            testChat.newConversation()
            verify(testChat.setConversationSettings("", {maxTokens: 4}))
            verify(testChat.send("Write a very long story about a dragon who learns to cook."))
            waitIdle()
            verify(testChat.setConversationSettings("", {maxTokens: 2000}))
            let question = null
            tryVerify(() => (question = findChild(window.contentItem, "message0")) !== null)
            mouseClick(findChild(question, "editButton"))
            const editor = findChild(question, "editor")
            tryVerify(() => editor.visible && editor.activeFocus)
            testChat.regenerate()  // as the answer's Regenerate button, still enabled
            verify(testChat.generating)
            verify(editor.activeFocus)
            keyClick(Qt.Key_Escape)
            verify(!question.editing, "Esc cancels the edit")
            verify(!editor.visible)
            verify(testChat.generating, "the answer goes on")
            compare(question.content, "Write a very long story about a dragon who learns to cook.")
            // With no edit open, Esc stops the answer.
            keyClick(Qt.Key_Escape)
            waitIdle()
            let answer = null
            tryVerify(() => (answer = findChild(window.contentItem, "message1")) !== null)
            tryCompare(answer, "messageState", MessageListModel.Stopped)
        }

        // On the Models page, choosing a conversation in the list, New chat or Ctrl+N shows
        // the chat: the page stayed, and the choice seemed to do nothing.
        function test_9b_choosing_a_conversation_on_the_models_page_shows_it() {
            const component = Qt.createComponent("qrc:/Powerhouse/Main.qml")
            verify(component.status === Component.Ready, component.errorString())
            const window = createTemporaryObject(component, null, {
                controller: testChat, dashboard: testDashboard, settings: testSettings, library: testLibrary,
                downloads: testDownloads
            })
            tryVerify(() => window.visible)
            window.requestActivate()
            tryVerify(() => window.active)
            const page = findChild(window.contentItem, "modelsPage")
            window.modelsVisible = true
            tryVerify(() => page.visible)
            let other = null
            tryVerify(() => (other = findChild(window.contentItem, "conversation1")) !== null)
            mouseClick(other)
            compare(testChat.currentConversationId, other.conversationId)
            verify(!window.modelsVisible, "the chat shows the conversation chosen")
            tryVerify(() => !page.visible)

            window.modelsVisible = true
            mouseClick(findChild(window.contentItem, "newChatButton"))
            compare(testChat.currentConversationId, 0)
            verify(!window.modelsVisible, "New chat shows the new chat")

            testChat.selectConversation(other.conversationId)
            window.modelsVisible = true
            keyClick(Qt.Key_N, Qt.ControlModifier)
            compare(testChat.currentConversationId, 0)
            verify(!window.modelsVisible, "Ctrl+N shows the new chat")
        }

        // Rename, export and delete were right-click only: Tab reaches a menu button on each
        // conversation, and the menu key or Shift+F10 opens the menu from the row.
        function test_9c_a_conversations_menu_is_reached_from_the_keyboard() {
            const component = Qt.createComponent("qrc:/Powerhouse/Main.qml")
            verify(component.status === Component.Ready, component.errorString())
            const window = createTemporaryObject(component, null, {
                controller: testChat, dashboard: testDashboard, settings: testSettings, library: testLibrary,
                downloads: testDownloads
            })
            tryVerify(() => window.visible)
            window.requestActivate()
            tryVerify(() => window.active)
            let row = null
            tryVerify(() => (row = findChild(window.contentItem, "conversation0")) !== null)
            const button = findChild(row, "conversationMenuButton")
            verify(button !== null && button.visible, "a menu button on each conversation")
            const menu = findChild(row, "conversationMenu")
            verify(menu !== null)
            row.forceActiveFocus()
            keyClick(Qt.Key_Tab)
            verify(button.activeFocus, "Tab goes from the conversation to its menu button")
            keyClick(Qt.Key_Space)
            tryVerify(() => menu.opened)
            keyClick(Qt.Key_Escape)
            tryVerify(() => !menu.visible)

            row.forceActiveFocus()
            keyClick(Qt.Key_Menu)
            tryVerify(() => menu.opened)
            compare(menu.currentIndex, 0, "on its first entry, for the arrows and Enter")
            keyClick(Qt.Key_Escape)
            tryVerify(() => !menu.visible)

            row.forceActiveFocus()
            keyClick(Qt.Key_F10, Qt.ShiftModifier)
            tryVerify(() => menu.opened)
            keyClick(Qt.Key_Return)  // Rename…
            const rename = findChild(window, "renameDialog")
            verify(rename !== null)
            tryVerify(() => rename.opened)
            rename.reject()
            tryVerify(() => !rename.visible)
        }
    }
}
