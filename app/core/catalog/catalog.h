// The model library's catalog: which GGUF models the user has, what each one is, and why a
// file cannot be used when it cannot. Models are found by scanning the library folder and
// any folder the user adds (subfolders included; a split model's parts count as one
// model), or imported one by one: registered where they are, or copied or moved into the
// library folder. Nothing is ever dropped silently: invalid, truncated and unsupported
// files are listed with the reason, and a file that cannot be read never stops a scan.
//
// The records live in the store (ModelRecord); `info_json` holds the summary written by
// model_summary_json() below.
//
// Thread-safety: free functions; the Store is used by the calling thread only. A scan reads
// every new or changed file's header, so callers with a GUI run it off their GUI thread.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "powerhouse/model_info.h"
#include "powerhouse/result.h"
#include "store/store.h"

namespace powerhouse::catalog {

struct ScanReport {
    int added = 0;      // new records
    int updated = 0;    // files that changed since they were inspected
    int unchanged = 0;
    int removed = 0;    // records whose files are gone
    int unusable = 0;   // of all found: invalid, truncated or unsupported
};

// Scans `folder` (recursively) into the catalog: every *.gguf file is inspected unless its
// size and modification time are those already recorded; records under the folder whose
// files are gone are removed. A folder that does not exist is an error; unreadable
// subfolders are skipped. Records made here have the source "folder"; paths the user
// forgot (Store::hide_model) are skipped.
Result<ScanReport> scan_folder(store::Store& store, const std::filesystem::path& folder);

// The model files in `folder` (and its subfolders when `recursive`): *.gguf, with the later
// parts of a split model left out when its first part is there (the first part stands for
// the model). Unreadable subfolders are skipped; a folder that cannot be read is an error.
Result<std::vector<std::filesystem::path>> find_model_files(const std::filesystem::path& folder,
                                                             bool recursive = true);

// A model file a scan found, with where it came from (store::ModelRecord::source).
struct FoundModel {
    std::filesystem::path path;
    std::string source;       // "folder", "lmstudio", "ollama", ...
    std::string source_name;  // the other app's name for it, if any
};

// Brings the records of `folder` (a scanned folder's key: ModelRecord::folder) in line with
// `found`, as scan_folder does: new and changed files are inspected, unchanged ones keep
// their record (their source name updated), records of `folder` not found are removed, and
// forgotten paths are skipped. Only the store is written: never the files or their folders.
// A record keeps the source "downloaded", and "imported" while it stays in its folder.
Result<ScanReport> sync_folder(store::Store& store, const std::string& folder, const std::vector<FoundModel>& found);

enum class ImportMode { in_place, copy, move };

// Adds one model file: in place (registered where it is), or copied or moved into
// `library` (all parts of a split model; written under a temporary name and renamed, so a
// failed copy leaves nothing behind). The record says whether it can be used; its source is
// "imported", and a path the user had forgotten is shown again.
Result<store::ModelRecord> import_model(store::Store& store, const std::filesystem::path& file, ImportMode mode,
                                        const std::filesystem::path& library);

// What a record holds about a model, as JSON: name (general.name), architecture,
// file_type, n_params, n_layer, n_ctx_train, has_chat_template, parts, weight_bytes, and
// for naming it (display_name.h): display_name, basename, size_label, finetune and
// quantization (file_type, or the file name's when the file names no known type).
// `other_name` is another app's name for it, the display name's last resort.
std::string model_summary_json(const ModelInfo& info, const std::string& other_name = {});

// The record of one file, inspected now (ok, or the problem), with its source. A file that
// cannot be read still gets a summary with its display_name (from the file name).
store::ModelRecord inspect_file(const std::filesystem::path& file, const std::string& folder,
                                const std::string& source = {}, const std::string& source_name = {});

// The name to show for a model (display_name.h) from what the file says about itself;
// `other_name` is another app's name for it (Ollama's tag), used when nothing better is known.
std::string model_display_name(const ModelInfo& info, const std::string& other_name = {});

// The name to show for a record: its summary's display_name, else its file name.
std::string record_display_name(const store::ModelRecord& record);

// When `p` was last written, in nanoseconds since the file clock's epoch; 0 if unknown.
int64_t mtime_ns(const std::filesystem::path& p);

}  // namespace powerhouse::catalog
