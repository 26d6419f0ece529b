// Find models on Hugging Face (the Models page's second tab): search GGUF repositories by
// name (gated ones marked), open one to see its models by quantization with their size and a
// fit estimate, which "Exact fit" replaces with the planner's answer from the file's header,
// and download one into the library (every part, each checked against the sha256 the Hub
// lists).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

ColumnLayout {
    id: root

    required property HubController hub

    spacing: Theme.space3

    function formatCount(n: real): string {
        return n >= 1e6 ? (n / 1e6).toFixed(1) + " M" : n >= 1e3 ? Math.round(n / 1e3) + " k" : "" + n
    }

    RowLayout {
        Layout.fillWidth: true
        spacing: Theme.space2
        TextField {
            id: query
            objectName: "hubQuery"
            Layout.fillWidth: true
            placeholderText: "Search Hugging Face for GGUF models (qwen3, llama 3.3, gemma…)"
            Accessible.name: "Search Hugging Face"
            onAccepted: root.hub.search(text.trim())
        }
        Button {
            objectName: "hubSearch"
            text: "Search"
            icon.name: "edit-find-symbolic"
            icon.color: Theme.text
            enabled: query.text.trim().length > 0
            onClicked: root.hub.search(query.text.trim())
        }
    }

    Label {
        objectName: "hubError"
        visible: root.hub.error.length > 0 || root.hub.message.length > 0
        text: root.hub.error.length > 0 ? root.hub.error : root.hub.message
        color: root.hub.error.length > 0 ? Theme.error : Theme.textMuted
        wrapMode: Text.Wrap
        Layout.fillWidth: true
    }

    // Results on the left, the chosen repository's models on the right; stacked when narrow.
    GridLayout {
        Layout.fillWidth: true
        Layout.fillHeight: true
        columns: root.width > 760 ? 2 : 1
        columnSpacing: Theme.space4
        rowSpacing: Theme.space4

        ListView {
            id: results
            objectName: "hubResults"
            Layout.fillWidth: true
            Layout.fillHeight: true
            Layout.preferredWidth: 1
            Layout.minimumHeight: 160
            clip: true
            spacing: Theme.space1
            model: root.hub.results
            ScrollBar.vertical: ScrollBar {}

            BusyIndicator {
                anchors.centerIn: parent
                running: root.hub.searching
                visible: running
            }
            Label {
                anchors.centerIn: parent
                width: parent.width * 0.8
                visible: results.count === 0 && !root.hub.searching
                text: "Search by a model's name; only repositories with GGUF files are listed."
                color: Theme.textMuted
                horizontalAlignment: Text.AlignHCenter
                wrapMode: Text.Wrap
            }

            delegate: ItemDelegate {
                id: result
                required property int index
                required property string repoId
                required property int downloads
                required property int likes
                required property string updated
                required property string gated
                objectName: "hubResult" + index
                width: ListView.view.width
                highlighted: root.hub.repository === repoId
                Accessible.name: repoId
                onClicked: root.hub.showFiles(repoId)
                background: Rectangle {
                    radius: Theme.radiusSmall
                    color: result.highlighted ? Theme.selection : result.hovered ? Theme.surfaceHover : Theme.surface
                    border.color: Theme.border
                }
                contentItem: ColumnLayout {
                    spacing: 2
                    RowLayout {
                        spacing: Theme.space2
                        Layout.fillWidth: true
                        Label {
                            text: result.repoId
                            color: Theme.text
                            font.weight: Font.DemiBold
                            elide: Text.ElideMiddle
                            Layout.fillWidth: true
                        }
                        Chip {
                            objectName: "hubGated" + result.index
                            visible: result.gated.length > 0
                            text: "gated"
                            Accessible.name: "Gated: accept its terms on Hugging Face and add your token in Settings"
                        }
                    }
                    Label {
                        text: root.formatCount(result.downloads) + " downloads · " + root.formatCount(result.likes)
                              + " likes · updated " + result.updated
                              + (result.gated.length > 0 ? " · gated: needs your Hugging Face token" : "")
                        color: result.gated.length > 0 ? Theme.warning : Theme.textMuted
                        font.pixelSize: Theme.captionSize
                        elide: Text.ElideRight
                        Layout.fillWidth: true
                    }
                }
            }
        }

        ListView {
            id: files
            objectName: "hubFiles"
            Layout.fillWidth: true
            Layout.fillHeight: true
            Layout.preferredWidth: 1
            Layout.minimumHeight: 160
            clip: true
            spacing: Theme.space1
            model: root.hub.files
            ScrollBar.vertical: ScrollBar {}
            // The repository's name, with room under it; no height without one. The label sits
            // in an item sized from it: a label whose own height is bound to its implicit
            // height is a binding loop.
            header: Item {
                width: files.width
                height: repositoryName.visible ? repositoryName.implicitHeight + Theme.space2 : 0
                Label {
                    id: repositoryName
                    objectName: "hubRepositoryName"
                    width: parent.width
                    visible: root.hub.repository.length > 0
                    text: root.hub.repository
                    color: Theme.text
                    font.pixelSize: Theme.subtitleSize
                    font.weight: Font.DemiBold
                    elide: Text.ElideMiddle
                }
            }
            BusyIndicator {
                anchors.centerIn: parent
                running: root.hub.listing
                visible: running
            }

            delegate: Rectangle {
                id: file
                required property int index
                required property string quantization
                required property string name
                required property string sizeText
                required property int parts
                required property bool complete
                required property bool fits
                required property string fit
                required property bool estimate
                required property bool checking
                objectName: "hubFile" + index
                width: ListView.view.width
                implicitHeight: fileRow.implicitHeight + 2 * Theme.space2
                radius: Theme.radiusSmall
                color: Theme.surface
                border.color: Theme.border

                RowLayout {
                    id: fileRow
                    anchors.fill: parent
                    anchors.margins: Theme.space2
                    spacing: Theme.space2
                    ColumnLayout {
                        Layout.fillWidth: true
                        spacing: 2
                        RowLayout {
                            spacing: Theme.space2
                            Chip { text: file.quantization.length > 0 ? file.quantization : "?" }
                            Label {
                                text: file.sizeText + (file.parts > 1 ? " in " + file.parts + " parts" : "")
                                color: Theme.text
                            }
                        }
                        Label {
                            text: file.name
                            color: Theme.textMuted
                            font.pixelSize: Theme.captionSize
                            elide: Text.ElideMiddle
                            Layout.fillWidth: true
                        }
                        Label {
                            objectName: "hubFit" + file.index
                            text: !file.complete ? "Parts are missing from the repository."
                                  : file.checking ? "Reading the file's header…" : file.fit
                            color: file.complete && file.fits ? Theme.success : Theme.warning
                            font.pixelSize: Theme.captionSize
                            wrapMode: Text.Wrap
                            Layout.fillWidth: true
                        }
                    }
                    Button {
                        objectName: "hubCheckFit" + file.index
                        text: "Exact fit"
                        visible: file.complete && file.estimate
                        enabled: !file.checking
                        Accessible.name: "Plan " + file.name + " from its header"
                        ToolTip.visible: hovered
                        ToolTip.text: "Reads the model's header (a few MiB) from Hugging Face and plans it on your devices, as the Models page does for a downloaded file."
                        onClicked: root.hub.checkFit(file.index)
                    }
                    Button {
                        objectName: "hubDownload" + file.index
                        text: "Download"
                        icon.name: "folder-download-symbolic"
                        icon.color: Theme.text
                        enabled: file.complete
                        Accessible.name: "Download " + file.name
                        onClicked: root.hub.download(root.hub.repository, file.index)
                    }
                }
            }
        }
    }
}
