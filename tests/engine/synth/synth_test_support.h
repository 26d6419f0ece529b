// Helpers shared by the synthetic-model tests (synth_*_test.cpp): plans, layouts, decoded
// statistics, and small independent BPE/SPM encoders that check the vocabularies work.
#pragma once

#include <gtest/gtest.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include "gguf/gguf_model.h"
#include "powerhouse/model_info.h"
#include "powerhouse/synth.h"
#include "support/test_support.h"
#include "synth/layout.h"
#include "synth/vocab.h"
#include "synth/weights.h"
#include "tensor/dequantize.h"

namespace powerhouse::synth_test {


namespace fs = std::filesystem;


// Small pools keep Debug and sanitizer builds fast; the pooled path is still exercised.
inline SynthOptions small_options(const std::string& preset, const std::string& type, uint32_t n_layer,
                           const fs::path& output = {}) {
    SynthOptions o;
    o.preset = preset;
    o.type = type;
    o.n_layer = n_layer;
    o.output = output;
    o.threads = 2;
    o.seed = 7;
    o.pool_weights = 4096;
    return o;
}


// The tensors of a file, from the layout's pure part (no vocabulary is built).
struct Tensors {
    std::map<std::string, std::string> type;  // "blk.0.attn_q.weight" -> "Q4_K"
    std::map<std::string, std::vector<int64_t>> dims;
    size_t count = 0;

    std::string type_of(const std::string& name) const {
        auto it = type.find(name);
        return it == type.end() ? "(absent)" : it->second;
    }
    bool has(const std::string& name) const { return type.count(name) != 0; }
};


inline Tensors tensors_of(const std::string& preset, const std::string& file_type, uint32_t n_layer = 0) {
    Tensors out;
    Result<synth::ResolvedOptions> r = synth::resolve_options(small_options(preset, file_type, n_layer));
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    if (!r.ok()) return out;
    for (const synth::PlannedTensor& t : synth::plan_tensors(r->preset, *r->type)) {
        out.type[t.spec.name] = std::string(type_traits(t.spec.type).name);
        out.dims[t.spec.name] = t.spec.dims;
        ++out.count;
    }
    return out;
}


// Layouts (metadata with the full vocabulary) are built once per preset: a 262k-token
// vocabulary takes a second in a Debug build. (Non-const: GgufWriter::metadata() is.)
inline synth::Layout& layout_of(const std::string& preset) {
    static std::map<std::string, synth::Layout> cache;
    auto it = cache.find(preset);
    if (it == cache.end()) {
        Result<synth::Layout> layout = synth::lay_out(small_options(preset, "q4_k_m", 0));
        EXPECT_TRUE(layout.ok()) << (layout.ok() ? "" : layout.error().message);
        if (!layout.ok()) std::abort();
        it = cache.emplace(preset, std::move(layout).value()).first;
    }
    return it->second;
}


// llama.cpp's use_more_bits, written out independently of the code under test.
inline bool more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}


inline const SynthPreset& preset_named(const std::string& name) {
    static const std::vector<SynthPreset> presets = synth_presets();
    for (const SynthPreset& p : presets) {
        if (p.name == name) return p;
    }
    ADD_FAILURE() << "no preset " << name;
    return presets.front();
}


struct Stats {
    double mean = 0;
    double std = 0;
    bool finite = true;
    int64_t n = 0;
};


// Decodes up to max_rows rows of a tensor.
inline Stats tensor_stats(const GgufTensorInfo& t, int64_t max_rows) {
    const int64_t rows = std::min(t.n_rows(), max_rows);
    const uint64_t stride = t.n_bytes / static_cast<uint64_t>(t.n_rows());
    std::vector<float> row(static_cast<size_t>(t.ne[0]));
    double sum = 0;
    double sum2 = 0;
    Stats s;
    for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(t.type, t.data + static_cast<uint64_t>(r) * stride, row.data(), t.ne[0]);
        for (float v : row) {
            s.finite = s.finite && std::isfinite(v);
            sum += v;
            sum2 += static_cast<double>(v) * v;
        }
    }
    s.n = rows * t.ne[0];
    s.mean = sum / static_cast<double>(s.n);
    s.std = std::sqrt(std::max(0.0, sum2 / static_cast<double>(s.n) - s.mean * s.mean));
    return s;
}


inline std::vector<std::string> string_array(const GgufMetadata& m, const std::string& key) {
    std::vector<std::string> out;
    if (const GgufArray* a = m.get_array(key)) {
        for (std::string_view s : a->strings) out.emplace_back(s);
    }
    return out;
}



struct Vocab {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<float> scores;
    std::vector<std::string> merges;
    std::unordered_map<std::string, size_t> ids;
};


inline Vocab vocab_of(const GgufMetadata& m) {
    Vocab v;
    v.tokens = string_array(m, "tokenizer.ggml.tokens");
    v.merges = string_array(m, "tokenizer.ggml.merges");
    if (const GgufArray* a = m.get_array("tokenizer.ggml.token_type")) v.types = a->to_vector<int32_t>();
    if (const GgufArray* a = m.get_array("tokenizer.ggml.scores")) v.scores = a->to_vector<float>();
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        EXPECT_TRUE(v.ids.emplace(v.tokens[i], i).second) << "duplicate token " << v.tokens[i];
    }
    EXPECT_EQ(v.types.size(), v.tokens.size());
    return v;
}


inline std::string token_named_by(const GgufMetadata& m, const Vocab& v, const char* key) {
    const auto id = m.get_uint(key);
    return id && *id < v.tokens.size() ? v.tokens[*id] : "(none)";
}


// Byte-level BPE encoding of one pre-token, lowest-ranked merge first (as llama.cpp does).
inline std::vector<std::string> bpe_encode(const std::string& word, const std::unordered_map<std::string, size_t>& ranks) {
    std::vector<std::string> symbols;
    for (unsigned char c : word) symbols.push_back(synth::gpt2_byte_text(c));
    for (;;) {
        size_t best = SIZE_MAX;
        size_t at = 0;
        for (size_t i = 0; i + 1 < symbols.size(); ++i) {
            auto it = ranks.find(symbols[i] + " " + symbols[i + 1]);
            if (it != ranks.end() && it->second < best) {
                best = it->second;
                at = i;
            }
        }
        if (best == SIZE_MAX) return symbols;
        symbols[at] += symbols[at + 1];
        symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
}


// `stride` > 1 checks every stride-th merge only and skips the encoding test: the whole
// check of a 150k-token vocabulary takes seconds in a Debug build, and SmolLM2's full check
// covers the same code.
inline void check_bpe_vocab(const GgufMetadata& m, const Vocab& v, uint32_t n_vocab, size_t stride = 1) {
    ASSERT_EQ(v.tokens.size(), n_vocab);
    EXPECT_TRUE(v.scores.empty());
    EXPECT_EQ(m.get_string("tokenizer.ggml.model"), "gpt2");

    // All 256 bytes, spelled as GPT-2 spells them, are normal tokens.
    for (int b = 0; b < 256; ++b) {
        auto it = v.ids.find(synth::gpt2_byte_text(static_cast<uint8_t>(b)));
        ASSERT_NE(it, v.ids.end()) << b;
        EXPECT_EQ(v.types[it->second], 1);
    }
    EXPECT_EQ(synth::gpt2_byte_text(' '), "\xC4\xA0");                        // "Ġ"
    EXPECT_EQ(synth::gpt2_byte_text('\n'), "\xC4\x8A");                       // "Ċ"
    EXPECT_EQ(v.tokens[v.ids.size() > 17 && v.types[0] == 1 ? 0 : 17], "!");  // GPT-2 numbers bytes from "!"

    // Every merge's parts and result are tokens; every normal token but the bytes is a merge result.
    std::unordered_map<std::string, size_t> ranks;
    std::unordered_set<std::string> results;
    for (size_t r = 0; r < v.merges.size(); r += stride) {
        const std::string& merge = v.merges[r];
        const size_t space = merge.find(' ');
        ASSERT_NE(space, std::string::npos) << merge;
        const std::string left = merge.substr(0, space);
        const std::string right = merge.substr(space + 1);
        ASSERT_EQ(right.find(' '), std::string::npos) << merge;
        ASSERT_TRUE(v.ids.count(left)) << merge;
        ASSERT_TRUE(v.ids.count(right)) << merge;
        ASSERT_TRUE(v.ids.count(left + right)) << merge;
        ranks.emplace(merge, r);
        results.insert(left + right);
    }
    size_t n_normal = 0;
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        if (v.types[i] == 1) {
            ++n_normal;
        } else {  // specials: <|...|>, <...>, [PAD...]; none can come out of merges
            EXPECT_TRUE(v.tokens[i].front() == '<' || v.tokens[i].front() == '[') << v.tokens[i];
            EXPECT_FALSE(results.count(v.tokens[i])) << v.tokens[i];
        }
    }
    if (stride > 1) return;
    EXPECT_EQ(results.size(), n_normal - 256);

    // A working tokenizer: common words become single tokens and every text round-trips.
    EXPECT_EQ(bpe_encode(" the", ranks), std::vector<std::string>{"\xC4\xA0the"});
    EXPECT_EQ(bpe_encode(" and", ranks).size(), 1u);
    size_t n_bytes = 0;
    size_t n_tokens = 0;
    for (const std::string word :
         {"Hello", " world", ",", " the", " model", " is", " running", " quickly", "\n", " 2025"}) {
        const std::vector<std::string> pieces = bpe_encode(word, ranks);
        std::string joined;
        for (const std::string& p : pieces) {
            EXPECT_TRUE(v.ids.count(p)) << p;
            joined += p;
        }
        std::string expected;
        for (unsigned char c : word) expected += synth::gpt2_byte_text(c);
        EXPECT_EQ(joined, expected);
        n_bytes += word.size();
        n_tokens += pieces.size();
    }
    EXPECT_LT(n_tokens * 2, n_bytes);  // merges compress English
}


// SPM: merge the adjacent pair whose concatenation has the highest score, as SentencePiece
// (and llama.cpp's SPM tokenizer) does.
inline std::vector<std::string> spm_encode(const std::string& text, const std::unordered_map<std::string, float>& score) {
    std::vector<std::string> symbols;
    for (size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        symbols.push_back(text.substr(i, len));
        i += len;
    }
    for (;;) {
        float best = -1e30f;
        size_t at = SIZE_MAX;
        for (size_t i = 0; i + 1 < symbols.size(); ++i) {
            auto it = score.find(symbols[i] + symbols[i + 1]);
            if (it != score.end() && it->second > best) {
                best = it->second;
                at = i;
            }
        }
        if (at == SIZE_MAX) return symbols;
        symbols[at] += symbols[at + 1];
        symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
}


// Checks every `stride`-th piece for being a concatenation of two pieces (all of them is
// slow for 262k pieces in a Debug build).
inline void check_spm_vocab(const GgufMetadata& m, const Vocab& v, uint32_t n_vocab, size_t n_leading, size_t stride) {
    ASSERT_EQ(v.tokens.size(), n_vocab);
    ASSERT_EQ(v.scores.size(), v.tokens.size());
    EXPECT_TRUE(v.merges.empty());
    EXPECT_EQ(m.get_string("tokenizer.ggml.model"), "llama");

    // Byte-fallback tokens follow the leading specials.
    EXPECT_EQ(v.tokens[n_leading], "<0x00>");
    EXPECT_EQ(v.tokens[n_leading + 255], "<0xFF>");
    for (size_t i = n_leading; i < n_leading + 256; ++i) EXPECT_EQ(v.types[i], 6);

    std::unordered_map<std::string, float> score;
    float previous = 1.0f;
    for (size_t i = n_leading + 256; i < v.tokens.size(); ++i) {
        if (v.types[i] != 1) continue;
        EXPECT_LT(v.scores[i], previous) << v.tokens[i];  // earlier merges score higher
        previous = v.scores[i];
        score.emplace(v.tokens[i], v.scores[i]);
    }
    // Every piece longer than one character is the concatenation of two pieces.
    const std::string kSpace = "\xE2\x96\x81";  // "▁"
    for (size_t i = n_leading + 256; i < v.tokens.size(); i += stride) {
        if (v.types[i] != 1) continue;
        const std::string& piece = v.tokens[i];
        bool splits =
            piece.size() <= 1 || piece == kSpace || (static_cast<unsigned char>(piece[0]) >= 0x80 && piece.size() <= 3);
        for (size_t cut = 1; cut < piece.size() && !splits; ++cut) {
            splits = score.count(piece.substr(0, cut)) != 0 && score.count(piece.substr(cut)) != 0;
        }
        EXPECT_TRUE(splits) << piece;
    }
    EXPECT_EQ(spm_encode(kSpace + "the", score), std::vector<std::string>{kSpace + "the"});
    const std::string text =
        kSpace + "Hello," + kSpace + "the" + kSpace + "model" + kSpace + "is" + kSpace + "running.";
    std::string joined;
    size_t n_tokens = 0;
    for (const std::string& p : spm_encode(text, score)) {
        EXPECT_TRUE(score.count(p)) << p;
        joined += p;
        ++n_tokens;
    }
    EXPECT_EQ(joined, text);
    EXPECT_LT(n_tokens * 3, text.size());
}

}  // namespace powerhouse::synth_test
