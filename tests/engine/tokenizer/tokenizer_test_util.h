// Helpers shared by the tokenizer tests: the test vocabularies, the llama.cpp fixtures in
// tests/data/tokenizer (see scripts/fixtures/make_tokenizer_fixture.py) and printing.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "powerhouse/tokenizer.h"
#include "support/test_support.h"

namespace powerhouse::test {

inline std::filesystem::path vocab_path(const std::string& name) {
    return shared_testdata_dir() / "vocab" / ("ggml-vocab-" + name + ".gguf");
}

inline std::filesystem::path tokenizer_data(const std::string& name) {
    return data_dir() / "tokenizer" / name;
}

// The tokenizer of a file; aborts the test program when it cannot be loaded, since every
// test that asks for one needs it.
inline Tokenizer load_tokenizer(const std::filesystem::path& path) {
    Result<Tokenizer> tokenizer = Tokenizer::load(path);
    if (!tokenizer) {
        std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), tokenizer.error().message.c_str());
        std::abort();
    }
    return std::move(tokenizer).value();
}

// Loaded once per program: vocabularies take a moment to load in debug builds.
inline const Tokenizer& smollm2() {
    static const Tokenizer tokenizer = load_tokenizer(test_model_path());
    return tokenizer;
}
inline const Tokenizer& shared_vocab(const std::string& name) {
    static std::map<std::string, Tokenizer> cache;
    auto it = cache.find(name);
    if (it == cache.end()) it = cache.emplace(name, load_tokenizer(vocab_path(name))).first;
    return it->second;
}

inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in.good()) << "cannot read " << path;
    std::vector<nlohmann::json> lines;
    std::string line;
    while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
    return lines;
}

inline std::string from_hex(const std::string& hex) {
    std::string bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
        bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    }
    return bytes;
}

// The corpus lines as bytes (lines that are not UTF-8 are stored as hex).
inline const std::vector<std::string>& corpus() {
    static const std::vector<std::string> lines = [] {
        std::vector<std::string> out;
        for (const auto& record : read_jsonl(tokenizer_data("corpus.jsonl"))) {
            out.push_back(record.contains("hex") ? from_hex(record["hex"].get<std::string>())
                                                 : record["text"].get<std::string>());
        }
        return out;
    }();
    return lines;
}

inline std::string ids_to_string(const std::vector<TokenId>& ids) {
    std::ostringstream out;
    for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
    return out.str();
}

// Shows control characters so that failure messages stay readable.
inline std::string printable(const std::string& s, size_t max_chars = 200) {
    std::string out;
    for (unsigned char c : s) {
        if (out.size() >= max_chars) return out + "...";
        if (c == '\n') {
            out += "\\n";
        } else if (c < 0x20 || c == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

}  // namespace powerhouse::test
