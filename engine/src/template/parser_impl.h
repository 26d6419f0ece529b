// The parser's internals, shared by parser_statements.cpp and parser_expressions.cpp.
//
// Thread-safety: one Parser per parse.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "template/ast.h"
#include "template/lexer.h"
#include "template/parser.h"

namespace powerhouse::jinja {

class Parser {
public:
    Parser(std::string_view source, uint32_t max_nesting)
        : source_(source), tokens_(source), max_nesting_(max_nesting) {}

    TemplateAst parse();

    // ---- statements (parser_statements.cpp)
    // Parses until a block tag named in `end_tags` (left as the current token, right after
    // its '{%') or, when end_tags is empty, the end of the template.
    StmtList parse_body(std::initializer_list<std::string_view> end_tags, SourcePos opened_at,
                        std::string_view opened_by);
    StmtPtr parse_statement();
    StmtPtr parse_for(SourcePos pos);
    StmtPtr parse_if(SourcePos pos);
    StmtPtr parse_set(SourcePos pos);
    StmtPtr parse_macro(SourcePos pos);
    StmtPtr parse_call_block(SourcePos pos);
    StmtPtr parse_filter_block(SourcePos pos);
    StmtPtr parse_with(SourcePos pos);
    Target parse_target(bool allow_namespace, bool allow_unpack);
    std::vector<std::unique_ptr<FilterExpr>> parse_filter_chain();
    void parse_macro_params(MacroParams& params);
    void expect_end_tag(std::string_view name);

    // ---- expressions (parser_expressions.cpp)
    ExprPtr parse_tuple(bool with_condition, std::initializer_list<std::string_view> extra_end = {},
                        bool explicit_parentheses = false);
    ExprPtr parse_expression(bool with_condition = true);
    ExprPtr parse_condition();
    ExprPtr parse_or();
    ExprPtr parse_and();
    ExprPtr parse_not();
    ExprPtr parse_compare();
    ExprPtr parse_math1();
    ExprPtr parse_concat();
    ExprPtr parse_math2();
    ExprPtr parse_pow();
    ExprPtr parse_unary(bool with_filter = true);
    ExprPtr parse_primary();
    ExprPtr parse_postfix(ExprPtr node);
    ExprPtr parse_filter_expr(ExprPtr node);
    ExprPtr parse_subscript(ExprPtr node);
    ExprPtr parse_test(ExprPtr node);
    std::unique_ptr<FilterExpr> parse_filter(ExprPtr operand);
    void parse_call_args(CallArgs& args);
    ExprPtr parse_list(SourcePos pos);
    ExprPtr parse_dict(SourcePos pos);

    // ---- tokens
    const Token& current() { return tokens_.at(index_); }
    const Token& peek(size_t ahead = 1) { return tokens_.at(index_ + ahead); }
    void advance() {
        if (current().kind != TokenKind::eof) ++index_;
    }
    SourcePos pos() { return SourcePos{current().offset}; }
    bool is_op(std::string_view op) { return current().kind == TokenKind::op && current().text == op; }
    bool is_name(std::string_view name) { return current().kind == TokenKind::name && current().text == name; }
    void expect_op(std::string_view op);
    std::string expect_name();
    void expect_block_end();
    [[noreturn]] void fail_here(std::string message);
    [[noreturn]] void unexpected(std::string_view expected);

    // Caps the parser's recursion and every node's depth at max_nesting.
    void enter();
    void leave() { --recursion_; }
    // Sets the node's depth to one more than its deepest child's and checks the limit.
    template <class T>
    std::unique_ptr<T> finish(std::unique_ptr<T> node, uint32_t child_depth);
    static uint32_t depth_of(std::initializer_list<const Expr*> children);

    // Records names that macros treat specially (varargs, kwargs, caller).
    void note_name(std::string_view name);

    std::string_view source_;
    TokenStream tokens_;  // lexed on demand
    size_t index_ = 0;
    uint32_t max_nesting_;
    uint32_t recursion_ = 0;
    uint32_t loop_depth_ = 0;
    std::vector<MacroStmt*> macros_;  // macros being parsed, innermost last

    // Filters and tests that do not exist (or that jinja2 has and this interpreter lacks). As
    // jinja2 3 does, one in an if statement's test or bodies, in a conditional expression, or
    // in an expression evaluated in that frame (a for loop's iterable, a with's values, a call's
    // arguments) fails only when it is evaluated; one anywhere else fails the parse, once the
    // whole template has parsed. Loop bodies, macros, call blocks, set blocks, filter blocks and
    // with bodies are new frames: not soft.
    struct UnknownName {
        SourcePos at;
        ErrorKind kind;
        std::string message;
        bool soft = false;
    };
    bool soft_ = false;
    std::vector<UnknownName> unknown_;
    void note_unknown(SourcePos at, ErrorKind kind, std::string message) {
        unknown_.push_back({at, kind, std::move(message), soft_});
    }
};

// Sets the parser's soft flag for its lifetime (the parser.h comment on unknown_).
class SoftFrame {
public:
    SoftFrame(bool& flag, bool soft) : flag_(flag), saved_(flag) { flag_ = soft; }
    ~SoftFrame() { flag_ = saved_; }
    SoftFrame(const SoftFrame&) = delete;
    SoftFrame& operator=(const SoftFrame&) = delete;

private:
    bool& flag_;
    bool saved_;
};

class RecursionGuard {
public:
    explicit RecursionGuard(Parser& parser) : parser_(parser) { parser_.enter(); }
    ~RecursionGuard() { parser_.leave(); }
    RecursionGuard(const RecursionGuard&) = delete;
    RecursionGuard& operator=(const RecursionGuard&) = delete;

private:
    Parser& parser_;
};

inline uint32_t Parser::depth_of(std::initializer_list<const Expr*> children) {
    uint32_t depth = 0;
    for (const Expr* child : children) {
        if (child != nullptr && child->depth > depth) depth = child->depth;
    }
    return depth;
}

template <class T>
std::unique_ptr<T> Parser::finish(std::unique_ptr<T> node, uint32_t child_depth) {
    node->depth = child_depth + 1;
    if (node->depth > max_nesting_) {
        fail_at(ErrorKind::limit, node->pos,
                "expression nests deeper than the limit of " + std::to_string(max_nesting_));
    }
    return node;
}

}  // namespace powerhouse::jinja
