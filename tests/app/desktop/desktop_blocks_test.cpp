// A message's blocks while it streams: MarkdownSplitter against split_markdown_blocks of
// the whole text after every append (random answers cut at random points), and
// MessageBlocksModel, fed through MessageListModel, under QAbstractItemModelTester and a
// mirror that applies only its signals, as a view would: never a reset, changes only at the
// end, and the mirror always equal to the whole text's split.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QPointer>
#include <QSignalSpy>
#include <QVariantMap>

#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "markdown_blocks.h"
#include "message_blocks_model.h"
#include "message_list_model.h"

namespace {

using Kind = MarkdownBlock::Kind;

// A random answer: lines of text (some that look almost like fences), fences of both
// characters and several lengths, with and without a language, indented or not, closed or
// left open, with "\n" or "\r\n" line ends and sometimes no final line end.
QString random_answer(std::mt19937& rng) {
    static const char* const text_lines[] = {
        "Some words.", "", "  ", "- a list item", "Use `inline` code.", "``` not a fence ```", "``", "`x`",
        "    ```", "1. step", "> quote", "~~", "tab\there", "```x`y", "Ünïcödé ✓",
    };
    static const char* const fences[] = {
        "```", "```python", "~~~", "~~~~ c  extra words", "````", "   ```js", "  ~~~ sh", "``````",
    };
    static const char* const code_lines[] = {
        "x = 1", "", "    indented()", "```", "~~~", "````", " ```", "``` still code", "}", "\tcode",
    };
    const auto pick = [&rng](const auto& list) {
        return QString::fromUtf8(list[std::uniform_int_distribution<size_t>(0, std::size(list) - 1)(rng)]);
    };
    const auto chance = [&rng](int percent) { return std::uniform_int_distribution<int>(0, 99)(rng) < percent; };
    const QString eol = chance(30) ? QStringLiteral("\r\n") : QStringLiteral("\n");
    QStringList lines;
    const int parts = std::uniform_int_distribution<int>(0, 6)(rng);
    for (int p = 0; p < parts; ++p) {
        if (chance(50)) {
            for (int n = std::uniform_int_distribution<int>(0, 4)(rng); n > 0; --n) lines << pick(text_lines);
            continue;
        }
        const QString fence = pick(fences);
        lines << fence;
        for (int n = std::uniform_int_distribution<int>(0, 4)(rng); n > 0; --n) lines << pick(code_lines);
        if (chance(80)) {
            // The closing fence: the same run (without its info), sometimes longer or trailed by blanks.
            qsizetype start = 0;
            while (fence[start] == QLatin1Char(' ')) ++start;
            qsizetype end = start;
            while (end < fence.size() && fence[end] == fence[start]) ++end;
            QString close = fence.mid(start, end - start);
            if (chance(20)) close += fence[start];
            if (chance(20)) close += QStringLiteral("  ");
            lines << close;
        }
    }
    QString answer = lines.join(eol);
    if (!lines.isEmpty() && chance(50)) answer += eol;
    return answer;
}

// The answer cut into pieces of 1 to 12 characters, as tokens arrive.
std::vector<QString> random_pieces(const QString& answer, std::mt19937& rng) {
    std::vector<QString> pieces;
    for (qsizetype at = 0; at < answer.size();) {
        const qsizetype n = std::uniform_int_distribution<qsizetype>(1, 12)(rng);
        pieces.push_back(answer.mid(at, n));
        at += n;
    }
    return pieces;
}

std::string describe(const std::vector<MarkdownBlock>& blocks) {
    std::string out;
    for (const MarkdownBlock& b : blocks) {
        out += b.kind == Kind::code ? "[code " + b.language.toStdString() + (b.closed ? "" : " open") + "] " : "[text] ";
        out += b.text.toStdString() + "\n";
    }
    return out;
}

TEST(MarkdownSplitter, AppendsGiveTheWholeTextsSplitAtEveryStep) {
    std::mt19937 rng(20240522);
    int steps = 0;
    for (int answer_number = 0; answer_number < 10000; ++answer_number) {
        const QString answer = random_answer(rng);
        MarkdownSplitter splitter;
        QString so_far;
        for (const QString& piece : random_pieces(answer, rng)) {
            const std::vector<MarkdownBlock> before = splitter.blocks();
            const size_t settled = splitter.settled();
            splitter.append(piece);
            so_far += piece;
            ++steps;
            const auto whole = split_markdown_blocks(so_far);
            ASSERT_EQ(splitter.blocks(), whole) << "answer " << answer_number << " after "
                                                << QString(so_far).replace(u'\r', u'␍').toStdString()
                                                << "\nincremental:\n" << describe(splitter.blocks())
                                                << "whole:\n" << describe(whole);
            // What it called settled did not change.
            ASSERT_GE(splitter.blocks().size(), settled);
            for (size_t i = 0; i < settled; ++i) ASSERT_EQ(splitter.blocks()[i], before[i]) << "block " << i;
            ASSERT_GE(splitter.settled(), settled);
        }
        ASSERT_EQ(so_far, answer);
    }
    EXPECT_GT(steps, 50000);
}

TEST(MarkdownSplitter, AFenceArrivingInPiecesAcrossUpdates) {
    MarkdownSplitter s;
    s.append("Text\r\n`");
    EXPECT_EQ(s.blocks(), (std::vector<MarkdownBlock>{{Kind::text, "Text\r\n`", {}, true}}));
    s.append("`");
    s.append("`py");
    // "```py" with no line end yet already opens a block; "```py`" would not.
    EXPECT_EQ(s.blocks(), (std::vector<MarkdownBlock>{{Kind::text, "Text\r", {}, true}, {Kind::code, "", "py", false}}));
    EXPECT_EQ(s.settled(), 0u) << "the opening line may still change";
    s.append("thon\r");
    s.append("\nx = 1\r\n``");
    EXPECT_EQ(s.blocks(),
              (std::vector<MarkdownBlock>{{Kind::text, "Text\r", {}, true}, {Kind::code, "x = 1\r\n``", "python", false}}));
    EXPECT_EQ(s.settled(), 1u) << "the text before a complete opening line is settled";
    s.append("`");
    EXPECT_EQ(s.blocks().back(), (MarkdownBlock{Kind::code, "x = 1\r", "python", true}));
    s.append("  \r\nafter");
    EXPECT_EQ(s.settled(), 2u) << "a complete closing line settles its block";
    EXPECT_EQ(s.blocks().back(), (MarkdownBlock{Kind::text, "after", {}, true}));
    // A last line that stops being a fence takes its block away again.
    MarkdownSplitter t;
    t.append("a\n```");
    EXPECT_EQ(t.blocks().size(), 2u);
    t.append("x`");
    EXPECT_EQ(t.blocks(), (std::vector<MarkdownBlock>{{Kind::text, "a\n```x`", {}, true}}));
}

// What a view holds of a blocks model, kept up to date by the model's signals alone. A row
// changed, inserted or removed before `end - 2` (more than the two last blocks) fails the test.
class Mirror {
public:
    explicit Mirror(MessageBlocksModel& model) : m_model(model) {
        for (int row = 0; row < model.rowCount(); ++row) m_rows.push_back(read(row));
        QObject::connect(&model, &QAbstractItemModel::modelReset, [this] {
            m_rows.clear();
            for (int row = 0; row < m_model.rowCount(); ++row) m_rows.push_back(read(row));
            ++resets;
        });
        QObject::connect(&model, &QAbstractItemModel::dataChanged, [this](const QModelIndex& a, const QModelIndex& b) {
            EXPECT_GE(a.row(), static_cast<int>(m_rows.size()) - 2) << "a change before the last blocks";
            for (int row = a.row(); row <= b.row(); ++row) m_rows[static_cast<size_t>(row)] = read(row);
            ++changes;
        });
        QObject::connect(&model, &QAbstractItemModel::rowsInserted, [this](const QModelIndex&, int first, int last) {
            EXPECT_EQ(first, static_cast<int>(m_rows.size())) << "rows inserted before the end";
            for (int row = first; row <= last; ++row) m_rows.push_back(read(row));
            inserted += last - first + 1;
        });
        QObject::connect(&model, &QAbstractItemModel::rowsRemoved, [this](const QModelIndex&, int first, int last) {
            EXPECT_EQ(last, static_cast<int>(m_rows.size()) - 1) << "rows removed before the end";
            EXPECT_GE(first, static_cast<int>(m_rows.size()) - 2);
            m_rows.erase(m_rows.begin() + first, m_rows.end());
            removed += last - first + 1;
        });
    }

    const std::vector<MarkdownBlock>& rows() const { return m_rows; }
    int changes = 0;
    int inserted = 0;
    int removed = 0;
    int resets = 0;

private:
    MarkdownBlock read(int row) const {
        const QModelIndex i = m_model.index(row);
        return {m_model.data(i, MessageBlocksModel::KindRole).toInt() == MessageBlocksModel::Code ? Kind::code : Kind::text,
                m_model.data(i, MessageBlocksModel::TextRole).toString(),
                m_model.data(i, MessageBlocksModel::LanguageRole).toString(),
                m_model.data(i, MessageBlocksModel::ClosedRole).toBool()};
    }

    MessageBlocksModel& m_model;
    std::vector<MarkdownBlock> m_rows;
};

TEST(MessageBlocksModel, RandomStreamsChangeOnlyTheEnd) {
    std::mt19937 rng(7);
    for (int answer_number = 0; answer_number < 300; ++answer_number) {
        const QString answer = random_answer(rng);
        MessageBlocksModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
        Mirror mirror(model);
        QString so_far;
        for (const QString& piece : random_pieces(answer, rng)) {
            model.appendText(piece);
            so_far += piece;
            ASSERT_EQ(mirror.rows(), split_markdown_blocks(so_far)) << "answer " << answer_number;
        }
        ASSERT_EQ(mirror.resets, 0);
    }
}

// An answer of about 20 000 characters: paragraphs and code blocks in several languages,
// the last one still open.
QString long_answer() {
    QString out;
    const char* const languages[] = {"python", "cpp", "", "sh"};
    for (int part = 0; out.size() < 20000; ++part) {
        out += QStringLiteral("Paragraph %1 explains the next step in some detail, with `inline` code and a list:\n\n"
                              "- first point\n- second point\n\n")
                   .arg(part);
        out += QStringLiteral("```%1\n").arg(QString::fromUtf8(languages[part % 4]));
        for (int line = 0; line < 12; ++line) out += QStringLiteral("    value_%1 = compute(%2, %1)  # why\n").arg(line).arg(part);
        if (out.size() < 19500) out += QStringLiteral("```\n\n");
    }
    return out;
}

powerhouse::store::Message streaming_answer(qint64 id) {
    powerhouse::store::Message m;
    m.id = id;
    m.role = "assistant";
    m.state = powerhouse::store::MessageState::streaming;
    return m;
}

TEST(MessageBlocksModel, ALongAnswerStreamsInWithoutAReset) {
    const QString answer = long_answer();
    ASSERT_GE(answer.size(), 20000);
    MessageListModel messages;
    messages.append(streaming_answer(1));
    MessageBlocksModel* blocks = messages.blocks(0);
    ASSERT_NE(blocks, nullptr);
    EXPECT_EQ(messages.data(messages.index(0), MessageListModel::BlocksRole).value<QObject*>(), blocks)
        << "the role hands the view the same object every time";
    QAbstractItemModelTester tester(blocks, QAbstractItemModelTester::FailureReportingMode::Fatal);
    Mirror mirror(*blocks);
    QSignalSpy rows(&messages, &QAbstractItemModel::dataChanged);
    for (qsizetype at = 0; at < answer.size(); at += 5) {
        messages.appendText(1, answer.mid(at, 5));
        if (at % 2000 == 0) {
            ASSERT_EQ(mirror.rows(), split_markdown_blocks(answer.left(at + 5)));
        }
    }
    EXPECT_EQ(mirror.rows(), split_markdown_blocks(answer));
    EXPECT_EQ(mirror.resets, 0);
    EXPECT_EQ(mirror.removed, 0);
    EXPECT_EQ(mirror.inserted, blocks->rowCount());
    EXPECT_GT(blocks->rowCount(), 60);
    for (const QList<QVariant>& signal : rows) {
        EXPECT_FALSE(signal.at(2).value<QList<int>>().contains(MessageListModel::BlocksRole))
            << "the message's row never hands the view new blocks";
    }

    // The answer ends with the text that streamed in, and more: the blocks only grow.
    powerhouse::store::Message done = streaming_answer(1);
    done.state = powerhouse::store::MessageState::complete;
    done.content = (answer + QStringLiteral("\n```\nThat is all.")).toStdString();
    const int changes = mirror.changes;
    messages.update(done);
    EXPECT_EQ(mirror.resets, 0);
    EXPECT_GT(mirror.changes, changes);
    EXPECT_EQ(mirror.rows(), split_markdown_blocks(QString::fromStdString(done.content)));
    EXPECT_EQ(messages.blocks(0), blocks);

    // Replaced by a text that does not extend it (edited): one reset, the same object.
    done.content = "Another answer.";
    messages.update(done);
    EXPECT_EQ(mirror.resets, 1);
    EXPECT_EQ(mirror.rows(), (std::vector<MarkdownBlock>{{Kind::text, "Another answer.", {}, true}}));
    EXPECT_EQ(blocks->rowCount(), 1);
    EXPECT_EQ(blocks->data(blocks->index(0), MessageBlocksModel::TextRole).toString(), "Another answer.");
}

TEST(MessageListModel, BlocksGoWithTheirMessages) {
    MessageListModel messages;
    powerhouse::store::Message m = streaming_answer(1);
    m.content = "Hi\n```sh\nls\n```";
    messages.setMessages({m});
    QPointer<MessageBlocksModel> first = messages.blocks(0);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->rowCount(), 2);
    EXPECT_EQ(first->data(first->index(1), MessageBlocksModel::KindRole).toInt(), MessageBlocksModel::Code);
    EXPECT_EQ(first->data(first->index(1), MessageBlocksModel::LanguageRole).toString(), "sh");
    EXPECT_TRUE(first->data(first->index(1), MessageBlocksModel::ClosedRole).toBool());
    EXPECT_EQ(first->roleNames().value(MessageBlocksModel::KindRole), "kind");
    // Regenerate: the answer's row goes, its blocks with it (later: a view may still hold them).
    messages.append(streaming_answer(2));
    QPointer<MessageBlocksModel> second = messages.blocks(1);
    messages.removeFrom(1);
    EXPECT_EQ(messages.blocks(1), nullptr);
    QCoreApplication::sendPostedEvents(nullptr, QEvent::DeferredDelete);
    EXPECT_FALSE(second);
    EXPECT_TRUE(first);
    // Another conversation: new rows, new blocks.
    messages.setMessages({streaming_answer(3)});
    QCoreApplication::sendPostedEvents(nullptr, QEvent::DeferredDelete);
    EXPECT_FALSE(first);
    EXPECT_EQ(messages.blocks(0)->rowCount(), 0);
}

// Not a check: how long the streaming takes, printed for the record (tests never assert
// time). The old path split the whole content and made a QVariantList of it at every update.
TEST(MessageBlocksModel, StreamingTimeOldPathAndNew) {
    const QString answer = long_answer();
    QElapsedTimer timer;

    timer.start();
    std::string content;
    qsizetype old_rows = 0;
    for (qsizetype at = 0; at < answer.size(); at += 5) {
        content += answer.mid(at, 5).toStdString();
        QVariantList out;
        for (const MarkdownBlock& b : split_markdown_blocks(QString::fromStdString(content))) {
            out.append(QVariantMap{{"kind", b.kind == Kind::code ? QStringLiteral("code") : QStringLiteral("text")},
                                   {"text", b.text},
                                   {"language", b.language},
                                   {"closed", b.closed}});
        }
        old_rows += out.size();
    }
    const qint64 old_ns = timer.nsecsElapsed();

    timer.restart();
    MessageListModel messages;
    messages.append(streaming_answer(1));
    MessageBlocksModel* blocks = messages.blocks(0);
    for (qsizetype at = 0; at < answer.size(); at += 5) messages.appendText(1, answer.mid(at, 5));
    const qint64 new_ns = timer.nsecsElapsed();

    EXPECT_GT(old_rows, 0);
    EXPECT_EQ(blocks->rowCount(), static_cast<int>(split_markdown_blocks(answer).size()));
    std::cout << "streaming " << answer.size() << " characters in 5-character appends: whole re-split "
              << old_ns / 1000000.0 << " ms, incremental " << new_ns / 1000000.0 << " ms\n";
}

}  // namespace
