// Expression evaluation, and the sandbox's view of objects: jinja2's getattr/getitem
// rules, iteration, calls, slicing and the `loop` object's attributes.
#include <fmt/format.h>

#include <limits>

#include "template/interpreter.h"
#include "template/text.h"
#include "template/value_format.h"
#include "template/value_ops.h"

namespace powerhouse::jinja {

namespace {

// jinja2's object_type_repr, for "'dict object' has no attribute 'x'".
std::string object_type(const Value& v) {
    switch (v.kind()) {
        case ValueKind::none:
            return "None";
        case ValueKind::name_space:
            return "jinja2.utils.Namespace object";
        case ValueKind::loop:
            return "jinja2.runtime.LoopContext object";
        case ValueKind::macro:
            return "jinja2.runtime.Macro object";
        default:
            return fmt::format("{} object", v.type_name());
    }
}

Value no_attribute(const Value& object, std::string_view name) {
    return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_type(object), name));
}

Value no_element(const Value& object, const Value& key, const Budget& budget) {
    std::string shown;
    append_repr(shown, key, budget);
    return Value::undefined(fmt::format("{} has no element {}", object_type(object), shown));
}

Value loop_cycle(Interpreter&, const FunctionObject& self, Args& args) {
    if (args.positional.empty()) fail(ErrorKind::type, "no items for cycling given");
    const LoopObject& loop = self.self.as_loop();
    return args.positional[loop.index0 % args.positional.size()];
}

Value loop_changed(Interpreter& interp, const FunctionObject& self, Args& args) {
    LoopObject& loop = self.self.as_loop();
    const Value current = interp.make_list(args.positional, SequenceKind::tuple);
    if (loop.has_last_changed && values_equal(loop.last_changed, current)) return Value(false);
    loop.last_changed = current;
    loop.has_last_changed = true;
    return Value(true);
}

Value bind(std::string name, NativeFunction function, const Value& self) {
    auto object = std::make_shared<FunctionObject>();
    object->name = std::move(name);
    object->call = function;
    object->self = self;
    return Value(std::shared_ptr<const FunctionObject>(std::move(object)));
}

}  // namespace

Value Interpreter::eval(const Expr& expr, Scope& scope) {
    NestingGuard nesting(budget_);
    try {
        switch (expr.kind) {
            case ExprKind::literal:
                return static_cast<const LiteralExpr&>(expr).value;
            case ExprKind::name:
                return eval_name(static_cast<const NameExpr&>(expr), scope);
            case ExprKind::list:
                return eval_list(static_cast<const ListExpr&>(expr), scope);
            case ExprKind::dict:
                return eval_dict(static_cast<const DictExpr&>(expr), scope);
            case ExprKind::attribute: {
                const auto& e = static_cast<const AttributeExpr&>(expr);
                return get_attribute(eval(*e.object, scope), e.name);
            }
            case ExprKind::item: {
                const auto& e = static_cast<const ItemExpr&>(expr);
                const Value object = eval(*e.object, scope);
                return get_item(object, eval(*e.index, scope));
            }
            case ExprKind::slice:
                return eval_slice(static_cast<const SliceExpr&>(expr), scope);
            case ExprKind::call:
                return eval_call(static_cast<const CallExpr&>(expr), scope);
            case ExprKind::filter: {
                const auto& e = static_cast<const FilterExpr&>(expr);
                return eval_filter(e, eval(*e.operand, scope), scope);
            }
            case ExprKind::test:
                return eval_test(static_cast<const TestExpr&>(expr), scope);
            case ExprKind::unary:
                return eval_unary(static_cast<const UnaryExpr&>(expr), scope);
            case ExprKind::binary:
                return eval_binary(static_cast<const BinaryExpr&>(expr), scope);
            case ExprKind::compare:
                return eval_compare(static_cast<const CompareExpr&>(expr), scope);
            case ExprKind::condition:
                return eval_condition(static_cast<const ConditionExpr&>(expr), scope);
        }
    } catch (TemplateError& error) {
        if (error.offset == kNoPosition) error.offset = expr.pos.offset;
        throw;
    }
    fail(ErrorKind::unsupported, "unknown expression");
}

Value Interpreter::eval_name(const NameExpr& expr, Scope& scope) {
    if (const Value* v = scope.find(expr.name)) return *v;
    Value global = find_global(expr.name);
    if (!global.is_undefined()) return global;
    return Value::undefined(fmt::format("'{}' is undefined", expr.name));
}

Value Interpreter::eval_list(const ListExpr& expr, Scope& scope) {
    std::vector<Value> items;
    items.reserve(expr.items.size());
    for (const ExprPtr& item : expr.items) items.push_back(eval(*item, scope));
    return make_list(std::move(items), expr.is_tuple ? SequenceKind::tuple : SequenceKind::list);
}

Value Interpreter::eval_dict(const DictExpr& expr, Scope& scope) {
    DictObject dict;
    for (const auto& [key_expr, value_expr] : expr.items) {
        Value key = eval(*key_expr, scope);
        if (!is_hashable(key)) {
            fail_at(ErrorKind::type, key_expr->pos, fmt::format("unhashable type: '{}'", key.type_name()));
        }
        dict.set(std::move(key), eval(*value_expr, scope));
    }
    return make_dict(std::move(dict));
}

Value Interpreter::eval_slice(const SliceExpr& expr, Scope& scope) {
    const Value object = eval(*expr.object, scope);
    const Value start = expr.start ? eval(*expr.start, scope) : Value::none();
    const Value stop = expr.stop ? eval(*expr.stop, scope) : Value::none();
    const Value step = expr.step ? eval(*expr.step, scope) : Value::none();
    return slice_value(*this, object, start, stop, step);
}

void Interpreter::eval_args(const CallArgs& call_args, Scope& scope, Args& args) {
    args.positional.reserve(call_args.positional.size());
    for (const ExprPtr& arg : call_args.positional) args.positional.push_back(eval(*arg, scope));
    for (const auto& [name, arg] : call_args.keyword) args.keyword.emplace_back(name, eval(*arg, scope));
}

Value Interpreter::eval_call(const CallExpr& expr, Scope& scope) {
    const Value callee = eval(*expr.callee, scope);
    Args args;
    eval_args(expr.args, scope, args);
    return call(callee, args);
}

Value Interpreter::eval_filter(const FilterExpr& expr, const Value& operand, Scope& scope) {
    if (expr.function == nullptr) {  // parsed where jinja2 fails only when it gets here
        UnknownCallable unknown = unknown_filter(expr.name);
        fail_at(unknown.kind, expr.pos, std::move(unknown.message));
    }
    Args args;
    eval_args(expr.args, scope, args);
    try {
        Value result = expr.function(*this, operand, args);
        return track_result(std::move(result), tracker_.contains_data(operand) || tracker_.contains_data(args));
    } catch (TemplateError& error) {
        if (error.offset == kNoPosition) error.offset = expr.pos.offset;
        throw;
    }
}

Value Interpreter::eval_test(const TestExpr& expr, Scope& scope) {
    if (expr.function == nullptr) {  // parsed where jinja2 fails only when it gets here
        UnknownCallable unknown = unknown_test(expr.name);
        fail_at(unknown.kind, expr.pos, std::move(unknown.message));
    }
    const Value operand = eval(*expr.operand, scope);
    Args args;
    eval_args(expr.args, scope, args);
    const bool result = expr.function(*this, operand, args);
    return Value(expr.negated ? !result : result);
}

Value Interpreter::eval_unary(const UnaryExpr& expr, Scope& scope) {
    const Value operand = eval(*expr.operand, scope);
    switch (expr.op) {
        case UnaryOp::logical_not:
            return Value(!operand.truthy());
        case UnaryOp::negate:
            return negate(operand, true);
        case UnaryOp::plus:
            return negate(operand, false);
    }
    return operand;
}

Value Interpreter::eval_binary(const BinaryExpr& expr, Scope& scope) {
    switch (expr.op) {
        case BinaryOp::logical_and: {
            Value left = eval(*expr.left, scope);
            return left.truthy() ? eval(*expr.right, scope) : left;
        }
        case BinaryOp::logical_or: {
            Value left = eval(*expr.left, scope);
            return left.truthy() ? left : eval(*expr.right, scope);
        }
        case BinaryOp::concat: {
            const Value left = eval(*expr.left, scope);
            const Value right = eval(*expr.right, scope);
            TrackedText text;
            append_value(text, left);
            append_value(text, right);
            return tracker_.make(*this, std::move(text));
        }
        default: {
            const Value left = eval(*expr.left, scope);
            const Value right = eval(*expr.right, scope);
            if (expr.op == BinaryOp::add && left.is_string() && right.is_string() && tracker_.enabled()) {
                TrackedText text;  // string + string keeps each side's provenance exactly
                append_value(text, left);
                append_value(text, right);
                return tracker_.make(*this, std::move(text));
            }
            Value result = arithmetic(*this, expr.op, left, right);
            return track_result(std::move(result), tracker_.contains_data(left) || tracker_.contains_data(right));
        }
    }
}

Value Interpreter::eval_compare(const CompareExpr& expr, Scope& scope) {
    Value left = eval(*expr.first, scope);
    for (const auto& [op, operand] : expr.rest) {
        Value right = eval(*operand, scope);
        if (!compare(op, left, right, *this)) return Value(false);
        left = std::move(right);
    }
    return Value(true);
}

Value Interpreter::eval_condition(const ConditionExpr& expr, Scope& scope) {
    if (eval(*expr.test, scope).truthy()) return eval(*expr.then_value, scope);
    if (expr.else_value) return eval(*expr.else_value, scope);
    return Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
}

Value Interpreter::call(const Value& callee, Args& args) {
    switch (callee.kind()) {
        case ValueKind::function: {
            const FunctionObject& function = callee.as_function();
            const bool data_in = tracker_.contains_data(function.self) || tracker_.contains_data(args);
            return track_result(function.call(*this, function, args), data_in);
        }
        case ValueKind::macro:
            return call_macro(callee.as_macro(), args, nullptr);
        case ValueKind::undefined:
            fail_undefined(callee);
        default:
            fail(ErrorKind::type, fmt::format("'{}' object is not callable", callee.type_name()));
    }
}

Value Interpreter::get_attribute(const Value& object, std::string_view name) {
    if (object.is_undefined()) fail_undefined(object);
    if (!name.empty() && name.front() == '_') {
        if (object.is_dict()) {
            if (const Value* v = object.as_dict().find(name)) return *v;
        }
        // Names starting with '_' reach Python internals in jinja2 (__class__, __globals__):
        // refused outright, with jinja2's sandbox message.
        fail(ErrorKind::security,
             fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, object.type_name()));
    }
    switch (object.kind()) {
        case ValueKind::dict: {
            Value method = find_method(*this, object, name);
            if (!method.is_undefined()) return method;
            if (const Value* v = object.as_dict().find(name)) return *v;
            return no_attribute(object, name);
        }
        case ValueKind::string:
        case ValueKind::list: {
            Value method = find_method(*this, object, name);
            if (!method.is_undefined()) return method;
            return no_attribute(object, name);
        }
        case ValueKind::name_space: {
            if (const Value* v = object.as_namespace()->find(name)) return *v;
            return no_attribute(object, name);
        }
        case ValueKind::loop:
            return loop_attribute(object, name);
        default:
            return no_attribute(object, name);
    }
}

Value Interpreter::get_item(const Value& object, const Value& key) {
    if (object.is_undefined()) fail_undefined(object);
    if (key.is_string() && !key.as_string().empty() && key.as_string().front() == '_' && !object.is_dict()) {
        return get_attribute(object, key.as_string());
    }
    switch (object.kind()) {
        case ValueKind::dict: {
            if (const Value* v = object.as_dict().find(key)) return *v;
            if (key.is_string()) {
                if (!key.as_string().empty() && key.as_string().front() == '_') {
                    return get_attribute(object, key.as_string());
                }
                Value method = find_method(*this, object, key.as_string());
                if (!method.is_undefined()) return method;
                return no_attribute(object, key.as_string());
            }
            return no_element(object, key, budget_);
        }
        case ValueKind::list:
        case ValueKind::string: {
            if (key.is_string()) {
                Value method = find_method(*this, object, key.as_string());
                if (!method.is_undefined()) return method;
                return no_attribute(object, key.as_string());
            }
            if (!key.is_int() && !key.is_bool()) return no_element(object, key, budget_);
            if (object.is_list() && object.as_list().kind == SequenceKind::generator) {
                return no_element(object, key, budget_);
            }
            int64_t index = key.to_int();
            if (object.is_list()) {
                const auto& items = object.as_list().items;
                const auto n = static_cast<int64_t>(items.size());
                if (index < 0) index += n;
                if (index < 0 || index >= n) return no_element(object, key, budget_);
                return items[static_cast<size_t>(index)];
            }
            const std::string& s = object.as_string();
            const bool data_in = tracker_.contains_data(object);
            if (is_ascii(s)) {
                const auto n = static_cast<int64_t>(s.size());
                if (index < 0) index += n;
                if (index < 0 || index >= n) return no_element(object, key, budget_);
                return track_result(Value(std::string(1, s[static_cast<size_t>(index)])), data_in);
            }
            const std::vector<size_t> offsets = code_point_offsets(s);
            const auto n = static_cast<int64_t>(offsets.size()) - 1;
            if (index < 0) index += n;
            if (index < 0 || index >= n) return no_element(object, key, budget_);
            const size_t at = offsets[static_cast<size_t>(index)];
            return track_result(Value(s.substr(at, offsets[static_cast<size_t>(index) + 1] - at)), data_in);
        }
        case ValueKind::name_space:
        case ValueKind::loop:
            if (key.is_string()) return get_attribute(object, key.as_string());
            return no_element(object, key, budget_);
        default:
            if (key.is_string()) return no_attribute(object, key.as_string());
            return no_element(object, key, budget_);
    }
}

Value Interpreter::get_path(const Value& object, std::string_view path) {
    Value current = object;
    size_t start = 0;
    for (;;) {
        const size_t dot = path.find('.', start);
        const std::string_view part =
            path.substr(start, dot == std::string_view::npos ? path.size() - start : dot - start);
        bool numeric = !part.empty();
        for (char c : part) numeric = numeric && c >= '0' && c <= '9';
        if (numeric && part.size() < 18) {
            int64_t index = 0;
            for (char c : part) index = index * 10 + (c - '0');
            current = get_item(current, Value(index));
        } else {
            current = get_item(current, Value(part));
        }
        if (dot == std::string_view::npos) return current;
        start = dot + 1;
    }
}

Value Interpreter::apply_filter(std::string_view name, const Value& operand, Args& args) {
    const FilterFunction filter = find_filter(name);
    if (filter == nullptr) {
        UnknownCallable unknown = unknown_filter(name);
        fail(unknown.kind, std::move(unknown.message));
    }
    return filter(*this, operand, args);
}

bool Interpreter::apply_test(std::string_view name, const Value& operand, Args& args) {
    const TestFunction test = find_test(name);
    if (test == nullptr) {
        UnknownCallable unknown = unknown_test(name);
        fail(unknown.kind, std::move(unknown.message));
    }
    return test(*this, operand, args);
}

std::vector<Value> Interpreter::iterate(const Value& value) {
    switch (value.kind()) {
        case ValueKind::undefined:
            return {};
        case ValueKind::list: {
            const ListObject& list = value.as_list();
            if (list.kind == SequenceKind::generator) {
                if (list.consumed) return {};
                list.consumed = true;
            }
            return list.items;
        }
        case ValueKind::dict: {
            std::vector<Value> keys;
            keys.reserve(value.as_dict().entries.size());
            for (const auto& [key, item] : value.as_dict().entries) keys.push_back(key);
            return keys;
        }
        case ValueKind::string: {
            const std::string& s = value.as_string();
            budget_.reserve_items(s.size());
            std::vector<Value> chars;
            chars.reserve(s.size());
            for (size_t i = 0; i < s.size();) {
                const size_t start = i;
                next_code_point(s, i);
                chars.emplace_back(s.substr(start, i - start));
            }
            if (tracker_.contains_data(value)) {
                for (Value& c : chars) c = tracker_.mark_all(*this, c);
            }
            return chars;
        }
        default:
            fail(ErrorKind::type, fmt::format("'{}' object is not iterable", value.type_name()));
    }
}

Value Interpreter::loop_attribute(const Value& loop_value, std::string_view name) {
    const LoopObject& loop = loop_value.as_loop();
    const auto index0 = static_cast<int64_t>(loop.index0);
    const auto length = static_cast<int64_t>(loop.length);
    if (name == "index") return Value(index0 + 1);
    if (name == "index0") return Value(index0);
    if (name == "revindex") return Value(length - index0);
    if (name == "revindex0") return Value(length - index0 - 1);
    if (name == "first") return Value(index0 == 0);
    if (name == "last") return Value(index0 == length - 1);
    if (name == "length") return Value(length);
    if (name == "depth") return Value(int64_t{1});
    if (name == "depth0") return Value(int64_t{0});
    if (name == "previtem") {
        if (index0 == 0) return Value::undefined("there is no previous item");
        return loop.items->items[loop.index0 - 1];
    }
    if (name == "nextitem") {
        if (index0 + 1 >= length) return Value::undefined("there is no next item");
        return loop.items->items[loop.index0 + 1];
    }
    if (name == "cycle") return bind("cycle", loop_cycle, loop_value);
    if (name == "changed") return bind("changed", loop_changed, loop_value);
    return no_attribute(loop_value, name);
}

Value slice_value(Interpreter& interp, const Value& object, const Value& start_value, const Value& stop_value,
                  const Value& step_value) {
    if (object.is_undefined()) fail_undefined(object);
    auto as_index = [](const Value& v, bool& ok) -> std::optional<int64_t> {
        if (v.is_none()) return std::nullopt;
        if (v.is_int() || v.is_bool()) return v.to_int();
        ok = false;
        return std::nullopt;
    };
    bool ok = true;
    const std::optional<int64_t> start_arg = as_index(start_value, ok);
    const std::optional<int64_t> stop_arg = as_index(stop_value, ok);
    const std::optional<int64_t> step_arg = as_index(step_value, ok);
    const bool sliceable = object.is_string() || (object.is_list() && object.as_list().kind != SequenceKind::generator);
    if (!ok || !sliceable)
        return Value::undefined(fmt::format("'{}' object cannot be sliced that way", object.type_name()));
    const int64_t step = step_arg.value_or(1);
    if (step == 0) fail(ErrorKind::value, "slice step cannot be zero");
    if (step == std::numeric_limits<int64_t>::min()) fail(ErrorKind::value, "slice step out of range");

    const bool ascii = object.is_string() && is_ascii(object.as_string());
    std::vector<size_t> offsets;
    int64_t length;
    if (object.is_list()) {
        length = static_cast<int64_t>(object.as_list().items.size());
    } else if (ascii) {
        length = static_cast<int64_t>(object.as_string().size());
    } else {
        offsets = code_point_offsets(object.as_string());
        length = static_cast<int64_t>(offsets.size()) - 1;
    }
    // Python's PySlice_AdjustIndices.
    auto adjust = [&](std::optional<int64_t> arg, bool is_start) -> int64_t {
        if (!arg) {
            if (step < 0) return is_start ? length - 1 : -1;
            return is_start ? 0 : length;
        }
        int64_t v = *arg;
        if (v < 0) {
            v += length;
            if (v < 0) v = step < 0 ? -1 : 0;
        } else if (v >= length) {
            v = step < 0 ? length - 1 : length;
        }
        return v;
    };
    const int64_t start = adjust(start_arg, true);
    const int64_t stop = adjust(stop_arg, false);
    int64_t count = 0;
    if (step > 0 && start < stop) count = (stop - start - 1) / step + 1;
    if (step < 0 && stop < start) count = (start - stop - 1) / (-step) + 1;

    if (object.is_list()) {
        const auto& items = object.as_list().items;
        std::vector<Value> out;
        out.reserve(static_cast<size_t>(count));
        for (int64_t i = 0, at = start; i < count; ++i, at += step) out.push_back(items[static_cast<size_t>(at)]);
        return interp.make_list(std::move(out), object.as_list().kind);
    }
    const std::string& s = object.as_string();
    std::string out;
    if (ascii && step == 1) {
        out = s.substr(static_cast<size_t>(start), static_cast<size_t>(count));
    } else {
        for (int64_t i = 0, at = start; i < count; ++i, at += step) {
            if (ascii) {
                out.push_back(s[static_cast<size_t>(at)]);
            } else {
                const size_t from = offsets[static_cast<size_t>(at)];
                out.append(s, from, offsets[static_cast<size_t>(at) + 1] - from);
            }
        }
    }
    return interp.track_result(interp.make_string(std::move(out)), interp.tracker().contains_data(object));
}

}  // namespace powerhouse::jinja
