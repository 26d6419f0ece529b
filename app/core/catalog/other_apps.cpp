#include "catalog/other_apps.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <system_error>

#include "catalog/catalog.h"

namespace powerhouse::catalog {

namespace fs = std::filesystem;

namespace {

// Small JSON files only (settings, manifests): anything larger is not what we look for.
constexpr std::uintmax_t kMaxJsonBytes = 4u << 20;

fs::path variable(const char* name, bool must_be_absolute) {
    const char* value = std::getenv(name);
    if (value == nullptr || value[0] == '\0') return {};
    fs::path p(value);
    if (must_be_absolute && !p.is_absolute()) return {};
    return p;
}

// A small JSON file, or why not.
nlohmann::json read_json(const fs::path& file, std::string& why) {
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(file, ec);
    if (ec) {
        why = ec.message();
        return {};
    }
    if (size > kMaxJsonBytes) {
        why = fmt::format("{} bytes, too large to be one", size);
        return {};
    }
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        why = "cannot be opened";
        return {};
    }
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) why = "not valid JSON";
    return j;
}

bool is_projector(const fs::path& file) {
    std::string name = file.filename().string();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    return name.rfind("mmproj", 0) == 0;
}

// A place to look: the app, the folder, and how its models are laid out.
enum class Layout {
    tree,         // *.gguf anywhere below (LM Studio's publisher/repository/, Jan's <id>/)
    flat,         // *.gguf in the folder itself (llama.cpp's cache, GPT4All)
    ollama,       // manifests/ naming files in blobs/
};
struct Place {
    std::string app;
    fs::path folder;
    Layout layout;
};

// The folder LM Studio was told to download into ("downloadsFolder" in its settings.json),
// when the settings say so; missing or malformed settings name none.
fs::path lm_studio_downloads_folder(const fs::path& settings) {
    std::error_code ec;
    if (!fs::is_regular_file(settings, ec)) return {};
    std::string why;
    const nlohmann::json j = read_json(settings, why);
    if (!why.empty() || !j.is_object()) return {};
    const auto it = j.find("downloadsFolder");
    if (it == j.end() || !it->is_string()) return {};
    fs::path folder(it->get<std::string>());
    return folder.is_absolute() ? folder : fs::path();
}

// The places to look, in order. Where each app keeps its models, and where we learned it:
std::vector<Place> places(const Environment& env) {
    std::vector<Place> out;
    const auto add = [&out](const char* app, const fs::path& folder, Layout layout) {
        if (!folder.empty()) out.push_back(Place{app, folder, layout});
    };
    const bool home = !env.home.empty();
    // LM Studio keeps models as <models folder>/<publisher>/<repository>/<file>.gguf, the
    // Hugging Face repository's path (LM Studio's docs, "Sideload models", and its issue
    // tracker: a file straight in the models folder is not seen). Since 0.3 the folder is
    // ~/.lmstudio/models; before, ~/.cache/lm-studio/models; the user can move it
    // (My Models), which settings.json records as downloadsFolder.
    if (home) {
        add("lmstudio", lm_studio_downloads_folder(env.home / ".lmstudio" / "settings.json"), Layout::tree);
        add("lmstudio", env.home / ".lmstudio" / "models", Layout::tree);
        add("lmstudio", env.home / ".cache" / "lm-studio" / "models", Layout::tree);
    }
    // Ollama: $OLLAMA_MODELS, else ~/.ollama/models; its Linux install script runs the
    // service as the user "ollama" whose home is /usr/share/ollama (Ollama's FAQ, "Where are
    // models stored?"). Inside: manifests/<registry>/<namespace>/<model>/<tag> (JSON
    // listing layers by media type and sha256 digest) and blobs/sha256-<hex> (Ollama's
    // server/manifest and blob code); the layer "application/vnd.ollama.image.model" is the
    // GGUF file.
    if (!env.ollama_models.empty()) {
        add("ollama", env.ollama_models, Layout::ollama);
    } else if (home) {
        add("ollama", env.home / ".ollama" / "models", Layout::ollama);
    }
    add("ollama", env.ollama_service_models, Layout::ollama);
    // llama.cpp's -hf/-mu downloads: $LLAMA_CACHE, else $XDG_CACHE_HOME/llama.cpp, else
    // ~/.cache/llama.cpp on Linux (fs_get_cache_directory in its common library), files
    // named <user>_<repository>_<file>.gguf beside .json and .etag records (ignored: not
    // .gguf). Newer llama.cpp moves these into Hugging Face's hub cache, not looked at here.
    if (!env.llama_cache.empty()) {
        add("llama.cpp", env.llama_cache, Layout::flat);
    } else if (home) {
        add("llama.cpp", env.cache_home() / "llama.cpp", Layout::flat);
    }
    // GPT4All downloads into its application data folder, Qt's AppLocalDataLocation for the
    // organisation "nomic.ai": $XDG_DATA_HOME/nomic.ai/GPT4All, files side by side.
    if (home) add("gpt4all", env.data_home() / "nomic.ai" / "GPT4All", Layout::flat);
    // Jan: before 0.6 everything lived in ~/jan, models as models/<id>/<file>.gguf with a
    // model.json (Jan's docs, "Jan Data Folder"); since, its data folder has
    // llamacpp/models/<id>/model.gguf (with model.yml). The docs name ~/.config/Jan/data
    // on Linux, and its Tauri builds use ~/.local/share/Jan/data: both are looked at.
    if (home) {
        add("jan", env.home / "jan" / "models", Layout::tree);
        add("jan", env.data_home() / "Jan" / "data" / "llamacpp" / "models", Layout::tree);
        add("jan", env.config_home() / "Jan" / "data" / "llamacpp" / "models", Layout::tree);
    }
    return out;
}

std::string relative_folder(const fs::path& file, const fs::path& root) {
    const fs::path rel = file.parent_path().lexically_relative(root);
    if (rel.empty() || rel == ".") return {};
    return rel.generic_string();
}

// Models in a folder of .gguf files (LM Studio, llama.cpp, GPT4All, Jan).
void find_files(const Place& place, OtherAppSource& source) {
    Result<std::vector<fs::path>> files = find_model_files(place.folder, place.layout == Layout::tree);
    if (!files) {
        source.unreadable = files.error().message;
        return;
    }
    for (const fs::path& file : *files) {
        if (is_projector(file)) continue;  // a vision model's image encoder, not a model to chat with
        OtherAppModel model{file, {}};
        // LM Studio calls a model by its repository ("publisher/repository"), Jan by its
        // folder (the model id).
        if (place.app == "lmstudio" || place.app == "jan") model.name = relative_folder(file, place.folder);
        source.models.push_back(std::move(model));
    }
}

bool is_sha256_hex(const std::string& s) {
    return s.size() == 64 && std::all_of(s.begin(), s.end(), [](unsigned char c) {
               return std::isdigit(c) != 0 || (c >= 'a' && c <= 'f');
           });
}

// Models in an Ollama folder: each manifest's model layer, the blob it names. Several tags
// can name one blob (llama3.2:latest and llama3.2:3b): one model with every name.
void find_ollama(const Place& place, OtherAppSource& source) {
    std::error_code ec;
    const fs::path manifests = place.folder / "manifests";
    if (!fs::is_directory(manifests, ec)) return;  // nothing pulled yet
    std::vector<fs::path> files;
    fs::recursive_directory_iterator it(manifests, fs::directory_options::skip_permission_denied, ec);
    if (ec) {
        source.unreadable = fmt::format("cannot read {}: {}", manifests.string(), ec.message());
        return;
    }
    for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
        if (ec) {
            ec.clear();
            continue;
        }
        std::error_code type_ec;
        if (it->is_regular_file(type_ec)) files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());
    std::map<fs::path, std::vector<std::string>> names;  // blob -> names, in manifest order
    for (const fs::path& file : files) {
        const fs::path rel = file.lexically_relative(manifests);
        const std::vector<std::string> parts(rel.begin(), rel.end());
        if (parts.size() != 4) continue;  // not <registry>/<namespace>/<model>/<tag>
        const std::string name = ollama_name(parts[0], parts[1], parts[2], parts[3]);
        const std::string shown = fmt::format("Ollama's manifest for {} ({})", name, file.string());
        std::string why;
        const nlohmann::json manifest = read_json(file, why);
        if (!why.empty()) {
            source.problems.push_back(fmt::format("{} was left out: {}", shown, why));
            continue;
        }
        const nlohmann::json* layers = manifest.is_object() && manifest.contains("layers") ? &manifest["layers"] : nullptr;
        if (layers == nullptr || !layers->is_array()) {
            source.problems.push_back(fmt::format("{} was left out: it has no list of layers", shown));
            continue;
        }
        // The model layer; projector, adapter, template, system and parameter layers are
        // not models and are ignored.
        const nlohmann::json* model = nullptr;
        for (const nlohmann::json& layer : *layers) {
            if (layer.is_object() && layer.value("mediaType", nlohmann::json()).is_string() &&
                layer["mediaType"].get<std::string>() == "application/vnd.ollama.image.model") {
                model = &layer;
                break;
            }
        }
        if (model == nullptr) {
            source.problems.push_back(fmt::format("{} was left out: it names no model layer", shown));
            continue;
        }
        const nlohmann::json digest = model->value("digest", nlohmann::json());
        const std::string text = digest.is_string() ? digest.get<std::string>() : std::string();
        // Only a well-formed digest makes a path: a manifest must not point outside blobs/.
        if (text.rfind("sha256:", 0) != 0 || !is_sha256_hex(text.substr(7))) {
            source.problems.push_back(
                fmt::format("{} was left out: its model layer's digest is not \"sha256:<64 hex digits>\"", shown));
            continue;
        }
        const fs::path blob = place.folder / "blobs" / ("sha256-" + text.substr(7));
        std::error_code blob_ec;
        if (!fs::is_regular_file(blob, blob_ec)) {
            source.problems.push_back(fmt::format("{} was left out: its model file {} is missing", shown, blob.string()));
            continue;
        }
        names[blob].push_back(name);
    }
    for (auto& [blob, list] : names) {
        std::string joined;
        for (const std::string& n : list) joined += (joined.empty() ? "" : ", ") + n;
        source.models.push_back(OtherAppModel{blob, joined});
    }
}

}  // namespace

Environment Environment::from_process() {
    Environment env;
    env.home = variable("HOME", true);
    env.xdg_data_home = variable("XDG_DATA_HOME", true);
    env.xdg_config_home = variable("XDG_CONFIG_HOME", true);
    env.xdg_cache_home = variable("XDG_CACHE_HOME", true);
    env.ollama_models = variable("OLLAMA_MODELS", false);
    env.llama_cache = variable("LLAMA_CACHE", false);
    return env;
}

fs::path Environment::data_home() const {
    return !xdg_data_home.empty() ? xdg_data_home : home.empty() ? fs::path() : home / ".local" / "share";
}
fs::path Environment::config_home() const {
    return !xdg_config_home.empty() ? xdg_config_home : home.empty() ? fs::path() : home / ".config";
}
fs::path Environment::cache_home() const {
    return !xdg_cache_home.empty() ? xdg_cache_home : home.empty() ? fs::path() : home / ".cache";
}

std::string ollama_name(const std::string& host, const std::string& name_space, const std::string& model,
                        const std::string& tag) {
    if (host == "registry.ollama.ai") {
        if (name_space == "library") return fmt::format("{}:{}", model, tag);
        return fmt::format("{}/{}:{}", name_space, model, tag);
    }
    return fmt::format("{}/{}/{}:{}", host, name_space, model, tag);
}

bool is_other_app(std::string_view source) {
    return source == "lmstudio" || source == "ollama" || source == "llama.cpp" || source == "gpt4all" ||
           source == "jan";
}

std::vector<OtherAppSource> find_other_apps(const Environment& env) {
    std::vector<OtherAppSource> out;
    std::set<fs::path> seen;
    for (const Place& place : places(env)) {
        std::error_code ec;
        const fs::file_status status = fs::status(place.folder, ec);
        if (!fs::exists(status)) continue;  // the app is not installed, or never downloaded
        // The same folder reached twice (a variable naming the default, a link) is one source.
        const fs::path canonical = fs::weakly_canonical(place.folder, ec);
        if (!seen.insert(ec ? place.folder : canonical).second) continue;
        OtherAppSource source;
        source.app = place.app;
        source.folder = place.folder;
        if (!fs::is_directory(status)) {
            source.unreadable = fmt::format("{} is not a folder", place.folder.string());
        } else if (fs::directory_iterator probe(place.folder, ec); ec) {
            source.unreadable = fmt::format("cannot read {}: {}", place.folder.string(), ec.message());
        } else if (place.layout == Layout::ollama) {
            find_ollama(place, source);
        } else {
            find_files(place, source);
        }
        out.push_back(std::move(source));
    }
    return out;
}

}  // namespace powerhouse::catalog
