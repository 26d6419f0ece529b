// Runs a parsed template against a context: a tree-walking interpreter with jinja2's
// semantics (scoping, Undefined, loop variables, macros) inside the sandbox — the template
// sees only the context's data and the built-in globals, and every render is bounded by a
// Budget.
//
// Thread-safety: one Interpreter per render; the TemplateAst it reads may be shared.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "powerhouse/chat_template.h"
#include "template/ast.h"
#include "template/interpreter_objects.h"
#include "template/limits.h"
#include "template/provenance.h"
#include "template/value.h"

namespace powerhouse::jinja {

class Interpreter {
public:
    Interpreter(const TemplateAst& ast, const RenderOptions& options);

    // Throws TemplateError.
    std::string render(const nlohmann::ordered_json& context);
    // Also records which bytes of the output came from the context's data: every string in
    // the context is data except those of the top-level variables named in `trusted`.
    TrackedText render_tracked(const nlohmann::ordered_json& context, const std::vector<std::string>& trusted);

    // ---- services for the built-in functions
    Budget& budget() { return budget_; }
    Arena& arena() { return arena_; }
    const RenderOptions& options() const { return options_; }

    // Calls a macro, function or bound method.
    Value call(const Value& callee, Args& args);
    // jinja2's getattr (a.b: attribute first, then item) and getitem (a[b]: item first).
    Value get_attribute(const Value& object, std::string_view name);
    Value get_item(const Value& object, const Value& key);
    // Looks up "a.b.0" paths the way filters like map(attribute=...) and selectattr do.
    Value get_path(const Value& object, std::string_view path);
    Value apply_filter(std::string_view name, const Value& operand, Args& args);
    bool apply_test(std::string_view name, const Value& operand, Args& args);
    // The items Python's iter() would give (generators are consumed; dicts give keys,
    // strings characters, Undefined nothing).
    std::vector<Value> iterate(const Value& value);

    // Builders that check sizes and nesting against the budget.
    Value make_string(std::string text);
    Value make_list(std::vector<Value> items, SequenceKind kind = SequenceKind::list);
    Value make_dict(DictObject dict);
    Value from_json(const nlohmann::ordered_json& json, uint32_t depth = 0);
    DataTracker& tracker() { return tracker_; }
    // After a filter, method, operator or indexing: when its inputs held data, every string
    // in the result is data (see provenance.h).
    Value track_result(Value result, bool inputs_hold_data);

private:
    enum class Flow { normal, break_loop, continue_loop };

    Flow exec_body(const StmtList& body, Scope& scope, TrackedText& out);
    Flow exec(const Stmt& stmt, Scope& scope, TrackedText& out);
    Flow exec_if(const struct IfStmt& stmt, Scope& scope, TrackedText& out);
    void exec_for(const struct ForStmt& stmt, Scope& scope, TrackedText& out);
    void exec_set(const struct SetStmt& stmt, Scope& scope);
    void exec_set_block(const struct SetBlockStmt& stmt, Scope& scope);
    void exec_macro(const struct MacroStmt& stmt, Scope& scope);
    void exec_call_block(const struct CallBlockStmt& stmt, Scope& scope, TrackedText& out);
    void exec_filter_block(const struct FilterBlockStmt& stmt, Scope& scope, TrackedText& out);
    void assign(const Target& target, const Value& value, Scope& scope, SourcePos pos);
    void append(TrackedText& out, std::string_view text);
    void append_value(TrackedText& out, const Value& value);
    Scope* capture(Scope& scope);

    Value eval(const Expr& expr, Scope& scope);
    Value eval_name(const struct NameExpr& expr, Scope& scope);
    Value eval_list(const struct ListExpr& expr, Scope& scope);
    Value eval_dict(const struct DictExpr& expr, Scope& scope);
    Value eval_slice(const struct SliceExpr& expr, Scope& scope);
    Value eval_call(const struct CallExpr& expr, Scope& scope);
    Value eval_filter(const struct FilterExpr& expr, const Value& operand, Scope& scope);
    Value eval_test(const struct TestExpr& expr, Scope& scope);
    Value eval_unary(const struct UnaryExpr& expr, Scope& scope);
    Value eval_binary(const struct BinaryExpr& expr, Scope& scope);
    Value eval_compare(const struct CompareExpr& expr, Scope& scope);
    Value eval_condition(const struct ConditionExpr& expr, Scope& scope);
    void eval_args(const CallArgs& call_args, Scope& scope, Args& args);
    Value call_macro(MacroObject* macro, Args& args, MacroObject* caller);
    Value loop_attribute(const Value& loop, std::string_view name);

    const TemplateAst& ast_;
    RenderOptions options_;
    Budget budget_;
    Arena arena_;
    Scope root_;
    DataTracker tracker_;
};

// Python slicing of a list, tuple or string; undefined for anything else.
Value slice_value(Interpreter& interp, const Value& object, const Value& start, const Value& stop, const Value& step);

}  // namespace powerhouse::jinja
