// Writes GGUF v3 files: metadata, tensor infos, then tensor data, each tensor padded to
// the alignment. Tensor data is produced on demand by a callback, one tensor at a time,
// so multi-gigabyte files (synthetic models) are written without holding them in memory.
//
// The file is written to "<path>.part", flushed with fsync and renamed into place, so
// the final name never holds a partial file.
//
// Thread-safety: one writer per thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_value.h"
#include "powerhouse/result.h"
#include "tensor/dtype.h"

namespace powerhouse {

struct GgufTensorSpec {
    std::string name;
    GgmlType type = GgmlType::f32;
    std::vector<int64_t> dims;  // dims[0] is the row length, at most 4 dims

    int64_t n_elements() const;
    uint64_t n_bytes() const;
};

class GgufWriter {
public:
    explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment);

    GgufMetadata& metadata() { return metadata_; }
    const std::vector<GgufTensorSpec>& tensors() const { return tensors_; }

    // Validates the shape against the type's block size; names must be unique.
    Result<void> add_tensor(GgufTensorSpec spec);

    // Fills `out` (exactly the tensor's n_bytes) with the data of tensor `index`.
    using FillFn = std::function<Result<void>(size_t index, const GgufTensorSpec& spec, std::span<std::byte> out)>;

    Result<void> write_file(const std::filesystem::path& path, const FillFn& fill) const;
    // The whole file in memory (tests, fuzz seeds).
    Result<std::vector<std::byte>> write_buffer(const FillFn& fill) const;

    // Bytes of everything before the data section, and of the whole file.
    uint64_t header_bytes() const;
    uint64_t file_bytes() const;

private:
    Result<void> write_to(const std::function<Result<void>(std::span<const std::byte>)>& sink,
                          const FillFn& fill) const;
    std::vector<std::byte> encode_header() const;

    uint32_t alignment_;
    GgufMetadata metadata_;
    std::vector<GgufTensorSpec> tensors_;
};

}  // namespace powerhouse
