// jinja2's tests (`x is defined`, `x is string`, `n is divisibleby 3`, ...), with the
// answers Python gives: Undefined is iterable and a sequence, bool is a number but not an
// integer, a dict is a sequence and a mapping.
#include <fmt/format.h>

#include "template/builtins_internal.h"
#include "template/text.h"

namespace powerhouse::jinja {

namespace {

const Value& single_arg(std::string_view test, Args& args) {
    if (args.positional.size() + args.keyword.size() != 1) {
        fail(ErrorKind::type, fmt::format("the test '{}' takes exactly one argument", test));
    }
    return args.positional.empty() ? args.keyword.front().second : args.positional.front();
}

void no_args(std::string_view test, Args& args) {
    if (!args.positional.empty() || !args.keyword.empty()) {
        fail(ErrorKind::type, fmt::format("the test '{}' takes no arguments", test));
    }
}

bool test_defined(Interpreter&, const Value& v, Args& args) {
    no_args("defined", args);
    return !v.is_undefined();
}
bool test_undefined(Interpreter&, const Value& v, Args& args) {
    no_args("undefined", args);
    return v.is_undefined();
}
bool test_none(Interpreter&, const Value& v, Args& args) {
    no_args("none", args);
    return v.is_none();
}
bool test_boolean(Interpreter&, const Value& v, Args& args) {
    no_args("boolean", args);
    return v.is_bool();
}
bool test_true(Interpreter&, const Value& v, Args& args) {
    no_args("true", args);
    return v.is_bool() && v.as_bool();
}
bool test_false(Interpreter&, const Value& v, Args& args) {
    no_args("false", args);
    return v.is_bool() && !v.as_bool();
}
bool test_integer(Interpreter&, const Value& v, Args& args) {
    no_args("integer", args);
    return v.is_int();
}
bool test_float(Interpreter&, const Value& v, Args& args) {
    no_args("float", args);
    return v.is_float();
}
bool test_number(Interpreter&, const Value& v, Args& args) {
    no_args("number", args);
    return v.is_number();
}
bool test_string(Interpreter&, const Value& v, Args& args) {
    no_args("string", args);
    return v.is_string();
}
bool test_mapping(Interpreter&, const Value& v, Args& args) {
    no_args("mapping", args);
    return v.is_dict();
}
bool test_iterable(Interpreter&, const Value& v, Args& args) {
    no_args("iterable", args);
    return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() || v.kind() == ValueKind::loop;
}
bool test_sequence(Interpreter&, const Value& v, Args& args) {
    no_args("sequence", args);
    return v.is_undefined() || v.is_string() || v.is_dict() ||
           (v.is_list() && v.as_list().kind != SequenceKind::generator);
}
bool test_callable(Interpreter&, const Value& v, Args& args) {
    no_args("callable", args);
    return v.is_callable();
}
bool test_escaped(Interpreter&, const Value&, Args& args) {
    no_args("escaped", args);
    return false;  // no Markup objects here
}

int64_t int_operand(const Value& v, std::string_view test) {
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_int() && !v.is_bool()) {
        fail(ErrorKind::type, fmt::format("the test '{}' needs an integer, not '{}'", test, v.type_name()));
    }
    return v.to_int();
}

bool test_odd(Interpreter&, const Value& v, Args& args) {
    no_args("odd", args);
    return int_operand(v, "odd") % 2 != 0;
}
bool test_even(Interpreter&, const Value& v, Args& args) {
    no_args("even", args);
    return int_operand(v, "even") % 2 == 0;
}
bool test_divisibleby(Interpreter& interp, const Value& v, Args& args) {
    const Value& divisor = single_arg("divisibleby", args);
    const Value rest = arithmetic(interp, BinaryOp::mod, v, divisor);
    return values_equal(rest, Value(int64_t{0}));
}

bool test_eq(Interpreter& interp, const Value& v, Args& args) {
    return compare(CompareOp::eq, v, single_arg("eq", args), interp);
}
bool test_ne(Interpreter& interp, const Value& v, Args& args) {
    return compare(CompareOp::ne, v, single_arg("ne", args), interp);
}
bool test_lt(Interpreter& interp, const Value& v, Args& args) {
    return compare(CompareOp::lt, v, single_arg("lt", args), interp);
}
bool test_le(Interpreter& interp, const Value& v, Args& args) {
    return compare(CompareOp::le, v, single_arg("le", args), interp);
}
bool test_gt(Interpreter& interp, const Value& v, Args& args) {
    return compare(CompareOp::gt, v, single_arg("gt", args), interp);
}
bool test_ge(Interpreter& interp, const Value& v, Args& args) {
    return compare(CompareOp::ge, v, single_arg("ge", args), interp);
}
bool test_in(Interpreter& interp, const Value& v, Args& args) {
    return contains(interp, single_arg("in", args), v);
}

bool test_sameas(Interpreter&, const Value& v, Args& args) {
    const Value& other = single_arg("sameas", args);
    if (v.kind() != other.kind()) return false;
    switch (v.kind()) {
        case ValueKind::none:
            return true;
        case ValueKind::boolean:
            return v.as_bool() == other.as_bool();
        case ValueKind::integer:
            return v.as_int() == other.as_int();
        case ValueKind::floating:
            return v.as_float() == other.as_float();
        case ValueKind::undefined:
            return false;
        default:
            return v.identity() == other.identity();
    }
}

bool test_lower(Interpreter& interp, const Value& v, Args& args) {
    no_args("lower", args);
    return py_islower(text_of(interp, v));
}
bool test_upper(Interpreter& interp, const Value& v, Args& args) {
    no_args("upper", args);
    return py_isupper(text_of(interp, v));
}
bool test_filter(Interpreter&, const Value& v, Args& args) {
    no_args("filter", args);
    return v.is_string() && find_filter(v.as_string()) != nullptr;
}
bool test_test(Interpreter&, const Value& v, Args& args) {
    no_args("test", args);
    return v.is_string() && find_test(v.as_string()) != nullptr;
}

constexpr TestEntry kTests[] = {
    {"defined", test_defined},
    {"undefined", test_undefined},
    {"none", test_none},
    {"boolean", test_boolean},
    {"true", test_true},
    {"false", test_false},
    {"integer", test_integer},
    {"float", test_float},
    {"number", test_number},
    {"string", test_string},
    {"mapping", test_mapping},
    {"iterable", test_iterable},
    {"sequence", test_sequence},
    {"callable", test_callable},
    {"escaped", test_escaped},
    {"odd", test_odd},
    {"even", test_even},
    {"divisibleby", test_divisibleby},
    {"eq", test_eq},
    {"equalto", test_eq},
    {"==", test_eq},
    {"ne", test_ne},
    {"!=", test_ne},
    {"lt", test_lt},
    {"lessthan", test_lt},
    {"<", test_lt},
    {"le", test_le},
    {"<=", test_le},
    {"gt", test_gt},
    {"greaterthan", test_gt},
    {">", test_gt},
    {"ge", test_ge},
    {">=", test_ge},
    {"in", test_in},
    {"sameas", test_sameas},
    {"lower", test_lower},
    {"upper", test_upper},
    {"filter", test_filter},
    {"test", test_test},
};

}  // namespace

std::span<const TestEntry> all_tests() {
    return kTests;
}

}  // namespace powerhouse::jinja
