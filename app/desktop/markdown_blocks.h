// An answer cut into Markdown text and fenced code blocks, so that the view can give each
// code block its own frame and Copy button. Fences follow CommonMark: a line of three or
// more backticks or tildes, indented by at most three spaces, optionally followed by an
// info string whose first word is the language; the block ends at a fence of the same
// character at least as long, or at the end of the text (an answer still streaming in).
// Fences nested deeper (in list items) stay in the text, where Markdown renders them.
//
// `MarkdownSplitter` gives the same blocks as `split_markdown_blocks` for a text that grows
// by appends, re-splitting only what an append can still change, so that a streaming
// answer costs the length of its last block per update, not the length of the answer.
//
// Thread-safety: a pure function; a MarkdownSplitter is a value used by one thread.
#pragma once

#include <QString>

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

class MarkdownSplitter {
public:
    // The text so far grows by `text`; blocks() is then split_markdown_blocks of it all.
    void append(const QString& text);
    const std::vector<MarkdownBlock>& blocks() const { return m_blocks; }
    // How many of blocks() no later append can change: those before the point the next
    // append re-splits from (the start of the last block, or just after a closed code block).
    size_t settled() const { return m_settled; }

private:
    std::vector<MarkdownBlock> m_blocks;
    size_t m_settled = 0;
    // The text from that point on. Splitting it alone gives the blocks after the settled
    // ones, because the splitter reads the text line by line with nothing carried over a
    // point where a block begins on a complete line.
    QString m_tail;
};
