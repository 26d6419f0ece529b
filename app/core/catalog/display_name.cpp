#include "catalog/display_name.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <vector>

namespace powerhouse::catalog {

namespace {

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool is_alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}

// Letters and digits only, lower case: "SmolLM2-135M" and "smollm2 135m" compare equal.
std::string compact(std::string_view s) {
    std::string out;
    for (const char c : s) {
        if (std::isalnum(static_cast<unsigned char>(c)) != 0) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
}

bool contains(std::string_view haystack, std::string_view needle) {
    return !needle.empty() && haystack.find(needle) != std::string_view::npos;
}

// llama.cpp's quantization names as they appear in file names (Q4_K_M, IQ4_XS, Q8_0, F16,
// BF16, MXFP4_MOE, ...), between separators.
const std::regex& quantization_pattern() {
    static const std::regex pattern(
        R"((^|[-._ ])(I?Q[1-8](_[0-9A-Z]{1,3}){0,3}|BF16|FP?16|FP?32|MXFP4(_MOE)?|TQ[12]_0)(?=$|[-._ ]))",
        std::regex::icase);
    return pattern;
}

// '_' and '-' become spaces, and so does '.' except between digits ("3.2"); runs of spaces
// become one, and none lead or trail.
std::string spaced(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '_' || c == '-' || (c == '.' && !(i > 0 && i + 1 < s.size() && is_digit(s[i - 1]) && is_digit(s[i + 1])))) {
            c = ' ';
        }
        if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
        out += c;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

std::vector<std::string> words(const std::string& s) {
    std::vector<std::string> out;
    std::string word;
    for (const char c : s + ' ') {
        if (c == ' ') {
            if (!word.empty()) out.push_back(word);
            word.clear();
        } else {
            word += c;
        }
    }
    return out;
}

// Metadata written in lower case ("smollm2", "instruct") gets capitals at word starts; any
// capital already there is the author's spelling and kept as it is.
std::string pretty(std::string_view s) {
    std::string out = spaced(s);
    if (std::any_of(out.begin(), out.end(), [](unsigned char c) { return std::isupper(c) != 0; })) return out;
    for (size_t i = 0; i < out.size(); ++i) {
        if ((i == 0 || out[i - 1] == ' ') && is_alpha(out[i])) out[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[i])));
    }
    return out;
}

// The file name without what is not the model's name (see display_name()).
std::string cleaned_file_name(std::string s) {
    if (s.size() > 5 && lower(s.substr(s.size() - 5)) == ".gguf") s.resize(s.size() - 5);
    static const std::regex split_suffix(R"(-\d{5}-of-\d{5}$)");
    s = std::regex_replace(s, split_suffix, "");
    // llama.cpp's cache names a download "<user>_<repo>_<file>", and GGUF repositories end
    // in "-GGUF": what follows "GGUF_" is the file's own name.
    const std::string low = lower(s);
    size_t cut = std::string::npos;
    for (size_t at = low.find("gguf_", 1); at != std::string::npos; at = low.find("gguf_", at + 1)) {
        if (low[at - 1] == '-' || low[at - 1] == '_') cut = at + 5;
    }
    if (cut != std::string::npos) s = s.substr(cut);
    s = std::regex_replace(s, quantization_pattern(), "");
    static const std::regex gguf_word(R"((^|[-._ ])gguf(?=$|[-._ ]))", std::regex::icase);
    s = std::regex_replace(s, gguf_word, "");
    return spaced(s);
}

// Whether a cleaned file name names anything: not a content hash (Ollama's blobs), not a
// generic "model" (Jan's model.gguf, "ggml-model-q4_0.gguf").
bool informative(const std::string& cleaned) {
    if (std::none_of(cleaned.begin(), cleaned.end(), is_alpha)) return false;
    static const std::regex hash(R"(^sha256 [0-9a-f]+$)", std::regex::icase);
    if (std::regex_match(cleaned, hash)) return false;
    const std::string low = lower(cleaned);
    return low != "model" && low != "ggml model" && low != "ggml";
}

// A finetune made of words and numbers ("Instruct", "Coder-Instruct", "Instruct-2407"), not
// a training run's tags ("8k-lc100k-mix1-ep2").
bool wordy(const std::string& finetune) {
    const std::vector<std::string> parts = words(spaced(finetune));
    if (parts.empty() || parts.size() > 4) return false;
    bool any_letters = false;
    for (const std::string& p : parts) {
        const bool letters = std::all_of(p.begin(), p.end(), is_alpha);
        const bool digits = std::all_of(p.begin(), p.end(), is_digit);
        if (!letters && !digits) return false;
        any_letters = any_letters || letters;
    }
    return any_letters;
}

}  // namespace

std::string quantization_from_file_name(std::string_view file_name) {
    const std::string s(file_name);
    std::string found;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), quantization_pattern()); it != std::sregex_iterator(); ++it) {
        found = (*it)[2].str();
    }
    std::transform(found.begin(), found.end(), found.begin(), [](unsigned char c) { return std::toupper(c); });
    return found;
}

std::string display_name(const NameFacts& facts) {
    const std::string file = cleaned_file_name(facts.file_name);
    std::string name;
    if (!facts.basename.empty()) {
        const std::string c = compact(file);
        if (informative(file) && contains(c, compact(facts.basename)) &&
            (facts.size_label.empty() || contains(c, compact(facts.size_label)))) {
            name = file;
        } else {
            name = pretty(facts.basename);
            if (!facts.size_label.empty() && !contains(compact(name), compact(facts.size_label))) {
                name += ' ' + facts.size_label;
            }
            if (wordy(facts.finetune) && !contains(compact(name), compact(facts.finetune))) {
                name += ' ' + pretty(facts.finetune);
            }
        }
    } else if (informative(file)) {
        name = file;
    } else if (!facts.general_name.empty()) {
        name = facts.general_name;
    } else if (!facts.other_name.empty()) {
        name = facts.other_name;
    } else {
        name = facts.file_name;
    }
    const std::string quantization =
        facts.quantization.empty() ? quantization_from_file_name(facts.file_name) : facts.quantization;
    if (!quantization.empty() && !contains(compact(name), compact(quantization))) name += " · " + quantization;
    return name;
}

}  // namespace powerhouse::catalog
