// The model catalog on real files: the SmolLM2 test model, small synthetic models with real
// shapes, a split model, and files that cannot be used (truncated, not GGUF at all, an
// architecture the engine does not run, a lone later part of a split model). Each is listed
// with what it is or why not; nothing stops a scan.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>

#include "catalog/catalog.h"
#include "gguf/gguf_model.h"
#include "gguf/gguf_writer.h"
#include "powerhouse/synth.h"
#include "store/store.h"
#include "support/test_support.h"

namespace powerhouse::catalog {
namespace {

namespace fs = std::filesystem;
using store::ModelRecord;
using store::Store;

Store open_store(const test::TempDir& dir) {
    auto s = Store::open(dir / "powerhouse.db");
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    return std::move(s).value();
}

void synth(const fs::path& out, const std::string& preset, uint32_t layers = 2) {
    SynthOptions o;
    o.preset = preset;
    o.type = "q8_0";
    o.n_layer = layers;
    o.output = out;
    o.threads = 2;
    o.pool_weights = 4096;
    auto r = synthesize_model(o);
    ASSERT_TRUE(r) << r.error().message;
}

// A valid GGUF file of an architecture the engine does not run.
void write_foreign_model(const fs::path& path) {
    GgufWriter writer;
    writer.metadata().set_string("general.architecture", "mamba");
    writer.metadata().set_string("general.name", "Some Mamba");
    writer.metadata().set("mamba.block_count", GgufValue{uint32_t{1}});
    ASSERT_TRUE(writer.add_tensor({"token_embd.weight", GgmlType::f32, {8, 4}}).ok());
    auto written = writer.write_file(path, [](size_t, const GgufTensorSpec&, std::span<std::byte> out) -> Result<void> {
        std::fill(out.begin(), out.end(), std::byte{0});
        return {};
    });
    ASSERT_TRUE(written) << written.error().message;
}

std::map<std::string, ModelRecord> by_name(Store& store) {
    std::map<std::string, ModelRecord> out;
    auto all = store.models();
    EXPECT_TRUE(all);
    for (const ModelRecord& r : *all) out[fs::path(r.path).filename().string()] = r;
    return out;
}

TEST(Catalog, AScanListsEveryModelAndSaysWhyTheBadOnesCannotBeUsed) {
    test::TempDir dir;
    Store store = open_store(dir);
    const fs::path models = dir / "models";
    fs::create_directories(models / "sub" / "deeper");
    fs::copy_file(test::test_model_path(), models / "SmolLM2.gguf");
    synth(models / "sub" / "qwen.gguf", "qwen2.5-0.5b");
    synth(models / "sub" / "deeper" / "gemma.gguf", "gemma3-1b");
    // Truncated: the first megabyte of a real model.
    const std::string smol = test::read_file(test::test_model_path());
    test::write_file(models / "cut.gguf", smol.substr(0, 1 << 20));
    test::write_file(models / "notes.gguf", "these are my notes, not a model\n");
    write_foreign_model(models / "mamba.gguf");
    test::write_file(models / "Big-00002-of-00003.gguf", "part two");  // its first part is missing
    test::write_file(models / "readme.txt", "not even named .gguf");
    test::write_file(models / "download.gguf.part", "half a download");

    auto report = scan_folder(store, models);
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_EQ(report->added, 7);
    EXPECT_EQ(report->unusable, 4);
    auto found = by_name(store);
    ASSERT_EQ(found.size(), 7u);

    EXPECT_TRUE(found["SmolLM2.gguf"].ok) << found["SmolLM2.gguf"].problem;
    const auto info = nlohmann::json::parse(found["SmolLM2.gguf"].info_json);
    EXPECT_EQ(info["architecture"], "llama");
    EXPECT_EQ(info["file_type"], "Q4_1");
    EXPECT_EQ(info["n_layer"], 30);
    EXPECT_TRUE(info["has_chat_template"].get<bool>());
    EXPECT_EQ(found["SmolLM2.gguf"].file_size, static_cast<int64_t>(smol.size()));
    EXPECT_TRUE(found["qwen.gguf"].ok) << found["qwen.gguf"].problem;
    EXPECT_EQ(nlohmann::json::parse(found["qwen.gguf"].info_json)["architecture"], "qwen2");
    EXPECT_TRUE(found["gemma.gguf"].ok) << found["gemma.gguf"].problem;

    EXPECT_FALSE(found["cut.gguf"].ok);
    EXPECT_NE(found["cut.gguf"].problem.find("cut.gguf"), std::string::npos) << found["cut.gguf"].problem;
    EXPECT_FALSE(found["notes.gguf"].ok);
    EXPECT_NE(found["notes.gguf"].problem.find("GGUF"), std::string::npos) << found["notes.gguf"].problem;
    EXPECT_FALSE(found["mamba.gguf"].ok);
    EXPECT_NE(found["mamba.gguf"].problem.find("mamba"), std::string::npos) << found["mamba.gguf"].problem;
    EXPECT_EQ(nlohmann::json::parse(found["mamba.gguf"].info_json)["name"], "Some Mamba");
    EXPECT_FALSE(found["Big-00002-of-00003.gguf"].ok);
    EXPECT_NE(found["Big-00002-of-00003.gguf"].problem.find("part 2 of 3"), std::string::npos);

    // Again: nothing changed, nothing is read again.
    report = scan_folder(store, models);
    ASSERT_TRUE(report);
    EXPECT_EQ(report->unchanged, 7);
    EXPECT_EQ(report->added + report->updated + report->removed, 0);

    // A file removed and one repaired: the catalog follows.
    fs::remove(models / "notes.gguf");
    fs::copy_file(test::test_model_path(), models / "cut.gguf", fs::copy_options::overwrite_existing);
    fs::last_write_time(models / "cut.gguf", fs::last_write_time(models / "cut.gguf") + std::chrono::seconds(5));
    report = scan_folder(store, models);
    ASSERT_TRUE(report);
    EXPECT_EQ(report->removed, 1);
    EXPECT_EQ(report->updated, 1);
    found = by_name(store);
    EXPECT_EQ(found.count("notes.gguf"), 0u);
    EXPECT_TRUE(found["cut.gguf"].ok) << found["cut.gguf"].problem;

    EXPECT_FALSE(scan_folder(store, dir / "no-such-folder"));
}

TEST(Catalog, ASplitModelIsOneEntry) {
    test::TempDir dir;
    Store store = open_store(dir);
    const fs::path models = dir / "models";
    fs::create_directories(models);
    // Three parts, as gguf-split writes them; only the first carries the metadata.
    const auto fill = [](size_t, const GgufTensorSpec&, std::span<std::byte> out) -> Result<void> {
        std::fill(out.begin(), out.end(), std::byte{1});
        return {};
    };
    for (uint16_t i = 0; i < 3; ++i) {
        GgufWriter writer;
        if (i == 0) writer.metadata().set_string("general.architecture", "mamba");
        writer.metadata().set(kSplitNoKey, GgufValue{i});
        writer.metadata().set(kSplitCountKey, GgufValue{uint16_t{3}});
        writer.metadata().set(kSplitTensorsCountKey, GgufValue{int32_t{3}});
        ASSERT_TRUE(writer.add_tensor({"t" + std::to_string(i), GgmlType::f32, {8, 2}}).ok());
        ASSERT_TRUE(writer.write_file(split_path(models / "Split", i + 1, 3), fill));
    }
    auto report = scan_folder(store, models);
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_EQ(report->added, 1);
    const auto found = by_name(store);
    ASSERT_EQ(found.size(), 1u);
    const ModelRecord& r = found.begin()->second;
    EXPECT_EQ(fs::path(r.path).filename(), "Split-00001-of-00003.gguf");
    EXPECT_EQ(nlohmann::json::parse(r.info_json)["parts"], 3);
    EXPECT_EQ(r.file_size, static_cast<int64_t>(fs::file_size(split_path(models / "Split", 1, 3)) +
                                                fs::file_size(split_path(models / "Split", 2, 3)) +
                                                fs::file_size(split_path(models / "Split", 3, 3))));
}

TEST(Catalog, ImportRegistersInPlaceOrCopiesOrMovesIntoTheLibrary) {
    test::TempDir dir;
    Store store = open_store(dir);
    const fs::path elsewhere = dir / "Downloads";
    const fs::path library = dir / "library";
    fs::create_directories(elsewhere);
    synth(elsewhere / "tiny.gguf", "smollm2-135m");

    auto in_place = import_model(store, elsewhere / "tiny.gguf", ImportMode::in_place, library);
    ASSERT_TRUE(in_place) << in_place.error().message;
    EXPECT_TRUE(in_place->ok) << in_place->problem;
    EXPECT_EQ(in_place->path, (elsewhere / "tiny.gguf").string());
    EXPECT_FALSE(fs::exists(library / "tiny.gguf")) << "registered where it is, no copy";

    auto copied = import_model(store, elsewhere / "tiny.gguf", ImportMode::copy, library);
    ASSERT_TRUE(copied) << copied.error().message;
    EXPECT_EQ(copied->path, (library / "tiny.gguf").string());
    EXPECT_EQ(test::read_file(library / "tiny.gguf"), test::read_file(elsewhere / "tiny.gguf"));
    EXPECT_EQ(copied->folder, library.string());
    // A different file of the same name is not overwritten.
    fs::create_directories(elsewhere / "other");
    synth(elsewhere / "other" / "tiny.gguf", "qwen3-0.6b");
    auto clash = import_model(store, elsewhere / "other" / "tiny.gguf", ImportMode::copy, library);
    ASSERT_FALSE(clash);
    EXPECT_NE(clash.error().message.find("already has a file named tiny.gguf"), std::string::npos);

    synth(elsewhere / "moved.gguf", "qwen3-0.6b");
    const std::string bytes = test::read_file(elsewhere / "moved.gguf");
    auto moved = import_model(store, elsewhere / "moved.gguf", ImportMode::move, library);
    ASSERT_TRUE(moved) << moved.error().message;
    EXPECT_FALSE(fs::exists(elsewhere / "moved.gguf"));
    EXPECT_EQ(test::read_file(library / "moved.gguf"), bytes);
    EXPECT_TRUE(moved->ok);

    // Not a model: refused with the reason, nothing recorded.
    test::write_file(elsewhere / "photo.jpg", "\xff\xd8\xff");
    auto photo = import_model(store, elsewhere / "photo.jpg", ImportMode::in_place, library);
    ASSERT_FALSE(photo);
    EXPECT_NE(photo.error().message.find("not a GGUF model"), std::string::npos) << photo.error().message;
    EXPECT_FALSE(import_model(store, elsewhere / "missing.gguf", ImportMode::copy, library));
    EXPECT_EQ(store.models()->size(), 3u);
    // Nothing half-copied is left in the library.
    for (const auto& entry : fs::directory_iterator(library)) {
        EXPECT_EQ(entry.path().string().find(".copying"), std::string::npos) << entry.path();
    }
}

}  // namespace
}  // namespace powerhouse::catalog
