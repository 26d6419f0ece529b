// The Models page: the user's models (the library folder, the user's folders, and what
// LM Studio, Ollama, llama.cpp, GPT4All and Jan downloaded) with whether and how each fits
// on the GPUs (or the CPU) at the chosen context, what would make it fit when it does not,
// and why a file cannot be used when it cannot; "Add model…" (a file dialog), a web address
// to download, and how imported files are kept. Files and links can also be dropped
// anywhere. Each model's chat template: its own, or one read from a file (used from its next
// load). The second tab finds models on Hugging Face.
// What went wrong shows here, beside what it concerns, until dismissed or resolved: a model
// that could not be loaded on its card (until it loads), a remote engine that could not be
// reached on its row above the list (until it answers a listing: "Retry"), the list of
// downloads that could not be saved above the downloads (until a later save succeeds).
import QtQuick
import QtQuick.Controls
import QtQuick.Dialogs
import QtQuick.Layouts
import Powerhouse

Rectangle {
    id: root

    required property LibraryController library
    required property DownloadController downloads
    // Hugging Face search (the second tab); null in views tested without it.
    property HubController hub: null
    // Remote engines, whose failures show here; null in views tested without them.
    property EnginesController engines: null

    signal loaded()

    color: Theme.background

    // An error beside what it concerns: its words, and the buttons given (Dismiss, Retry).
    component ErrorBox: Rectangle {
        id: box
        property alias text: words.text
        default property alias actions: actionRow.data
        color: Theme.errorBackground
        radius: Theme.radiusSmall
        Layout.fillWidth: true
        implicitHeight: boxRow.implicitHeight + 2 * Theme.space2
        RowLayout {
            id: boxRow
            anchors.fill: parent
            anchors.margins: Theme.space2
            spacing: Theme.space2
            Label {
                id: words
                objectName: "errorWords"
                color: Theme.error
                wrapMode: Text.Wrap
                Accessible.role: Accessible.AlertMessage
                Accessible.name: text
                Layout.fillWidth: true
            }
            Row {
                id: actionRow
                spacing: Theme.space1
            }
        }
    }

    FileDialog {
        id: fileDialog
        title: "Add models"
        fileMode: FileDialog.OpenFiles
        nameFilters: ["GGUF models (*.gguf)", "All files (*)"]
        onAccepted: root.library.importUrls(selectedFiles)
    }

    // A chat template for the model at modelPath instead of its own.
    FileDialog {
        id: templateDialog
        property string modelPath: ""
        title: "Chat template"
        fileMode: FileDialog.OpenFile
        nameFilters: ["Jinja chat templates (*.jinja *.j2 *.txt)", "All files (*)"]
        onAccepted: root.library.setChatTemplateFile(modelPath, selectedFile)
    }

    ColumnLayout {
        anchors.fill: parent
        anchors.margins: Theme.spacing * 2
        spacing: Theme.spacing

        // The title and the page's actions; the import mode wraps below them when narrow.
        Flow {
            Layout.fillWidth: true
            spacing: Theme.space2
            Label {
                text: "Models"
                color: Theme.text
                font.weight: Font.DemiBold
                font.pixelSize: Theme.titleSize
                height: Theme.controlHeight
                verticalAlignment: Text.AlignVCenter
                rightPadding: Theme.space4
            }
            Button {
                text: "Add model…"
                icon.name: "list-add-symbolic"
                icon.color: Theme.text
                Accessible.name: "Add model files"
                onClicked: fileDialog.open()
            }
            Button {
                objectName: "rescanButton"
                text: "Rescan"
                icon.name: "view-refresh-symbolic"
                icon.color: Theme.text
                Accessible.name: "Scan the library folders again"
                onClicked: root.library.rescan()
            }
            Row {
                spacing: Theme.space2
                Label {
                    text: "Imported files are"
                    color: Theme.textMuted
                    height: Theme.controlHeight
                    verticalAlignment: Text.AlignVCenter
                    leftPadding: Theme.space2
                }
                ComboBox {
                    objectName: "importMode"
                    readonly property var values: ["in_place", "copy", "move"]
                    model: ["used where they are", "copied to the library", "moved to the library"]
                    currentIndex: Math.max(0, values.indexOf(root.library.importMode))
                    // Then shows what is stored: a refused change (the message says why) leaves it.
                    onActivated: {
                        root.library.importMode = values[currentIndex]
                        currentIndex = Qt.binding(() => Math.max(0, values.indexOf(root.library.importMode)))
                    }
                    Accessible.name: "How imported files are kept"
                    width: 210
                }
            }
        }

        TabBar {
            id: tabs
            objectName: "modelsTabs"
            Layout.fillWidth: true
            visible: root.hub !== null
            TabButton { text: "On this machine"; width: implicitWidth }
            TabButton { objectName: "hubTab"; text: "Find on Hugging Face"; width: implicitWidth }
        }

        // Remote engines that could not be reached (listing their models, or answering).
        Repeater {
            // Kept while it is tried again (Retry), until the listing's end says otherwise.
            model: root.engines !== null ? root.engines.endpoints.filter(e => e.error.length > 0 && !e.errorDismissed) : []
            delegate: ErrorBox {
                id: engineRow
                required property var modelData
                objectName: "engineError_" + modelData.name
                text: "Remote engine " + modelData.name + " (" + modelData.url + "): " + modelData.error
                Button {
                    text: engineRow.modelData.status === "listing" ? "Trying…" : "Retry"
                    enabled: engineRow.modelData.status !== "listing"
                    Accessible.name: "List the models of " + engineRow.modelData.name + " again"
                    onClicked: root.engines.refreshEndpoint(engineRow.modelData.name)
                }
                Button {
                    text: "Dismiss"
                    Accessible.name: "Dismiss the error of " + engineRow.modelData.name
                    onClicked: root.engines.dismissEndpointError(engineRow.modelData.name)
                }
            }
        }

        // The library itself (a refresh that failed, a model that could not be forgotten).
        ErrorBox {
            objectName: "libraryError"
            visible: root.library.errorText.length > 0
            text: root.library.errorText
            Button {
                text: "Dismiss"
                Accessible.name: "Dismiss the library's error"
                onClicked: root.library.dismissError()
            }
        }

        // The downloads as a whole (their list could not be saved for the next start).
        ErrorBox {
            objectName: "downloadsError"
            visible: root.downloads.errorText.length > 0
            text: root.downloads.errorText
            Button {
                text: "Dismiss"
                Accessible.name: "Dismiss the downloads' error"
                onClicked: root.downloads.dismissError()
            }
        }

        // Downloads: progress, pause/resume/cancel; a listed repository's files to choose from.
        Repeater {
            model: root.downloads
            delegate: Rectangle {
                id: download
                required property int downloadId
                required property string name
                required property int downloadState  // a DownloadController.State
                required property real progress
                required property string status
                required property var options
                objectName: "download" + downloadId
                Layout.fillWidth: true
                implicitHeight: downloadColumn.implicitHeight + Theme.spacing
                radius: 6
                color: Theme.surface
                border.color: download.downloadState === DownloadController.Failed ? Theme.error : Theme.border

                ColumnLayout {
                    id: downloadColumn
                    anchors.fill: parent
                    anchors.margins: Theme.spacing / 2
                    spacing: 2
                    RowLayout {
                        Layout.fillWidth: true
                        Label {
                            text: download.name
                            color: Theme.text
                            elide: Text.ElideMiddle
                            Layout.fillWidth: true
                        }
                        ToolButton {
                            visible: download.downloadState === DownloadController.Downloading || download.downloadState === DownloadController.Queued
                            text: "Pause"
                            onClicked: root.downloads.pause(download.downloadId)
                        }
                        ToolButton {
                            visible: download.downloadState === DownloadController.Paused || download.downloadState === DownloadController.Failed
                            text: "Resume"
                            onClicked: root.downloads.resume(download.downloadId)
                        }
                        ToolButton {
                            visible: download.downloadState !== DownloadController.Done
                            text: "Cancel"
                            Accessible.name: "Cancel the download of " + download.name
                            onClicked: root.downloads.cancel(download.downloadId)
                        }
                    }
                    ProgressBar {
                        visible: download.downloadState === DownloadController.Downloading
                        indeterminate: download.progress < 0
                        value: Math.max(0, download.progress)
                        Layout.fillWidth: true
                    }
                    RowLayout {
                        visible: download.downloadState === DownloadController.Choose
                        Layout.fillWidth: true
                        ComboBox {
                            id: choice
                            model: download.options.map(o => o.label + " · " + o.size)
                            Accessible.name: "Which file to download"
                            Layout.fillWidth: true
                        }
                        Button {
                            text: "Download"
                            onClicked: root.downloads.choose(download.downloadId, choice.currentIndex)
                        }
                    }
                    Label {
                        objectName: "downloadStatus"
                        text: download.status
                        color: download.downloadState === DownloadController.Failed ? Theme.error : Theme.textMuted
                        font.pixelSize: Theme.smallFontSize
                        wrapMode: Text.Wrap
                        Layout.fillWidth: true
                    }
                }
            }
        }

        StackLayout {
            Layout.fillWidth: true
            Layout.fillHeight: true
            currentIndex: root.hub !== null ? tabs.currentIndex : 0

            ColumnLayout {
                spacing: Theme.spacing
                RowLayout {
                    spacing: Theme.spacing
                    TextField {
                        id: urlField
                        objectName: "urlField"
                        placeholderText: "A Hugging Face model or file link, or an https:// link to a .gguf file"
                        Accessible.name: "Download address"
                        Layout.fillWidth: true
                        onAccepted: download()
                        function download() {
                            if (text.trim().length === 0)
                                return
                            root.library.importUrls([text.trim()])
                            text = ""
                        }
                    }
                    Button {
                        objectName: "downloadButton"
                        text: "Download"
                        icon.name: "folder-download-symbolic"
                        icon.color: Theme.text
                        enabled: urlField.text.trim().length > 0
                        onClicked: urlField.download()
                    }
                }

                // Folders of other apps that could not be read, and why.
                Label {
                    objectName: "scanNotes"
                    visible: root.library.scanNotes.length > 0
                    text: root.library.scanNotes.join("\n")
                    color: Theme.warning
                    font.pixelSize: Theme.captionSize
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
                Label {
                    objectName: "libraryMessage"
                    visible: root.library.message.length > 0
                    text: root.library.message
                    color: Theme.textMuted
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }

                ListView {
                    id: list
                    objectName: "modelList"
                    Layout.fillWidth: true
                    Layout.fillHeight: true
                    clip: true
                    spacing: Theme.spacing
                    model: root.library.models
                    ScrollBar.vertical: ScrollBar {}

                    Label {
                        anchors.centerIn: parent
                        visible: list.count === 0
                        width: parent.width * 0.7
                        horizontalAlignment: Text.AlignHCenter
                        wrapMode: Text.Wrap
                        text: "No models yet. Drop a .gguf file or a download link here, use Add model, or find one on Hugging Face. Models that LM Studio, Ollama, llama.cpp, GPT4All and Jan downloaded show here by themselves.\nThe library folder is " + root.library.libraryFolder
                        color: Theme.textMuted
                    }

                    delegate: Rectangle {
                        id: card
                        required property int index
                        required property string path
                        required property string name
                        required property string fileName
                        required property string details
                        required property bool usable
                        required property string problem
                        required property bool fits
                        required property string fit
                        required property string suggestion
                        required property bool loaded
                        required property string source
                        required property string loadError
                        required property bool embeddingOnly
                        objectName: "model" + index
                        width: ListView.view.width
                        implicitHeight: cardColumn.implicitHeight + 2 * Theme.spacing
                        radius: Theme.radius
                        color: Theme.surface
                        border.color: card.loaded ? Theme.accent : Theme.border

                        ColumnLayout {
                            id: cardColumn
                            anchors.fill: parent
                            anchors.margins: Theme.spacing
                            spacing: 4
                            RowLayout {
                                Layout.fillWidth: true
                                Label {
                                    text: card.name
                                    color: Theme.text
                                    font.weight: Font.DemiBold
                                    font.pixelSize: Theme.subtitleSize
                                    elide: Text.ElideRight
                                    Layout.fillWidth: true
                                }
                                Chip {
                                    visible: card.loaded
                                    text: "Loaded"
                                    tint: Theme.success
                                    fill: Theme.successSoft
                                }
                                Button {
                                    objectName: "loadButton"
                                    visible: card.usable
                                    text: card.loaded ? "Reload" : "Load"
                                    Accessible.name: "Load " + card.name
                                    onClicked: {
                                        root.library.load(card.path)
                                        root.loaded()
                                    }
                                }
                                ToolButton {
                                    text: "Forget"
                                    Accessible.name: "Remove " + card.name + " from the list (the file stays)"
                                    onClicked: root.library.forget(card.path)
                                }
                            }
                            Chip {
                                objectName: "source"
                                visible: card.source.length > 0
                                text: card.source
                                Layout.maximumWidth: cardColumn.width
                                elide: Text.ElideRight
                            }
                            Label {
                                text: card.fileName + " · " + card.details
                                color: Theme.textMuted
                                font.pixelSize: Theme.smallFontSize
                                wrapMode: Text.Wrap
                                Layout.fillWidth: true
                            }
                            // An encoder: it is loaded for the API server, not for a chat.
                            Label {
                                objectName: "embeddingNote"
                                visible: card.embeddingOnly
                                text: "Embedding model: makes embeddings for the API server's /v1/embeddings; it does not chat"
                                color: Theme.text
                                font.pixelSize: Theme.smallFontSize
                                wrapMode: Text.Wrap
                                Layout.fillWidth: true
                            }
                            RowLayout {
                                id: templateRow
                                // Read again when a template is chosen or dropped.
                                readonly property string file: {
                                    root.library.chatTemplatesRevision
                                    return root.library.chatTemplateFile(card.path)
                                }
                                visible: card.usable && !card.embeddingOnly  // no chat, no template
                                Layout.fillWidth: true
                                Label {
                                    objectName: "chatTemplate"
                                    text: templateRow.file.length > 0 ? "Chat template: from " + templateRow.file
                                                                      : "Chat template: the model's own"
                                    color: Theme.textMuted
                                    font.pixelSize: Theme.smallFontSize
                                    elide: Text.ElideMiddle
                                    Layout.fillWidth: true
                                }
                                ToolButton {
                                    objectName: "chatTemplateFromFile"
                                    text: "From a file…"
                                    Accessible.name: "Chat template for " + card.name + " from a file"
                                    ToolTip.visible: hovered
                                    ToolTip.text: "Chat with a Jinja template of your own instead of the model's, from its next load."
                                    onClicked: {
                                        templateDialog.modelPath = card.path
                                        templateDialog.open()
                                    }
                                }
                                ToolButton {
                                    objectName: "chatTemplateOwn"
                                    visible: templateRow.file.length > 0
                                    text: "Use the model's own"
                                    Accessible.name: "Use the model's own chat template for " + card.name
                                    onClicked: root.library.useOwnChatTemplate(card.path)
                                }
                            }
                            RowLayout {
                                id: draftRow
                                // Read again when a draft model is chosen, or the list changes.
                                readonly property string draft: {
                                    root.library.draftModelsRevision
                                    return root.library.draftModel(card.path)
                                }
                                // "None" first, then the library's other usable models; a
                                // chosen one no longer listed is kept, by its file name. Read
                                // again when a model is listed, goes, or turns usable or not.
                                readonly property var choices: {
                                    root.library.draftChoicesRevision
                                    const list = [{path: "", name: "None"}]
                                    let listed = false
                                    for (const c of root.library.draftChoices(card.path)) {
                                        list.push(c)
                                        if (c.path === draftRow.draft) listed = true
                                    }
                                    if (draftRow.draft.length > 0 && !listed)
                                        list.push({path: draftRow.draft, name: draftRow.draft.split("/").pop()})
                                    return list
                                }
                                visible: card.usable && !card.embeddingOnly  // it writes no text to guess
                                Layout.fillWidth: true
                                Label {
                                    text: "Draft model:"
                                    color: Theme.textMuted
                                    font.pixelSize: Theme.smallFontSize
                                }
                                ComboBox {
                                    objectName: "draftModel"
                                    model: draftRow.choices
                                    textRole: "name"
                                    valueRole: "path"
                                    currentIndex: Math.max(0, draftRow.choices.findIndex(c => c.path === draftRow.draft))
                                    Accessible.name: "Draft model for " + card.name
                                    ToolTip.visible: hovered
                                    ToolTip.text: "Speculative decoding: a small model of the same family (the same vocabulary) guesses the next tokens and this model checks them, from its next load. The answer is the same, often faster on a GPU."
                                    onActivated: index => root.library.setDraftModel(card.path, draftRow.choices[index].path)
                                    Layout.fillWidth: true
                                    Layout.maximumWidth: 360
                                }
                            }
                            ErrorBox {
                                objectName: "loadError"
                                visible: card.loadError.length > 0
                                text: "Could not be loaded: " + card.loadError
                                Button {
                                    text: "Dismiss"
                                    Accessible.name: "Dismiss why " + card.name + " could not be loaded"
                                    onClicked: root.library.dismissLoadError(card.path)
                                }
                            }
                            Label {
                                objectName: "problem"
                                visible: !card.usable
                                text: "Cannot be used: " + card.problem
                                color: Theme.error
                                wrapMode: Text.Wrap
                                Layout.fillWidth: true
                            }
                            Label {
                                objectName: "fit"
                                visible: card.usable && card.fit.length > 0
                                text: card.fit
                                color: card.fits ? Theme.text : Theme.error
                                font.pixelSize: Theme.smallFontSize
                                wrapMode: Text.Wrap
                                Layout.fillWidth: true
                            }
                            Label {
                                visible: card.suggestion.length > 0
                                text: card.suggestion
                                color: Theme.textMuted
                                font.pixelSize: Theme.smallFontSize
                                wrapMode: Text.Wrap
                                Layout.fillWidth: true
                            }
                        }
                    }
                }
            }

            // Built when the tab is first opened (the search lives in HubController).
            Loader {
                active: root.hub !== null && (tabs.currentIndex === 1 || item !== null)
                sourceComponent: HubSearch { hub: root.hub }
            }
        }
    }
}
