#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <unordered_set>

namespace powerhouse {
namespace {

class Encoder {
public:
    template <class T>
    void put(T value) {
        append(&value, sizeof(T));
    }
    void put_string(std::string_view s) {
        put<uint64_t>(s.size());
        append(s.data(), s.size());
    }
    // resize + memcpy rather than insert(): GCC 12 at -O2 misreads insert() of a few
    // bytes as an overflow (-Wstringop-overflow false positive).
    void append(const void* data, size_t n) {
        if (n == 0) return;
        const size_t at = out.size();
        out.resize(at + n);
        std::memcpy(out.data() + at, data, n);
    }
    void put_value(const GgufValue& value) {
        std::visit(
            [this](const auto& v) {
                using T = std::decay_t<decltype(v)>;
                if constexpr (std::is_same_v<T, std::string_view>) {
                    put_string(v);
                } else if constexpr (std::is_same_v<T, GgufArray>) {
                    put<uint32_t>(static_cast<uint32_t>(v.element_type));
                    put<uint64_t>(v.count);
                    if (v.element_type == GgufValueType::string) {
                        for (std::string_view s : v.strings) put_string(s);
                    } else {
                        append(v.raw, static_cast<size_t>(v.count) * gguf_value_type_size(v.element_type));
                    }
                } else if constexpr (std::is_same_v<T, bool>) {
                    put<uint8_t>(v ? 1 : 0);
                } else {
                    put<T>(v);
                }
            },
            value);
    }
    std::vector<std::byte> out;
};

uint64_t align_up(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// Writes everything or reports why not; retries short writes and EINTR.
Result<void> write_all(int fd, std::span<const std::byte> data, const std::filesystem::path& path) {
    while (!data.empty()) {
        const ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            return make_error(ErrorCode::io, fmt::format("cannot write {}: {}{}", path.string(), std::strerror(err),
                                                         err == ENOSPC ? " (free some disk space and try again)" : ""));
        }
        data = data.subspan(static_cast<size_t>(n));
    }
    return {};
}

}  // namespace

int64_t GgufTensorSpec::n_elements() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
}

uint64_t GgufTensorSpec::n_bytes() const {
    const TypeTraits& traits = type_traits(type);
    return static_cast<uint64_t>(n_elements()) / traits.block_size * traits.type_size;
}

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
    if (alignment_ != kGgufDefaultAlignment) metadata_.set("general.alignment", GgufValue{alignment_});
}

Result<void> GgufWriter::add_tensor(GgufTensorSpec spec) {
    if (spec.name.empty() || spec.dims.empty() || spec.dims.size() > kGgufMaxDims) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("tensor '{}': needs a name and 1 to {} dimensions", spec.name, kGgufMaxDims));
    }
    int64_t n = 1;
    for (int64_t d : spec.dims) {
        if (d <= 0 || __builtin_mul_overflow(n, d, &n)) {
            return make_error(ErrorCode::invalid_argument, fmt::format("tensor '{}': invalid dimensions", spec.name));
        }
    }
    const TypeTraits& traits = type_traits(spec.type);
    if (spec.dims[0] % traits.block_size != 0) {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("tensor '{}': row length {} is not a multiple of the {} block size {}", spec.name,
                                      spec.dims[0], traits.name, traits.block_size));
    }
    for (const GgufTensorSpec& t : tensors_) {
        if (t.name == spec.name) {
            return make_error(ErrorCode::invalid_argument, fmt::format("tensor '{}' added twice", spec.name));
        }
    }
    tensors_.push_back(std::move(spec));
    return {};
}

std::vector<std::byte> GgufWriter::encode_header() const {
    Encoder e;
    e.put<uint32_t>(0x46554747);  // "GGUF"
    e.put<uint32_t>(3);
    e.put<uint64_t>(tensors_.size());
    e.put<uint64_t>(metadata_.size());
    for (const auto& [key, value] : metadata_.entries()) {
        e.put_string(key);
        e.put<uint32_t>(static_cast<uint32_t>(value_type(value)));
        e.put_value(value);
    }
    uint64_t offset = 0;
    for (const GgufTensorSpec& t : tensors_) {
        e.put_string(t.name);
        e.put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
        for (int64_t d : t.dims) e.put<uint64_t>(static_cast<uint64_t>(d));
        e.put<uint32_t>(static_cast<uint32_t>(t.type));
        e.put<uint64_t>(offset);
        offset = align_up(offset + t.n_bytes(), alignment_);
    }
    e.out.resize(align_up(e.out.size(), alignment_), std::byte{0});
    return std::move(e.out);
}

uint64_t GgufWriter::header_bytes() const { return encode_header().size(); }

uint64_t GgufWriter::file_bytes() const {
    uint64_t total = header_bytes();
    for (const GgufTensorSpec& t : tensors_) total = align_up(total + t.n_bytes(), alignment_);
    return total;
}

Result<void> GgufWriter::write_to(const std::function<Result<void>(std::span<const std::byte>)>& sink,
                                  const FillFn& fill) const {
    PH_TRY(sink(encode_header()));
    std::vector<std::byte> buffer;
    for (size_t i = 0; i < tensors_.size(); ++i) {
        const uint64_t n = tensors_[i].n_bytes();
        buffer.assign(static_cast<size_t>(align_up(n, alignment_)), std::byte{0});
        PH_TRY(fill(i, tensors_[i], std::span<std::byte>(buffer.data(), static_cast<size_t>(n))));
        PH_TRY(sink(buffer));
    }
    return {};
}

Result<void> GgufWriter::write_file(const std::filesystem::path& path, const FillFn& fill) const {
    std::filesystem::path part = path;
    part += ".part";
    const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return make_error(ErrorCode::io, fmt::format("cannot create {}: {}", part.string(), std::strerror(errno)));
    }
    Result<void> written = write_to([&](std::span<const std::byte> data) { return write_all(fd, data, part); }, fill);
    if (written.ok() && ::fsync(fd) != 0) {
        written = make_error(ErrorCode::io, fmt::format("cannot flush {}: {}", part.string(), std::strerror(errno)));
    }
    ::close(fd);
    if (written.ok() && std::rename(part.c_str(), path.c_str()) != 0) {
        written = make_error(ErrorCode::io, fmt::format("cannot rename {} to {}: {}", part.string(), path.string(),
                                                        std::strerror(errno)));
    }
    if (!written.ok()) ::unlink(part.c_str());
    return written;
}

Result<std::vector<std::byte>> GgufWriter::write_buffer(const FillFn& fill) const {
    std::vector<std::byte> out;
    Result<void> written = write_to(
        [&](std::span<const std::byte> data) -> Result<void> {
            out.insert(out.end(), data.begin(), data.end());
            return {};
        },
        fill);
    if (!written) return std::move(written).error();
    return out;
}

}  // namespace powerhouse
