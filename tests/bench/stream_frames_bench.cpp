// Frame times of the chat view while an answer streams at a given rate (default 1000
// tokens/s), with a synthetic stream: the real ChatView, ChatController and message model
// (no model loaded), the answer's text appended once per 16 ms as EngineClient batches it,
// ~4 characters a token, Markdown with a code block every few paragraphs. Run it in a real X
// window for figures that mean something:
//
//   xvfb-run -a -s '-screen 0 1280x800x24' build/ci/tests/bench/stream_frames_bench [--rate 1000] [--seconds 10]
//
// Prints the intervals between frames shown (frameSwapped): median, 95th and 99th
// percentiles, the longest, and how many exceeded 33 ms (a dropped frame at 60 Hz is 16.7).
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QGuiApplication>
#include <QQuickItem>
#include <QQmlEngine>
#include <QQuickView>
#include <QTimer>
#include <QtQml/QQmlExtensionPlugin>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <vector>

#include <unistd.h>

#include "chat_controller.h"
#include "engine_client.h"
#include "store/store.h"

Q_IMPORT_QML_PLUGIN(PowerhousePlugin)

namespace {

// Markdown as answers come: paragraphs, a list, code blocks.
QString answerText() {
    QString text;
    for (int i = 0; i < 400; ++i) {
        text += QStringLiteral("Here is step %1 of the explanation, with `inline code` and **bold** words that "
                               "a model writes when it answers at length.\n\n").arg(i);
        if (i % 3 == 1) {
            text += QStringLiteral("```python\ndef step_%1(values):\n    total = sum(v * v for v in values)\n"
                                   "    return total / max(1, len(values))\n```\n\n").arg(i);
        }
        if (i % 5 == 4) text += QStringLiteral("- one point\n- another point\n- a third\n\n");
    }
    return text;
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char* argv[]) {
    QGuiApplication app(argc, argv);
    QCommandLineParser parser;
    parser.addOption({QStringLiteral("rate"), QStringLiteral("Tokens per second."), QStringLiteral("N"), "1000"});
    parser.addOption({QStringLiteral("seconds"), QStringLiteral("How long to stream."), QStringLiteral("S"), "10"});
    parser.addHelpOption();
    parser.process(app);
    const double rate = parser.value(QStringLiteral("rate")).toDouble();
    const int seconds = parser.value(QStringLiteral("seconds")).toInt();

    const auto folder = std::filesystem::temp_directory_path() / ("stream_frames_bench." + std::to_string(::getpid()));
    auto store = powerhouse::store::Store::open(folder / "p.db");
    if (!store) {
        std::fprintf(stderr, "%s\n", store.error().message.c_str());
        return 1;
    }
    EngineClient engine;
    ChatController controller(*store, engine);
    // A conversation with a question and an answer that streams.
    auto conversation = store->create_conversation("Frame times");
    auto question = store->add_message(conversation->id, "user", "Explain it at length, with code.");
    auto answer = store->add_message(conversation->id, "assistant", "", powerhouse::store::MessageState::streaming);
    if (!conversation || !question || !answer) return 1;
    controller.conversations()->reload();
    controller.selectConversation(conversation->id);

    QQuickView view;
    view.engine()->addImportPath(QStringLiteral("qrc:/"));
    view.setInitialProperties({{QStringLiteral("controller"), QVariant::fromValue(&controller)}});
    view.setSource(QUrl(QStringLiteral("qrc:/Powerhouse/ChatView.qml")));
    if (view.status() != QQuickView::Ready) {
        for (const auto& e : view.errors()) std::fprintf(stderr, "%s\n", qPrintable(e.toString()));
        return 1;
    }
    view.setResizeMode(QQuickView::SizeRootObjectToView);
    view.resize(900, 760);
    view.show();

    std::mutex lock;
    std::vector<double> intervals;
    QElapsedTimer clock;
    clock.start();
    double last = -1;
    bool streaming = false;
    QObject::connect(&view, &QQuickWindow::frameSwapped, &view, [&] {
        std::lock_guard guard(lock);
        const double now = static_cast<double>(clock.nsecsElapsed()) / 1e6;
        if (streaming && last >= 0) intervals.push_back(now - last);
        last = now;
    }, Qt::DirectConnection);

    const QString text = answerText();
    qsizetype at = 0;
    double owed = 0;  // characters due but not yet appended
    QElapsedTimer streamClock;
    QTimer tick;
    tick.setInterval(16);  // EngineClient hands tokens on once per frame
    QObject::connect(&tick, &QTimer::timeout, &controller, [&] {
        if (!streaming) {
            streaming = true;
            streamClock.start();
        }
        owed += rate * 4.0 * 0.016;
        const auto n = static_cast<qsizetype>(owed);
        owed -= static_cast<double>(n);
        controller.messages()->appendText(answer->id, text.mid(at % text.size(), n));
        at += n;
        if (streamClock.elapsed() >= seconds * 1000) {
            tick.stop();
            app.quit();
        }
    });
    // Let the window settle before streaming starts.
    QTimer::singleShot(1500, &tick, [&tick] { tick.start(); });
    app.exec();

    std::lock_guard guard(lock);
    const auto over = std::count_if(intervals.begin(), intervals.end(), [](double v) { return v > 33.4; });
    std::printf("streamed %lld characters (%.0f tokens/s of 4 characters) for %d s: %zu frames\n",
                static_cast<long long>(at), rate, seconds, intervals.size());
    std::printf("frame interval ms: median %.1f, p95 %.1f, p99 %.1f, max %.1f; over 33 ms: %lld\n",
                percentile(intervals, 0.5), percentile(intervals, 0.95), percentile(intervals, 0.99),
                intervals.empty() ? 0.0 : *std::max_element(intervals.begin(), intervals.end()),
                static_cast<long long>(over));
    std::error_code ec;
    std::filesystem::remove_all(folder, ec);
    return 0;
}
