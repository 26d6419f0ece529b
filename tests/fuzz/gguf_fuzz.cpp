// Fuzz target for the GGUF reader: any bytes either parse or yield an error; nothing the
// parser accepts may point outside the input. Also exercises what `info` computes from
// an accepted file (typed lookups over every key, tensor sizes).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "gguf/gguf_file.h"
#include "gguf/gguf_model.h"

using namespace powerhouse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto bytes = std::as_bytes(std::span(data, size));
    Result<GgufFile> file = GgufFile::parse(bytes, "fuzz.gguf");
    if (!file.ok()) {
        if (file.error().message.empty()) std::abort();
        return 0;
    }
    const std::byte* begin = bytes.data();
    const std::byte* end = begin + size;
    uint64_t checksum = 0;
    for (const GgufTensorInfo& t : file->tensors()) {
        if (t.n_bytes > 0 && (t.data < begin || t.data + t.n_bytes > end)) std::abort();
        if (t.n_elements <= 0 || t.ne[0] % type_traits(t.type).block_size != 0) std::abort();
        if (t.n_bytes > 0) checksum += static_cast<uint8_t>(t.data[0]) + static_cast<uint8_t>(t.data[t.n_bytes - 1]);
    }
    for (const auto& [key, value] : file->metadata().entries()) {
        checksum += file->metadata().get_uint(key).value_or(0);
        checksum += describe_value(value).size();
        if (const auto* array = std::get_if<GgufArray>(&value)) {
            if (array->element_type != GgufValueType::string && array->count > 0) {
                const size_t n = array->count * gguf_value_type_size(array->element_type);
                if (array->raw < begin || array->raw + n > end) std::abort();
                checksum += static_cast<uint8_t>(array->raw[n - 1]);
            }
        }
    }
    std::vector<GgufFile> parts;
    parts.push_back(std::move(file).value());
    Result<GgufModel> model = GgufModel::from_parts(std::move(parts));
    if (model.ok()) checksum += model->total_tensor_bytes();
    asm volatile("" : : "r"(checksum) : "memory");  // keeps the reads from being optimised away
    return 0;
}
