// The views, driven as a user would (keys and clicks), on the real controllers of the
// setup in desktop_qml_test.cpp: testController (no model loaded), testSettings and
// testDashboard (two simulated RTX 4090s), testDataFolder.
import QtQuick
import QtQuick.Controls
import QtTest
import Powerhouse

Item {
    id: root
    width: 1000
    height: 700

    Component {
        id: chatViewComponent
        ChatView {
            controller: testController
            anchors.fill: parent
        }
    }
    Component {
        id: settingsComponent
        SettingsDialog {
            settings: testSettings
        }
    }
    Component {
        id: placementComponent
        PlacementBar {
            width: 300
        }
    }
    Component {
        id: messageComponent
        MessageDelegate {
            width: 600
            controller: testController
            isLast: true
            index: 0
            messageId: 1
            role: "assistant"
            messageState: MessageListModel.Complete
            stats: "10.0 tokens/s · 5 ms to first token · 3 tokens"
            error: ""
            recovery: ""
            toolCalls: ""
            content: "Here:\n```python\nprint(1)\n```\nDone."
            reasoning: ""
            // The roles of the app's MessageBlocksModel, which QML cannot make.
            blocks: ListModel {
                ListElement { kind: MessageBlocksModel.Text; text: "Here:"; language: ""; closed: true }
                ListElement { kind: MessageBlocksModel.Code; text: "print(1)"; language: "python"; closed: true }
                ListElement { kind: MessageBlocksModel.Text; text: "Done."; language: ""; closed: true }
            }
        }
    }
    ListModel { id: noBlocks }
    Component {
        id: dashboardComponent
        GpuDashboard {
            width: 320
            height: 700
            dashboard: testDashboard
        }
    }

    Component {
        id: powerDashboardComponent
        GpuDashboard {
            dashboard: testDashboard
            power: testPower
            height: parent.height
        }
    }
    Component {
        id: powerSettingsComponent
        SettingsDialog {
            settings: testSettings
            power: testPower
        }
    }

    TestCase {
        name: "Views"
        when: windowShown

        function test_theme_follows_the_choice() {
            Theme.mode = "dark"
            verify(Theme.dark)
            compare(Theme.background.toString(), "#15171c")
            Theme.mode = "light"
            verify(!Theme.dark)
            compare(Theme.background.toString(), "#f6f7f9")
            Theme.mode = "system"
        }

        function test_placement_bar_draws_layers_to_scale() {
            const bar = createTemporaryObject(placementComponent, root, {
                layers: 30,
                plan: [{gpu: 0, name: "A", part: "layers 0-19", first: 0, count: 20, tensor: false, bytes: 2e9},
                       {gpu: 1, name: "B", part: "layers 20-29", first: 20, count: 10, tensor: false, bytes: 1e9}]
            })
            verify(bar)
            const a = findChild(bar, "segment0")
            const b = findChild(bar, "segment1")
            verify(a && b)
            fuzzyCompare(a.width, 200, 1)
            fuzzyCompare(b.width, 100, 1)
            verify(a.color !== b.color)
            // Tensor split: every GPU holds a share of every layer, drawn by bytes.
            bar.plan = [{gpu: 0, part: "KV heads 0-1", count: 30, tensor: true, bytes: 3e9},
                        {gpu: 1, part: "KV heads 2", count: 30, tensor: true, bytes: 1e9}]
            fuzzyCompare(findChild(bar, "segment0").width, 225, 1)
        }

        function test_enter_sends_and_without_a_model_the_error_says_what_to_do() {
            const chat = createTemporaryObject(chatViewComponent, root)
            verify(chat)
            chat.focusComposer()
            const input = findChild(chat, "composerInput")
            verify(input.activeFocus)
            keyClick(Qt.Key_H)
            keyClick(Qt.Key_I)
            compare(input.text, "hi")
            // Shift+Enter adds a line; Enter sends.
            keyClick(Qt.Key_Return, Qt.ShiftModifier)
            compare(input.text, "hi\n")
            keyClick(Qt.Key_Return)
            verify(testController.errorText.indexOf("No model is loaded") >= 0, testController.errorText)
            // Not sent: the words stay in the composer, to send once a model is ready.
            compare(input.text, "hi\n")
            const error = findChild(chat, "errorText")
            verify(error.visible)
            compare(error.text, testController.errorText)
            testController.dismissError()
            verify(!error.visible)
            input.text = ""
        }

        function test_unsent_words_stay_when_the_chat_is_made_again() {
            const first = createTemporaryObject(chatViewComponent, root)
            findChild(first, "composerInput").text = "half a thought"
            compare(testController.draft, "half a thought")
            first.destroy()
            // The app's next start makes its window again; the controller has the words from
            // the store (ChatControllerTest.AnUnsentDraftIsKeptAcrossARestart).
            const second = createTemporaryObject(chatViewComponent, root)
            const input = findChild(second, "composerInput")
            compare(input.text, "half a thought")
            input.text = ""
            compare(testController.draft, "")
        }

        function test_the_keypad_enter_sends_and_resends_too() {
            const chat = createTemporaryObject(chatViewComponent, root)
            chat.focusComposer()
            const input = findChild(chat, "composerInput")
            input.text = "hi"
            input.cursorPosition = 2
            keyClick(Qt.Key_Enter, Qt.KeypadModifier)
            compare(input.text, "hi", "no line is added")
            verify(testController.errorText.indexOf("No model is loaded") >= 0, testController.errorText)
            testController.dismissError()
            // Editing a message of one's own: the keypad's Enter resends it (and adds no line).
            const message = createTemporaryObject(messageComponent, root, {role: "user", content: "hello"})
            mouseClick(findChild(message, "editButton"))
            const editor = findChild(message, "editor")
            tryVerify(() => editor.visible && editor.activeFocus)
            editor.text = "hello there"
            editor.cursorPosition = editor.length
            keyClick(Qt.Key_Enter, Qt.KeypadModifier)
            compare(editor.text, "hello there")
            // Without a model it cannot be resent: the edit stays open, with its words.
            verify(message.editing, "the refused edit stays open")
            verify(editor.visible)
        }

        function test_conversation_settings_are_kept_for_the_new_chat() {
            const chat = createTemporaryObject(chatViewComponent, root)
            chat.openConversationSettings()
            const dialog = findChild(chat, "conversationSettings")
            tryVerify(() => dialog.opened)
            const temperature = findChild(dialog, "temperature")
            compare(temperature.text, "0.80")
            temperature.text = "0.25"
            findChild(dialog, "systemPrompt").text = "Answer briefly."
            dialog.save()
            tryVerify(() => !dialog.visible)
            fuzzyCompare(testController.sampling.temperature, 0.25, 1e-6)
            compare(testController.systemPrompt, "Answer briefly.")
            // Out of range: refused, and the dialog stays open with the reason in it, under the
            // field's row (the chat behind may be covered in a small window), not above the chat.
            chat.openConversationSettings()
            tryVerify(() => dialog.opened)
            const field = findChild(dialog, "temperature")
            field.text = "-1"
            dialog.save()
            verify(dialog.opened)
            const problem = findChild(dialog, "problem_temperature_topK")
            verify(problem && problem.visible, "the reason is shown in the dialog")
            verify(problem.text.indexOf("temperature") >= 0, problem.text)
            verify(field.activeFocus, "the field at fault has the focus")
            // (once the grid and the dialog, centred again, have been laid out)
            const y = item => item.mapToItem(null, 0, 0).y
            tryVerify(() => y(problem) >= y(field) + field.height - 0.5 && y(problem) < y(field) + 3 * field.height,
                      2000, "under the field's row: " + y(problem) + " vs " + (y(field) + field.height))
            const below = findChild(dialog, "maxTokens")
            verify(y(problem) + problem.height <= y(below), "above the rows below")
            compare(testController.errorText, "", "nothing above the chat")
            // Emptied: not saved as 0 (a temperature of 0 is greedy), refused with the default.
            field.text = ""
            dialog.save()
            verify(dialog.opened, "an emptied field was saved")
            verify(problem.visible)
            verify(problem.text.indexOf("temperature is empty") >= 0, problem.text)
            verify(problem.text.indexOf("0.8") >= 0, problem.text)
            fuzzyCompare(testController.sampling.temperature, 0.25, 1e-6)
            // Cancel: the reason goes with the dialog, and the settings are as they were.
            dialog.reject()
            tryVerify(() => !dialog.visible)
            verify(!problem.visible)
            compare(testController.errorText, "")
            fuzzyCompare(testController.sampling.temperature, 0.25, 1e-6)
            chat.openConversationSettings()
            tryVerify(() => dialog.opened)
            verify(!problem.visible, "opened again, no old refusal")
            compare(field.text, "0.25")
            dialog.reject()
            tryVerify(() => !dialog.visible)
            testController.resetConversationSettings()
            compare(testController.systemPrompt, "")
        }

        function test_gpu_settings_preview_follows_the_choices() {
            const dialog = createTemporaryObject(settingsComponent, root)
            dialog.open()
            tryVerify(() => dialog.opened)
            // The title shows above the tabs, and the content starts below both.
            const title = findChild(dialog.header, "settingsTitle")
            verify(title && title.visible && title.height > 0)
            compare(title.text, "Settings")
            verify(dialog.contentItem.mapToItem(null, 0, 0).y >= title.mapToItem(null, 0, title.height).y)
            testSettings.splitMode = "layer"
            const preview = findChild(dialog.contentItem, "planPreview")
            verify(preview.text.indexOf("layer split") >= 0, preview.text)
            verify(preview.text.indexOf("GPU 1 (RTX 4090)") >= 0, preview.text)
            // Unticking GPU 1 takes it out of the plan.
            const use1 = findChild(dialog.contentItem, "useGpu1")
            verify(use1.checked)
            mouseClick(use1)
            verify(!testSettings.gpus[1].use)
            verify(preview.text.indexOf("GPU 1") < 0, preview.text)
            // Close forgets what was not applied.
            dialog.reject()
            verify(testSettings.gpus[1].use)
            compare(testSettings.splitMode, "auto")
        }

        function test_general_settings_set_the_conversations_at_once_and_the_kv_cache() {
            const dialog = createTemporaryObject(settingsComponent, root)
            dialog.open()
            dialog.tab = 1
            tryVerify(() => dialog.opened)
            const sequences = findChild(dialog.contentItem, "maxSequences")
            compare(sequences.value, 4)
            sequences.forceActiveFocus()
            keyClick(Qt.Key_Up)
            compare(testSettings.maxSequences, 5)
            const kv = findChild(dialog.contentItem, "kvCacheTokens")
            compare(kv.value, 0)
            kv.forceActiveFocus()
            keyClick(Qt.Key_Up)
            compare(testSettings.kvCacheTokens, 1024)
            // Close forgets what was not applied.
            dialog.reject()
            compare(testSettings.maxSequences, 4)
            compare(testSettings.kvCacheTokens, 0)
        }

        function test_code_blocks_have_their_own_copy_button() {
            const message = createTemporaryObject(messageComponent, root)
            verify(message)
            const code = findChild(message, "codeText")
            verify(code)
            compare(code.text, "print(1)")
            const copy = findChild(message, "copyCode")
            compare(copy.text, "Copy")
            mouseClick(copy)
            compare(copy.text, "Copied")
            // The answer streams on: blocks change and arrive at the end, and the code block
            // keeps its delegate (and so its "Copied").
            message.blocks.setProperty(2, "text", "Done. And")
            message.blocks.append({kind: MessageBlocksModel.Code, text: "x", language: "", closed: false})
            compare(findChild(message, "copyCode"), copy)
            compare(copy.text, "Copied")
            message.blocks.setProperty(1, "text", "print(2)")
            compare(code.text, "print(2)")
            compare(findChild(message, "codeText"), code)
            tryCompare(copy, "text", "Copy", 3000)
        }

        function test_dashboard_labels_simulated_gpus() {
            const dashboard = createTemporaryObject(dashboardComponent, root)
            verify(dashboard)
            tryVerify(() => testDashboard.gpus.count === 2)
            verify(testDashboard.simulated)
            const note = findChild(dashboard, "sourceNote")
            verify(note.visible)
            verify(note.text.indexOf("Simulated GPUs") === 0, note.text)
        }

        // Every visible item under `item`, depth first.
        function visibleItems(item, out) {
            out = out || []
            for (let i = 0; i < item.children.length; ++i) {
                const child = item.children[i]
                if (!child.visible) continue
                out.push(child)
                visibleItems(child, out)
            }
            return out
        }
        // Whether `item` lies wholly inside `area`, horizontally (not cut off by its edge).
        function insideWidth(area, item) {
            const at = item.mapToItem(area, 0, 0)
            return at.x >= -0.5 && at.x + item.width <= area.width + 0.5
        }

        function test_a_narrow_answer_shows_all_of_its_statistics() {
            // About as wide as the chat column of the smallest window (640 px, the conversations
            // beside it): the statistics wrap rather than run past the edge, "stopped" included.
            const message = createTemporaryObject(messageComponent, root, {
                width: 300, messageState: MessageListModel.Stopped,
                stats: "22.2 tokens/s · 1963 ms to first token · 134 tokens"
            })
            const label = findChild(message, "statsLabel")
            verify(label.text.indexOf("stopped") > 0, label.text)
            waitForRendering(message)
            verify(insideWidth(message, label), "x " + label.mapToItem(message, 0, 0).x + " width " + label.width
                   + " of " + message.width)
            // Its lines are all shown, not drawn over the actions beside or below it.
            verify(label.height >= label.implicitHeight, label.height + " < " + label.implicitHeight)
        }

        // Stopped before its first token: no text and no figures. The answer says how it ended
        // instead of an empty bubble; with text but no figures (a server that sent no usage),
        // the statistics line still says "stopped".
        function test_an_answer_stopped_before_any_text_says_so() {
            const message = createTemporaryObject(messageComponent, root, {
                messageState: MessageListModel.Stopped, stats: "", content: "", blocks: noBlocks
            })
            const note = findChild(message, "emptyAnswer")
            verify(note.visible)
            compare(note.text, "Stopped before any text came.")
            waitForRendering(message)
            verify(note.height > 0)
            message.messageState = MessageListModel.Interrupted
            compare(note.text, "Interrupted before any text came.")
            message.messageState = MessageListModel.Complete
            compare(note.text, "")
            message.messageState = MessageListModel.Streaming
            compare(note.text, "…")

            const partial = createTemporaryObject(messageComponent, root, {
                messageState: MessageListModel.Stopped, stats: "", content: "Once upon"
            })
            const label = findChild(partial, "statsLabel")
            verify(label.visible)
            compare(label.text, "stopped")
            partial.stats = "10.0 tokens/s · 5 ms to first token · 3 tokens"
            compare(label.text, "10.0 tokens/s · 5 ms to first token · 3 tokens · stopped")
            partial.messageState = MessageListModel.Complete
            compare(label.text, "10.0 tokens/s · 5 ms to first token · 3 tokens")
            partial.stats = ""
            verify(!label.visible)
        }

        // An imported answer that only called tools (OpenAI's null content with tool_calls)
        // shows the calls, not an empty bubble; the app's own answers call none.
        function test_an_answer_that_called_tools_shows_them() {
            const message = createTemporaryObject(messageComponent, root, {
                content: "", blocks: noBlocks, stats: "",
                toolCalls: "Called get_weather({\"city\": \"Paris\"})\nCalled get_time({})"
            })
            const note = findChild(message, "toolCallsNote")
            verify(note.visible)
            compare(note.text, "Called get_weather({\"city\": \"Paris\"})\nCalled get_time({})")
            compare(note.Accessible.name, note.text)
            waitForRendering(message)
            verify(note.height > 0)
            const plain = createTemporaryObject(messageComponent, root)
            verify(!findChild(plain, "toolCallsNote").visible)
        }

        // At the smallest window the GPU dashboard does not fit beside the conversations and
        // the chat: it folds away and the toggle says so ("Show GPUs"); shown, it takes the
        // conversation list's place at no less than its minimum width. Wide again, both show.
        function test_the_gpu_dashboard_is_shown_or_hidden_honestly_in_a_narrow_window() {
            const component = Qt.createComponent("qrc:/Powerhouse/Main.qml")
            verify(component.status === Component.Ready, component.errorString())
            const window = createTemporaryObject(component, null, {
                controller: testController, dashboard: testDashboard, settings: testSettings, library: testLibrary,
                downloads: testDownloads, width: 640, height: 420
            })
            tryVerify(() => window.visible)
            const dashboard = findChild(window.contentItem, "gpuDashboard")
            const conversations = findChild(window.contentItem, "conversationsPanel")
            const toggle = findChild(window.header, "dashboardButton")
            verify(dashboard && conversations && toggle)
            // Folded: not a sliver at the window's edge (the rest cut off) that the toggle calls shown.
            const right = () => dashboard.mapToItem(window.contentItem, 0, 0).x + dashboard.width
            wait(100)  // (the split's layout)
            verify(!dashboard.visible, "dashboard at x " + dashboard.x + ", " + dashboard.width + " px wide")
            compare(toggle.text, "Show GPUs")
            verify(conversations.visible)
            verify(toggle.Accessible.name.indexOf("too narrow") > 0, toggle.Accessible.name)
            // Shown: in the conversations' place, whole.
            mouseClick(toggle)
            tryVerify(() => dashboard.visible && dashboard.width >= 220, 2000, "dashboard " + dashboard.width + " px wide")
            verify(!conversations.visible)
            compare(toggle.text, "Hide GPUs")
            tryVerify(() => right() <= window.width + 0.5, 2000, "ends at " + right() + " of " + window.width)
            mouseClick(toggle)
            tryVerify(() => !dashboard.visible && conversations.visible)
            compare(toggle.text, "Show GPUs")
            // Wide: the dashboard beside the conversations, as the wide window's choice says.
            window.width = 1180
            tryVerify(() => dashboard.visible && dashboard.width >= 220 && conversations.visible)
            compare(toggle.text, "Hide GPUs")
            mouseClick(toggle)
            tryVerify(() => !dashboard.visible)
            compare(toggle.text, "Show GPUs")
            window.width = 640
            verify(!dashboard.visible)
        }

        function test_dashboard_and_settings_fit_from_the_smallest_window_to_4k() {
            tryVerify(() => testDashboard.gpus.count === 2 && testPower.gpus.length === 2)
            // The dashboard at its narrowest (SplitView.minimumWidth in Main.qml) in the smallest
            // window, and a wide one at 4K.
            for (const size of [[640, 420, 220], [3840, 2160, 700]]) {
                root.width = size[0]
                root.height = size[1]
                const dashboard = createTemporaryObject(powerDashboardComponent, root, {width: size[2]})
                const cards = visibleItems(dashboard).filter(c => c instanceof GpuCard)
                compare(cards.length, 2)
                // Open the first card's power limit: its slider and field must fit too.
                const toggle = visibleItems(cards[0]).filter(c => c.objectName === "powerLimitToggle")[0]
                toggle.toggle()
                toggle.toggled()
                tryVerify(() => visibleItems(cards[0]).some(c => c.objectName === "powerLimitField"))
                // (after the layouts' next polish)
                for (const item of visibleItems(cards[0]).filter(c => c instanceof PowerLimitControl))
                    waitForItemPolished(item)
                waitForRendering(dashboard)
                for (const card of cards) {
                    verify(insideWidth(dashboard, card), "card at " + size)
                    for (const item of visibleItems(card)) {
                        if (item.width > 0 && (item.objectName.length > 0 || item.text !== undefined))
                            verify(insideWidth(card, item), (item.objectName || item.text) + " leaves its card at " + size
                                   + ": x " + item.mapToItem(card, 0, 0).x + " width " + item.width + " of " + card.width)
                    }
                }
                for (const name of ["keepPowerLimits", "sourceNote"]) {
                    const item = visibleItems(dashboard).filter(c => c.objectName === name)[0]
                    verify(item && insideWidth(dashboard, item), name + " at " + size)
                }

                // The settings: the dialog inside the window, its rows inside the dialog, on
                // the GPUs and General tabs.
                const dialog = createTemporaryObject(powerSettingsComponent, root)
                dialog.open()
                tryVerify(() => dialog.opened)
                verify(dialog.width <= root.width && dialog.height <= root.height,
                       "dialog " + dialog.width + "x" + dialog.height + " in " + size)
                const at = dialog.contentItem.mapToItem(root, 0, 0)
                verify(at.x >= 0 && at.y >= 0, "dialog at " + at.x + "," + at.y)
                for (const tab of [0, 1]) {
                    dialog.tab = tab
                    waitForItemPolished(dialog.contentItem)
                    const names = tab === 0 ? ["gpuCard0", "gpuCard1", "useGpu0", "useGpu1", "settingsPowerLimit0",
                                               "splitMode", "expertsInRam", "planPreview"]
                                            : ["kvCacheTokens", "maxSequences", "recoveryPolicy", "theme"]
                    for (const name of names) {
                        const item = findChild(dialog.contentItem, name)
                        verify(item && item.visible, name)
                        verify(insideWidth(dialog.contentItem, item), name + " leaves the dialog at " + size + ": x "
                               + item.mapToItem(dialog.contentItem, 0, 0).x + " width " + item.width + " of " + dialog.contentItem.width)
                    }
                }
                for (const button of visibleItems(dialog.footer).filter(c => c instanceof Button))
                    verify(insideWidth(dialog.footer, button), button.text + " at " + size)
                dialog.reject()
                tryVerify(() => !dialog.visible)
            }
            root.width = 1000
            root.height = 700
        }
    }
}
