// powerhouse-cli list as a user runs it, on a fake home laid out as LM Studio, Ollama and
// llama.cpp lay out their downloads (HOME and the XDG variables point at it): the JSON
// parsed and checked field by field, the table, the app's default data folder, models
// forgotten in the app staying hidden, and nothing in the other apps' folders modified.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <string>

#include "cli_runner.h"
#include "store/store.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

namespace fs = std::filesystem;
using test::quoted;
using test::run_cli;

const std::string kBlob = "sha256-" + std::string(64, 'a');

void put(const fs::path& path, const std::string& bytes) {
    fs::create_directories(path.parent_path());
    test::write_file(path, bytes);
}

// The test model at `to`: a hard link where the file system allows (it is only read), else
// a copy.
void place_model(const fs::path& to) {
    fs::create_directories(to.parent_path());
    std::error_code ec;
    fs::create_hard_link(test::test_model_path(), to, ec);
    if (ec) fs::copy_file(test::test_model_path(), to);
}

std::map<std::string, std::string> snapshot(const fs::path& root) {
    std::map<std::string, std::string> out;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        std::string facts = std::to_string(entry.last_write_time().time_since_epoch().count());
        if (entry.is_regular_file()) {
            facts += " " + std::to_string(entry.file_size());
            if (entry.file_size() < (1 << 20)) facts += " " + test::read_file(entry.path());
        }
        out[entry.path().string()] = facts;
    }
    return out;
}

class CliList : public ::testing::Test {
protected:
    void SetUp() override {
        model_ = test::test_model_path();  // before HOME moves
        ASSERT_TRUE(fs::exists(model_)) << "run scripts/fetch-test-model";
        home_ = dir_ / "home";
        place_model(home_ / ".lmstudio" / "models" / "bartowski" / "SmolLM2-135M-Instruct-GGUF" /
                    "SmolLM2-135M-Instruct-Q4_1.gguf");
        const fs::path ollama = home_ / ".ollama" / "models";
        place_model(ollama / "blobs" / kBlob);
        for (const char* tag : {"135m", "latest"}) {
            const nlohmann::json manifest = {
                {"schemaVersion", 2},
                {"layers",
                 {{{"mediaType", "application/vnd.ollama.image.model"}, {"digest", "sha256:" + std::string(64, 'a')}},
                  {{"mediaType", "application/vnd.ollama.image.template"},
                   {"digest", "sha256:" + std::string(64, 'b')}}}}};
            put(ollama / "manifests" / "registry.ollama.ai" / "library" / "smollm2" / tag, manifest.dump());
        }
        put(ollama / "manifests" / "registry.ollama.ai" / "library" / "broken" / "latest", "{ nope");
        // llama.cpp's cache: a download cut short, beside its record.
        const std::string cut = test::read_file(model_).substr(0, 1 << 20);
        put(home_ / ".cache" / "llama.cpp" / "bartowski_SmolLM2-135M-Instruct-GGUF_SmolLM2-135M-Instruct-Q8_0.gguf", cut);
        put(home_ / ".cache" / "llama.cpp" / "bartowski_SmolLM2-135M-Instruct-GGUF_SmolLM2-135M-Instruct-Q8_0.gguf.json",
            "{}");
        // The app's own library folder.
        data_ = dir_ / "data";
        place_model(data_ / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf");

        setenv("HOME", home_.c_str(), 1);
        for (const char* name : {"XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "OLLAMA_MODELS", "LLAMA_CACHE"}) {
            unsetenv(name);
        }
    }
    void TearDown() override {
        if (const char* home = saved_home_.empty() ? nullptr : saved_home_.c_str()) setenv("HOME", home, 1);
    }

    // The entries under the fake home or data folder (a machine's own Ollama service
    // folder, /usr/share/ollama, would add its models), by path.
    std::map<std::string, nlohmann::json> entries(const std::string& out) const {
        std::map<std::string, nlohmann::json> by_path;
        const nlohmann::json list = nlohmann::json::parse(out);
        EXPECT_TRUE(list.is_array());
        for (const nlohmann::json& e : list) {
            const std::string path = e.at("path");
            if (path.rfind(dir_.path().string(), 0) == 0) by_path[path] = e;
        }
        return by_path;
    }

    test::TempDir dir_;
    fs::path model_, home_, data_;
    std::string saved_home_ = getenv("HOME") != nullptr ? getenv("HOME") : "";
};

TEST_F(CliList, ListsTheLibraryAndOtherAppsDownloadsAsJson) {
    const auto before = snapshot(home_);
    const test::CliRun run = run_cli("list --json --data-dir " + quoted(data_));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(snapshot(home_), before) << "other apps' folders are only read";
    const auto found = entries(run.out);
    ASSERT_EQ(found.size(), 4u) << run.out;

    const nlohmann::json& lms = found.at((home_ / ".lmstudio" / "models" / "bartowski" / "SmolLM2-135M-Instruct-GGUF" /
                                          "SmolLM2-135M-Instruct-Q4_1.gguf")
                                             .string());
    EXPECT_EQ(lms["name"], "SmolLM2 135M Instruct · Q4_1");
    EXPECT_EQ(lms["size_bytes"], static_cast<int64_t>(fs::file_size(model_)));
    EXPECT_EQ(lms["quantization"], "Q4_1");
    EXPECT_EQ(lms["architecture"], "llama");
    EXPECT_EQ(lms["source"], "lmstudio");
    EXPECT_EQ(lms["source_name"], "bartowski/SmolLM2-135M-Instruct-GGUF");
    EXPECT_EQ(lms["usable"], true);
    EXPECT_EQ(lms["problem"], "");

    const nlohmann::json& ollama = found.at((home_ / ".ollama" / "models" / "blobs" / kBlob).string());
    EXPECT_EQ(ollama["name"], "Smollm2 135M · Q4_1") << "from the metadata: a blob's name says nothing";
    EXPECT_EQ(ollama["source"], "ollama");
    EXPECT_EQ(ollama["source_name"], "smollm2:135m, smollm2:latest");
    EXPECT_EQ(ollama["usable"], true);

    const nlohmann::json& cut = found.at(
        (home_ / ".cache" / "llama.cpp" / "bartowski_SmolLM2-135M-Instruct-GGUF_SmolLM2-135M-Instruct-Q8_0.gguf").string());
    EXPECT_EQ(cut["name"], "SmolLM2 135M Instruct · Q8_0");
    EXPECT_EQ(cut["source"], "llama.cpp");
    EXPECT_EQ(cut["quantization"], "Q8_0") << "from the file name";
    EXPECT_EQ(cut["usable"], false);
    EXPECT_NE(cut["problem"].get<std::string>().find("metadata"), std::string::npos) << cut["problem"];

    const nlohmann::json& own = found.at((data_ / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf").string());
    EXPECT_EQ(own["source"], "folder");
    EXPECT_EQ(own["usable"], true);

    // What was passed over is said on stderr, with the reason.
    EXPECT_NE(run.err.find("broken:latest"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("not valid JSON"), std::string::npos) << run.err;

    // A model forgotten in the app (the same store) stays hidden; its file stays.
    {
        auto store = store::Store::open(data_ / "powerhouse.db");
        ASSERT_TRUE(store) << store.error().message;
        ASSERT_TRUE(store->hide_model((home_ / ".ollama" / "models" / "blobs" / kBlob).string()));
    }
    const test::CliRun again = run_cli("list --json --data-dir " + quoted(data_));
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_EQ(entries(again.out).size(), 3u) << again.out;
    EXPECT_EQ(snapshot(home_), before);
}

TEST_F(CliList, TheTableAndTheAppsDefaultDataFolder) {
    // No --data-dir: the desktop app's folder, $XDG_DATA_HOME/powerhouse.
    const fs::path xdg = dir_ / "xdg-data";
    setenv("XDG_DATA_HOME", xdg.c_str(), 1);
    const test::CliRun run = run_cli("list");
    unsetenv("XDG_DATA_HOME");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_TRUE(fs::exists(xdg / "powerhouse" / "powerhouse.db"));
    EXPECT_TRUE(fs::is_directory(xdg / "powerhouse" / "models"));
    EXPECT_EQ(run.out.rfind("NAME", 0), 0u) << run.out;
    for (const char* column : {"SIZE", "QUANT", "SOURCE", "STATUS"}) EXPECT_NE(run.out.find(column), std::string::npos);
    EXPECT_NE(run.out.find("Ollama · smollm2:135m, smollm2:latest"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("LM Studio · bartowski/SmolLM2-135M-Instruct-GGUF"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("usable"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("93.81 MiB"), std::string::npos) << run.out;
    // The columns line up: every row's SOURCE starts where the header's does (in
    // characters: the names hold a two-byte "·").
    const auto column_of = [](const std::string& line, const std::string& text) {
        const size_t at = line.find(text);
        size_t chars = 0;
        for (size_t i = 0; i < at; ++i) chars += (static_cast<unsigned char>(line[i]) & 0xC0) != 0x80 ? 1 : 0;
        return chars;
    };
    const std::string header = run.out.substr(0, run.out.find('\n'));
    const size_t ollama_line = run.out.find("Ollama ·");
    const std::string line = run.out.substr(run.out.rfind('\n', ollama_line) + 1,
                                            run.out.find('\n', ollama_line) - run.out.rfind('\n', ollama_line) - 1);
    EXPECT_EQ(column_of(line, "Ollama"), column_of(header, "SOURCE")) << run.out;

    // The home's own ~/.local/share/powerhouse stays untouched when XDG_DATA_HOME is set.
    EXPECT_FALSE(fs::exists(home_ / ".local" / "share" / "powerhouse"));
}

TEST_F(CliList, AnEmptyHomeListsNothingAndSaysWhere) {
    setenv("HOME", (dir_ / "empty").c_str(), 1);
    const test::CliRun run = run_cli("list --data-dir " + quoted(dir_ / "empty-data"));
    ASSERT_EQ(run.status, 0) << run.err;
    // Only a machine's own Ollama service folder could add models here.
    if (!fs::exists("/usr/share/ollama/.ollama/models")) {
        EXPECT_NE(run.out.find("No models yet"), std::string::npos) << run.out;
        const test::CliRun json = run_cli("list --json --data-dir " + quoted(dir_ / "empty-data"));
        ASSERT_EQ(json.status, 0) << json.err;
        EXPECT_EQ(nlohmann::json::parse(json.out), nlohmann::json::array());
    }
    EXPECT_TRUE(fs::is_directory(dir_ / "empty-data" / "models"));
}

// A file name that is not UTF-8 (Latin-1 from an old archive, say) ended list, and the
// app's scan with it, with nlohmann's "invalid UTF-8" exception (abort, status 134).
TEST_F(CliList, AFileNameThatIsNotUtf8IsListed) {
    fs::create_symlink(model_, data_ / "models" / "caf\xe9-model.gguf");  // SetUp moved HOME
    setenv("HOME", (dir_ / "empty").c_str(), 1);
    const test::CliRun run = run_cli("list --data-dir " + quoted(data_));
    ASSERT_EQ(run.status, 0) << run.err;

    const test::CliRun json = run_cli("list --json --data-dir " + quoted(data_));
    ASSERT_EQ(json.status, 0) << json.err;
    const auto listed = entries(json.out);
    EXPECT_EQ(listed.count((data_ / "models" / "caf\xef\xbf\xbd-model.gguf").string()), 1u) << json.out;
}

}  // namespace
}  // namespace powerhouse
