// An answer cut into Markdown text and fenced code blocks, so that the view can give each
// code block its own frame and Copy button. Fences follow CommonMark: a line of three or
// more backticks or tildes, indented by at most three spaces, optionally followed by an
// info string whose first word is the language; the block ends at a fence of the same
// character at least as long, or at the end of the text (an answer still streaming in).
// Fences nested deeper (in list items) stay in the text, where Markdown renders them.
//
// Thread-safety: a pure function.
#pragma once

#include <QString>
#include <QVariantList>

#include <vector>

struct MarkdownBlock {
    enum class Kind { text, code };
    Kind kind = Kind::text;
    QString text;      // text: Markdown; code: the code as written, without the fences
    QString language;  // code only: "python", or empty
    bool closed = true;  // code only: false while its closing fence has not arrived
    bool operator==(const MarkdownBlock&) const = default;
};

std::vector<MarkdownBlock> split_markdown_blocks(const QString& markdown);

// For QML: [{kind: "text"|"code", text, language, closed}].
QVariantList markdown_blocks_variant(const QString& markdown);
