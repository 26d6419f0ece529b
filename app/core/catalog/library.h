// "The library": every model the user has, from everywhere Powerhouse looks, refreshed and
// listed the same way for the desktop's Models page (LibraryController::rescan) and
// `powerhouse-cli list`, so that both show the same models under the same names.
//
// A refresh scans, in this order, the library folder (<data dir>/models), the folders the
// user added (Store::model_folders) and other apps' downloads (other_apps.h), into the
// store; a file reached from two of them belongs to the first. Files imported by themselves
// are inspected again when they change. Other apps' files are used in place and only read:
// their records go when the file or the app's folder goes, and forgetting one hides it
// (forget_model) so that a refresh does not bring it back.
//
// Thread-safety: free functions; the Store is used by the calling thread only. A refresh
// reads the header of every new or changed file, so a GUI runs it off its GUI thread when
// that matters.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/other_apps.h"
#include "powerhouse/result.h"
#include "store/store.h"

namespace powerhouse::catalog {

struct LibraryPlaces {
    std::filesystem::path library;  // the library folder, made when missing
    Environment environment;        // where other apps keep their downloads
    bool other_apps = true;         // false: other apps' downloads are not looked for (and unlisted)
    // Asked between folders (a GUI closing during a scan): true stops the refresh with a
    // `cancelled` error, what was synced so far kept. Called on the refreshing thread.
    std::function<bool()> cancelled;
};

// The desktop app's data folder, which the CLI shares: $XDG_DATA_HOME/powerhouse, else
// ~/.local/share/powerhouse (Qt's GenericDataLocation on Linux), else "powerhouse" here.
// The store is powerhouse.db in it, the library folder models/.
std::filesystem::path default_data_dir(const Environment& env);

struct LibraryEntry {
    store::ModelRecord record;
    std::string name;          // display_name.h's name ("SmolLM2 135M Instruct · Q4_1")
    std::string quantization;  // "Q4_1": the file's, else its name's; empty when unknown
    std::string architecture;  // general.architecture; empty when unknown
};

struct Library {
    std::vector<LibraryEntry> models;  // by name (case folded), then path
    // What was passed over, each with why: a folder that could not be read, a malformed
    // Ollama manifest. Files that cannot be used are models (with their problem), not notes.
    std::vector<std::string> notes;
};

// Scans everything into the store, then lists it. Fails only when the store does.
Result<Library> refresh_library(store::Store& store, const LibraryPlaces& places);

// Lists what the store holds, without scanning.
Result<Library> list_library(const store::Store& store);

// Forgets a model: a file a scan would find again (in a library folder, another app's) is
// hidden (Store::hide_model); one imported by itself is simply dropped. No file is touched.
Result<void> forget_model(store::Store& store, const std::string& path);

// How a source reads in a list: "Downloaded", "Imported", "Folder", "LM Studio",
// "Ollama", "llama.cpp", "GPT4All", "Jan"; the source itself when unknown, "" when empty.
std::string source_title(std::string_view source);

// The title and, when the app has one, its name for the model: "Ollama · llama3.2:3b".
std::string source_label(const store::ModelRecord& record);

}  // namespace powerhouse::catalog
