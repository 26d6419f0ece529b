// Builds GGUF bytes field by field, including invalid ones, for the malformed-file tests.
// Unlike GgufWriter it checks nothing: every count, type and offset is the test's choice.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace powerhouse::test {

class ByteSink {
public:
    template <class T>
    ByteSink& put(T value) {
        const char* p = reinterpret_cast<const char*>(&value);
        bytes.append(p, sizeof(T));
        return *this;
    }
    ByteSink& str(std::string_view s) {
        put<uint64_t>(s.size());
        bytes.append(s);
        return *this;
    }
    std::string bytes;
};

struct RawTensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type = 0;  // GgmlType id
    uint64_t offset = 0;
};

class RawGguf {
public:
    uint32_t magic = 0x46554747;
    uint32_t version = 3;
    uint64_t tensor_count = UINT64_MAX;  // UINT64_MAX: the number of tensors added
    uint64_t kv_count = UINT64_MAX;      // UINT64_MAX: the number of key/values added
    uint32_t alignment = 32;             // only pads the data section; add the key yourself
    std::string data;                    // the data section

    // A key/value whose value bytes (after the type id) the test encodes itself.
    void kv(std::string_view key, uint32_t type, const std::string& value_bytes) {
        ByteSink s;
        s.str(key).put<uint32_t>(type);
        kvs_.push_back(s.bytes + value_bytes);
        ++n_kv_;
    }
    void kv_u32(std::string_view key, uint32_t v) { kv(key, 4, ByteSink().put(v).bytes); }
    void kv_string(std::string_view key, std::string_view v) { kv(key, 8, ByteSink().str(v).bytes); }
    void tensor(RawTensor t) { tensors_.push_back(std::move(t)); }

    // Byte position where the tensor infos start (after the header and key/values).
    size_t tensor_infos_offset() const {
        size_t n = 24;
        for (const auto& kv : kvs_) n += kv.size();
        return n;
    }

    std::string build() const {
        ByteSink s;
        s.put(magic).put(version);
        s.put<uint64_t>(tensor_count == UINT64_MAX ? tensors_.size() : tensor_count);
        s.put<uint64_t>(kv_count == UINT64_MAX ? n_kv_ : kv_count);
        for (const auto& kv : kvs_) s.bytes += kv;
        for (const RawTensor& t : tensors_) {
            s.str(t.name).put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
            for (uint64_t d : t.dims) s.put(d);
            s.put(t.type).put(t.offset);
        }
        const size_t padded = (s.bytes.size() + alignment - 1) / alignment * alignment;
        s.bytes.resize(padded, '\0');
        return s.bytes + data;
    }

private:
    std::vector<std::string> kvs_;
    uint64_t n_kv_ = 0;
    std::vector<RawTensor> tensors_;
};

}  // namespace powerhouse::test
