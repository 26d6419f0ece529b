// Reader for the tensor-format fixtures in tests/data/quants/*.bin, written by
// scripts/fixtures/make_quant_fixture.py (its docstring is the format's specification).
// Header-only: shared by dequantize_test.cpp and quantize_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "tensor/dtype.h"

namespace powerhouse::test {

struct QuantRecord {
    uint32_t type_id = 0;
    std::string label;          // which case: "random", "zero-scales", ...
    std::vector<uint8_t> data;  // the encoded row
    std::vector<float> values;  // decoded row (dequantize.bin) or input row (quantize.bin)

    std::string describe() const {
        const auto traits = type_traits(type_id);
        return std::string(traits ? traits->name : "type " + std::to_string(type_id)) + " '" + label + "'";
    }
};

// Parses tests/data/quants/<name>; adds a test failure and returns what it could read
// when the file is missing or malformed.
inline std::vector<QuantRecord> load_quant_fixture(const std::string& name) {
    const std::string blob = read_file(data_dir() / "quants" / name);
    std::vector<QuantRecord> records;
    size_t pos = 0;
    auto take = [&](void* out, size_t n) {
        if (blob.size() - pos < n) return false;
        std::memcpy(out, blob.data() + pos, n);
        pos += n;
        return true;
    };
    auto take_u32 = [&](uint32_t& v) { return take(&v, sizeof v); };

    char magic[8];
    uint32_t count = 0;
    if (!take(magic, 8) || std::memcmp(magic, "PHQUANT1", 8) != 0 || !take_u32(count)) {
        ADD_FAILURE() << "missing or malformed fixture " << name << " (run scripts/fixtures/make_quant_fixture.py)";
        return records;
    }
    for (uint32_t r = 0; r < count; ++r) {
        QuantRecord rec;
        uint32_t n_elements = 0;
        uint32_t n_bytes = 0;
        uint32_t label_len = 0;
        bool ok = take_u32(rec.type_id) && take_u32(n_elements) && take_u32(n_bytes) && take_u32(label_len) &&
                  label_len <= 256;
        if (ok) {
            rec.label.resize(label_len);
            rec.data.resize(n_bytes);
            rec.values.resize(n_elements);
            ok = take(rec.label.data(), label_len) && take(rec.data.data(), n_bytes) &&
                 take(rec.values.data(), n_elements * sizeof(float));
        }
        if (!ok) {
            ADD_FAILURE() << name << ": record " << r << " is truncated";
            return records;
        }
        records.push_back(std::move(rec));
    }
    if (pos != blob.size()) ADD_FAILURE() << name << ": trailing bytes after the last record";
    return records;
}

}  // namespace powerhouse::test
