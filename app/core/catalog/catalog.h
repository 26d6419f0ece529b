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
// subfolders are skipped.
Result<ScanReport> scan_folder(store::Store& store, const std::filesystem::path& folder);

enum class ImportMode { in_place, copy, move };

// Adds one model file: in place (registered where it is), or copied or moved into
// `library` (all parts of a split model; written under a temporary name and renamed, so a
// failed copy leaves nothing behind). The record says whether it can be used.
Result<store::ModelRecord> import_model(store::Store& store, const std::filesystem::path& file, ImportMode mode,
                                        const std::filesystem::path& library);

// What a record holds about a model, as JSON: name, architecture, file_type, n_params,
// n_layer, n_ctx_train, has_chat_template, parts, weight_bytes.
std::string model_summary_json(const ModelInfo& info);

// The record of one file, inspected now (ok, or the problem).
store::ModelRecord inspect_file(const std::filesystem::path& file, const std::string& folder);

}  // namespace powerhouse::catalog
