#include "gguf/gguf_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <type_traits>

namespace powerhouse {

std::string_view gguf_value_type_name(GgufValueType type) {
    switch (type) {
        case GgufValueType::u8: return "uint8";
        case GgufValueType::i8: return "int8";
        case GgufValueType::u16: return "uint16";
        case GgufValueType::i16: return "int16";
        case GgufValueType::u32: return "uint32";
        case GgufValueType::i32: return "int32";
        case GgufValueType::f32: return "float32";
        case GgufValueType::boolean: return "bool";
        case GgufValueType::string: return "string";
        case GgufValueType::array: return "array";
        case GgufValueType::u64: return "uint64";
        case GgufValueType::i64: return "int64";
        case GgufValueType::f64: return "float64";
    }
    return "unknown";
}

bool is_valid_gguf_value_type(uint32_t type_id) { return type_id <= static_cast<uint32_t>(GgufValueType::f64); }

size_t gguf_value_type_size(GgufValueType type) {
    switch (type) {
        case GgufValueType::u8:
        case GgufValueType::i8:
        case GgufValueType::boolean: return 1;
        case GgufValueType::u16:
        case GgufValueType::i16: return 2;
        case GgufValueType::u32:
        case GgufValueType::i32:
        case GgufValueType::f32: return 4;
        case GgufValueType::u64:
        case GgufValueType::i64:
        case GgufValueType::f64: return 8;
        case GgufValueType::string:
        case GgufValueType::array: return 0;
    }
    return 0;
}

bool values_equal(const GgufValue& a, const GgufValue& b) {
    if (a.index() != b.index()) return false;
    if (const auto* x = std::get_if<GgufArray>(&a)) {
        const auto& y = std::get<GgufArray>(b);
        if (x->element_type != y.element_type || x->count != y.count) return false;
        if (x->element_type == GgufValueType::string) return x->strings == y.strings;
        const size_t n = static_cast<size_t>(x->count) * gguf_value_type_size(x->element_type);
        return n == 0 || std::memcmp(x->raw, y.raw, n) == 0;
    }
    if (const auto* x = std::get_if<float>(&a)) {  // bitwise: NaN == NaN, -0 != +0
        return std::memcmp(x, &std::get<float>(b), sizeof(float)) == 0;
    }
    if (const auto* x = std::get_if<double>(&a)) {
        return std::memcmp(x, &std::get<double>(b), sizeof(double)) == 0;
    }
    return std::visit(
        [&b](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, GgufArray>) {
                return false;  // handled above
            } else {
                return x == std::get<T>(b);
            }
        },
        a);
}

namespace {

std::string quoted(std::string_view s, size_t max_chars) {
    std::string out = "\"";
    for (char c : s) {
        if (out.size() >= max_chars) {
            out += "...";
            break;
        }
        if (c == '\n') {
            out += "\\n";
        } else if (c == '"') {
            out += "\\\"";
        } else if (static_cast<unsigned char>(c) < 0x20) {
            out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        } else {
            out += c;
        }
    }
    out += '"';
    return out;
}

}  // namespace

std::string describe_value(const GgufValue& value, size_t max_chars) {
    return std::visit(
        [&](const auto& v) -> std::string {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string_view>) {
                return quoted(v, max_chars);
            } else if constexpr (std::is_same_v<T, GgufArray>) {
                if (v.element_type == GgufValueType::string && v.count <= 4) {
                    std::string out = "[";
                    for (size_t i = 0; i < v.strings.size(); ++i) {
                        out += (i ? ", " : "") + quoted(v.strings[i], max_chars / 4);
                    }
                    return out + "]";
                }
                return fmt::format("[{} x {}]", v.count, gguf_value_type_name(v.element_type));
            } else if constexpr (std::is_same_v<T, bool>) {
                return v ? "true" : "false";
            } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
                return fmt::format("{}", static_cast<int>(v));
            } else {
                return fmt::format("{}", v);
            }
        },
        value);
}

const GgufValue* GgufMetadata::find(std::string_view key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &entries_[it->second].second;
}

std::optional<uint64_t> GgufMetadata::get_uint(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    return std::visit(
        [](const auto& x) -> std::optional<uint64_t> {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
                if constexpr (std::is_signed_v<T>) {
                    if (x < 0) return std::nullopt;
                }
                return static_cast<uint64_t>(x);
            } else {
                return std::nullopt;
            }
        },
        *v);
}

std::optional<int64_t> GgufMetadata::get_int(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    return std::visit(
        [](const auto& x) -> std::optional<int64_t> {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, uint64_t>) {
                if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
                return static_cast<int64_t>(x);
            } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
                return static_cast<int64_t>(x);
            } else {
                return std::nullopt;
            }
        },
        *v);
}

std::optional<double> GgufMetadata::get_float(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    return std::visit(
        [](const auto& x) -> std::optional<double> {
            using T = std::decay_t<decltype(x)>;
            if constexpr ((std::is_integral_v<T> || std::is_floating_point_v<T>) && !std::is_same_v<T, bool>) {
                return static_cast<double>(x);
            } else {
                return std::nullopt;
            }
        },
        *v);
}

std::optional<bool> GgufMetadata::get_bool(std::string_view key) const {
    const GgufValue* v = find(key);
    if (const bool* b = v ? std::get_if<bool>(v) : nullptr) return *b;
    return std::nullopt;
}

std::optional<std::string_view> GgufMetadata::get_string(std::string_view key) const {
    const GgufValue* v = find(key);
    if (const auto* s = v ? std::get_if<std::string_view>(v) : nullptr) return *s;
    return std::nullopt;
}

const GgufArray* GgufMetadata::get_array(std::string_view key) const {
    const GgufValue* v = find(key);
    return v ? std::get_if<GgufArray>(v) : nullptr;
}

bool GgufMetadata::insert_view(std::string_view key, GgufValue value) {
    if (index_.count(key) != 0) return false;
    index_.emplace(key, entries_.size());
    entries_.emplace_back(key, std::move(value));
    return true;
}

std::string_view GgufMetadata::own(std::string_view text) {
    if (text.empty()) return {};
    const std::byte* p = own(reinterpret_cast<const std::byte*>(text.data()), text.size());
    return {reinterpret_cast<const char*>(p), text.size()};
}

const std::byte* GgufMetadata::own(const std::byte* data, size_t n) {
    if (n == 0) return nullptr;
    auto buffer = std::make_unique<std::byte[]>(n);
    std::memcpy(buffer.get(), data, n);
    arena_.push_back(std::move(buffer));
    return arena_.back().get();
}

GgufValue GgufMetadata::own_value(const GgufValue& value) {
    if (const auto* s = std::get_if<std::string_view>(&value)) return GgufValue{own(*s)};
    if (const auto* a = std::get_if<GgufArray>(&value)) {
        GgufArray copy;
        copy.element_type = a->element_type;
        copy.count = a->count;
        if (a->element_type == GgufValueType::string) {
            copy.strings.reserve(a->strings.size());
            for (std::string_view s : a->strings) copy.strings.push_back(own(s));
            copy.count = copy.strings.size();
        } else {
            copy.raw = own(a->raw, static_cast<size_t>(a->count) * gguf_value_type_size(a->element_type));
        }
        return GgufValue{std::move(copy)};
    }
    return value;
}

void GgufMetadata::set(std::string_view key, const GgufValue& value) {
    GgufValue owned = own_value(value);
    if (auto it = index_.find(key); it != index_.end()) {
        entries_[it->second].second = std::move(owned);
        return;
    }
    const std::string_view owned_key = own(key);
    index_.emplace(owned_key, entries_.size());
    entries_.emplace_back(owned_key, std::move(owned));
}

void GgufMetadata::set_string_array(std::string_view key, const std::vector<std::string>& values) {
    GgufArray array;
    array.element_type = GgufValueType::string;
    array.count = values.size();
    array.strings.assign(values.begin(), values.end());
    set(key, GgufValue{std::move(array)});
}

bool GgufMetadata::erase(std::string_view key) {
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(it->second));
    index_.clear();
    for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
    return true;
}

}  // namespace powerhouse
