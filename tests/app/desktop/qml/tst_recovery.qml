// A device failing under the model, as the views show it (issue 23), on the real controllers
// of desktop_qml_test.cpp with testRecovery standing in for the engine and the GPU monitor:
// the chat's banner through each phase (busy, then the engine's words, then the way to other
// devices), kept while conversations are switched and gone when dismissed; the note under an
// answer that went on elsewhere; a failed GPU's card and its row in the settings, which cannot
// be ticked again; the "When a GPU fails" setting. The functions run in name order.
import QtQuick
import QtQuick.Controls
import QtTest
import Powerhouse

Item {
    id: root
    width: 1200
    height: 760

    ChatView {
        id: chat
        controller: testController
        width: 860
        height: parent.height
    }
    GpuDashboard {
        id: dashboard
        dashboard: testDashboard
        x: 880
        width: 320
        height: parent.height
    }
    SignalSpy {
        id: openSettings
        target: chat
        signalName: "openSettings"
    }
    Component {
        id: settingsComponent
        SettingsDialog {
            settings: testSettings
        }
    }
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
            stats: "10.0 tokens/s · 5 ms to first token · 40 tokens"
            error: ""
            recovery: "Continued on CPU (8 threads) after GPU 1 failed at token 37: Xid 79, fell off the bus"
            toolCalls: ""
            content: "The whole answer."
            reasoning: ""
            blocks: ListModel {
                ListElement { kind: MessageBlocksModel.Text; text: "The whole answer."; language: ""; closed: true }
            }
        }
    }

    TestCase {
        name: "Recovery"
        when: windowShown

        readonly property string fault: "GPU 1 stopped answering: Xid 79, fell off the bus."

        // Every item under `item`, depth first.
        function all(item, out) {
            out = out || []
            for (let i = 0; i < item.children.length; ++i) {
                out.push(item.children[i])
                all(item.children[i], out)
            }
            return out
        }

        function banner() {
            return findChild(chat, "recoveryBanner")
        }

        function test_1_while_the_model_is_loaded_again_the_banner_is_busy() {
            verify(!banner().visible, "no banner before anything failed")
            testRecovery.announce(0, fault + " Loading the model again on cuda:GPU-0.", "")
            verify(banner().visible)
            compare(testController.recovery, ChatController.Reloading)
            verify(findChild(banner(), "recoveryBusy").visible)
            verify(findChild(banner(), "recoveryBusy").running)
            verify(!findChild(banner(), "recoveryIcon").visible)
            compare(findChild(banner(), "recoveryText").text, fault + " Loading the model again on cuda:GPU-0.")
            verify(!findChild(banner(), "recoverySettings").visible)
            compare(banner().color, Theme.accentSoft)
        }

        function test_2_once_it_answers_again_the_banner_says_where_and_how_fast() {
            const words = fault + " Continuing on GPU 0 and RAM, at about 24 tokens/s."
            testRecovery.announce(1, words, "GPU 0 and RAM")
            compare(testController.recovery, ChatController.Recovered)
            compare(findChild(banner(), "recoveryText").text, words)
            verify(!findChild(banner(), "recoveryBusy").visible)
            const icon = findChild(banner(), "recoveryIcon")
            verify(icon.visible)
            compare(banner().iconName, "dialog-warning-symbolic")
            compare(icon.color, Theme.warning)
            compare(banner().color, Theme.warningSoft)
            // The model bar's device follows the model.
            compare(testController.modelDevice, "GPU 0 and RAM")
            verify(banner().Accessible.name.indexOf(words) >= 0, banner().Accessible.name)
            // The text wraps inside the chat's width, and the messages start below the banner.
            verify(findChild(banner(), "recoveryText").width <= chat.width)
            const list = findChild(chat, "messageList")
            // (after the layout's next polish)
            tryVerify(() => list.mapToItem(null, 0, 0).y >= banner().mapToItem(null, 0, banner().height).y - 1)
        }

        function test_3_switching_conversations_keeps_it_until_dismissed() {
            testController.newConversation()
            verify(banner().visible)
            compare(testController.recovery, ChatController.Recovered)
            mouseClick(findChild(banner(), "recoveryDismiss"))
            verify(!banner().visible)
            compare(testController.recovery, ChatController.None)
            compare(testController.recoveryText, "")
        }

        function test_4_when_it_cannot_go_on_the_banner_leads_to_the_settings() {
            testRecovery.announce(2, fault + " The model could not be loaded again on cpu: out of memory", "")
            compare(testController.recovery, ChatController.Failed)
            compare(testController.modelState, ChatController.Failed)
            verify(banner().visible)
            compare(banner().color, Theme.errorBackground)
            compare(banner().iconName, "dialog-error-symbolic")
            compare(findChild(banner(), "recoveryIcon").color, Theme.error)
            verify(testController.recoveryText.indexOf("Choose other devices in Settings") > 0,
                   testController.recoveryText)
            const choose = findChild(banner(), "recoverySettings")
            verify(choose.visible)
            // The banner has just grown: click where the layout puts the button, once it has.
            waitForItemPolished(choose.parent)
            waitForRendering(banner())
            mouseClick(choose)
            compare(openSettings.count, 1)
            testController.dismissRecovery()
        }

        function test_5_an_answer_that_went_on_elsewhere_says_so_under_it() {
            const answer = createTemporaryObject(answerComponent, root)
            const note = findChild(answer, "recoveryNote")
            verify(note.visible)
            compare(findChild(answer, "recoveryNoteText").text,
                    "Continued on CPU (8 threads) after GPU 1 failed at token 37: Xid 79, fell off the bus")
            answer.recovery = ""
            verify(!note.visible, "answers no failure touched have no note")
        }

        function test_6_a_failed_gpu_is_marked_and_cannot_be_ticked_again() {
            const uuid = testSettings.gpus[1].uuid
            const why = "GPU 1 stopped answering: Xid 79, fell off the bus"
            testRecovery.failGpu(uuid, why)
            // Its card on the dashboard, and only its.
            const cards = all(dashboard).filter(c => c instanceof GpuCard)
            compare(cards.length, 2)
            verify(cards[1].failed)
            verify(!cards[0].failed)
            compare(cards[1].Accessible.name, "GPU RTX 4090, failed: " + why)
            verify(findChild(cards[1], "failedChip").visible)
            verify(!findChild(cards[0], "failedChip").visible)
            const text = findChild(cards[1], "failureText")
            verify(text.visible)
            compare(text.text, why + ". Nothing runs on it until Powerhouse restarts.")
            // Its row in the settings: unticked, with why, and not to be ticked.
            const dialog = createTemporaryObject(settingsComponent, root)
            dialog.open()
            tryVerify(() => dialog.opened)
            const use1 = findChild(dialog.contentItem, "useGpu1")
            verify(!use1.checked)
            verify(!use1.enabled)
            const failure = findChild(dialog.contentItem, "gpuFailure1")
            verify(failure.visible)
            compare(failure.text, why + ". Not used until Powerhouse restarts.")
            verify(findChild(dialog.contentItem, "useGpu0").enabled)
            testSettings.setGpuUse(1, true)
            verify(!testSettings.gpus[1].use)
            const preview = findChild(dialog.contentItem, "planPreview")
            verify(preview.text.indexOf("GPU 1") < 0, preview.text)
            dialog.reject()
        }

        function test_7_what_to_do_when_a_gpu_fails_is_a_setting() {
            const dialog = createTemporaryObject(settingsComponent, root)
            dialog.open()
            dialog.tab = 1
            tryVerify(() => dialog.opened)
            const policy = findChild(dialog.contentItem, "recoveryPolicy")
            compare(policy.currentText, "Continue on the other devices")
            policy.currentIndex = 2
            policy.activated(2)
            compare(testSettings.recoveryPolicy, "stop")
            dialog.reject()
            compare(testSettings.recoveryPolicy, "replan", "Close forgets what was not applied")
        }
    }
}
