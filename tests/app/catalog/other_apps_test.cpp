// Other apps' downloads, used in place: fake homes laid out as LM Studio, Ollama, llama.cpp's
// cache, GPT4All and Jan lay them out (Ollama's blobs are real GGUF files: the test model
// and tiny files with naming metadata), found with the right source and name, refreshed
// into the store as the Models page and `powerhouse-cli list` do, and never modified.
// Missing and unreadable folders and malformed manifests are passed over with the reason.
#include "catalog/other_apps.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "catalog/library.h"
#include "gguf/gguf_writer.h"
#include "store/store.h"
#include "support/test_support.h"

namespace powerhouse::catalog {
namespace {

namespace fs = std::filesystem;
using store::Store;

// A small valid GGUF file with naming metadata (not runnable: one tensor, no tokenizer).
struct Tiny {
    std::string basename, size_label, finetune, name;
    uint32_t file_type = 15;  // Q4_K_M
};
void write_tiny(const fs::path& path, const Tiny& t) {
    fs::create_directories(path.parent_path());
    GgufWriter writer;
    writer.metadata().set_string("general.architecture", "llama");
    if (!t.name.empty()) writer.metadata().set_string("general.name", t.name);
    if (!t.basename.empty()) writer.metadata().set_string("general.basename", t.basename);
    if (!t.size_label.empty()) writer.metadata().set_string("general.size_label", t.size_label);
    if (!t.finetune.empty()) writer.metadata().set_string("general.finetune", t.finetune);
    writer.metadata().set("general.file_type", GgufValue{t.file_type});
    ASSERT_TRUE(writer.add_tensor({"token_embd.weight", GgmlType::f32, {8, 4}}).ok());
    auto written = writer.write_file(path, [](size_t, const GgufTensorSpec&, std::span<std::byte> out) -> Result<void> {
        std::fill(out.begin(), out.end(), std::byte{0});
        return {};
    });
    ASSERT_TRUE(written) << written.error().message;
}

// A file with its folders.
void put(const fs::path& path, const std::string& bytes) {
    fs::create_directories(path.parent_path());
    test::write_file(path, bytes);
}

std::string hex(char c) { return std::string(64, c); }

void write_manifest(const fs::path& models, const std::string& rel, const std::string& model_digest) {
    const nlohmann::json manifest = {
        {"schemaVersion", 2},
        {"mediaType", "application/vnd.docker.distribution.manifest.v2+json"},
        {"config", {{"mediaType", "application/vnd.docker.container.image.v1+json"}, {"digest", "sha256:" + hex('f')}}},
        {"layers",
         {{{"mediaType", "application/vnd.ollama.image.projector"}, {"digest", "sha256:" + hex('e')}, {"size", 10}},
          {{"mediaType", "application/vnd.ollama.image.model"}, {"digest", model_digest}, {"size", 100}},
          {{"mediaType", "application/vnd.ollama.image.template"}, {"digest", "sha256:" + hex('d')}, {"size", 5}},
          {{"mediaType", "application/vnd.ollama.image.params"}, {"digest", "sha256:" + hex('c')}, {"size", 5}}}}};
    put(models / "manifests" / rel, manifest.dump());
}

// A home with every app's downloads, as each app lays them out.
struct FakeHome {
    explicit FakeHome(const fs::path& root) : home(root / "home") {
        const fs::path lms = home / ".lmstudio" / "models";
        write_tiny(lms / "lmstudio-community" / "Llama-3.2-1B-Instruct-GGUF" / "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
                   {"Llama-3.2", "1B", "Instruct", "Llama 3.2 1B Instruct"});
        // A vision model's projector beside it is no model.
        write_tiny(lms / "lmstudio-community" / "Llama-3.2-1B-Instruct-GGUF" / "mmproj-model-f16.gguf", {});
        // A split model: its parts are one model.
        put(lms / "bartowski" / "Big-GGUF" / "Big-Q8_0-00001-of-00002.gguf", "part one");
        put(lms / "bartowski" / "Big-GGUF" / "Big-Q8_0-00002-of-00002.gguf", "part two");
        // LM Studio told to download elsewhere.
        put(home / ".lmstudio" / "settings.json",
                         nlohmann::json{{"downloadsFolder", (home / "Models").string()}, {"other", 1}}.dump());
        write_tiny(home / "Models" / "Qwen" / "Qwen3-4B-GGUF" / "Qwen3-4B-Q8_0.gguf", {"Qwen3", "4B", "", "Qwen3 4B", 7});
        // The older LM Studio folder.
        write_tiny(home / ".cache" / "lm-studio" / "models" / "TheBloke" / "Mistral-7B-Instruct-v0.2-GGUF" /
                       "mistral-7b-instruct-v0.2.Q5_K_M.gguf",
                   {"", "", "", "mistralai_mistral-7b-instruct-v0.2", 17});

        // Ollama: two tags of the real test model (one blob), a model in a user's namespace,
        // one from another registry, and manifests that cannot be used.
        const fs::path ollama = home / ".ollama" / "models";
        fs::create_directories(ollama / "blobs");
        fs::copy_file(test::test_model_path(), ollama / "blobs" / ("sha256-" + hex('1')));
        write_manifest(ollama, "registry.ollama.ai/library/smollm2/135m", "sha256:" + hex('1'));
        write_manifest(ollama, "registry.ollama.ai/library/smollm2/latest", "sha256:" + hex('1'));
        write_tiny(ollama / "blobs" / ("sha256-" + hex('2')), {"Llama-3.2", "3B", "Instruct", "Llama 3.2 3B Instruct"});
        write_manifest(ollama, "registry.ollama.ai/library/llama3.2/3b", "sha256:" + hex('2'));
        write_tiny(ollama / "blobs" / ("sha256-" + hex('3')), {}); // no naming metadata at all
        write_manifest(ollama, "registry.ollama.ai/someone/mymodel/q8", "sha256:" + hex('3'));
        write_tiny(ollama / "blobs" / ("sha256-" + hex('4')), {"Foo", "7B", "", ""});
        write_manifest(ollama, "hf.co/bartowski/Foo-GGUF/Q4_K_M", "sha256:" + hex('4'));
        put(ollama / "manifests" / "registry.ollama.ai" / "library" / "broken" / "latest", "{ not json");
        write_manifest(ollama, "registry.ollama.ai/library/gone/latest", "sha256:" + hex('9'));  // no such blob
        write_manifest(ollama, "registry.ollama.ai/library/evil/latest", "sha256:../../../../etc/passwd");
        put(ollama / "manifests" / "registry.ollama.ai" / "library" / "nolayers" / "latest",
                         R"({"schemaVersion": 2})");
        // The projector and template blobs exist too; they are not models.
        put(ollama / "blobs" / ("sha256-" + hex('e')), "projector");
        put(ollama / "blobs" / ("sha256-" + hex('d')), "{{ .Prompt }}");

        // llama.cpp's cache, with its side files.
        const fs::path cache = home / ".cache" / "llama.cpp";
        write_tiny(cache / "bartowski_Llama-3.2-1B-Instruct-GGUF_Llama-3.2-1B-Instruct-Q4_K_M.gguf", {});
        put(cache / "bartowski_Llama-3.2-1B-Instruct-GGUF_Llama-3.2-1B-Instruct-Q4_K_M.gguf.json", "{}");
        put(cache / "bartowski_Llama-3.2-1B-Instruct-GGUF_Llama-3.2-1B-Instruct-Q4_K_M.gguf.etag", "\"x\"");
        put(cache / "manifest=bartowski=Llama-3.2-1B-Instruct-GGUF=latest.json", "{}");

        // GPT4All: files side by side in its data folder.
        write_tiny(home / ".local" / "share" / "nomic.ai" / "GPT4All" / "Meta-Llama-3-8B-Instruct.Q4_0.gguf",
                   {"", "", "", "", 2});

        // Jan: the older ~/jan and the newer data folder.
        write_tiny(home / "jan" / "models" / "tinyllama-1.1b" / "tinyllama-1.1b-chat-v1.0.Q4_0.gguf", {"", "", "", "", 2});
        put(home / "jan" / "models" / "tinyllama-1.1b" / "model.json", "{}");
        write_tiny(home / ".local" / "share" / "Jan" / "data" / "llamacpp" / "models" / "qwen3-4b" / "model.gguf",
                   {"Qwen3", "4B", "", ""});
        put(home / ".local" / "share" / "Jan" / "data" / "llamacpp" / "models" / "qwen3-4b" / "model.yml",
                         "name: qwen3-4b\n");
    }

    Environment env() const {
        Environment e;
        e.home = home;
        e.ollama_service_models.clear();  // not the machine's own
        return e;
    }

    fs::path home;
};

// Every file under a folder with its size, modification time and (small ones) contents.
std::map<std::string, std::string> snapshot(const fs::path& root) {
    std::map<std::string, std::string> out;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        const auto mtime = entry.last_write_time().time_since_epoch().count();
        if (!entry.is_regular_file()) {
            out[entry.path().string()] = "folder " + std::to_string(mtime);
            continue;
        }
        std::string facts = std::to_string(entry.file_size()) + " " + std::to_string(mtime);
        if (entry.file_size() < (1 << 20)) facts += " " + test::read_file(entry.path());
        out[entry.path().string()] = facts;
    }
    return out;
}

const OtherAppSource* source_at(const std::vector<OtherAppSource>& sources, const fs::path& folder) {
    for (const OtherAppSource& s : sources) {
        if (s.folder == folder) return &s;
    }
    return nullptr;
}

std::vector<std::string> names_of(const OtherAppSource& source) {
    std::vector<std::string> out;
    for (const OtherAppModel& m : source.models) out.push_back(m.path.filename().string() + " = " + m.name);
    return out;
}

Store open_store(const fs::path& file) {
    auto s = Store::open(file);
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    return std::move(s).value();
}

TEST(OtherApps, EachAppsFolderIsFoundWithItsModelsAndTheirNames) {
    test::TempDir dir;
    const FakeHome fake(dir.path());
    const std::vector<OtherAppSource> sources = find_other_apps(fake.env());
    std::vector<std::string> apps;
    for (const OtherAppSource& s : sources) {
        apps.push_back(s.app);
        EXPECT_TRUE(s.unreadable.empty()) << s.folder << ": " << s.unreadable;
    }
    EXPECT_EQ(apps, (std::vector<std::string>{"lmstudio", "lmstudio", "lmstudio", "ollama", "llama.cpp", "gpt4all",
                                              "jan", "jan"}));

    const OtherAppSource* lms = source_at(sources, fake.home / ".lmstudio" / "models");
    ASSERT_NE(lms, nullptr);
    EXPECT_EQ(names_of(*lms), (std::vector<std::string>{
                                  "Big-Q8_0-00001-of-00002.gguf = bartowski/Big-GGUF",
                                  "Llama-3.2-1B-Instruct-Q4_K_M.gguf = lmstudio-community/Llama-3.2-1B-Instruct-GGUF",
                              }));
    const OtherAppSource* elsewhere = source_at(sources, fake.home / "Models");
    ASSERT_NE(elsewhere, nullptr) << "settings.json's downloadsFolder";
    EXPECT_EQ(names_of(*elsewhere), std::vector<std::string>{"Qwen3-4B-Q8_0.gguf = Qwen/Qwen3-4B-GGUF"});
    ASSERT_NE(source_at(sources, fake.home / ".cache" / "lm-studio" / "models"), nullptr);

    const OtherAppSource* ollama = source_at(sources, fake.home / ".ollama" / "models");
    ASSERT_NE(ollama, nullptr);
    EXPECT_EQ(names_of(*ollama), (std::vector<std::string>{
                                     "sha256-" + hex('1') + " = smollm2:135m, smollm2:latest",
                                     "sha256-" + hex('2') + " = llama3.2:3b",
                                     "sha256-" + hex('3') + " = someone/mymodel:q8",
                                     "sha256-" + hex('4') + " = hf.co/bartowski/Foo-GGUF:Q4_K_M",
                                 }));
    // Each manifest that cannot be used is named with the reason.
    ASSERT_EQ(ollama->problems.size(), 4u);
    const auto problem_about = [&](const std::string& name) {
        for (const std::string& p : ollama->problems) {
            if (p.find(name) != std::string::npos) return p;
        }
        return std::string("(none about ") + name + ")";
    };
    EXPECT_NE(problem_about("broken:latest").find("not valid JSON"), std::string::npos) << problem_about("broken");
    EXPECT_NE(problem_about("gone:latest").find("is missing"), std::string::npos) << problem_about("gone");
    EXPECT_NE(problem_about("evil:latest").find("digest"), std::string::npos) << problem_about("evil");
    EXPECT_NE(problem_about("nolayers:latest").find("no list of layers"), std::string::npos);

    const OtherAppSource* llama_cpp = source_at(sources, fake.home / ".cache" / "llama.cpp");
    ASSERT_NE(llama_cpp, nullptr);
    EXPECT_EQ(names_of(*llama_cpp),
              std::vector<std::string>{"bartowski_Llama-3.2-1B-Instruct-GGUF_Llama-3.2-1B-Instruct-Q4_K_M.gguf = "});
    const OtherAppSource* gpt4all = source_at(sources, fake.home / ".local" / "share" / "nomic.ai" / "GPT4All");
    ASSERT_NE(gpt4all, nullptr);
    EXPECT_EQ(names_of(*gpt4all), std::vector<std::string>{"Meta-Llama-3-8B-Instruct.Q4_0.gguf = "});
    const OtherAppSource* jan_old = source_at(sources, fake.home / "jan" / "models");
    ASSERT_NE(jan_old, nullptr);
    EXPECT_EQ(names_of(*jan_old), std::vector<std::string>{"tinyllama-1.1b-chat-v1.0.Q4_0.gguf = tinyllama-1.1b"});
    const OtherAppSource* jan = source_at(sources, fake.home / ".local" / "share" / "Jan" / "data" / "llamacpp" / "models");
    ASSERT_NE(jan, nullptr);
    EXPECT_EQ(names_of(*jan), std::vector<std::string>{"model.gguf = qwen3-4b"});
}

TEST(OtherApps, VariablesMoveTheFoldersAndAFolderReachedTwiceCountsOnce) {
    test::TempDir dir;
    const FakeHome fake(dir.path());
    Environment env = fake.env();
    env.ollama_models = fake.home / ".ollama" / "models";      // the default, named
    env.ollama_service_models = fake.home / ".ollama" / "models" / ".." / "models";
    env.llama_cache = dir / "elsewhere-cache";
    write_tiny(env.llama_cache / "tiny-Q8_0.gguf", {"", "", "", "", 7});
    env.xdg_data_home = dir / "xdg-data";  // GPT4All and Jan's newer folder move with it
    const std::vector<OtherAppSource> sources = find_other_apps(env);
    int ollamas = 0;
    for (const OtherAppSource& s : sources) ollamas += s.app == "ollama" ? 1 : 0;
    EXPECT_EQ(ollamas, 1);
    const OtherAppSource* cache = source_at(sources, env.llama_cache);
    ASSERT_NE(cache, nullptr);
    EXPECT_EQ(cache->models.size(), 1u);
    EXPECT_EQ(source_at(sources, fake.home / ".cache" / "llama.cpp"), nullptr) << "$LLAMA_CACHE replaces it";
    EXPECT_EQ(source_at(sources, fake.home / ".local" / "share" / "nomic.ai" / "GPT4All"), nullptr);
}

TEST(OtherApps, MissingUnreadableAndMalformedPlacesAreFine) {
    test::TempDir dir;
    // No home at all, and an empty home: no sources.
    Environment nowhere;
    nowhere.ollama_service_models.clear();
    EXPECT_TRUE(find_other_apps(nowhere).empty());
    Environment empty;
    empty.home = dir / "empty-home";
    empty.ollama_service_models = dir / "no-such-service-folder";
    fs::create_directories(empty.home);
    EXPECT_TRUE(find_other_apps(empty).empty());

    // Ollama's folder is a file, LM Studio's settings are not JSON, its downloadsFolder is a
    // number in another: skipped with the reason, or ignored.
    Environment odd;
    odd.home = dir / "odd-home";
    odd.ollama_service_models.clear();
    put(odd.home / ".ollama" / "models", "not a folder");
    put(odd.home / ".lmstudio" / "settings.json", "{ broken");
    write_tiny(odd.home / ".lmstudio" / "models" / "p" / "r" / "m-Q4_0.gguf", {"", "", "", "", 2});
    std::vector<OtherAppSource> sources = find_other_apps(odd);
    ASSERT_EQ(sources.size(), 2u);
    EXPECT_EQ(sources[0].app, "lmstudio");
    EXPECT_EQ(sources[0].models.size(), 1u);
    EXPECT_EQ(sources[1].app, "ollama");
    EXPECT_NE(sources[1].unreadable.find("not a folder"), std::string::npos) << sources[1].unreadable;
    put(odd.home / ".lmstudio" / "settings.json", R"({"downloadsFolder": 42})");
    EXPECT_EQ(find_other_apps(odd).size(), 2u);

    // A folder that cannot be read (root reads everything, so only as another user).
    if (::geteuid() != 0) {
        Environment locked;
        locked.home = dir / "locked-home";
        locked.ollama_service_models.clear();
        write_tiny(locked.home / ".cache" / "llama.cpp" / "m-Q4_0.gguf", {});
        fs::permissions(locked.home / ".cache" / "llama.cpp", fs::perms::none);
        sources = find_other_apps(locked);
        fs::permissions(locked.home / ".cache" / "llama.cpp", fs::perms::owner_all);
        ASSERT_EQ(sources.size(), 1u);
        EXPECT_FALSE(sources[0].unreadable.empty());
    }
}

TEST(OtherApps, TheLibraryUsesThemInPlaceAndNeverTouchesThem) {
    test::TempDir dir;
    const FakeHome fake(dir.path());
    const auto before = snapshot(fake.home);
    Store store = open_store(dir / "data" / "powerhouse.db");
    LibraryPlaces places;
    places.library = dir / "data" / "models";
    places.environment = fake.env();
    Result<Library> library = refresh_library(store, places);
    ASSERT_TRUE(library) << library.error().message;
    EXPECT_EQ(snapshot(fake.home), before) << "a scan only reads other apps' folders";
    EXPECT_TRUE(fs::is_directory(places.library)) << "the library folder is made";

    std::map<std::string, LibraryEntry> by_name;
    for (const LibraryEntry& e : library->models) by_name[e.name] = e;
    std::vector<std::string> names;
    for (const LibraryEntry& e : library->models) names.push_back(e.name + " | " + source_label(e.record));
    EXPECT_EQ(names, (std::vector<std::string>{
                         "Big · Q8_0 | LM Studio · bartowski/Big-GGUF",
                         "Foo 7B · Q4_K_M | Ollama · hf.co/bartowski/Foo-GGUF:Q4_K_M",
                         // Equal names: by path (~/.cache/llama.cpp before ~/.lmstudio).
                         "Llama 3.2 1B Instruct · Q4_K_M | llama.cpp",
                         "Llama 3.2 1B Instruct · Q4_K_M | LM Studio · lmstudio-community/Llama-3.2-1B-Instruct-GGUF",
                         "Llama 3.2 3B Instruct · Q4_K_M | Ollama · llama3.2:3b",
                         "Meta Llama 3 8B Instruct · Q4_0 | GPT4All",
                         "mistral 7b instruct v0.2 · Q5_K_M | LM Studio · TheBloke/Mistral-7B-Instruct-v0.2-GGUF",
                         "Qwen3 4B · Q4_K_M | Jan · qwen3-4b",
                         "Qwen3 4B · Q8_0 | LM Studio · Qwen/Qwen3-4B-GGUF",
                         "Smollm2 135M · Q4_1 | Ollama · smollm2:135m, smollm2:latest",
                         "someone/mymodel:q8 · Q4_K_M | Ollama · someone/mymodel:q8",
                         "tinyllama 1.1b chat v1.0 · Q4_0 | Jan · tinyllama-1.1b",
                     }));
    // The real model in Ollama's blob is usable in place; the tiny ones say why not.
    const LibraryEntry& smol = by_name.at("Smollm2 135M · Q4_1");
    EXPECT_TRUE(smol.record.ok) << smol.record.problem;
    EXPECT_EQ(smol.record.source, "ollama");
    EXPECT_EQ(smol.record.path, (fake.home / ".ollama" / "models" / "blobs" / ("sha256-" + hex('1'))).string());
    EXPECT_EQ(smol.quantization, "Q4_1");
    EXPECT_EQ(smol.architecture, "llama");
    EXPECT_FALSE(by_name.at("Qwen3 4B · Q4_K_M").record.ok);
    EXPECT_FALSE(by_name.at("Qwen3 4B · Q4_K_M").record.problem.empty());
    EXPECT_EQ(by_name.at("Big · Q8_0").record.path.find("-00001-of-00002.gguf") != std::string::npos, true);
    // The malformed manifests are notes, with their reasons.
    ASSERT_EQ(library->notes.size(), 4u);
    for (const std::string& note : library->notes) EXPECT_NE(note.find("Ollama's manifest"), std::string::npos) << note;

    // Again: the same list, nothing read again, still nothing touched.
    Result<Library> again = refresh_library(store, places);
    ASSERT_TRUE(again);
    ASSERT_EQ(again->models.size(), library->models.size());
    for (size_t i = 0; i < again->models.size(); ++i) {
        EXPECT_EQ(again->models[i].name, library->models[i].name);
        EXPECT_EQ(again->models[i].record.id, library->models[i].record.id);
    }
    EXPECT_EQ(snapshot(fake.home), before);

    // Forgetting one hides it: the file stays, a refresh does not bring it back, and an
    // explicit import shows it again.
    const std::string blob = smol.record.path;
    ASSERT_TRUE(forget_model(store, blob));
    again = refresh_library(store, places);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->models.size(), library->models.size() - 1);
    EXPECT_TRUE(fs::exists(blob));
    EXPECT_EQ(snapshot(fake.home), before);
    Result<store::ModelRecord> imported = import_model(store, blob, ImportMode::in_place, places.library);
    EXPECT_FALSE(imported) << "not named .gguf: imports take GGUF files by name";
    ASSERT_TRUE(store.unhide_model(blob));
    again = refresh_library(store, places);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->models.size(), library->models.size());

    // An app's folder that goes takes its records with it; its files were never ours.
    fs::remove_all(fake.home / "jan");
    again = refresh_library(store, places);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->models.size(), library->models.size() - 1);
    // Without other apps, only the library's own models are listed.
    places.other_apps = false;
    again = refresh_library(store, places);
    ASSERT_TRUE(again);
    EXPECT_TRUE(again->models.empty());
}

TEST(OtherApps, AFileInALibraryFolderBelongsToItFirst) {
    test::TempDir dir;
    const FakeHome fake(dir.path());
    Store store = open_store(dir / "data" / "powerhouse.db");
    // The user added LM Studio's folder as a library folder too: its files are "folder".
    ASSERT_TRUE(store.add_model_folder((fake.home / ".lmstudio" / "models").string()));
    LibraryPlaces places;
    places.library = dir / "data" / "models";
    places.environment = fake.env();
    Result<Library> library = refresh_library(store, places);
    ASSERT_TRUE(library) << library.error().message;
    int lmstudio_folder = 0;
    for (const LibraryEntry& e : library->models) {
        if (e.record.folder == (fake.home / ".lmstudio" / "models").string()) {
            ++lmstudio_folder;
            EXPECT_EQ(e.record.source, "folder") << e.record.path;
        }
    }
    EXPECT_EQ(lmstudio_folder, 3) << "a library folder lists every .gguf file, the projector too";
    // Forgetting one there hides it too; the library folder's own files likewise.
    ASSERT_TRUE(forget_model(store, library->models.front().record.path));
    Result<Library> again = refresh_library(store, places);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->models.size(), library->models.size() - 1);
}

}  // namespace
}  // namespace powerhouse::catalog
