// Statements, scopes, macros and the render entry point. Expressions are in
// interpreter_expressions.cpp.
#include "template/interpreter.h"

#include <fmt/format.h>

#include <algorithm>

#include "template/text.h"
#include "template/value_format.h"
#include "template/value_ops.h"

namespace powerhouse::jinja {

// ---- Scope ------------------------------------------------------------------------------

const Value* Scope::find_local(std::string_view name) const {
    if (!index_.empty()) {
        const auto it = index_.find(std::string(name));
        return it == index_.end() ? nullptr : &vars_[it->second].second;
    }
    for (const auto& [key, value] : vars_) {
        if (key == name) return &value;
    }
    return nullptr;
}

const Value* Scope::find(std::string_view name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent_) {
        if (const Value* v = s->find_local(name)) return v;
    }
    return nullptr;
}

void Scope::set(std::string_view name, Value value) {
    if (const Value* existing = find_local(name)) {
        *const_cast<Value*>(existing) = std::move(value);
        return;
    }
    vars_.emplace_back(std::string(name), std::move(value));
    constexpr size_t kIndexFrom = 16;  // small scopes search linearly
    if (!index_.empty()) {
        index_.emplace(vars_.back().first, vars_.size() - 1);
    } else if (vars_.size() >= kIndexFrom) {
        for (size_t i = 0; i < vars_.size(); ++i) index_.emplace(vars_[i].first, i);
    }
}

void Scope::collect_until(const Scope* stop, std::vector<std::pair<std::string, Value>>& out) const {
    for (const Scope* s = this; s != nullptr && s != stop; s = s->parent_) {
        for (const auto& entry : s->vars_) out.push_back(entry);
    }
}

// ---- Interpreter ------------------------------------------------------------------------

Interpreter::Interpreter(const TemplateAst& ast, const RenderOptions& options)
    : ast_(ast), options_(options), budget_(options.limits), arena_(budget_) {}

Value Interpreter::make_string(std::string text) {
    budget_.reserve_string(text.size());
    return Value(std::move(text));
}

Value Interpreter::make_list(std::vector<Value> items, SequenceKind kind) {
    budget_.reserve_items(items.size());
    Value out;
    if (!make_sequence(std::move(items), kind, budget_.max_data_depth(), out)) {
        fail(ErrorKind::limit, fmt::format("data nests deeper than the limit of {}", budget_.max_data_depth()));
    }
    return out;
}

Value Interpreter::make_dict(DictObject dict) {
    budget_.reserve_items(dict.entries.size() * 2);
    Value out;
    if (!jinja::make_dict(std::move(dict), budget_.max_data_depth(), out)) {
        fail(ErrorKind::limit, fmt::format("data nests deeper than the limit of {}", budget_.max_data_depth()));
    }
    return out;
}

Value Interpreter::from_json(const nlohmann::ordered_json& json, uint32_t depth) {
    if (depth >= budget_.max_data_depth()) {
        fail(ErrorKind::limit, fmt::format("the context nests deeper than the limit of {}", budget_.max_data_depth()));
    }
    budget_.step();
    switch (json.type()) {
        case nlohmann::ordered_json::value_t::null:
            return Value::none();
        case nlohmann::ordered_json::value_t::boolean:
            return Value(json.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer:
            return Value(json.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned: {
            const auto u = json.get<uint64_t>();
            if (u > static_cast<uint64_t>(INT64_MAX)) {
                fail(ErrorKind::unsupported, "the context holds an integer larger than 64 bits");
            }
            return Value(static_cast<int64_t>(u));
        }
        case nlohmann::ordered_json::value_t::number_float:
            return Value(json.get<double>());
        case nlohmann::ordered_json::value_t::string:
            return make_string(json.get<std::string>());
        case nlohmann::ordered_json::value_t::array: {
            std::vector<Value> items;
            items.reserve(json.size());
            for (const auto& item : json) items.push_back(from_json(item, depth + 1));
            return make_list(std::move(items));
        }
        case nlohmann::ordered_json::value_t::object: {
            DictObject dict;
            for (const auto& [key, item] : json.items()) dict.set(Value(key), from_json(item, depth + 1));
            return make_dict(std::move(dict));
        }
        default:
            fail(ErrorKind::unsupported, "the context holds binary data");
    }
}

std::string Interpreter::render(const nlohmann::ordered_json& context) {
    if (!context.is_object()) fail(ErrorKind::type, "the context must be a JSON object");
    for (const auto& [key, value] : context.items()) root_.set(key, from_json(value));
    TrackedText out;
    exec_body(ast_.body, root_, out);
    return std::move(out.text);
}

TrackedText Interpreter::render_tracked(const nlohmann::ordered_json& context, const std::vector<std::string>& trusted) {
    if (!context.is_object()) fail(ErrorKind::type, "the context must be a JSON object");
    tracker_.enable();
    for (const auto& [key, value] : context.items()) {
        Value converted = from_json(value);
        const bool is_trusted = std::find(trusted.begin(), trusted.end(), key) != trusted.end();
        root_.set(key, is_trusted ? converted : tracker_.mark_all(*this, converted));
    }
    TrackedText out;
    exec_body(ast_.body, root_, out);
    return out;
}

void Interpreter::append(TrackedText& out, std::string_view text) {
    budget_.check_string_size(out.text.size() + text.size());
    out.text.append(text);
}

void Interpreter::append_value(TrackedText& out, const Value& value) {
    if (value.is_string()) {
        budget_.check_string_size(out.text.size() + value.as_string().size());
        tracker_.append(out, value);
        return;
    }
    const size_t begin = out.text.size();
    append_str(out.text, value, budget_);
    if (tracker_.contains_data(value)) add_span(out.data, begin, out.text.size());
}

Value Interpreter::track_result(Value result, bool inputs_hold_data) {
    if (!inputs_hold_data) return result;
    return tracker_.mark_all(*this, result);
}

Interpreter::Flow Interpreter::exec_body(const StmtList& body, Scope& scope, TrackedText& out) {
    for (const StmtPtr& stmt : body) {
        const Flow flow = exec(*stmt, scope, out);
        if (flow != Flow::normal) return flow;
    }
    return Flow::normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& stmt, Scope& scope, TrackedText& out) {
    NestingGuard nesting(budget_);
    try {
        switch (stmt.kind) {
            case StmtKind::text:
                append(out, static_cast<const TextStmt&>(stmt).text);
                break;
            case StmtKind::output: {
                append_value(out, eval(*static_cast<const OutputStmt&>(stmt).expr, scope));
                break;
            }
            case StmtKind::if_:
                return exec_if(static_cast<const IfStmt&>(stmt), scope, out);
            case StmtKind::for_:
                exec_for(static_cast<const ForStmt&>(stmt), scope, out);
                break;
            case StmtKind::set:
                exec_set(static_cast<const SetStmt&>(stmt), scope);
                break;
            case StmtKind::set_block:
                exec_set_block(static_cast<const SetBlockStmt&>(stmt), scope);
                break;
            case StmtKind::macro:
                exec_macro(static_cast<const MacroStmt&>(stmt), scope);
                break;
            case StmtKind::call_block:
                exec_call_block(static_cast<const CallBlockStmt&>(stmt), scope, out);
                break;
            case StmtKind::filter_block:
                exec_filter_block(static_cast<const FilterBlockStmt&>(stmt), scope, out);
                break;
            case StmtKind::with: {
                const auto& with = static_cast<const WithStmt&>(stmt);
                Scope inner(&scope);
                for (const auto& [target, expr] : with.assignments) assign(target, eval(*expr, scope), inner, stmt.pos);
                return exec_body(with.body, inner, out);
            }
            case StmtKind::scope: {
                Scope inner(&scope);
                return exec_body(static_cast<const ScopeStmt&>(stmt).body, inner, out);
            }
            case StmtKind::break_:
                return Flow::break_loop;
            case StmtKind::continue_:
                return Flow::continue_loop;
        }
    } catch (TemplateError& error) {
        if (error.offset == kNoPosition) error.offset = stmt.pos.offset;
        throw;
    }
    return Flow::normal;
}

Interpreter::Flow Interpreter::exec_if(const IfStmt& stmt, Scope& scope, TrackedText& out) {
    for (const auto& [test, body] : stmt.branches) {
        if (eval(*test, scope).truthy()) return exec_body(body, scope, out);
    }
    return exec_body(stmt.else_body, scope, out);
}

void Interpreter::exec_for(const ForStmt& stmt, Scope& scope, TrackedText& out) {
    const Value iterable = eval(*stmt.iterable, scope);
    if (iterable.is_none() || iterable.is_number() || iterable.kind() == ValueKind::function ||
        iterable.kind() == ValueKind::macro || iterable.is_namespace() || iterable.kind() == ValueKind::loop) {
        fail_at(ErrorKind::type, stmt.iterable->pos, fmt::format("'{}' object is not iterable", iterable.type_name()));
    }
    std::vector<Value> items = iterate(iterable);
    if (stmt.condition) {
        std::vector<Value> kept;
        for (Value& item : items) {
            budget_.loop_iteration();
            Scope probe(&scope);
            assign(stmt.target, item, probe, stmt.pos);
            if (eval(*stmt.condition, probe).truthy()) kept.push_back(std::move(item));
        }
        items = std::move(kept);
    }
    if (items.empty()) {
        Scope inner(&scope);
        exec_body(stmt.else_body, inner, out);
        return;
    }
    auto loop = std::make_shared<LoopObject>();
    loop->length = items.size();
    auto list = std::make_shared<ListObject>();
    list->items = std::move(items);
    loop->items = list;
    const Value loop_value(loop);
    for (size_t i = 0; i < loop->items->items.size(); ++i) {
        budget_.loop_iteration();
        loop->index0 = i;
        Scope iteration(&scope);
        assign(stmt.target, loop->items->items[i], iteration, stmt.pos);
        iteration.set("loop", loop_value);
        if (exec_body(stmt.body, iteration, out) == Flow::break_loop) break;
    }
}

void Interpreter::assign(const Target& target, const Value& value, Scope& scope, SourcePos pos) {
    if (!target.attribute.empty()) {
        const Value* ns = scope.find(target.names[0]);
        if (ns == nullptr || !ns->is_namespace()) {
            fail_at(ErrorKind::type, pos, "cannot assign attribute on non-namespace object");
        }
        ns->as_namespace()->set(target.attribute, value);
        return;
    }
    if (!target.unpack) {
        scope.set(target.names[0], value);
        return;
    }
    if (value.is_none() || value.is_number() || value.is_undefined() || value.is_namespace()) {
        fail_at(ErrorKind::type, pos, fmt::format("cannot unpack non-iterable {} object", value.type_name()));
    }
    const std::vector<Value> items = iterate(value);
    if (items.size() != target.names.size()) {
        if (items.size() > target.names.size()) {
            fail_at(ErrorKind::value, pos, fmt::format("too many values to unpack (expected {})", target.names.size()));
        }
        fail_at(ErrorKind::value, pos,
                fmt::format("not enough values to unpack (expected {}, got {})", target.names.size(), items.size()));
    }
    for (size_t i = 0; i < items.size(); ++i) scope.set(target.names[i], items[i]);
}

void Interpreter::exec_set(const SetStmt& stmt, Scope& scope) {
    assign(stmt.target, eval(*stmt.value, scope), scope, stmt.pos);
}

void Interpreter::exec_set_block(const SetBlockStmt& stmt, Scope& scope) {
    TrackedText text;
    Scope inner(&scope);
    exec_body(stmt.body, inner, text);
    Value value = tracker_.make(*this, std::move(text));
    for (const auto& filter : stmt.filters) value = eval_filter(*filter, value, scope);
    assign(stmt.target, value, scope, stmt.pos);
}

Scope* Interpreter::capture(Scope& scope) {
    if (&scope == &root_) return &root_;
    // A nested scope dies with its block: copy what it sees into the arena, as jinja2's
    // closures see the values at definition time. The root stays live (top-level macros
    // see later top-level assignments, as in jinja2).
    std::vector<std::pair<std::string, Value>> visible;
    scope.collect_until(&root_, visible);
    Scope* copy = arena_.make<Scope>(&root_);
    for (auto& [name, value] : visible) {  // innermost first: the first occurrence wins
        if (!copy->has_local(name)) copy->set(name, std::move(value));
    }
    return copy;
}

void Interpreter::exec_macro(const MacroStmt& stmt, Scope& scope) {
    MacroObject* macro = arena_.make<MacroObject>();
    macro->name = stmt.name;
    macro->definition = &stmt;
    scope.set(stmt.name, Value(macro));
    macro->closure = capture(scope);
}

void Interpreter::exec_call_block(const CallBlockStmt& stmt, Scope& scope, TrackedText& out) {
    MacroObject* caller = arena_.make<MacroObject>();
    caller->name = "caller";
    caller->definition = stmt.caller.get();
    caller->closure = capture(scope);
    const Value callee = eval(*stmt.call->callee, scope);
    Args args;
    eval_args(stmt.call->args, scope, args);
    if (callee.kind() != ValueKind::macro) {
        if (callee.is_undefined()) fail_undefined(callee);
        fail(ErrorKind::type, "{% call %} needs a macro");
    }
    append_value(out, call_macro(callee.as_macro(), args, caller));
}

void Interpreter::exec_filter_block(const FilterBlockStmt& stmt, Scope& scope, TrackedText& out) {
    TrackedText text;
    Scope inner(&scope);
    exec_body(stmt.body, inner, text);
    Value value = tracker_.make(*this, std::move(text));
    for (const auto& filter : stmt.filters) value = eval_filter(*filter, value, scope);
    append_value(out, value);
}

Value Interpreter::call_macro(MacroObject* macro, Args& args, MacroObject* caller) {
    CallGuard guard(budget_);
    const MacroStmt& def = *macro->definition;
    const MacroParams& params = def.params;
    Scope scope(macro->closure);
    const size_t first_default = params.names.size() - params.defaults.size();
    std::vector<bool> taken(args.keyword.size(), false);
    for (size_t i = 0; i < params.names.size(); ++i) {
        const std::string& name = params.names[i];
        const Value* given = nullptr;
        for (size_t k = 0; k < args.keyword.size(); ++k) {
            if (args.keyword[k].first == name) {
                if (i < args.positional.size()) {
                    fail(ErrorKind::type,
                         fmt::format("macro '{}' got multiple values for argument '{}'", macro->name, name));
                }
                given = &args.keyword[k].second;
                taken[k] = true;
            }
        }
        if (i < args.positional.size()) {
            scope.set(name, args.positional[i]);
        } else if (given != nullptr) {
            scope.set(name, *given);
        } else if (i >= first_default) {
            scope.set(name, eval(*params.defaults[i - first_default], scope));
        } else {
            scope.set(name, Value::undefined(fmt::format("parameter '{}' was not provided", name)));
        }
    }
    if (args.positional.size() > params.names.size()) {
        if (!def.uses_varargs) {
            fail(ErrorKind::type,
                 fmt::format("macro '{}' takes not more than {} argument(s)", macro->name, params.names.size()));
        }
    }
    if (def.uses_varargs) {
        std::vector<Value> extra;
        for (size_t i = params.names.size(); i < args.positional.size(); ++i) extra.push_back(args.positional[i]);
        scope.set("varargs", make_list(std::move(extra), SequenceKind::tuple));
    }
    DictObject extra_kwargs;
    for (size_t k = 0; k < args.keyword.size(); ++k) {
        if (taken[k]) continue;
        if (args.keyword[k].first == "caller" && def.uses_caller && caller == nullptr) {
            scope.set("caller", args.keyword[k].second);
            continue;
        }
        if (!def.uses_kwargs) {
            fail(ErrorKind::type,
                 fmt::format("macro '{}' takes no keyword argument '{}'", macro->name, args.keyword[k].first));
        }
        extra_kwargs.set(Value(args.keyword[k].first), args.keyword[k].second);
    }
    if (def.uses_kwargs) scope.set("kwargs", make_dict(std::move(extra_kwargs)));
    if (caller != nullptr) scope.set("caller", Value(caller));
    TrackedText out;
    exec_body(def.body, scope, out);
    return tracker_.make(*this, std::move(out));
}

}  // namespace powerhouse::jinja
