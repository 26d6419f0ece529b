// The dashboard's remote machines (testRemote of desktop_qml_test.cpp: the DCGM exporter's
// and vLLM's sample files read twice, and a source that failed): a header per host, the same
// GPU cards as local GPUs with the exporter's values, the engine's figures, the error line.
import QtQuick
import QtQuick.Controls
import QtTest
import Powerhouse

Item {
    id: root
    width: 400
    height: 2400

    Component {
        id: dashboardComponent
        GpuDashboard {
            width: 380
            height: 2400
            dashboard: testDashboard
            remote: testRemote
        }
    }

    TestCase {
        name: "RemoteDashboard"
        when: windowShown

        // Every item under `item` (children, Repeater delegates included), depth first.
        function all(item, out) {
            out = out || []
            for (let i = 0; i < item.children.length; ++i) {
                out.push(item.children[i])
                all(item.children[i], out)
            }
            return out
        }
        function texts(item) {
            return all(item).filter(c => c.visible && typeof c.text === "string" && c.text.length > 0).map(c => c.text)
        }
        function named(item, name) {
            return all(item).filter(c => c.objectName === name)
        }

        function test_remote_hosts_render_grouped_cards_and_figures() {
            const dashboard = createTemporaryObject(dashboardComponent, root)
            verify(dashboard)
            compare(testRemote.count, 3)
            let hosts = []
            tryVerify(() => { hosts = named(dashboard, "remoteHost"); return hosts.length === 3 })

            // The DCGM exporter's host: its title, two cards with the exporter's readings.
            const dcgm = texts(hosts[0])
            verify(dcgm[0].indexOf("gpu-node-1 · DCGM exporter at http://10.0.0.9:9400/metrics") === 0, dcgm[0])
            const cards = all(hosts[0]).filter(c => c instanceof GpuCard)
            compare(cards.length, 2)
            compare(cards[0].name, "NVIDIA H100 80GB HBM3")
            compare(cards[0].load, 97)
            compare(cards[0].loadHistory.length, 2)
            const card = texts(cards[0]).join("\n")
            verify(card.indexOf("97 %") >= 0, card)
            verify(card.indexOf("61 °C") >= 0, card)
            verify(card.indexOf("76.1 GiB / 79.2 GiB") >= 0, card)  // FB_USED 77972 MiB of 81079
            verify(card.indexOf("512 W") >= 0, card)
            verify(card.indexOf("SIMULATED") < 0, card)
            compare(named(hosts[0], "remoteError")[0].visible, false)

            // vLLM: no GPU cards, the engine's figures.
            const vllm = texts(hosts[1])
            verify(vllm[0].indexOf("10.0.0.7 · vLLM at http://10.0.0.7:8000/metrics") === 0, vllm[0])
            compare(all(hosts[1]).filter(c => c instanceof GpuCard).length, 0)
            const engine = named(hosts[1], "remoteEngine")
            compare(engine.length, 1)
            compare(engine[0].text, "vLLM serving meta-llama/Llama-3.1-70B-Instruct: 8 running · 2 waiting · KV cache 38 % · 0.0 tokens/s")

            // The failed source: its error, once.
            const down = named(hosts[2], "remoteError")
            compare(down.length, 1)
            verify(down[0].visible)
            compare(down[0].text, "could not connect to 10.0.0.8:9400: connection refused")
            verify(texts(hosts[2])[0].indexOf("10.0.0.8 · http://10.0.0.8:9400/metrics") === 0)
        }
    }
}
