// GGUF metadata values and the ordered key/value container shared by the reader and the
// writer.
//
// Values read from a file are views into its memory mapping (strings and arrays are not
// copied: a 150k-token vocabulary costs one pass over the bytes). Values set by a writer
// are copied into an arena the container owns, so both kinds look the same to callers.
// A GgufMetadata is move-only; moving it keeps every view valid.
//
// Thread-safety: const access from several threads is safe; mutation is not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace powerhouse {

// Value type ids as stored in GGUF files.
enum class GgufValueType : uint32_t {
    u8 = 0,
    i8 = 1,
    u16 = 2,
    i16 = 3,
    u32 = 4,
    i32 = 5,
    f32 = 6,
    boolean = 7,
    string = 8,
    array = 9,
    u64 = 10,
    i64 = 11,
    f64 = 12,
};

std::string_view gguf_value_type_name(GgufValueType type);
bool is_valid_gguf_value_type(uint32_t type_id);
// Bytes of one element of a fixed-size type (0 for string and array).
size_t gguf_value_type_size(GgufValueType type);

// An array of one element type. Numeric and bool elements are little-endian bytes that
// may be unaligned (read them with at<T>() or to_vector<T>()); string elements are views.
struct GgufArray {
    GgufValueType element_type = GgufValueType::u8;
    uint64_t count = 0;
    const std::byte* raw = nullptr;          // count * element size bytes (not strings)
    std::vector<std::string_view> strings;   // element_type == string

    // Element i converted to T; T must match element_type's size.
    template <class T>
    T at(uint64_t i) const {
        T value;
        std::memcpy(&value, raw + i * sizeof(T), sizeof(T));
        return value;
    }
    template <class T>
    std::vector<T> to_vector() const {
        std::vector<T> out(static_cast<size_t>(count));
        if (count > 0) std::memcpy(out.data(), raw, static_cast<size_t>(count) * sizeof(T));
        return out;
    }
};

// The alternative index equals the GgufValueType id.
using GgufValue = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string_view, GgufArray, uint64_t, int64_t, double>;

inline GgufValueType value_type(const GgufValue& value) {
    return static_cast<GgufValueType>(value.index());
}

// Structural equality (strings and array elements by content).
bool values_equal(const GgufValue& a, const GgufValue& b);

// Short human-readable rendering, arrays abbreviated: `[49152 strings]`, `"llama"`.
std::string describe_value(const GgufValue& value, size_t max_chars = 80);

class GgufMetadata {
public:
    GgufMetadata() = default;
    GgufMetadata(GgufMetadata&&) noexcept = default;
    GgufMetadata& operator=(GgufMetadata&&) noexcept = default;
    GgufMetadata(const GgufMetadata&) = delete;  // a vocabulary is megabytes: no silent copies
    GgufMetadata& operator=(const GgufMetadata&) = delete;

    size_t size() const { return entries_.size(); }
    const std::vector<std::pair<std::string_view, GgufValue>>& entries() const { return entries_; }

    const GgufValue* find(std::string_view key) const;
    bool contains(std::string_view key) const { return find(key) != nullptr; }

    // Typed lookups; nullopt when absent or of an incompatible type. Integers of any width
    // convert when the value fits; get_float accepts floats and integers.
    std::optional<uint64_t> get_uint(std::string_view key) const;
    std::optional<int64_t> get_int(std::string_view key) const;
    std::optional<double> get_float(std::string_view key) const;
    std::optional<bool> get_bool(std::string_view key) const;
    std::optional<std::string_view> get_string(std::string_view key) const;
    const GgufArray* get_array(std::string_view key) const;

    // Reader side: the key and value already point at storage that outlives this object
    // (the file mapping). Returns false when the key is already present.
    bool insert_view(std::string_view key, GgufValue value);

    // Writer side: copies the key and any string/array contents into the arena. Replaces
    // an existing value of the same key in place (keeping the key order).
    void set(std::string_view key, const GgufValue& value);
    void set_string(std::string_view key, std::string_view value) { set(key, GgufValue{value}); }
    void set_string_array(std::string_view key, const std::vector<std::string>& values);
    template <class T>
    void set_array(std::string_view key, GgufValueType element_type, std::span<const T> values) {
        GgufArray array;
        array.element_type = element_type;
        array.count = values.size();
        array.raw = reinterpret_cast<const std::byte*>(values.data());
        set(key, GgufValue{std::move(array)});
    }
    bool erase(std::string_view key);

private:
    std::string_view own(std::string_view text);
    const std::byte* own(const std::byte* data, size_t n);
    GgufValue own_value(const GgufValue& value);

    std::vector<std::pair<std::string_view, GgufValue>> entries_;
    std::unordered_map<std::string_view, size_t> index_;
    std::vector<std::unique_ptr<std::byte[]>> arena_;
};

}  // namespace powerhouse
