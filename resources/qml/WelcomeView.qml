// The first run: with no model loaded, this machine (its GPUs and RAM) and a few models
// that fit it well, planned by the planner on these GPUs, each one click from downloading
// and loading; models already on disk are one click away on the Models page.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Powerhouse

Rectangle {
    id: root

    required property WelcomeController welcome
    property DownloadController downloads: null
    // The user's models (other apps' downloads included), offered first; null: none shown.
    property LibraryController library: null
    readonly property int libraryCount: library ? library.models.count : 0

    signal openModels()

    color: Theme.background

    ScrollView {
        id: scroll
        anchors.fill: parent
        contentWidth: availableWidth

        ColumnLayout {
            id: column
            width: Math.min(scroll.availableWidth - 2 * Theme.space6, Theme.readableWidth)
            x: (scroll.availableWidth - width) / 2
            spacing: Theme.space4

            Item { Layout.preferredHeight: Theme.space6 }

            Label {
                text: "Welcome to Powerhouse"
                color: Theme.text
                font.pixelSize: Theme.headlineSize
                font.weight: Font.DemiBold
                Accessible.role: Accessible.Heading
            }
            Label {
                text: "Run language models on this machine's GPUs. Pick one that fits, or use the models you already have."
                color: Theme.textMuted
                font.pixelSize: Theme.subtitleSize
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }

            // This machine.
            Rectangle {
                objectName: "machineCard"
                Layout.fillWidth: true
                implicitHeight: machine.implicitHeight + 2 * Theme.space4
                radius: Theme.radiusLarge
                color: Theme.surface
                border.color: Theme.border

                ColumnLayout {
                    id: machine
                    anchors.fill: parent
                    anchors.margins: Theme.space4
                    spacing: Theme.space2
                    Label {
                        text: "This machine"
                        color: Theme.textMuted
                        font.pixelSize: Theme.captionSize
                        font.capitalization: Font.AllUppercase
                        font.letterSpacing: 0.6
                    }
                    Repeater {
                        model: root.welcome.gpus
                        delegate: RowLayout {
                            required property string modelData
                            required property int index
                            spacing: Theme.space2
                            Rectangle {
                                implicitWidth: 8
                                implicitHeight: 8
                                radius: 4
                                color: Theme.success
                            }
                            Label {
                                text: "GPU " + index + "  " + modelData
                                color: Theme.text
                                font.pixelSize: Theme.bodySize
                            }
                        }
                    }
                    Label {
                        visible: root.welcome.gpus.length === 0
                        text: "No NVIDIA GPU found: models run on the CPU, so small ones are suggested."
                        color: Theme.textMuted
                        wrapMode: Text.Wrap
                        Layout.fillWidth: true
                    }
                    Label {
                        objectName: "memoryLabel"
                        text: root.welcome.memory
                        color: Theme.textMuted
                    }
                }
            }

            // Models already on this machine: one click to load.
            Label {
                visible: usableRepeater.usable > 0 || root.welcome.starterPath.length > 0
                text: "Ready to load"
                color: Theme.text
                font.pixelSize: Theme.titleSize
                font.weight: Font.DemiBold
                Layout.topMargin: Theme.space2
            }
            Repeater {
                id: usableRepeater
                // How many of the user's models can be loaded (at most four are shown).
                property int usable: 0
                model: root.library ? root.library.models : null
                onItemAdded: usable = countUsable()
                onItemRemoved: usable = countUsable()
                function countUsable() {
                    let n = 0
                    for (let i = 0; i < count; ++i)
                        if (itemAt(i) && itemAt(i).usable) ++n
                    return n
                }
                delegate: Rectangle {
                    id: mine
                    required property int index
                    required property string path
                    required property string name
                    required property string source
                    required property bool usable
                    required property bool fits
                    required property string fit
                    objectName: "libraryModel" + index
                    visible: usable && index < 4
                    Layout.fillWidth: true
                    implicitHeight: visible ? mineRow.implicitHeight + 2 * Theme.space3 : 0
                    radius: Theme.radius
                    color: Theme.surface
                    border.color: Theme.border
                    RowLayout {
                        id: mineRow
                        anchors.fill: parent
                        anchors.margins: Theme.space3
                        anchors.leftMargin: Theme.space4
                        spacing: Theme.space3
                        ColumnLayout {
                            Layout.fillWidth: true
                            spacing: 2
                            Label {
                                text: mine.name
                                color: Theme.text
                                font.weight: Font.DemiBold
                                elide: Text.ElideRight
                                Layout.fillWidth: true
                            }
                            Label {
                                text: (mine.source.length > 0 ? mine.source + " · " : "") + mine.fit.split("\n")[0]
                                color: mine.fits ? Theme.textMuted : Theme.warning
                                font.pixelSize: Theme.captionSize
                                elide: Text.ElideRight
                                Layout.fillWidth: true
                            }
                        }
                        Button {
                            text: "Load"
                            icon.name: "media-playback-start-symbolic"
                            icon.color: Theme.text
                            Accessible.name: "Load " + mine.name
                            onClicked: root.library.load(mine.path)
                        }
                    }
                }
            }
            Rectangle {
                objectName: "starterModel"
                visible: root.welcome.starterPath.length > 0
                Layout.fillWidth: true
                implicitHeight: visible ? starterRow.implicitHeight + 2 * Theme.space3 : 0
                radius: Theme.radius
                color: Theme.surface
                border.color: Theme.border
                RowLayout {
                    id: starterRow
                    anchors.fill: parent
                    anchors.margins: Theme.space3
                    anchors.leftMargin: Theme.space4
                    spacing: Theme.space3
                    ColumnLayout {
                        Layout.fillWidth: true
                        spacing: 2
                        Label {
                            text: root.welcome.starterName
                            color: Theme.text
                            font.weight: Font.DemiBold
                            elide: Text.ElideRight
                            Layout.fillWidth: true
                        }
                        Label {
                            text: "Tiny and already downloaded: a first look in seconds, not a model for real work."
                            color: Theme.textMuted
                            font.pixelSize: Theme.captionSize
                            wrapMode: Text.Wrap
                            Layout.fillWidth: true
                        }
                    }
                    Button {
                        objectName: "loadStarter"
                        text: "Try it"
                        icon.name: "media-playback-start-symbolic"
                        icon.color: Theme.text
                        onClicked: root.welcome.loadStarter()
                    }
                }
            }

            RowLayout {
                Layout.fillWidth: true
                Layout.topMargin: Theme.space2
                Label {
                    text: "Suggested for this machine"
                    color: Theme.text
                    font.pixelSize: Theme.titleSize
                    font.weight: Font.DemiBold
                    Layout.fillWidth: true
                }
                BusyIndicator {
                    running: root.welcome.planning
                    visible: running
                    implicitWidth: 24
                    implicitHeight: 24
                }
            }

            Repeater {
                objectName: "suggestions"
                model: root.welcome.suggestions
                delegate: Rectangle {
                    id: card
                    required property int index
                    required property string name
                    required property string summary
                    required property string repo
                    required property string quantization
                    required property string size
                    required property string where
                    required property int placement
                    required property real tokensPerSecond
                    required property bool recommended
                    required property int download
                    objectName: "suggestion" + index
                    visible: recommended
                    Layout.fillWidth: true
                    implicitHeight: visible ? cardRow.implicitHeight + 2 * Theme.space4 : 0
                    radius: Theme.radiusLarge
                    color: hover.hovered ? Theme.surfaceHover : Theme.surface
                    border.color: Theme.border

                    HoverHandler { id: hover }

                    RowLayout {
                        id: cardRow
                        anchors.fill: parent
                        anchors.margins: Theme.space4
                        spacing: Theme.space4

                        ColumnLayout {
                            Layout.fillWidth: true
                            spacing: Theme.space1
                            RowLayout {
                                spacing: Theme.space2
                                Label {
                                    text: card.name
                                    color: Theme.text
                                    font.pixelSize: Theme.subtitleSize
                                    font.weight: Font.DemiBold
                                }
                                Chip { text: card.quantization }
                                Chip { text: card.size }
                            }
                            Label {
                                text: card.summary
                                color: Theme.textMuted
                                wrapMode: Text.Wrap
                                Layout.fillWidth: true
                            }
                            Label {
                                objectName: "where"
                                text: card.where + " · about " + Math.round(card.tokensPerSecond) + " tokens/s"
                                color: card.placement === SuggestionListModel.Cpu ? Theme.warning : Theme.success
                                font.pixelSize: Theme.captionSize
                                wrapMode: Text.Wrap
                                Layout.fillWidth: true
                            }
                            Label {
                                text: card.repo
                                color: Theme.textFaint
                                font.pixelSize: Theme.captionSize
                                elide: Text.ElideMiddle
                                Layout.fillWidth: true
                            }
                        }
                        Button {
                            objectName: "downloadSuggestion" + card.index
                            text: card.download === SuggestionListModel.Available ? "Download and load"
                                : card.download === SuggestionListModel.Downloading ? "Downloading…" : "Loaded"
                            enabled: card.download === SuggestionListModel.Available
                            highlighted: true
                            icon.name: "folder-download-symbolic"
                            Accessible.name: "Download and load " + card.name
                            onClicked: root.welcome.download(card.index)
                        }
                    }
                }
            }

            Label {
                visible: root.welcome.message.length > 0
                text: root.welcome.message
                color: Theme.textMuted
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }

            // Downloads in progress, as on the Models page.
            Repeater {
                model: root.downloads
                delegate: ColumnLayout {
                    required property string name
                    required property real progress
                    required property string status
                    Layout.fillWidth: true
                    spacing: Theme.space1
                    Label {
                        text: name + " · " + status
                        color: Theme.textMuted
                        font.pixelSize: Theme.captionSize
                        elide: Text.ElideMiddle
                        Layout.fillWidth: true
                    }
                    ProgressBar {
                        Layout.fillWidth: true
                        indeterminate: progress < 0
                        value: Math.max(0, progress)
                    }
                }
            }

            Rectangle {
                Layout.fillWidth: true
                Layout.topMargin: Theme.space2
                implicitHeight: other.implicitHeight + 2 * Theme.space4
                radius: Theme.radiusLarge
                color: Theme.surfaceSunken

                RowLayout {
                    id: other
                    anchors.fill: parent
                    anchors.margins: Theme.space4
                    spacing: Theme.space4
                    Label {
                        text: root.libraryCount > 0
                              ? "The Models page lists all " + root.libraryCount + (root.libraryCount === 1 ? " model" : " models")
                                + " on this machine, with where each came from, and finds more on Hugging Face."
                              : "Have a .gguf file already? Drop it on this window, or add it on the Models page. Models that LM Studio, Ollama, llama.cpp, GPT4All or Jan downloaded are found by themselves."
                        color: Theme.text
                        wrapMode: Text.Wrap
                        Layout.fillWidth: true
                    }
                    Button {
                        objectName: "openModels"
                        text: "Models"
                        icon.name: "drive-harddisk-symbolic"
                        onClicked: root.openModels()
                    }
                }
            }

            Item { Layout.preferredHeight: Theme.space6 }
        }
    }
}
