#include "logits_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace powerhouse::cli {
namespace {

constexpr char kMagic[8] = {'P', 'H', 'L', 'O', 'G', 'I', 'T', 'S'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kHeaderBytes = 48;
constexpr uint64_t kAlign = 64;

uint64_t value_bytes(LogitsType type) { return type == LogitsType::f32 ? 4 : 2; }

uint64_t data_offset(const LogitsFileInfo& info) {
    const uint64_t end = kHeaderBytes + uint64_t{4} * info.n_chunks * info.n_ctx;
    return (end + kAlign - 1) / kAlign * kAlign;
}

uint64_t row_bytes(const LogitsFileInfo& info) { return uint64_t{info.n_vocab} * value_bytes(info.type); }

// IEEE half precision, round to nearest even; written here because the app may use only the
// engine's public headers, and the compiler's _Float16 is not on every target.
uint16_t to_half(float f) {
    uint32_t x = 0;
    std::memcpy(&x, &f, 4);
    const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // 65520 and up round to inf
    if (abs < 0x38800000u) {
        // Below the smallest normal half (2^-14): a multiple of 2^-24. Scaling by 2^24 is exact.
        float v = 0;
        std::memcpy(&v, &abs, 4);
        return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(v * 16777216.0f)));
    }
    const uint32_t mant = abs & 0x7fffffu;
    uint32_t h = (((abs >> 23) - 112u) << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
    return static_cast<uint16_t>(sign | h);
}

float from_half(uint16_t h) {
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
        return sign != 0 ? -v : v;
    }
    const uint32_t bits = exp == 31 ? (sign | 0x7f800000u | (mant << 13)) : (sign | ((exp + 112u) << 23) | (mant << 13));
    float f = 0;
    std::memcpy(&f, &bits, 4);
    return f;
}

void put_u32(unsigned char* at, uint32_t v) { std::memcpy(at, &v, 4); }
void put_u64(unsigned char* at, uint64_t v) { std::memcpy(at, &v, 8); }
uint32_t get_u32(const unsigned char* at) {
    uint32_t v = 0;
    std::memcpy(&v, at, 4);
    return v;
}
uint64_t get_u64(const unsigned char* at) {
    uint64_t v = 0;
    std::memcpy(&v, at, 8);
    return v;
}

std::filesystem::path part_path(const std::filesystem::path& path) {
    std::filesystem::path p = path;
    p += ".part";
    return p;
}

}  // namespace

uint64_t vocab_hash(const Tokenizer& tokenizer) {
    uint64_t h = 0xcbf29ce484222325ull;
    const auto mix = [&h](unsigned char c) {
        h ^= c;
        h *= 0x100000001b3ull;
    };
    for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
        for (char c : tokenizer.token_text(id)) mix(static_cast<unsigned char>(c));
        mix(0);
    }
    return h;
}

// ---- writer ----

struct LogitsWriter::State {
    std::filesystem::path path;
    std::FILE* file = nullptr;
    LogitsFileInfo info;
    uint64_t rows_written = 0;
    std::vector<unsigned char> row;  // one row in the file's type

    ~State() {
        if (file != nullptr) {
            std::fclose(file);
            std::error_code ec;
            std::filesystem::remove(part_path(path), ec);
        }
    }
};

LogitsWriter::LogitsWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
LogitsWriter::LogitsWriter(LogitsWriter&&) noexcept = default;
LogitsWriter& LogitsWriter::operator=(LogitsWriter&&) noexcept = default;
LogitsWriter::~LogitsWriter() = default;

Result<LogitsWriter> LogitsWriter::create(const std::filesystem::path& path, const LogitsFileInfo& info,
                                          std::span<const TokenId> tokens) {
    if (tokens.size() != uint64_t{info.n_chunks} * info.n_ctx) {
        return make_error(ErrorCode::internal, "the logits file's tokens do not match its chunks");
    }
    // Written to PATH.part and renamed onto PATH at the end: over a folder that would fail only
    // after the whole run, and over a device (/dev/null) it would replace the device node.
    std::error_code ec;
    const std::filesystem::file_status status = std::filesystem::status(path, ec);
    if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
        return make_error(
            ErrorCode::invalid_argument,
            fmt::format("'{}' is {}, not a file: name the file to write the logits to", path.string(),
                        std::filesystem::is_directory(status) ? "a folder" : "a device or other special file"));
    }
    auto state = std::make_unique<State>();
    state->path = path;
    state->info = info;
    state->file = std::fopen(part_path(path).c_str(), "wb");
    if (state->file == nullptr) {
        return make_error(ErrorCode::io, fmt::format("cannot create '{}': {}", part_path(path).string(),
                                                     std::strerror(errno)));
    }
    unsigned char header[kHeaderBytes] = {};
    std::memcpy(header, kMagic, 8);
    put_u32(header + 8, kVersion);
    put_u32(header + 12, static_cast<uint32_t>(info.type));
    put_u32(header + 16, info.n_vocab);
    put_u32(header + 20, info.n_ctx);
    put_u32(header + 24, info.n_chunks);
    put_u32(header + 28, info.n_scored);
    put_u64(header + 32, info.vocab_hash);
    put_u64(header + 40, data_offset(info));
    const uint64_t pad = data_offset(info) - kHeaderBytes - tokens.size_bytes();
    const std::vector<unsigned char> zeros(pad, 0);
    if (std::fwrite(header, 1, kHeaderBytes, state->file) != kHeaderBytes ||
        std::fwrite(tokens.data(), 1, tokens.size_bytes(), state->file) != tokens.size_bytes() ||
        std::fwrite(zeros.data(), 1, zeros.size(), state->file) != zeros.size()) {
        return make_error(ErrorCode::io, fmt::format("cannot write '{}': {}", part_path(path).string(),
                                                     std::strerror(errno)));
    }
    state->row.resize(row_bytes(info));
    return LogitsWriter(std::move(state));
}

Result<void> LogitsWriter::append(std::span<const float> log_probs) {
    State& s = *state_;
    if (log_probs.size() != s.info.n_vocab) return make_error(ErrorCode::internal, "a logits row of the wrong width");
    if (s.rows_written == uint64_t{s.info.n_chunks} * s.info.n_scored) {
        return make_error(ErrorCode::internal, "more logits rows than the file holds");
    }
    if (s.info.type == LogitsType::f32) {
        std::memcpy(s.row.data(), log_probs.data(), log_probs.size_bytes());
    } else {
        for (size_t i = 0; i < log_probs.size(); ++i) {
            const uint16_t h = to_half(log_probs[i]);
            std::memcpy(s.row.data() + 2 * i, &h, 2);
        }
    }
    if (std::fwrite(s.row.data(), 1, s.row.size(), s.file) != s.row.size()) {
        return make_error(ErrorCode::io, fmt::format("cannot write '{}': {}", part_path(s.path).string(),
                                                     std::strerror(errno)));
    }
    ++s.rows_written;
    return {};
}

Result<void> LogitsWriter::finish() {
    State& s = *state_;
    if (s.rows_written != uint64_t{s.info.n_chunks} * s.info.n_scored) {
        return make_error(ErrorCode::internal, "the logits file is missing rows");
    }
    const bool flushed = std::fflush(s.file) == 0 && ::fsync(::fileno(s.file)) == 0;
    const bool closed = std::fclose(s.file) == 0;
    s.file = nullptr;
    std::error_code ec;
    if (!flushed || !closed) {
        std::filesystem::remove(part_path(s.path), ec);
        return make_error(ErrorCode::io, fmt::format("cannot write '{}'", part_path(s.path).string()));
    }
    std::filesystem::rename(part_path(s.path), s.path, ec);
    if (ec) {
        return make_error(ErrorCode::io, fmt::format("cannot rename '{}' to '{}': {}", part_path(s.path).string(),
                                                     s.path.string(), ec.message()));
    }
    return {};
}

// ---- reader ----

struct LogitsReader::State {
    std::filesystem::path path;
    const unsigned char* data = nullptr;
    size_t size = 0;
    LogitsFileInfo info;
    uint64_t offset = 0;

    ~State() {
        if (data != nullptr) ::munmap(const_cast<unsigned char*>(data), size);
    }
};

LogitsReader::LogitsReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
LogitsReader::LogitsReader(LogitsReader&&) noexcept = default;
LogitsReader& LogitsReader::operator=(LogitsReader&&) noexcept = default;
LogitsReader::~LogitsReader() = default;

Result<LogitsReader> LogitsReader::open(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return make_error(ErrorCode::io, fmt::format("cannot open '{}': {}", path.string(), std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        ::close(fd);
        return make_error(ErrorCode::io, fmt::format("cannot read '{}': {}", path.string(), std::strerror(errno)));
    }
    const auto size = static_cast<uint64_t>(st.st_size);
    const auto bad = [&](const std::string& why) {
        return make_error(ErrorCode::format, fmt::format("'{}' is not a usable logits file: {}", path.string(), why));
    };
    if (size < kHeaderBytes) {
        ::close(fd);
        return bad("shorter than its header");
    }
    void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (mapped == MAP_FAILED) {
        return make_error(ErrorCode::io, fmt::format("cannot map '{}': {}", path.string(), std::strerror(errno)));
    }
    auto state = std::make_unique<State>();
    state->path = path;
    state->data = static_cast<const unsigned char*>(mapped);
    state->size = size;
    const unsigned char* h = state->data;
    if (std::memcmp(h, kMagic, 8) != 0) return bad("no PHLOGITS magic");
    if (get_u32(h + 8) != kVersion) return bad(fmt::format("version {} (this program reads {})", get_u32(h + 8), kVersion));
    LogitsFileInfo& info = state->info;
    const uint32_t type = get_u32(h + 12);
    if (type > 1) return bad(fmt::format("value type {} is neither f32 (0) nor f16 (1)", type));
    info.type = static_cast<LogitsType>(type);
    info.n_vocab = get_u32(h + 16);
    info.n_ctx = get_u32(h + 20);
    info.n_chunks = get_u32(h + 24);
    info.n_scored = get_u32(h + 28);
    info.vocab_hash = get_u64(h + 32);
    state->offset = get_u64(h + 40);
    if (info.n_vocab == 0 || info.n_ctx < 3 || info.n_chunks == 0) return bad("empty");
    if (info.n_scored != info.n_ctx - 1 - info.n_ctx / 2) {
        return bad(fmt::format("{} rows per chunk of {} tokens (expected {})", info.n_scored, info.n_ctx,
                               info.n_ctx - 1 - info.n_ctx / 2));
    }
    if (state->offset != data_offset(info)) return bad("the data offset does not follow the tokens");
    uint64_t rows = 0, data_bytes = 0, expected = 0;
    if (__builtin_mul_overflow(uint64_t{info.n_chunks}, uint64_t{info.n_scored}, &rows) ||
        __builtin_mul_overflow(rows, row_bytes(info), &data_bytes) ||
        __builtin_add_overflow(state->offset, data_bytes, &expected) || expected != size) {
        return bad(fmt::format("{} bytes, which is not the size of {} chunks of {} rows of {} values", size,
                               info.n_chunks, info.n_scored, info.n_vocab));
    }
    ::madvise(mapped, size, MADV_SEQUENTIAL);
    return LogitsReader(std::move(state));
}

const LogitsFileInfo& LogitsReader::info() const { return state_->info; }

std::span<const TokenId> LogitsReader::chunk_tokens(uint32_t chunk) const {
    const auto* tokens = reinterpret_cast<const TokenId*>(state_->data + kHeaderBytes);
    return {tokens + uint64_t{chunk} * state_->info.n_ctx, state_->info.n_ctx};
}

void LogitsReader::read_row(uint32_t chunk, uint32_t row, std::vector<float>& out) const {
    const LogitsFileInfo& info = state_->info;
    const uint64_t index = uint64_t{chunk} * info.n_scored + row;
    const unsigned char* at = state_->data + state_->offset + index * row_bytes(info);
    out.resize(info.n_vocab);
    if (info.type == LogitsType::f32) {
        std::memcpy(out.data(), at, row_bytes(info));
        return;
    }
    for (uint32_t i = 0; i < info.n_vocab; ++i) {
        uint16_t v = 0;
        std::memcpy(&v, at + 2 * uint64_t{i}, 2);
        out[i] = from_half(v);
    }
}

void LogitsReader::release_chunk(uint32_t chunk) const {
    const LogitsFileInfo& info = state_->info;
    const long page = ::sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    const auto page_size = static_cast<uint64_t>(page);
    const uint64_t begin = state_->offset + uint64_t{chunk} * info.n_scored * row_bytes(info);
    const uint64_t end = begin + uint64_t{info.n_scored} * row_bytes(info);
    // Only whole pages inside the chunk: a page shared with the next chunk is still wanted.
    const uint64_t first = (begin + page_size - 1) / page_size * page_size;
    const uint64_t last = end / page_size * page_size;
    if (last > first) {
        ::madvise(const_cast<unsigned char*>(state_->data) + first, last - first, MADV_DONTNEED);
    }
}

bool is_logits_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    char magic[8] = {};
    return in.read(magic, 8) && std::memcmp(magic, kMagic, 8) == 0;
}

}  // namespace powerhouse::cli
