#include "template/value_ops.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "template/interpreter.h"
#include "template/text.h"
#include "template/value_format.h"

namespace powerhouse::jinja {

void fail_undefined(const Value& undefined) {
    fail(ErrorKind::undefined, undefined.undefined_message());
}

namespace {

[[noreturn]] void unsupported_operands(std::string_view op, const Value& a, const Value& b) {
    fail(ErrorKind::type,
         fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name()));
}

[[noreturn]] void overflow() {
    fail(ErrorKind::value, "integer overflow: values beyond 64 bits are not supported");
}

int64_t checked_add(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) overflow();
    return r;
}
int64_t checked_sub(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) overflow();
    return r;
}
int64_t checked_mul(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) overflow();
    return r;
}

int64_t int_pow(int64_t base, int64_t exponent) {
    int64_t result = 1;
    while (exponent > 0) {
        if (exponent & 1) result = checked_mul(result, base);
        exponent >>= 1;
        if (exponent > 0) base = checked_mul(base, base);
    }
    return result;
}

// Python's float divmod.
void float_divmod(double a, double b, double& div_out, double& mod_out) {
    double mod = std::fmod(a, b);
    double div = (a - mod) / b;
    if (mod != 0.0) {
        if ((b < 0) != (mod < 0)) {
            mod += b;
            div -= 1.0;
        }
    } else {
        mod = std::copysign(0.0, b);
    }
    double floordiv;
    if (div != 0.0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = std::copysign(0.0, a / b);
    }
    div_out = floordiv;
    mod_out = mod;
}

Value repeat(Interpreter& interp, const Value& sequence, int64_t times) {
    if (times <= 0) {
        if (sequence.is_string()) return Value(std::string());
        return interp.make_list({}, sequence.as_list().kind);
    }
    if (sequence.is_string()) {
        const std::string& s = sequence.as_string();
        const uint64_t limit = interp.budget().limits().max_output_bytes;
        if (!s.empty() && static_cast<uint64_t>(times) > limit / s.size()) {
            interp.budget().check_string_size(limit + 1);
        }
        interp.budget().reserve_string(s.size() * static_cast<uint64_t>(times));
        std::string out;
        out.reserve(s.size() * static_cast<size_t>(times));
        for (int64_t i = 0; i < times; ++i) out += s;
        return Value(std::move(out));
    }
    const ListObject& list = sequence.as_list();
    if (list.kind == SequenceKind::generator) {
        fail(ErrorKind::type, "unsupported operand type(s) for *: 'generator' and 'int'");
    }
    const uint64_t max_items = interp.budget().max_list_items();
    if (!list.items.empty() && static_cast<uint64_t>(times) > max_items / list.items.size()) {
        interp.budget().check_items(max_items + 1);
    }
    interp.budget().check_items(list.items.size() * static_cast<uint64_t>(times));
    std::vector<Value> items;
    items.reserve(list.items.size() * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) items.insert(items.end(), list.items.begin(), list.items.end());
    return interp.make_list(std::move(items), list.kind);
}

bool is_sequence(const Value& v) {
    return v.is_string() || v.is_list();
}

Value add(Interpreter& interp, const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return Value(a.to_double() + b.to_double());
        return Value(checked_add(a.to_int(), b.to_int()));
    }
    if (a.is_string() && b.is_string()) {
        interp.budget().reserve_string(a.as_string().size() + b.as_string().size());
        std::string out;
        out.reserve(a.as_string().size() + b.as_string().size());
        out += a.as_string();
        out += b.as_string();
        return Value(std::move(out));
    }
    if (a.is_list() && b.is_list() && a.as_list().kind == b.as_list().kind &&
        a.as_list().kind != SequenceKind::generator) {
        interp.budget().check_items(a.as_list().items.size() + b.as_list().items.size());  // before copying
        std::vector<Value> items;
        items.reserve(a.as_list().items.size() + b.as_list().items.size());
        items.insert(items.end(), a.as_list().items.begin(), a.as_list().items.end());
        items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
        return interp.make_list(std::move(items), a.as_list().kind);
    }
    if (a.is_string() || (a.is_list() && a.as_list().kind != SequenceKind::generator)) {
        fail(ErrorKind::type,
             fmt::format("can only concatenate {} (not \"{}\") to {}", a.type_name(), b.type_name(), a.type_name()));
    }
    unsupported_operands("+", a, b);
}

}  // namespace

Value arithmetic(Interpreter& interp, BinaryOp op, const Value& a, const Value& b) {
    if (a.is_undefined()) fail_undefined(a);
    if (b.is_undefined()) fail_undefined(b);
    const bool numbers = a.is_number() && b.is_number();
    const bool floats = numbers && (a.is_float() || b.is_float());
    switch (op) {
        case BinaryOp::add:
            return add(interp, a, b);
        case BinaryOp::sub:
            if (!numbers) unsupported_operands("-", a, b);
            if (floats) return Value(a.to_double() - b.to_double());
            return Value(checked_sub(a.to_int(), b.to_int()));
        case BinaryOp::mul:
            if (numbers) {
                if (floats) return Value(a.to_double() * b.to_double());
                return Value(checked_mul(a.to_int(), b.to_int()));
            }
            if (is_sequence(a) && (b.is_int() || b.is_bool())) return repeat(interp, a, b.to_int());
            if (is_sequence(b) && (a.is_int() || a.is_bool())) return repeat(interp, b, a.to_int());
            if (is_sequence(a) && b.is_float()) {
                fail(ErrorKind::type, "can't multiply sequence by non-int of type 'float'");
            }
            unsupported_operands("*", a, b);
        case BinaryOp::div:
            if (!numbers) unsupported_operands("/", a, b);
            if (b.to_double() == 0.0) fail(ErrorKind::value, "division by zero");
            return Value(a.to_double() / b.to_double());
        case BinaryOp::floordiv:
            if (!numbers) unsupported_operands("//", a, b);
            if (floats) {
                if (b.to_double() == 0.0) fail(ErrorKind::value, "float floor division by zero");
                double div, mod;
                float_divmod(a.to_double(), b.to_double(), div, mod);
                return Value(div);
            } else {
                const int64_t x = a.to_int();
                const int64_t y = b.to_int();
                if (y == 0) fail(ErrorKind::value, "integer division or modulo by zero");
                if (x == std::numeric_limits<int64_t>::min() && y == -1) overflow();
                int64_t q = x / y;
                if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
                return Value(q);
            }
        case BinaryOp::mod:
            if (a.is_string()) return interp.make_string(percent_format(interp, a.as_string(), b));
            if (!numbers) unsupported_operands("%", a, b);
            if (floats) {
                if (b.to_double() == 0.0) fail(ErrorKind::value, "float modulo by zero");
                double div, mod;
                float_divmod(a.to_double(), b.to_double(), div, mod);
                return Value(mod);
            } else {
                const int64_t x = a.to_int();
                const int64_t y = b.to_int();
                if (y == 0) fail(ErrorKind::value, "integer modulo by zero");
                if (y == -1) return Value(int64_t{0});
                int64_t r = x % y;
                if (r != 0 && ((r < 0) != (y < 0))) r += y;
                return Value(r);
            }
        case BinaryOp::pow:
            if (!numbers) unsupported_operands("** or pow()", a, b);
            if (!floats && b.to_int() >= 0) return Value(int_pow(a.to_int(), b.to_int()));
            if (a.to_double() == 0.0 && b.to_double() < 0) {
                fail(ErrorKind::value, "0.0 cannot be raised to a negative power");
            }
            if (a.to_double() < 0 && std::floor(b.to_double()) != b.to_double()) {
                fail(ErrorKind::unsupported, "complex numbers are not supported");
            }
            return Value(std::pow(a.to_double(), b.to_double()));
        default:
            break;
    }
    fail(ErrorKind::unsupported, "unsupported operator");
}

Value negate(const Value& v, bool minus) {
    if (v.is_undefined()) fail_undefined(v);
    if (v.is_float()) return Value(minus ? -v.as_float() : v.as_float());
    if (v.is_int() || v.is_bool()) {
        if (!minus) return Value(v.to_int());
        if (v.to_int() == std::numeric_limits<int64_t>::min()) overflow();
        return Value(-v.to_int());
    }
    fail(ErrorKind::type, fmt::format("bad operand type for unary {}: '{}'", minus ? '-' : '+', v.type_name()));
}

int compare_order(const Value& a, const Value& b, std::string_view op) {
    if (a.is_undefined()) fail_undefined(a);
    if (b.is_undefined()) fail_undefined(b);
    if (a.is_number() && b.is_number()) {
        if (!a.is_float() && !b.is_float()) {
            const int64_t x = a.to_int();
            const int64_t y = b.to_int();
            return x < y ? -1 : x > y ? 1 : 0;
        }
        const double x = a.to_double();
        const double y = b.to_double();
        if (!a.is_float() || !b.is_float()) {
            // int vs float: compare exactly
            const bool a_int = !a.is_float();
            const int64_t i = a_int ? a.to_int() : b.to_int();
            const double d = a_int ? y : x;
            if (std::isnan(d)) return 2;
            int c;
            if (d >= 9.3e18) {
                c = -1;
            } else if (d <= -9.3e18) {
                c = 1;
            } else {
                const double fl = std::floor(d);
                const auto fi = static_cast<int64_t>(fl);
                c = i < fi ? -1 : i > fi ? 1 : (fl == d ? 0 : -1);
            }
            return a_int ? c : -c;
        }
        if (std::isnan(x) || std::isnan(y)) return 2;  // unordered: every comparison is false
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.is_string() && b.is_string()) {
        const int c = a.as_string().compare(b.as_string());  // UTF-8 order is code point order
        return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    if (a.is_list() && b.is_list() && a.as_list().kind == b.as_list().kind &&
        a.as_list().kind != SequenceKind::generator) {
        const auto& x = a.as_list().items;
        const auto& y = b.as_list().items;
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (!values_equal(x[i], y[i])) return compare_order(x[i], y[i], op);
        }
        return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
    fail(ErrorKind::type,
         fmt::format("'{}' not supported between instances of '{}' and '{}'", op, a.type_name(), b.type_name()));
}

bool compare(CompareOp op, const Value& a, const Value& b, Interpreter& interp) {
    switch (op) {
        case CompareOp::eq:
            return values_equal(a, b);
        case CompareOp::ne:
            return !values_equal(a, b);
        case CompareOp::lt:
            return compare_order(a, b, "<") == -1;
        case CompareOp::le: {
            const int c = compare_order(a, b, "<=");
            return c == -1 || c == 0;
        }
        case CompareOp::gt:
            return compare_order(a, b, ">") == 1;
        case CompareOp::ge: {
            const int c = compare_order(a, b, ">=");
            return c == 1 || c == 0;
        }
        case CompareOp::in:
            return contains(interp, b, a);
        case CompareOp::not_in:
            return !contains(interp, b, a);
    }
    return false;
}

bool contains(Interpreter& interp, const Value& container, const Value& item) {
    switch (container.kind()) {
        case ValueKind::string:
            if (item.is_undefined()) fail_undefined(item);
            if (!item.is_string()) {
                fail(ErrorKind::type,
                     fmt::format("'in <string>' requires string as left operand, not {}", item.type_name()));
            }
            return container.as_string().find(item.as_string()) != std::string::npos;
        case ValueKind::list:
            if (container.as_list().kind == SequenceKind::generator) {
                for (const Value& v : interp.iterate(container)) {
                    if (values_equal(v, item)) return true;
                }
                return false;
            }
            for (const Value& v : container.as_list().items) {
                if (values_equal(v, item)) return true;
            }
            return false;
        case ValueKind::dict:
            if (!is_hashable(item)) {
                if (item.is_undefined()) fail_undefined(item);
                fail(ErrorKind::type, fmt::format("unhashable type: '{}'", item.type_name()));
            }
            return container.as_dict().find(item) != nullptr;
        case ValueKind::undefined:
            return false;
        default:
            fail(ErrorKind::type, fmt::format("argument of type '{}' is not iterable", container.type_name()));
    }
}

namespace {

// One conversion of a %-format: flags, width, precision and type.
struct PercentSpec {
    bool left = false, plus = false, space = false, zero = false, alt = false;
    int width = -1, precision = -1;
    char type = 's';
};

std::string pad(std::string body, const PercentSpec& spec, bool numeric) {
    if (spec.width < 0 || static_cast<int>(code_point_count(body)) >= spec.width) return body;
    const size_t fill = static_cast<size_t>(spec.width) - code_point_count(body);
    if (spec.left) return body + std::string(fill, ' ');
    if (spec.zero && numeric) {
        const size_t sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
        return body.substr(0, sign) + std::string(fill, '0') + body.substr(sign);
    }
    return std::string(fill, ' ') + body;
}

std::string format_one(Interpreter& interp, const PercentSpec& spec, const Value& arg) {
    if (arg.is_undefined() && spec.type != 's' && spec.type != 'r') fail_undefined(arg);
    std::string sign_prefix;
    auto with_sign = [&](std::string digits, bool negative) {
        if (negative) return "-" + digits;
        if (spec.plus) return "+" + digits;
        if (spec.space) return " " + digits;
        return digits;
    };
    switch (spec.type) {
        case 's': {
            std::string s = to_str(arg, interp.budget());
            if (spec.precision >= 0 && code_point_count(s) > static_cast<size_t>(spec.precision)) {
                s = s.substr(0, code_point_offsets(s)[static_cast<size_t>(spec.precision)]);
            }
            return pad(std::move(s), spec, false);
        }
        case 'r':
        case 'a': {
            std::string s;
            append_repr(s, arg, interp.budget());
            return pad(std::move(s), spec, false);
        }
        case 'd':
        case 'i':
        case 'u':
        case 'x':
        case 'X':
        case 'o': {
            if (!arg.is_number()) {
                fail(ErrorKind::type,
                     fmt::format("%{} format: a real number is required, not {}", spec.type, arg.type_name()));
            }
            const double d = arg.to_double();
            if (arg.is_float() && !std::isfinite(d)) fail(ErrorKind::value, "cannot convert float to integer");
            const int64_t v = arg.is_float() ? static_cast<int64_t>(d) : arg.to_int();
            const uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
            std::string digits;
            if (spec.type == 'x') {
                digits = (spec.alt ? "0x" : "") + fmt::format("{:x}", magnitude);
            } else if (spec.type == 'X') {
                digits = (spec.alt ? "0X" : "") + fmt::format("{:X}", magnitude);
            } else if (spec.type == 'o') {
                digits = (spec.alt ? "0o" : "") + fmt::format("{:o}", magnitude);
            } else {
                digits = fmt::format("{}", magnitude);
            }
            if (spec.precision > 0 && digits.size() < static_cast<size_t>(spec.precision)) {
                digits = std::string(static_cast<size_t>(spec.precision) - digits.size(), '0') + digits;
            }
            return pad(with_sign(digits, v < 0), spec, true);
        }
        case 'f':
        case 'F':
        case 'e':
        case 'E':
        case 'g':
        case 'G': {
            if (!arg.is_number()) {
                fail(ErrorKind::type, fmt::format("must be real number, not {}", arg.type_name()));
            }
            const double d = arg.to_double();
            const int precision = spec.precision < 0 ? 6 : std::min(spec.precision, 100);
            std::string body;
            const double magnitude = std::fabs(d);
            switch (spec.type) {
                case 'f':
                    body = fmt::format("{:.{}f}", magnitude, precision);
                    break;
                case 'F':
                    body = fmt::format("{:.{}F}", magnitude, precision);
                    break;
                case 'e':
                    body = fmt::format("{:.{}e}", magnitude, precision);
                    break;
                case 'E':
                    body = fmt::format("{:.{}E}", magnitude, precision);
                    break;
                case 'g':
                    body = spec.alt ? fmt::format("{:#.{}g}", magnitude, std::max(precision, 1))
                                    : fmt::format("{:.{}g}", magnitude, std::max(precision, 1));
                    break;
                default:
                    body = spec.alt ? fmt::format("{:#.{}G}", magnitude, std::max(precision, 1))
                                    : fmt::format("{:.{}G}", magnitude, std::max(precision, 1));
                    break;
            }
            return pad(with_sign(body, std::signbit(d) && !std::isnan(d)), spec, true);
        }
        case 'c': {
            std::string s;
            if (arg.is_string() && code_point_count(arg.as_string()) == 1) {
                s = arg.as_string();
            } else if (arg.is_int() && arg.as_int() >= 0 && arg.as_int() <= 0x10FFFF) {
                append_utf8(s, static_cast<char32_t>(arg.as_int()));
            } else {
                fail(ErrorKind::type, "%c requires an int or a unicode character");
            }
            return pad(std::move(s), spec, false);
        }
        default:
            break;
    }
    fail(ErrorKind::value, fmt::format("unsupported format character '{}'", spec.type));
}

}  // namespace

std::string percent_format(Interpreter& interp, std::string_view format, const Value& args) {
    std::vector<Value> positional;
    const DictObject* mapping = nullptr;
    if (args.is_list() && args.as_list().kind == SequenceKind::tuple) {
        positional = args.as_list().items;
    } else if (args.is_dict()) {
        mapping = &args.as_dict();
        positional.push_back(args);
    } else {
        positional.push_back(args);
    }
    size_t next_arg = 0;
    bool used_mapping = false;
    std::string out;
    for (size_t i = 0; i < format.size(); ++i) {
        if (format[i] != '%') {
            out.push_back(format[i]);
            continue;
        }
        if (++i >= format.size()) fail(ErrorKind::value, "incomplete format");
        if (format[i] == '%') {
            out.push_back('%');
            continue;
        }
        const Value* arg = nullptr;
        if (format[i] == '(') {
            const size_t close = format.find(')', i);
            if (close == std::string_view::npos) fail(ErrorKind::value, "incomplete format key");
            if (mapping == nullptr) fail(ErrorKind::type, "format requires a mapping");
            arg = mapping->find(format.substr(i + 1, close - i - 1));
            if (arg == nullptr)
                fail(ErrorKind::value, fmt::format("format key '{}' not found", format.substr(i + 1, close - i - 1)));
            used_mapping = true;
            i = close + 1;
        }
        PercentSpec spec;
        for (; i < format.size(); ++i) {
            const char f = format[i];
            if (f == '-')
                spec.left = true;
            else if (f == '+')
                spec.plus = true;
            else if (f == ' ')
                spec.space = true;
            else if (f == '0')
                spec.zero = true;
            else if (f == '#')
                spec.alt = true;
            else
                break;
        }
        auto read_number = [&](int& into) {
            if (i < format.size() && format[i] == '*') fail(ErrorKind::unsupported, "'*' in a format is not supported");
            while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
                into = std::max(into, 0) * 10 + (format[i] - '0');
                if (into > 10000) fail(ErrorKind::limit, "format width or precision too large");
                ++i;
            }
        };
        read_number(spec.width);
        if (i < format.size() && format[i] == '.') {
            ++i;
            spec.precision = 0;
            read_number(spec.precision);
        }
        while (i < format.size() && (format[i] == 'l' || format[i] == 'h' || format[i] == 'L')) ++i;
        if (i >= format.size()) fail(ErrorKind::value, "incomplete format");
        spec.type = format[i];
        if (arg == nullptr) {
            if (next_arg >= positional.size()) fail(ErrorKind::type, "not enough arguments for format string");
            arg = &positional[next_arg++];
        }
        out += format_one(interp, spec, *arg);
        interp.budget().check_string_size(out.size());
    }
    if (!used_mapping && mapping == nullptr && next_arg < positional.size()) {
        fail(ErrorKind::type, "not all arguments converted during string formatting");
    }
    return out;
}

}  // namespace powerhouse::jinja
