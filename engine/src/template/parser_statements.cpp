// Statements: text, {{ output }}, and the block tags for, if, set, macro, call, filter,
// with, break/continue (jinja2's loopcontrols) and generation (transformers' extension).
#include <fmt/format.h>

#include "template/parser_impl.h"
#include "template/text.h"

namespace powerhouse::jinja {

std::string line_column(std::string_view source, uint32_t offset) {
    if (offset > source.size()) offset = static_cast<uint32_t>(source.size());
    size_t line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < offset; ++i) {
        if (source[i] == '\n') {
            ++line;
            line_start = i + 1;
        }
    }
    const size_t column = code_point_count(source.substr(line_start, offset - line_start)) + 1;
    return fmt::format("{}:{}", line, column);
}

TemplateAst parse_template(std::string_view source, const TemplateLimits& limits) {
    Parser parser(source, limits.max_nesting);
    return parser.parse();
}

TemplateAst Parser::parse() {
    TemplateAst ast;
    ast.body = parse_body({}, SourcePos{0}, "");
    for (const UnknownName& u : unknown_) {
        if (!u.soft) fail_at(u.kind, u.at, u.message);
    }
    return ast;
}

void Parser::fail_here(std::string message) {
    fail_at(ErrorKind::syntax, pos(), std::move(message));
}

void Parser::unexpected(std::string_view expected) {
    fail_here(fmt::format("expected {}, got {}", expected, describe_token(current())));
}

void Parser::expect_op(std::string_view op) {
    if (!is_op(op)) unexpected(fmt::format("'{}'", op));
    advance();
}

std::string Parser::expect_name() {
    if (current().kind != TokenKind::name) unexpected("a name");
    std::string name = current().text;
    advance();
    return name;
}

void Parser::expect_block_end() {
    if (current().kind != TokenKind::block_end) unexpected("end of statement block '%}'");
    advance();
}

void Parser::enter() {
    if (++recursion_ > max_nesting_) {
        fail_at(ErrorKind::limit, pos(), fmt::format("the template nests deeper than the limit of {}", max_nesting_));
    }
}

void Parser::note_name(std::string_view name) {
    if (macros_.empty()) return;
    MacroStmt* macro = macros_.back();
    if (name == "varargs") macro->uses_varargs = true;
    if (name == "kwargs") macro->uses_kwargs = true;
    if (name == "caller") macro->uses_caller = true;
}

StmtList Parser::parse_body(std::initializer_list<std::string_view> end_tags, SourcePos opened_at,
                            std::string_view opened_by) {
    StmtList body;
    for (;;) {
        const Token& t = current();
        switch (t.kind) {
            case TokenKind::data:
                body.push_back(std::make_unique<TextStmt>(pos(), t.text));
                advance();
                break;
            case TokenKind::variable_begin: {
                const SourcePos at = pos();
                advance();
                ExprPtr expr = parse_tuple(true);
                if (current().kind != TokenKind::variable_end) unexpected("end of print statement '}}'");
                advance();
                body.push_back(std::make_unique<OutputStmt>(at, std::move(expr)));
                break;
            }
            case TokenKind::block_begin: {
                const Token& tag = peek();
                if (tag.kind == TokenKind::name) {
                    for (std::string_view end : end_tags) {
                        if (tag.text == end) {
                            advance();  // leave the tag name as the current token
                            return body;
                        }
                    }
                }
                advance();
                body.push_back(parse_statement());
                break;
            }
            case TokenKind::eof: {
                if (end_tags.size() == 0) return body;
                std::string expected;
                for (std::string_view end : end_tags) {
                    expected += expected.empty() ? fmt::format("'{}'", end) : fmt::format(" or '{}'", end);
                }
                fail_at(ErrorKind::syntax, opened_at,
                        fmt::format("unexpected end of template: the '{}' block opened here is never closed "
                                    "(expected {})",
                                    opened_by, expected));
            }
            default:
                unexpected("text, '{{' or '{%'");
        }
    }
}

StmtPtr Parser::parse_statement() {
    RecursionGuard guard(*this);
    const SourcePos at = pos();
    if (current().kind != TokenKind::name) unexpected("a tag name");
    const std::string tag = current().text;
    advance();
    if (tag == "for") return parse_for(at);
    if (tag == "if") return parse_if(at);
    if (tag == "set") return parse_set(at);
    if (tag == "macro") return parse_macro(at);
    if (tag == "call") return parse_call_block(at);
    if (tag == "filter") return parse_filter_block(at);
    if (tag == "with") return parse_with(at);
    if (tag == "break" || tag == "continue") {
        if (loop_depth_ == 0) fail_at(ErrorKind::syntax, at, fmt::format("'{}' outside of a for loop", tag));
        expect_block_end();
        return std::make_unique<LoopControlStmt>(tag == "break" ? StmtKind::break_ : StmtKind::continue_, at);
    }
    if (tag == "generation") {
        expect_block_end();
        auto scope = std::make_unique<ScopeStmt>(at);
        scope->body = parse_body({"endgeneration"}, at, tag);
        expect_end_tag("endgeneration");
        return scope;
    }
    if (tag == "include" || tag == "import" || tag == "from" || tag == "extends" || tag == "block" ||
        tag == "autoescape" || tag == "do" || tag == "trans" || tag == "pluralize") {
        fail_at(ErrorKind::unsupported, at,
                fmt::format("the '{}' tag is not supported (a chat template cannot load other templates or run "
                            "extensions)",
                            tag));
    }
    fail_at(ErrorKind::syntax, at, fmt::format("unknown tag '{}'", tag));
}

void Parser::expect_end_tag(std::string_view name) {
    if (!is_name(name)) unexpected(fmt::format("'{}'", name));
    advance();
    expect_block_end();
}

Target Parser::parse_target(bool allow_namespace, bool allow_unpack) {
    Target target;
    if (allow_namespace && current().kind == TokenKind::name && peek().kind == TokenKind::op && peek().text == ".") {
        target.names.push_back(expect_name());
        advance();
        target.attribute = expect_name();
        if (target.attribute.starts_with('_')) {
            fail_at(ErrorKind::security, pos(), "attributes starting with '_' cannot be assigned");
        }
        return target;
    }
    const bool parenthesized = allow_unpack && is_op("(");
    if (parenthesized) advance();
    for (;;) {
        target.names.push_back(expect_name());
        if (!allow_unpack || !is_op(",")) break;
        advance();
        target.unpack = true;
        if (current().kind != TokenKind::name) break;  // trailing comma
    }
    if (parenthesized) {
        target.unpack = true;
        expect_op(")");
    }
    for (const std::string& name : target.names) {
        if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
            name == "None") {
            fail_here(fmt::format("cannot assign to '{}'", name));
        }
    }
    return target;
}

StmtPtr Parser::parse_for(SourcePos at) {
    auto stmt = std::make_unique<ForStmt>(at);
    stmt->target = parse_target(false, true);
    if (!is_name("in")) unexpected("'in'");
    advance();
    stmt->iterable = parse_tuple(false, {"recursive"});
    const SoftFrame loop_frame(soft_, false);
    if (is_name("if")) {
        advance();
        stmt->condition = parse_expression();
    }
    if (is_name("recursive")) fail_at(ErrorKind::unsupported, pos(), "recursive for loops are not supported");
    expect_block_end();
    ++loop_depth_;
    stmt->body = parse_body({"endfor", "else"}, at, "for");
    --loop_depth_;
    if (is_name("else")) {
        advance();
        expect_block_end();
        stmt->else_body = parse_body({"endfor"}, at, "for");
    }
    expect_end_tag("endfor");
    return stmt;
}

StmtPtr Parser::parse_if(SourcePos at) {
    const SoftFrame soft(soft_, true);
    auto stmt = std::make_unique<IfStmt>(at);
    ExprPtr test = parse_tuple(false);
    for (;;) {
        expect_block_end();
        StmtList body = parse_body({"elif", "else", "endif"}, at, "if");
        stmt->branches.emplace_back(std::move(test), std::move(body));
        if (is_name("elif")) {
            advance();
            test = parse_tuple(false);
            continue;
        }
        if (is_name("else")) {
            advance();
            expect_block_end();
            stmt->else_body = parse_body({"endif"}, at, "if");
        }
        expect_end_tag("endif");
        return stmt;
    }
}

std::vector<std::unique_ptr<FilterExpr>> Parser::parse_filter_chain() {
    std::vector<std::unique_ptr<FilterExpr>> filters;
    filters.push_back(parse_filter(nullptr));
    while (is_op("|")) filters.push_back(parse_filter(nullptr));
    return filters;
}

StmtPtr Parser::parse_set(SourcePos at) {
    Target target = parse_target(true, true);
    if (is_op("=")) {
        advance();
        auto stmt = std::make_unique<SetStmt>(at);
        stmt->target = std::move(target);
        stmt->value = parse_tuple(true);
        expect_block_end();
        return stmt;
    }
    if (target.unpack) unexpected("'='");
    const SoftFrame block_frame(soft_, false);
    auto stmt = std::make_unique<SetBlockStmt>(at);
    stmt->target = std::move(target);
    if (is_op("|")) stmt->filters = parse_filter_chain();
    expect_block_end();
    stmt->body = parse_body({"endset"}, at, "set");
    expect_end_tag("endset");
    return stmt;
}

void Parser::parse_macro_params(MacroParams& params) {
    expect_op("(");
    while (!is_op(")")) {
        if (!params.names.empty()) expect_op(",");
        const SourcePos at = pos();
        std::string name = expect_name();
        if (is_op("=")) {
            advance();
            params.defaults.push_back(parse_expression());
        } else if (!params.defaults.empty()) {
            fail_at(ErrorKind::syntax, at, "a parameter without a default follows one with a default");
        }
        params.names.push_back(std::move(name));
    }
    expect_op(")");
}

StmtPtr Parser::parse_macro(SourcePos at) {
    const SoftFrame macro_frame(soft_, false);
    std::string name = expect_name();
    auto macro = std::make_unique<MacroStmt>(at);
    macro->name = std::move(name);
    parse_macro_params(macro->params);
    expect_block_end();
    const uint32_t saved_loops = loop_depth_;
    loop_depth_ = 0;
    macros_.push_back(macro.get());
    macro->body = parse_body({"endmacro"}, at, "macro");
    macros_.pop_back();
    loop_depth_ = saved_loops;
    if (!is_name("endmacro")) unexpected("'endmacro'");
    advance();
    if (current().kind == TokenKind::name) advance();  // {% endmacro name %}
    expect_block_end();
    return macro;
}

StmtPtr Parser::parse_call_block(SourcePos at) {
    auto stmt = std::make_unique<CallBlockStmt>(at);
    auto caller = std::make_unique<MacroStmt>(at);
    caller->name = "caller";
    if (is_op("(")) {
        const SoftFrame caller_frame(soft_, false);
        parse_macro_params(caller->params);
    }
    ExprPtr call = parse_expression();
    if (call->kind != ExprKind::call) fail_at(ErrorKind::syntax, call->pos, "{% call %} needs a macro call");
    stmt->call.reset(static_cast<CallExpr*>(call.release()));
    expect_block_end();
    const SoftFrame caller_frame(soft_, false);
    const uint32_t saved_loops = loop_depth_;
    loop_depth_ = 0;
    macros_.push_back(caller.get());
    caller->body = parse_body({"endcall"}, at, "call");
    macros_.pop_back();
    loop_depth_ = saved_loops;
    expect_end_tag("endcall");
    stmt->caller = std::move(caller);
    return stmt;
}

StmtPtr Parser::parse_filter_block(SourcePos at) {
    const SoftFrame block_frame(soft_, false);
    auto stmt = std::make_unique<FilterBlockStmt>(at);
    stmt->filters = parse_filter_chain();
    expect_block_end();
    stmt->body = parse_body({"endfilter"}, at, "filter");
    expect_end_tag("endfilter");
    return stmt;
}

StmtPtr Parser::parse_with(SourcePos at) {
    auto stmt = std::make_unique<WithStmt>(at);
    while (current().kind != TokenKind::block_end) {
        if (!stmt->assignments.empty()) expect_op(",");
        Target target = parse_target(false, false);
        expect_op("=");
        stmt->assignments.emplace_back(std::move(target), parse_expression());
    }
    expect_block_end();
    const SoftFrame body_frame(soft_, false);
    stmt->body = parse_body({"endwith"}, at, "with");
    expect_end_tag("endwith");
    return stmt;
}

}  // namespace powerhouse::jinja
