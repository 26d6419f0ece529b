#include "markdown_blocks.h"

#include <QStringList>
#include <QVariantMap>

#include <optional>

namespace {

struct Fence {
    QChar mark;
    qsizetype length = 0;  // of the run of marks
    qsizetype indent = 0;
    QString info;
};

// The fence `line` opens, if it is one.
std::optional<Fence> opening_fence(const QString& line) {
    qsizetype indent = 0;
    while (indent < line.size() && line[indent] == QLatin1Char(' ')) ++indent;
    if (indent > 3 || indent >= line.size()) return std::nullopt;
    const QChar mark = line[indent];
    if (mark != QLatin1Char('`') && mark != QLatin1Char('~')) return std::nullopt;
    qsizetype end = indent;
    while (end < line.size() && line[end] == mark) ++end;
    if (end - indent < 3) return std::nullopt;
    const QString info = line.mid(end).trimmed();
    if (mark == QLatin1Char('`') && info.contains(QLatin1Char('`'))) return std::nullopt;  // inline code
    return Fence{mark, end - indent, indent, info};
}

bool closes(const QString& line, const Fence& fence) {
    qsizetype indent = 0;
    while (indent < line.size() && line[indent] == QLatin1Char(' ')) ++indent;
    if (indent > 3) return false;
    qsizetype end = indent;
    while (end < line.size() && line[end] == fence.mark) ++end;
    return end - indent >= fence.length && line.mid(end).trimmed().isEmpty();
}

// A code line without up to `indent` of the opening fence's leading spaces.
QString unindent(const QString& line, qsizetype indent) {
    qsizetype n = 0;
    while (n < indent && n < line.size() && line[n] == QLatin1Char(' ')) ++n;
    return line.mid(n);
}

}  // namespace

std::vector<MarkdownBlock> split_markdown_blocks(const QString& markdown) {
    std::vector<MarkdownBlock> blocks;
    QStringList text;
    const auto flush_text = [&] {
        // Blank lines around a code block are the block's spacing, not text.
        while (!text.isEmpty() && text.front().trimmed().isEmpty()) text.removeFirst();
        while (!text.isEmpty() && text.back().trimmed().isEmpty()) text.removeLast();
        if (!text.isEmpty()) blocks.push_back({MarkdownBlock::Kind::text, text.join(QLatin1Char('\n')), {}, true});
        text.clear();
    };
    const QStringList lines = markdown.split(QLatin1Char('\n'));
    for (qsizetype i = 0; i < lines.size(); ++i) {
        const std::optional<Fence> fence = opening_fence(lines[i]);
        if (!fence) {
            text << lines[i];
            continue;
        }
        flush_text();
        QStringList code;
        bool closed = false;
        for (++i; i < lines.size(); ++i) {
            if (closes(lines[i], *fence)) {
                closed = true;
                break;
            }
            code << unindent(lines[i], fence->indent);
        }
        blocks.push_back({MarkdownBlock::Kind::code, code.join(QLatin1Char('\n')),
                          fence->info.section(QLatin1Char(' '), 0, 0), closed});
    }
    flush_text();
    return blocks;
}

QVariantList markdown_blocks_variant(const QString& markdown) {
    QVariantList out;
    for (const MarkdownBlock& b : split_markdown_blocks(markdown)) {
        out.append(QVariantMap{{"kind", b.kind == MarkdownBlock::Kind::code ? QStringLiteral("code") : QStringLiteral("text")},
                               {"text", b.text},
                               {"language", b.language},
                               {"closed", b.closed}});
    }
    return out;
}
