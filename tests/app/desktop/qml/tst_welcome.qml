// The welcome view (the first run) on the real WelcomeController, planned on the two
// simulated RTX 4090s of testSettings: the machine is described, and the recommended models
// are the planner's answers for these GPUs.
import QtQuick
import QtQuick.Controls
import QtTest
import Powerhouse

Item {
    id: root
    width: 900
    height: 1400

    Component {
        id: welcomeComponent
        WelcomeView {
            anchors.fill: parent
            welcome: testWelcome
            downloads: testDownloads
        }
    }

    // Items whose objectName is `prefix` followed by digits (or `prefix` itself), each once.
    function findAll(item, prefix, out) {
        if (item.objectName && new RegExp("^" + prefix + "\\d*$").test(item.objectName) && out.indexOf(item) < 0)
            out.push(item)
        for (let i = 0; i < item.children.length; ++i)
            findAll(item.children[i], prefix, out)
        if (item.contentItem && item.contentItem !== item)
            findAll(item.contentItem, prefix, out)
        return out
    }

    TestCase {
        name: "Welcome"
        when: windowShown

        function test_the_machine_and_its_suggestions_come_from_the_planner() {
            const view = createTemporaryObject(welcomeComponent, root)
            verify(view)
            testWelcome.active = true  // as Main.qml does while the view shows
            // The dashboard reports the simulated GPUs; the welcome view plans once they are known.
            tryVerify(() => testWelcome.gpus.length === 2, 10000)
            testWelcome.refresh()
            tryVerify(() => !testWelcome.planning, 20000)
            compare(testWelcome.gpus[0], "RTX 4090 · 24 GiB")
            verify(testWelcome.memory.indexOf("GiB of RAM free") > 0, testWelcome.memory)

            const cards = findAll(view, "suggestion", []).filter(c => c.visible)
            compare(cards.length, 4)  // at most four recommended
            for (const card of cards) {
                verify(card.tokensPerSecond >= 8, card.name)
                verify(card.placement === SuggestionListModel.Gpu || card.placement === SuggestionListModel.Split,
                       card.name + ": " + card.where)
            }
            // The most capable first: a 70B split over both GPUs.
            compare(cards[0].name, "Llama 3.3 70B Instruct")
            compare(cards[0].where, "split over 2 GPUs")
            compare(cards[0].download, SuggestionListModel.Available)
            const where = findAll(cards[0], "where", [])[0]
            verify(where.text.indexOf("tokens/s") > 0, where.text)
        }
    }
}
