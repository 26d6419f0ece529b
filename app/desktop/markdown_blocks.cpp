#include "markdown_blocks.h"

#include <QList>

#include <algorithm>
#include <iterator>
#include <optional>

namespace {

struct Fence {
    QChar mark;
    qsizetype length = 0;  // of the run of marks
    qsizetype indent = 0;
    QString info;
};

qsizetype leading_spaces(QStringView line) {
    qsizetype n = 0;
    while (n < line.size() && line[n] == QLatin1Char(' ')) ++n;
    return n;
}

// The fence `line` opens, if it is one.
std::optional<Fence> opening_fence(QStringView line) {
    const qsizetype indent = leading_spaces(line);
    if (indent > 3 || indent >= line.size()) return std::nullopt;
    const QChar mark = line[indent];
    if (mark != QLatin1Char('`') && mark != QLatin1Char('~')) return std::nullopt;
    qsizetype end = indent;
    while (end < line.size() && line[end] == mark) ++end;
    if (end - indent < 3) return std::nullopt;
    const QStringView info = line.mid(end).trimmed();
    if (mark == QLatin1Char('`') && info.contains(QLatin1Char('`'))) return std::nullopt;  // inline code
    return Fence{mark, end - indent, indent, info.toString()};
}

bool closes(QStringView line, const Fence& fence) {
    const qsizetype indent = leading_spaces(line);
    if (indent > 3) return false;
    qsizetype end = indent;
    while (end < line.size() && line[end] == fence.mark) ++end;
    return end - indent >= fence.length && line.mid(end).trimmed().isEmpty();
}

// A code line without up to `indent` of the opening fence's leading spaces.
QStringView unindent(QStringView line, qsizetype indent) {
    return line.mid(std::min(leading_spaces(line), indent));
}

QString join_lines(const std::vector<QStringView>& lines) {
    qsizetype size = 0;
    for (QStringView line : lines) size += line.size() + 1;
    QString out;
    out.reserve(size);
    for (size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) out += QLatin1Char('\n');
        out += lines[i];
    }
    return out;
}

// The blocks of a text, and where a split of the text's continuation may start again: a
// line start before which every line is complete (ended by '\n', so no append changes it)
// and where the splitter holds nothing over, being either just after a closing fence or at
// an opening fence (which has just flushed the text before it into its blocks).
struct Split {
    std::vector<MarkdownBlock> blocks;
    qsizetype resume = 0;  // offset of that line start in the text
    size_t settled = 0;    // how many of `blocks` lie before it
};

Split split(QStringView markdown) {
    Split out;
    std::vector<QStringView> text;
    const auto flush_text = [&] {
        // Blank lines around a code block are the block's spacing, not text.
        size_t first = 0;
        size_t end = text.size();
        while (first < end && text[first].trimmed().isEmpty()) ++first;
        while (end > first && text[end - 1].trimmed().isEmpty()) --end;
        if (first < end) {
            out.blocks.push_back({MarkdownBlock::Kind::text,
                                  join_lines({text.begin() + static_cast<std::ptrdiff_t>(first),
                                              text.begin() + static_cast<std::ptrdiff_t>(end)}),
                                  {},
                                  true});
        }
        text.clear();
    };
    const QList<QStringView> lines = markdown.split(QLatin1Char('\n'));
    std::vector<qsizetype> starts(static_cast<size_t>(lines.size()));
    for (qsizetype i = 1; i < lines.size(); ++i) {
        starts[static_cast<size_t>(i)] = starts[static_cast<size_t>(i - 1)] + lines[i - 1].size() + 1;
    }
    // The last line has no '\n' yet: it may still become, or stop being, a fence.
    const qsizetype last = lines.size() - 1;
    for (qsizetype i = 0; i < lines.size(); ++i) {
        const std::optional<Fence> fence = opening_fence(lines[i]);
        if (!fence) {
            text.push_back(lines[i]);
            continue;
        }
        flush_text();
        if (i < last) {
            out.resume = starts[static_cast<size_t>(i)];
            out.settled = out.blocks.size();
        }
        std::vector<QStringView> code;
        bool closed = false;
        for (++i; i < lines.size(); ++i) {
            if (closes(lines[i], *fence)) {
                closed = true;
                break;
            }
            code.push_back(unindent(lines[i], fence->indent));
        }
        out.blocks.push_back(
            {MarkdownBlock::Kind::code, join_lines(code), fence->info.section(QLatin1Char(' '), 0, 0), closed});
        if (closed && i < last) {
            out.resume = starts[static_cast<size_t>(i + 1)];
            out.settled = out.blocks.size();
        }
    }
    flush_text();
    return out;
}

}  // namespace

std::vector<MarkdownBlock> split_markdown_blocks(const QString& markdown) {
    return split(markdown).blocks;
}

void MarkdownSplitter::append(const QString& text) {
    if (text.isEmpty()) return;
    m_tail += text;
    Split tail = split(m_tail);
    m_blocks.erase(m_blocks.begin() + static_cast<std::ptrdiff_t>(m_settled), m_blocks.end());
    m_blocks.insert(m_blocks.end(), std::make_move_iterator(tail.blocks.begin()),
                    std::make_move_iterator(tail.blocks.end()));
    m_settled += tail.settled;
    m_tail.remove(0, tail.resume);
}
