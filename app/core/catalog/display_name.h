// Model names as a person writes them ("SmolLM2 135M Instruct · Q4_1"), made from what a
// GGUF file says about itself and what its file is called.
//
// Newer converters (llama.cpp's convert_hf_to_gguf) write general.basename,
// general.size_label and general.finetune, and build general.name from them together with
// the training run's tags, which makes names like "Smollm2 135M 8k Lc100K Mix1 Ep2". The
// file name a publisher chose ("SmolLM2-135M-Instruct.Q4_1.gguf") is usually the better
// spelling, so it is preferred whenever it names the same model; the metadata fills in when
// the file name says nothing (Ollama's "sha256-…" blobs, Jan's "model.gguf").
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace powerhouse::catalog {

struct NameFacts {
    std::string basename;      // general.basename ("smollm2")
    std::string size_label;    // general.size_label ("135M")
    std::string finetune;      // general.finetune ("Instruct", or a training tag)
    std::string general_name;  // general.name
    std::string quantization;  // "Q4_1", "Q4_K_M"; empty: read from the file name
    std::string file_name;     // the model's (first) file name, without its folder
    std::string other_name;    // another app's name for it ("llama3.2:3b"): a last resort
};

// The name to show, then " · " and the quantization when it is known:
//  1. with general.basename: the cleaned file name when it contains the basename and the
//     size label (its casing and words are the publisher's), else the basename, the size
//     label and the finetune when that is made of words ("Instruct"; not "8k-lc100k-ep2");
//  2. without: the cleaned file name when it says something, else general.name, else the
//     other app's name, else the file name as it is.
// A cleaned file name has no ".gguf", split suffix ("-00001-of-00003"), quantization,
// "GGUF" or llama.cpp cache prefix ("<user>_<repo>-GGUF_"), and spaces for '_', '-' and
// '.' (except in version numbers: "Llama 3.2").
std::string display_name(const NameFacts& facts);

// The quantization named in a file name ("Llama-3.2-1B-Instruct-Q4_K_M.gguf" -> "Q4_K_M"),
// upper case; empty when it names none.
std::string quantization_from_file_name(std::string_view file_name);

}  // namespace powerhouse::catalog
