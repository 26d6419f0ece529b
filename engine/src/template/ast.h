// The syntax tree of a parsed template: expressions and statements, each with its source
// offset for error messages and (expressions) its nesting depth, which the parser caps so
// that evaluating or destroying any tree needs bounded stack.
//
// Thread-safety: built once by the parser, then only read (shared by concurrent renders).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/builtins.h"
#include "template/limits.h"
#include "template/value.h"

namespace powerhouse::jinja {

enum class ExprKind : uint8_t {
    literal,
    name,
    list,  // list or tuple display
    dict,
    attribute,  // a.b
    item,       // a[b]
    slice,      // a[b:c:d]
    call,
    filter,
    test,
    unary,
    binary,
    compare,
    condition,  // a if b else c
};

struct Expr {
    Expr(ExprKind k, SourcePos p) : kind(k), pos(p) {}
    virtual ~Expr() = default;
    Expr(const Expr&) = delete;
    Expr& operator=(const Expr&) = delete;

    ExprKind kind;
    SourcePos pos;
    uint32_t depth = 1;  // 1 + the deepest child
};
using ExprPtr = std::unique_ptr<Expr>;

struct LiteralExpr : Expr {
    LiteralExpr(SourcePos p, Value v) : Expr(ExprKind::literal, p), value(std::move(v)) {}
    Value value;
};

struct NameExpr : Expr {
    NameExpr(SourcePos p, std::string n) : Expr(ExprKind::name, p), name(std::move(n)) {}
    std::string name;
};

struct ListExpr : Expr {
    ListExpr(SourcePos p, bool tuple) : Expr(ExprKind::list, p), is_tuple(tuple) {}
    std::vector<ExprPtr> items;
    bool is_tuple;
};

struct DictExpr : Expr {
    explicit DictExpr(SourcePos p) : Expr(ExprKind::dict, p) {}
    std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct AttributeExpr : Expr {
    AttributeExpr(SourcePos p, ExprPtr o, std::string n)
        : Expr(ExprKind::attribute, p), object(std::move(o)), name(std::move(n)) {}
    ExprPtr object;
    std::string name;
};

struct ItemExpr : Expr {
    ItemExpr(SourcePos p, ExprPtr o, ExprPtr i) : Expr(ExprKind::item, p), object(std::move(o)), index(std::move(i)) {}
    ExprPtr object;
    ExprPtr index;
};

struct SliceExpr : Expr {
    SliceExpr(SourcePos p, ExprPtr o) : Expr(ExprKind::slice, p), object(std::move(o)) {}
    ExprPtr object;
    ExprPtr start, stop, step;  // each may be null
};

struct CallArgs {
    std::vector<ExprPtr> positional;
    std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct CallExpr : Expr {
    CallExpr(SourcePos p, ExprPtr c) : Expr(ExprKind::call, p), callee(std::move(c)) {}
    ExprPtr callee;
    CallArgs args;
};

struct FilterExpr : Expr {
    FilterExpr(SourcePos p, ExprPtr o, std::string n, FilterFunction f)
        : Expr(ExprKind::filter, p), operand(std::move(o)), name(std::move(n)), function(f) {}
    ExprPtr operand;  // null in {% filter %} blocks and {% set x | f %}: the block's text
    std::string name;
    FilterFunction function;
    CallArgs args;
};

struct TestExpr : Expr {
    TestExpr(SourcePos p, ExprPtr o, std::string n, TestFunction f, bool neg)
        : Expr(ExprKind::test, p), operand(std::move(o)), name(std::move(n)), function(f), negated(neg) {}
    ExprPtr operand;
    std::string name;
    TestFunction function;
    bool negated;
    CallArgs args;
};

enum class UnaryOp : uint8_t { negate, plus, logical_not };

struct UnaryExpr : Expr {
    UnaryExpr(SourcePos p, UnaryOp o, ExprPtr e) : Expr(ExprKind::unary, p), op(o), operand(std::move(e)) {}
    UnaryOp op;
    ExprPtr operand;
};

enum class BinaryOp : uint8_t { add, sub, mul, div, floordiv, mod, pow, concat, logical_and, logical_or };

struct BinaryExpr : Expr {
    BinaryExpr(SourcePos p, BinaryOp o, ExprPtr l, ExprPtr r)
        : Expr(ExprKind::binary, p), op(o), left(std::move(l)), right(std::move(r)) {}
    BinaryOp op;
    ExprPtr left, right;
};

enum class CompareOp : uint8_t { eq, ne, lt, le, gt, ge, in, not_in };

// a < b <= c: Python's chained comparison, each operand evaluated once.
struct CompareExpr : Expr {
    CompareExpr(SourcePos p, ExprPtr f) : Expr(ExprKind::compare, p), first(std::move(f)) {}
    ExprPtr first;
    std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct ConditionExpr : Expr {
    explicit ConditionExpr(SourcePos p) : Expr(ExprKind::condition, p) {}
    ExprPtr test, then_value, else_value;  // else_value may be null (then: undefined)
};

// ---------------------------------------------------------------------------------------

enum class StmtKind : uint8_t {
    text,
    output,
    if_,
    for_,
    set,
    set_block,
    macro,
    call_block,
    filter_block,
    with,
    scope,  // a body with its own scope ({% generation %})
    break_,
    continue_,
};

struct Stmt {
    Stmt(StmtKind k, SourcePos p) : kind(k), pos(p) {}
    virtual ~Stmt() = default;
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;

    StmtKind kind;
    SourcePos pos;
};
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

struct TextStmt : Stmt {
    TextStmt(SourcePos p, std::string t) : Stmt(StmtKind::text, p), text(std::move(t)) {}
    std::string text;
};

struct OutputStmt : Stmt {
    OutputStmt(SourcePos p, ExprPtr e) : Stmt(StmtKind::output, p), expr(std::move(e)) {}
    ExprPtr expr;
};

struct IfStmt : Stmt {
    explicit IfStmt(SourcePos p) : Stmt(StmtKind::if_, p) {}
    std::vector<std::pair<ExprPtr, StmtList>> branches;  // if, elif...
    StmtList else_body;
};

// Assignment targets: `x`, `a, b` (unpacking) or `ns.attr` (namespace attribute).
struct Target {
    std::vector<std::string> names;
    bool unpack = false;
    std::string attribute;  // set for ns.attr: names[0] is the namespace
};

struct ForStmt : Stmt {
    explicit ForStmt(SourcePos p) : Stmt(StmtKind::for_, p) {}
    Target target;
    ExprPtr iterable;
    ExprPtr condition;  // `for x in xs if cond`, may be null
    StmtList body, else_body;
};

struct SetStmt : Stmt {
    explicit SetStmt(SourcePos p) : Stmt(StmtKind::set, p) {}
    Target target;
    ExprPtr value;
};

// {% set x %}...{% endset %}, optionally filtered: {% set x | trim %}.
struct SetBlockStmt : Stmt {
    explicit SetBlockStmt(SourcePos p) : Stmt(StmtKind::set_block, p) {}
    Target target;
    std::vector<std::unique_ptr<FilterExpr>> filters;
    StmtList body;
};

struct MacroParams {
    std::vector<std::string> names;
    std::vector<ExprPtr> defaults;  // for the last defaults.size() names
};

struct MacroStmt : Stmt {
    explicit MacroStmt(SourcePos p) : Stmt(StmtKind::macro, p) {}
    std::string name;
    MacroParams params;
    StmtList body;
    // jinja2 accepts extra arguments only when the body mentions varargs / kwargs.
    bool uses_varargs = false;
    bool uses_kwargs = false;
    bool uses_caller = false;
};

// {% call(args) macro(...) %}body{% endcall %}: the body becomes `caller`.
struct CallBlockStmt : Stmt {
    explicit CallBlockStmt(SourcePos p) : Stmt(StmtKind::call_block, p) {}
    std::unique_ptr<CallExpr> call;
    std::unique_ptr<MacroStmt> caller;  // name "caller"
};

struct FilterBlockStmt : Stmt {
    explicit FilterBlockStmt(SourcePos p) : Stmt(StmtKind::filter_block, p) {}
    std::vector<std::unique_ptr<FilterExpr>> filters;
    StmtList body;
};

struct WithStmt : Stmt {
    explicit WithStmt(SourcePos p) : Stmt(StmtKind::with, p) {}
    std::vector<std::pair<Target, ExprPtr>> assignments;
    StmtList body;
};

struct ScopeStmt : Stmt {
    explicit ScopeStmt(SourcePos p) : Stmt(StmtKind::scope, p) {}
    StmtList body;
};

struct LoopControlStmt : Stmt {
    LoopControlStmt(StmtKind k, SourcePos p) : Stmt(k, p) {}
};

struct TemplateAst {
    StmtList body;
};

}  // namespace powerhouse::jinja
