// Expressions, in jinja2's precedence order (loosest first): conditional, or, and, not,
// comparisons (==, in, not in, ...), + -, ~, * / // %, **, unary - +, then primaries with
// their postfix (.attr, [index], (call)) and filters/tests (| f, is t).
#include <fmt/format.h>

#include "template/parser_impl.h"

namespace powerhouse::jinja {

namespace {

uint32_t max_depth(const std::vector<ExprPtr>& items) {
    uint32_t depth = 0;
    for (const ExprPtr& item : items) depth = std::max(depth, item ? item->depth : 0);
    return depth;
}

uint32_t args_depth(const CallArgs& args) {
    uint32_t depth = max_depth(args.positional);
    for (const auto& [name, value] : args.keyword) depth = std::max(depth, value->depth);
    return depth;
}

}  // namespace

ExprPtr Parser::parse_tuple(bool with_condition, std::initializer_list<std::string_view> extra_end,
                            bool explicit_parentheses) {
    const SourcePos start = pos();
    auto at_end = [&] {
        const Token& t = current();
        if (t.kind == TokenKind::variable_end || t.kind == TokenKind::block_end || t.kind == TokenKind::eof)
            return true;
        if (t.kind == TokenKind::op && t.text == ")") return true;
        if (t.kind == TokenKind::name) {
            for (std::string_view end : extra_end) {
                if (t.text == end) return true;
            }
        }
        return false;
    };
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    for (;;) {
        if (!items.empty()) expect_op(",");
        if (at_end()) break;
        items.push_back(parse_expression(with_condition));
        if (is_op(",")) {
            is_tuple = true;
        } else {
            break;
        }
    }
    if (!is_tuple) {
        if (!items.empty()) return std::move(items.front());
        if (!explicit_parentheses) unexpected("an expression");
    }
    auto tuple = std::make_unique<ListExpr>(start, true);
    const uint32_t depth = max_depth(items);
    tuple->items = std::move(items);
    return finish(std::move(tuple), depth);
}

ExprPtr Parser::parse_expression(bool with_condition) {
    RecursionGuard guard(*this);
    return with_condition ? parse_condition() : parse_or();
}

ExprPtr Parser::parse_condition() {
    const size_t first_unknown = unknown_.size();
    ExprPtr expr = parse_or();
    while (is_name("if")) {
        // The value before 'if' is evaluated only when the test holds: soft, as what follows.
        for (size_t i = first_unknown; i < unknown_.size(); ++i) unknown_[i].soft = true;
        const SoftFrame soft(soft_, true);
        const SourcePos at = pos();
        advance();
        auto cond = std::make_unique<ConditionExpr>(at);
        cond->then_value = std::move(expr);
        cond->test = parse_or();
        if (is_name("else")) {
            advance();
            RecursionGuard guard(*this);
            cond->else_value = parse_condition();
        }
        const uint32_t depth = depth_of({cond->then_value.get(), cond->test.get(), cond->else_value.get()});
        expr = finish(std::move(cond), depth);
    }
    return expr;
}

ExprPtr Parser::parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
        const SourcePos at = pos();
        advance();
        ExprPtr right = parse_and();
        const Expr* l = left.get();
        const Expr* r = right.get();
        left = finish(std::make_unique<BinaryExpr>(at, BinaryOp::logical_or, std::move(left), std::move(right)),
                      depth_of({l, r}));
    }
    return left;
}

ExprPtr Parser::parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
        const SourcePos at = pos();
        advance();
        ExprPtr right = parse_not();
        const Expr* l = left.get();
        const Expr* r = right.get();
        left = finish(std::make_unique<BinaryExpr>(at, BinaryOp::logical_and, std::move(left), std::move(right)),
                      depth_of({l, r}));
    }
    return left;
}

ExprPtr Parser::parse_not() {
    if (is_name("not")) {
        const SourcePos at = pos();
        advance();
        RecursionGuard guard(*this);
        ExprPtr operand = parse_not();
        const Expr* o = operand.get();
        return finish(std::make_unique<UnaryExpr>(at, UnaryOp::logical_not, std::move(operand)), depth_of({o}));
    }
    return parse_compare();
}

ExprPtr Parser::parse_compare() {
    const SourcePos at = pos();
    ExprPtr first = parse_math1();
    std::unique_ptr<CompareExpr> compare;
    for (;;) {
        CompareOp op;
        if (current().kind == TokenKind::op &&
            (current().text == "==" || current().text == "!=" || current().text == "<" || current().text == "<=" ||
             current().text == ">" || current().text == ">=")) {
            const std::string& t = current().text;
            op = t == "=="   ? CompareOp::eq
                 : t == "!=" ? CompareOp::ne
                 : t == "<"  ? CompareOp::lt
                 : t == "<=" ? CompareOp::le
                 : t == ">"  ? CompareOp::gt
                             : CompareOp::ge;
            advance();
        } else if (is_name("in")) {
            op = CompareOp::in;
            advance();
        } else if (is_name("not") && peek().kind == TokenKind::name && peek().text == "in") {
            op = CompareOp::not_in;
            advance();
            advance();
        } else {
            break;
        }
        if (!compare) compare = std::make_unique<CompareExpr>(at, std::move(first));
        compare->rest.emplace_back(op, parse_math1());
    }
    if (!compare) return first;
    uint32_t depth = compare->first->depth;
    for (const auto& [op, operand] : compare->rest) depth = std::max(depth, operand->depth);
    return finish(std::move(compare), depth);
}

ExprPtr Parser::parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
        const SourcePos at = pos();
        const BinaryOp op = is_op("+") ? BinaryOp::add : BinaryOp::sub;
        advance();
        ExprPtr right = parse_concat();
        const Expr* l = left.get();
        const Expr* r = right.get();
        left = finish(std::make_unique<BinaryExpr>(at, op, std::move(left), std::move(right)), depth_of({l, r}));
    }
    return left;
}

ExprPtr Parser::parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
        const SourcePos at = pos();
        advance();
        ExprPtr right = parse_math2();
        const Expr* l = left.get();
        const Expr* r = right.get();
        left = finish(std::make_unique<BinaryExpr>(at, BinaryOp::concat, std::move(left), std::move(right)),
                      depth_of({l, r}));
    }
    return left;
}

ExprPtr Parser::parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
        const SourcePos at = pos();
        const std::string& t = current().text;
        const BinaryOp op = t == "*"    ? BinaryOp::mul
                            : t == "/"  ? BinaryOp::div
                            : t == "//" ? BinaryOp::floordiv
                                        : BinaryOp::mod;
        advance();
        ExprPtr right = parse_pow();
        const Expr* l = left.get();
        const Expr* r = right.get();
        left = finish(std::make_unique<BinaryExpr>(at, op, std::move(left), std::move(right)), depth_of({l, r}));
    }
    return left;
}

ExprPtr Parser::parse_pow() {
    ExprPtr left = parse_unary();
    while (is_op("**")) {
        const SourcePos at = pos();
        advance();
        ExprPtr right = parse_unary();
        const Expr* l = left.get();
        const Expr* r = right.get();
        left = finish(std::make_unique<BinaryExpr>(at, BinaryOp::pow, std::move(left), std::move(right)),
                      depth_of({l, r}));
    }
    return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
        const SourcePos at = pos();
        const UnaryOp op = is_op("-") ? UnaryOp::negate : UnaryOp::plus;
        advance();
        RecursionGuard guard(*this);  // - - - - x
        ExprPtr operand = parse_unary(false);
        const Expr* o = operand.get();
        node = finish(std::make_unique<UnaryExpr>(at, op, std::move(operand)), depth_of({o}));
    } else {
        node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
}

ExprPtr Parser::parse_primary() {
    // No guard here: every way back into parse_primary passes parse_expression (parentheses,
    // lists, dicts, arguments), parse_not or parse_unary, which count one level each.
    const Token& t = current();
    const SourcePos at = pos();
    switch (t.kind) {
        case TokenKind::name: {
            Value constant;
            bool is_constant = true;
            if (t.text == "true" || t.text == "True") {
                constant = Value(true);
            } else if (t.text == "false" || t.text == "False") {
                constant = Value(false);
            } else if (t.text == "none" || t.text == "None") {
                constant = Value::none();
            } else {
                is_constant = false;
            }
            if (is_constant) {
                advance();
                return finish(std::make_unique<LiteralExpr>(at, std::move(constant)), 0);
            }
            note_name(t.text);
            auto name = std::make_unique<NameExpr>(at, t.text);
            advance();
            return finish(std::move(name), 0);
        }
        case TokenKind::string: {
            std::string text = t.text;
            advance();
            while (current().kind == TokenKind::string) {  // adjacent literals join, as in Python
                text += current().text;
                advance();
            }
            return finish(std::make_unique<LiteralExpr>(at, Value(std::move(text))), 0);
        }
        case TokenKind::integer: {
            const int64_t v = t.int_value;
            advance();
            return finish(std::make_unique<LiteralExpr>(at, Value(v)), 0);
        }
        case TokenKind::floating: {
            const double v = t.float_value;
            advance();
            return finish(std::make_unique<LiteralExpr>(at, Value(v)), 0);
        }
        case TokenKind::op:
            if (t.text == "(") {
                advance();
                ExprPtr inner = parse_tuple(true, {}, true);
                expect_op(")");
                return inner;
            }
            if (t.text == "[") return parse_list(at);
            if (t.text == "{") return parse_dict(at);
            break;
        default:
            break;
    }
    unexpected("an expression");
}

ExprPtr Parser::parse_list(SourcePos at) {
    expect_op("[");
    auto list = std::make_unique<ListExpr>(at, false);
    while (!is_op("]")) {
        if (!list->items.empty()) {
            expect_op(",");
            if (is_op("]")) break;
        }
        list->items.push_back(parse_expression());
    }
    expect_op("]");
    const uint32_t depth = max_depth(list->items);
    return finish(std::move(list), depth);
}

ExprPtr Parser::parse_dict(SourcePos at) {
    expect_op("{");
    auto dict = std::make_unique<DictExpr>(at);
    uint32_t depth = 0;
    while (!is_op("}")) {
        if (!dict->items.empty()) {
            expect_op(",");
            if (is_op("}")) break;
        }
        ExprPtr key = parse_expression();
        expect_op(":");
        ExprPtr value = parse_expression();
        depth = std::max({depth, key->depth, value->depth});
        dict->items.emplace_back(std::move(key), std::move(value));
    }
    expect_op("}");
    return finish(std::move(dict), depth);
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
    for (;;) {
        if (is_op(".") || is_op("[")) {
            node = parse_subscript(std::move(node));
        } else if (is_op("(")) {
            const SourcePos at = node->pos;  // errors in a call point at what is called
            auto call = std::make_unique<CallExpr>(at, std::move(node));
            parse_call_args(call->args);
            const uint32_t depth = std::max(call->callee->depth, args_depth(call->args));
            node = finish(std::move(call), depth);
        } else {
            return node;
        }
    }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
    const SourcePos at = pos();
    if (is_op(".")) {
        advance();
        if (current().kind == TokenKind::name) {
            std::string name = current().text;
            advance();
            const Expr* o = node.get();
            return finish(std::make_unique<AttributeExpr>(at, std::move(node), std::move(name)), depth_of({o}));
        }
        if (current().kind == TokenKind::integer) {
            auto index = std::make_unique<LiteralExpr>(pos(), Value(current().int_value));
            advance();
            const Expr* o = node.get();
            return finish(std::make_unique<ItemExpr>(at, std::move(node), std::move(index)), depth_of({o}));
        }
        unexpected("an attribute name");
    }
    expect_op("[");
    // a[i], a[i:j:k] (any part may be left out)
    ExprPtr first;
    if (!is_op(":")) first = parse_expression();
    if (!is_op(":")) {
        if (is_op(",")) fail_here("indexing with several subscripts is not supported");
        expect_op("]");
        const Expr* o = node.get();
        const Expr* i = first.get();
        return finish(std::make_unique<ItemExpr>(at, std::move(node), std::move(first)), depth_of({o, i}));
    }
    auto slice = std::make_unique<SliceExpr>(at, std::move(node));
    slice->start = std::move(first);
    advance();  // ':'
    if (!is_op(":") && !is_op("]")) slice->stop = parse_expression();
    if (is_op(":")) {
        advance();
        if (!is_op("]")) slice->step = parse_expression();
    }
    expect_op("]");
    const Expr* o = slice->object.get();
    const Expr* a = slice->start.get();
    const Expr* b = slice->stop.get();
    const Expr* c = slice->step.get();
    return finish(std::move(slice), depth_of({o, a, b, c}));
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
    for (;;) {
        if (is_op("|")) {
            node = parse_filter(std::move(node));
        } else if (is_name("is")) {
            node = parse_test(std::move(node));
        } else if (is_op("(")) {
            node = parse_postfix(std::move(node));
        } else {
            return node;
        }
    }
}

std::unique_ptr<FilterExpr> Parser::parse_filter(ExprPtr operand) {
    if (is_op("|")) advance();
    const SourcePos at = pos();
    std::string name = expect_name();
    while (is_op(".")) {
        advance();
        name += "." + expect_name();
    }
    const FilterFunction function = find_filter(name);
    if (function == nullptr) {
        UnknownCallable unknown = unknown_filter(name);
        note_unknown(at, unknown.kind, std::move(unknown.message));
    }
    auto filter = std::make_unique<FilterExpr>(at, std::move(operand), std::move(name), function);
    if (is_op("(")) parse_call_args(filter->args);
    const uint32_t depth = std::max(filter->operand ? filter->operand->depth : 0, args_depth(filter->args));
    return finish(std::move(filter), depth);
}

ExprPtr Parser::parse_test(ExprPtr node) {
    advance();  // 'is'
    bool negated = false;
    if (is_name("not")) {
        negated = true;
        advance();
    }
    const SourcePos at = pos();
    std::string name = expect_name();
    while (is_op(".")) {
        advance();
        name += "." + expect_name();
    }
    const TestFunction function = find_test(name);
    if (function == nullptr) {
        UnknownCallable unknown = unknown_test(name);
        note_unknown(at, unknown.kind, std::move(unknown.message));
    }
    auto test = std::make_unique<TestExpr>(at, std::move(node), std::move(name), function, negated);
    const Token& t = current();
    const bool starts_argument = t.kind == TokenKind::name || t.kind == TokenKind::string ||
                                 t.kind == TokenKind::integer || t.kind == TokenKind::floating ||
                                 (t.kind == TokenKind::op && (t.text == "[" || t.text == "{"));
    if (is_op("(")) {
        parse_call_args(test->args);
    } else if (starts_argument && !is_name("else") && !is_name("or") && !is_name("and")) {
        if (is_name("is")) fail_here("tests cannot be chained with 'is'");
        test->args.positional.push_back(parse_postfix(parse_primary()));
    }
    const uint32_t depth = std::max(test->operand->depth, args_depth(test->args));
    return finish(std::move(test), depth);
}

void Parser::parse_call_args(CallArgs& args) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
        if (!first) {
            expect_op(",");
            if (is_op(")")) break;
        }
        first = false;
        if (is_op("*") || is_op("**")) fail_here("*args and **kwargs in calls are not supported");
        if (current().kind == TokenKind::name && peek().kind == TokenKind::op && peek().text == "=") {
            std::string key = current().text;
            advance();
            advance();
            args.keyword.emplace_back(std::move(key), parse_expression());
        } else {
            if (!args.keyword.empty()) fail_here("a positional argument follows a keyword argument");
            args.positional.push_back(parse_expression());
        }
    }
    expect_op(")");
}

}  // namespace powerhouse::jinja
