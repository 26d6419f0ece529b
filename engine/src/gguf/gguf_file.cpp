#include "gguf/gguf_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <unordered_set>
#include <utility>

namespace powerhouse {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint64_t kMaxKeyLength = 65535;  // the GGUF specification's limit on key length
constexpr uint64_t kMaxTensorNameLength = 1024;
// Smallest encodings, used to bound counts by the bytes left before anything is allocated.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;              // key length, 1-byte key, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name, n_dims, 1 dim, type, offset

std::string printable(std::string_view s) {
    std::string out;
    for (char c : s.substr(0, 64)) {
        const auto u = static_cast<unsigned char>(c);
        out += (u >= 0x20 && u < 0x7f) ? std::string(1, c) : fmt::format("\\x{:02x}", u);
    }
    if (s.size() > 64) out += "...";
    return out;
}

}  // namespace

// Reads the file front to back. The first failure is kept and every later read fails, so
// loops only check for failure once per item.
class GgufParser {
public:
    GgufParser(std::span<const std::byte> bytes, const std::string& name) : bytes_(bytes), name_(name) {}
    // Header only: `bytes` is the start of a file of `file_size` bytes. Counts and lengths
    // are checked against the whole file; a read past `bytes` but inside the file marks the
    // header incomplete (`ran_out`) instead of the file truncated.
    GgufParser(std::span<const std::byte> prefix, uint64_t file_size, const std::string& name)
        : bytes_(prefix), name_(name), file_size_(file_size), header_only_(true) {}

    bool ran_out() const { return ran_out_; }

    Result<void> parse(GgufFile& out) {
        parse_header(out);
        if (!failed()) parse_metadata(out);
        if (!failed()) parse_alignment(out);
        if (!failed()) parse_tensor_infos(out);
        if (!failed()) place_tensor_data(out);
        if (failed()) return std::move(*error_);
        return {};
    }

private:
    bool failed() const { return error_.has_value(); }
    uint64_t left() const { return bytes_.size() - pos_; }
    // What the whole file has left: the bytes at hand, unless only the header is parsed.
    uint64_t file_left() const { return header_only_ ? (file_size_ > pos_ ? file_size_ - pos_ : 0) : left(); }

    // A read of `n` bytes runs past the prefix but not past the file: more must be fetched.
    bool need_more(uint64_t n) {
        if (!header_only_ || n <= left() || n > file_left() || failed()) return false;
        ran_out_ = true;
        fail_at(pos_, fmt::format("the header continues past the first {} bytes", bytes_.size()));
        return true;
    }

    void fail_at(uint64_t offset, std::string_view what) {
        if (failed()) return;
        std::string where = context_.empty() ? std::string() : context_ + ": ";
        error_ = make_error(ErrorCode::format, fmt::format("{}: {}{} (at byte {})", name_, where, what, offset));
    }

    bool read_raw(void* dst, uint64_t n, std::string_view field) {
        if (failed()) return false;
        if (need_more(n)) return false;
        if (n > left()) {
            fail_at(pos_, fmt::format("file ends inside {} ({} bytes needed, {} left): the file is truncated",
                                      field, n, left()));
            return false;
        }
        std::memcpy(dst, bytes_.data() + pos_, static_cast<size_t>(n));
        pos_ += n;
        return true;
    }

    template <class T>
    T read(std::string_view field) {
        T value{};
        read_raw(&value, sizeof(T), field);
        return value;
    }

    // A GGUF string: u64 length, then bytes (not NUL-terminated). Returns a view. The
    // field is named lazily ("string 17 of the array") so that reading a 150k-entry
    // vocabulary formats nothing unless it fails.
    std::string_view read_string(std::string_view field, uint64_t max_length, uint64_t element = UINT64_MAX) {
        if (failed()) return {};
        const uint64_t at = pos_;
        uint64_t length = 0;
        if (left() < sizeof(length)) {
            read_raw(&length, sizeof(length), name_field(field, element));
            return {};
        }
        std::memcpy(&length, bytes_.data() + pos_, sizeof(length));
        pos_ += sizeof(length);
        if (length > file_left()) {
            fail_at(at, fmt::format("{} length {} is past the end of the file ({} bytes left)",
                                    name_field(field, element), length, file_left()));
            return {};
        }
        if (length > max_length) {
            fail_at(at, fmt::format("{} length {} exceeds the limit of {} bytes", name_field(field, element), length,
                                    max_length));
            return {};
        }
        if (need_more(length)) return {};
        std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(length));
        pos_ += length;
        return s;
    }

    static std::string name_field(std::string_view field, uint64_t element) {
        return element == UINT64_MAX ? std::string(field) : fmt::format("{} {} of the array", field, element);
    }

    void parse_header(GgufFile& out) {
        context_ = "header";
        const auto magic = read<uint32_t>("the magic number");
        if (failed()) return;
        if (magic != kMagic) {
            char text[4];
            std::memcpy(text, &magic, 4);
            const std::string shown = printable(std::string_view(text, 4));
            const bool old_ggml = shown == "lmgg" || shown == "fmgg" || shown == "tjgg";
            fail_at(0, fmt::format("magic is \"{}\", expected \"GGUF\": this is not a GGUF model file{}", shown,
                                   old_ggml ? " (it is an old GGML/GGJT file; convert it with llama.cpp's scripts)" : ""));
            return;
        }
        const auto version = read<uint32_t>("the version");
        if (failed()) return;
        if (version != 2 && version != 3) {
            std::string hint;
            if (version == 1) {
                hint = ": version 1 files used 32-bit counts and are obsolete; re-convert the model";
            } else if (__builtin_bswap32(version) == 2 || __builtin_bswap32(version) == 3) {
                hint = ": this is a big-endian GGUF file; only little-endian files are supported";
            } else {
                hint = ": supported versions are 2 and 3";
            }
            fail_at(4, fmt::format("GGUF version {} is not supported{}", version, hint));
            return;
        }
        out.version_ = version;
        const uint64_t at_tensor_count = pos_;
        tensor_count_ = read<uint64_t>("the tensor count");
        const uint64_t at_kv_count = pos_;
        kv_count_ = read<uint64_t>("the metadata count");
        if (failed()) return;
        // Each entry takes some bytes; a count that cannot fit in the rest of the file is
        // refused here, before anything is sized by it.
        if (kv_count_ > file_left() / kMinKvBytes) {
            fail_at(at_kv_count, fmt::format("metadata count {} cannot fit in the {} bytes left in the file",
                                             kv_count_, file_left()));
        } else if (tensor_count_ > file_left() / kMinTensorInfoBytes) {
            fail_at(at_tensor_count, fmt::format("tensor count {} cannot fit in the {} bytes left in the file",
                                                 tensor_count_, file_left()));
        }
    }

    void parse_metadata(GgufFile& out) {
        for (uint64_t i = 0; i < kv_count_ && !failed(); ++i) {
            context_ = fmt::format("metadata entry {}", i);
            const uint64_t at_key = pos_;
            const std::string_view key = read_string("key", kMaxKeyLength);
            if (failed()) return;
            if (key.empty()) {
                fail_at(at_key, "key is empty");
                return;
            }
            context_ = fmt::format("metadata entry {} ('{}')", i, printable(key));
            GgufValue value = read_value();
            if (failed()) return;
            if (!out.metadata_.insert_view(key, std::move(value))) {
                fail_at(at_key, "duplicate key: the key appears twice in the file");
                return;
            }
        }
    }

    GgufValue read_value() {
        const uint64_t at_type = pos_;
        const auto type_id = read<uint32_t>("value type");
        if (failed()) return {};
        if (!is_valid_gguf_value_type(type_id)) {
            fail_at(at_type, fmt::format("unknown value type {} (valid types are 0 to 12)", type_id));
            return {};
        }
        const auto type = static_cast<GgufValueType>(type_id);
        switch (type) {
            case GgufValueType::u8: return read<uint8_t>("uint8 value");
            case GgufValueType::i8: return read<int8_t>("int8 value");
            case GgufValueType::u16: return read<uint16_t>("uint16 value");
            case GgufValueType::i16: return read<int16_t>("int16 value");
            case GgufValueType::u32: return read<uint32_t>("uint32 value");
            case GgufValueType::i32: return read<int32_t>("int32 value");
            case GgufValueType::f32: return read<float>("float32 value");
            case GgufValueType::u64: return read<uint64_t>("uint64 value");
            case GgufValueType::i64: return read<int64_t>("int64 value");
            case GgufValueType::f64: return read<double>("float64 value");
            case GgufValueType::boolean: {
                const uint64_t at = pos_;
                const auto b = read<uint8_t>("bool value");
                if (b > 1) fail_at(at, fmt::format("bool value is {}, expected 0 or 1", b));
                return b == 1;
            }
            case GgufValueType::string: return read_string("string value", UINT64_MAX);
            case GgufValueType::array: return read_array();
        }
        return {};
    }

    GgufValue read_array() {
        GgufArray array;
        const uint64_t at_type = pos_;
        const auto type_id = read<uint32_t>("array element type");
        const uint64_t at_count = pos_;
        array.count = read<uint64_t>("array length");
        if (failed()) return {};
        if (!is_valid_gguf_value_type(type_id)) {
            fail_at(at_type, fmt::format("unknown array element type {} (valid types are 0 to 12)", type_id));
            return {};
        }
        array.element_type = static_cast<GgufValueType>(type_id);
        if (array.element_type == GgufValueType::array) {
            fail_at(at_type, "nested arrays (arrays of arrays) are not supported");
            return {};
        }
        if (array.element_type == GgufValueType::string) {
            if (array.count > file_left() / 8) {
                fail_at(at_count, fmt::format("array length {} cannot fit in the {} bytes left (each string takes at "
                                              "least 8)", array.count, file_left()));
                return {};
            }
            array.strings.reserve(static_cast<size_t>(array.count));
            for (uint64_t i = 0; i < array.count; ++i) {
                array.strings.push_back(read_string("string", UINT64_MAX, i));
                if (failed()) return {};
            }
            return array;
        }
        const uint64_t element_size = gguf_value_type_size(array.element_type);
        if (array.count > file_left() / element_size) {
            fail_at(at_count, fmt::format("array of {} {} values needs {} bytes but only {} are left in the file",
                                          array.count, gguf_value_type_name(array.element_type),
                                          fmt::format("{}{}", array.count > UINT64_MAX / element_size ? "more than " : "",
                                                      array.count > UINT64_MAX / element_size
                                                          ? UINT64_MAX
                                                          : array.count * element_size),
                                          file_left()));
            return {};
        }
        if (need_more(array.count * element_size)) return {};
        array.raw = bytes_.data() + pos_;
        if (array.element_type == GgufValueType::boolean) {
            for (uint64_t i = 0; i < array.count; ++i) {
                const auto b = static_cast<uint8_t>(array.raw[i]);
                if (b > 1) {
                    fail_at(pos_ + i, fmt::format("element {} of a bool array is {}, expected 0 or 1", i, b));
                    return {};
                }
            }
        }
        pos_ += array.count * element_size;
        return array;
    }

    void parse_alignment(GgufFile& out) {
        context_ = "metadata";
        const GgufValue* value = out.metadata_.find("general.alignment");
        if (value == nullptr) return;
        const auto* alignment = std::get_if<uint32_t>(value);
        if (alignment == nullptr) {
            fail_at(0, fmt::format("general.alignment has type {}, expected uint32",
                                   gguf_value_type_name(value_type(*value))));
            return;
        }
        if (*alignment == 0 || !std::has_single_bit(*alignment) || *alignment > kGgufMaxAlignment) {
            fail_at(0, fmt::format("general.alignment is {}; it must be a power of two from 1 to {}", *alignment,
                                   kGgufMaxAlignment));
            return;
        }
        out.alignment_ = *alignment;
    }

    void parse_tensor_infos(GgufFile& out) {
        std::unordered_set<std::string_view> names;
        out.tensors_.reserve(static_cast<size_t>(std::min<uint64_t>(tensor_count_, 1u << 16)));
        for (uint64_t i = 0; i < tensor_count_ && !failed(); ++i) {
            context_ = fmt::format("tensor {}", i);
            GgufTensorInfo info;
            const uint64_t at_name = pos_;
            info.name = read_string("name", kMaxTensorNameLength);
            if (failed()) return;
            if (info.name.empty()) {
                fail_at(at_name, "tensor name is empty");
                return;
            }
            context_ = fmt::format("tensor {} ('{}')", i, printable(info.name));
            if (!names.insert(info.name).second) {
                fail_at(at_name, "duplicate tensor name");
                return;
            }
            const uint64_t at_dims = pos_;
            info.n_dims = read<uint32_t>("n_dims");
            if (failed()) return;
            if (info.n_dims == 0 || info.n_dims > kGgufMaxDims) {
                fail_at(at_dims, fmt::format("n_dims is {}, expected 1 to {}", info.n_dims, kGgufMaxDims));
                return;
            }
            int64_t n_elements = 1;
            for (uint32_t d = 0; d < info.n_dims; ++d) {
                const uint64_t at = pos_;
                const auto dim = read<uint64_t>("a dimension");
                if (failed()) return;
                if (dim == 0 || dim > static_cast<uint64_t>(INT64_MAX)) {
                    fail_at(at, fmt::format("dimension {} is {}; dimensions must be between 1 and 2^63-1", d,
                                            dim > static_cast<uint64_t>(INT64_MAX)
                                                ? fmt::format("{} (negative as int64)", static_cast<int64_t>(dim))
                                                : std::string("0")));
                    return;
                }
                info.ne[d] = static_cast<int64_t>(dim);
                if (__builtin_mul_overflow(n_elements, info.ne[d], &n_elements)) {
                    fail_at(at, "the product of the dimensions overflows 64 bits");
                    return;
                }
            }
            info.n_elements = n_elements;
            const uint64_t at_type = pos_;
            const auto type_id = read<uint32_t>("type");
            if (failed()) return;
            const std::optional<TypeTraits> traits = type_traits(type_id);
            if (!traits) {
                fail_at(at_type, fmt::format("unknown tensor type {}; the file may need a newer Powerhouse", type_id));
                return;
            }
            info.type = traits->type;
            if (info.ne[0] % traits->block_size != 0) {
                fail_at(at_dims, fmt::format("row length {} is not a multiple of the {} block size {}", info.ne[0],
                                             traits->name, traits->block_size));
                return;
            }
            // n_elements fits in int64, so the byte count of a row cannot overflow; the rows can.
            const uint64_t row = row_bytes(*traits, static_cast<uint64_t>(info.ne[0]));
            if (__builtin_mul_overflow(row, static_cast<uint64_t>(info.n_rows()), &info.n_bytes)) {
                fail_at(at_dims, "the tensor's size in bytes overflows 64 bits");
                return;
            }
            const uint64_t at_offset = pos_;
            info.offset = read<uint64_t>("data offset");
            if (failed()) return;
            if (info.offset % out.alignment_ != 0) {
                fail_at(at_offset,
                        fmt::format("data offset {} is not a multiple of the alignment {}", info.offset, out.alignment_));
                return;
            }
            offset_positions_.push_back(at_offset);
            out.tensors_.push_back(info);
        }
    }

    void place_tensor_data(GgufFile& out) {
        context_.clear();
        const uint64_t end_of_infos = pos_;
        const uint64_t data_offset = (end_of_infos + out.alignment_ - 1) / out.alignment_ * out.alignment_;
        out.data_offset_ = data_offset;
        const bool has_data =
            std::any_of(out.tensors_.begin(), out.tensors_.end(), [](const auto& t) { return t.n_bytes > 0; });
        if (!has_data) return;  // a vocabulary-only file may end right after its header
        const uint64_t size = header_only_ ? file_size_ : bytes_.size();
        if (data_offset > size) {
            fail_at(end_of_infos, fmt::format("the data section would start at byte {}, past the end of the file "
                                              "({} bytes): the file is truncated",
                                              data_offset, size));
            return;
        }
        const uint64_t data_size = size - data_offset;
        // Tensor data must be stored in the order of the tensor infos without overlapping,
        // as every GGUF writer does; llama.cpp refuses anything else too.
        uint64_t previous_end = 0;
        std::string_view previous_name;
        for (size_t i = 0; i < out.tensors_.size(); ++i) {
            GgufTensorInfo& t = out.tensors_[i];
            context_ = fmt::format("tensor {} ('{}')", i, printable(t.name));
            if (t.offset < previous_end) {
                fail_at(offset_positions_[i],
                        fmt::format("data offset {} is before the end of the previous tensor '{}' ({}): tensor data "
                                    "overlaps or is out of order",
                                    t.offset, printable(previous_name), previous_end));
                return;
            }
            if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
                fail_at(offset_positions_[i],
                        fmt::format("data [{}, +{}) runs past the end of the data section ({} bytes): the file is "
                                    "truncated or the offset is wrong",
                                    t.offset, t.n_bytes, data_size));
                return;
            }
            // Header only: the data is not at hand.
            t.data = header_only_ ? nullptr : bytes_.data() + data_offset + t.offset;
            previous_end = t.offset + t.n_bytes;
            previous_name = t.name;
        }
    }

    std::span<const std::byte> bytes_;
    const std::string& name_;
    uint64_t pos_ = 0;
    uint64_t tensor_count_ = 0;
    uint64_t kv_count_ = 0;
    std::vector<uint64_t> offset_positions_;  // byte position of each tensor's offset field
    std::string context_;
    std::optional<Error> error_;
    uint64_t file_size_ = 0;
    bool header_only_ = false;
    bool ran_out_ = false;
};

Result<GgufFile> GgufFile::open(const std::filesystem::path& path) {
    Result<MappedFile> mapping = MappedFile::open(path);
    if (!mapping) return std::move(mapping).error();
    GgufFile file;
    file.mapping_ = std::move(mapping).value();
    file.bytes_ = file.mapping_.bytes();
    file.name_ = path.filename().string();
    GgufParser parser(file.bytes_, file.name_);
    PH_TRY(parser.parse(file));
    return file;
}

Result<GgufFile> GgufFile::parse(std::span<const std::byte> bytes, std::string name) {
    GgufFile file;
    file.bytes_ = bytes;
    file.name_ = std::move(name);
    GgufParser parser(file.bytes_, file.name_);
    PH_TRY(parser.parse(file));
    return file;
}

Result<std::optional<GgufFile>> GgufFile::parse_header(std::span<const std::byte> prefix, uint64_t file_size,
                                                       std::string name) {
    if (prefix.size() > file_size) prefix = prefix.first(static_cast<size_t>(file_size));
    GgufFile file;
    file.bytes_ = prefix;
    file.name_ = std::move(name);
    file.header_only_size_ = file_size;
    GgufParser parser(file.bytes_, file_size, file.name_);
    Result<void> parsed = parser.parse(file);
    if (!parsed && parser.ran_out()) return std::optional<GgufFile>();
    if (!parsed) return std::move(parsed).error();
    return std::optional<GgufFile>(std::move(file));
}

}  // namespace powerhouse
