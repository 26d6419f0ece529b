// Models that other apps already downloaded, found where those apps keep them so that
// Powerhouse can use them in place: LM Studio, Ollama, llama.cpp's download cache, GPT4All
// and Jan. Finding them only reads: nothing in those folders is ever written, renamed or
// removed (the catalog's records are Powerhouse's own).
//
// Every location comes from an Environment (the home folder and the variables that move
// these folders), so tests lay out fake homes. A folder that is not there is not a source;
// one that is there but cannot be read is reported with the reason and skipped; a file in
// it that makes no sense (a malformed Ollama manifest) is left out with the reason.
//
// Thread-safety: free functions over values; safe from any thread.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace powerhouse::catalog {

// Where the user's folders are. Empty paths mean "not set"; the XDG folders then default
// to their places under `home` (as the XDG base directory specification says).
struct Environment {
    std::filesystem::path home;             // $HOME; empty: no folder under a home is looked at
    std::filesystem::path xdg_data_home;    // $XDG_DATA_HOME, else home/.local/share
    std::filesystem::path xdg_config_home;  // $XDG_CONFIG_HOME, else home/.config
    std::filesystem::path xdg_cache_home;   // $XDG_CACHE_HOME, else home/.cache
    std::filesystem::path ollama_models;    // $OLLAMA_MODELS, else home/.ollama/models
    std::filesystem::path llama_cache;      // $LLAMA_CACHE, else xdg_cache_home/llama.cpp
    // Where Ollama's Linux install script makes the service keep its models (the service
    // runs as the user "ollama" with this home); a field so tests can move it.
    std::filesystem::path ollama_service_models = "/usr/share/ollama/.ollama/models";

    // This process's environment. XDG variables count only when they are absolute paths,
    // as the specification says; others only when they are not empty.
    static Environment from_process();

    std::filesystem::path data_home() const;
    std::filesystem::path config_home() const;
    std::filesystem::path cache_home() const;
};

struct OtherAppModel {
    std::filesystem::path path;  // the model's (first) file, used in place
    // The app's name for it: Ollama's "llama3.2:3b" (every tag naming the same file, joined
    // by ", "), LM Studio's "publisher/repository", Jan's model id; empty for llama.cpp's
    // cache and GPT4All, whose names are the file names.
    std::string name;
};

struct OtherAppSource {
    std::string app;                  // "lmstudio", "ollama", "llama.cpp", "gpt4all", "jan"
    std::filesystem::path folder;     // the folder looked in (the records' folder)
    std::string unreadable;           // not empty: the folder is there but could not be read: why
    std::vector<OtherAppModel> models;
    std::vector<std::string> problems;  // what in it was left out, each with why
};

// Every other app's folder that exists, in the order above (a folder reached twice, through
// a link or a variable naming a default, counts once). Within a folder, models come sorted
// by path; a split model's later parts and vision projectors ("mmproj*.gguf") are left out.
std::vector<OtherAppSource> find_other_apps(const Environment& env);

// Whether `source` (store::ModelRecord::source) names another app.
bool is_other_app(std::string_view source);

// Ollama's name for the model of a manifest at manifests/<host>/<namespace>/<model>/<tag>:
// "llama3.2:3b" in the default registry's "library", "user/model:tag" in its other
// namespaces, "host/namespace/model:tag" elsewhere.
std::string ollama_name(const std::string& host, const std::string& name_space, const std::string& model,
                        const std::string& tag);

}  // namespace powerhouse::catalog
