// powerhouse-cli conversations export / import, run as a user would on a data folder of its
// own: a file imported and exported again is the same file (and Python's json module reads
// it), Markdown by flag or by the file's extension, standard input, the app's default
// folder, refusals with their place, and failed exports that leave no file behind.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_runner.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

namespace fs = std::filesystem;
using test::CliRun;
using test::quoted;
using test::run_cli;

// Our format as export writes it (every key, in its order), with what tends to break files.
const char* kExport = R"({
  "format": "powerhouse.conversations",
  "version": 1,
  "exported_ms": 1714572999000,
  "conversations": [
    {
      "title": "Código ✓ \"quoted\" 🚀",
      "system_prompt": "Answer with ``` fences.",
      "settings": {"temperature": 0.3, "top_k": 7, "seed": 1234},
      "created_ms": 1714572000000,
      "updated_ms": 1714572060000,
      "messages": [
        {"role": "user", "content": "Hello world in C?", "state": "complete",
         "created_ms": 1714572000000, "updated_ms": 1714572000000},
        {"role": "assistant", "content": "```c\nint main(void) { return 0; }\n```\n", "state": "complete",
         "created_ms": 1714572001000, "updated_ms": 1714572002000,
         "stats": {"model": "SmolLM2-135M-Instruct", "engine": "local", "prompt_tokens": 30, "reused_tokens": 0,
                   "generated_tokens": 14, "ttft_ms": 20.5, "tokens_per_second": 45.25, "energy_joules": 1.5}},
        {"role": "assistant", "content": "", "state": "failed", "error": "out of memory on cuda:0",
         "created_ms": 1714572003000, "updated_ms": 1714572003000}
      ]
    },
    {
      "title": "Second",
      "system_prompt": "",
      "settings": {},
      "created_ms": 1714573000000,
      "updated_ms": 1714573000000,
      "messages": [
        {"role": "user", "content": "Hi", "state": "complete", "created_ms": 1714573000000,
         "updated_ms": 1714573000000},
        {"role": "assistant", "content": "Hel", "state": "stopped", "created_ms": 1714573000000,
         "updated_ms": 1714573000000,
         "stats": {"model": "m", "engine": "http://box:8000/v1", "prompt_tokens": 3, "reused_tokens": 1,
                   "generated_tokens": 1, "ttft_ms": 5.0, "tokens_per_second": 0.0}}
      ]
    }
  ]
})";

nlohmann::json without_time(nlohmann::json doc) {
    doc.erase("exported_ms");
    return doc;
}

// No file of the export's making is left beside `dir`'s files (the temporary ones included).
size_t files_in(const fs::path& dir) {
    size_t n = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++n;
    return n;
}

class CliConversations : public ::testing::Test {
protected:
    std::string data() const { return " --data-dir " + quoted(dir_ / "data"); }
    void import_fixture() {
        test::write_file(dir_ / "in.json", kExport);
        const CliRun run = run_cli("conversations import " + quoted(dir_ / "in.json") + data());
        ASSERT_EQ(run.status, 0) << run.err;
        EXPECT_EQ(run.out,
                  "Imported 2 conversations (5 messages) into " + (dir_ / "data" / "powerhouse.db").string() + "\n");
    }

    test::TempDir dir_;
};

TEST_F(CliConversations, ImportThenExportGivesTheSameFile) {
    import_fixture();
    const CliRun run = run_cli("conversations export -o " + quoted(dir_ / "out.json") + data());
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out, "Exported 2 conversations to " + (dir_ / "out.json").string() + "\n");
    const std::string written = test::read_file(dir_ / "out.json");
    EXPECT_EQ(without_time(nlohmann::json::parse(written)), without_time(nlohmann::json::parse(kExport)));

    // Python's json module reads it as the same document.
    const std::string check =
        "python3 -c 'import json, sys; d = json.load(open(sys.argv[1], encoding=\"utf-8\")); "
        "assert d[\"format\"] == \"powerhouse.conversations\"; "
        "assert d[\"conversations\"][0][\"title\"] == \"C\\u00f3digo \\u2713 \\\"quoted\\\" "
        "\\U0001F680\"; assert d[\"conversations\"][1][\"messages\"][1][\"stats\"]"
        "[\"engine\"] == \"http://box:8000/v1\"' " +
        quoted(dir_ / "out.json");
    EXPECT_EQ(std::system(check.c_str()), 0) << check;

    // To standard output, chosen conversations in the order given.
    const CliRun chosen = run_cli("conversations export --id 2 --id 1" + data());
    ASSERT_EQ(chosen.status, 0) << chosen.err;
    const auto doc = nlohmann::json::parse(chosen.out);
    ASSERT_EQ(doc["conversations"].size(), 2u);
    EXPECT_EQ(doc["conversations"][0]["title"], "Second");

    // The export imports again: two more, equal to the first two.
    const CliRun again = run_cli("conversations import " + quoted(dir_ / "out.json") + data());
    ASSERT_EQ(again.status, 0) << again.err;
    const CliRun copies = run_cli("conversations export --id 3 --id 4" + data());
    ASSERT_EQ(copies.status, 0) << copies.err;
    EXPECT_EQ(without_time(nlohmann::json::parse(copies.out)), without_time(nlohmann::json::parse(kExport)));
}

// -o naming standard output itself: the data alone on standard output, the line that says
// what was exported on standard error.
TEST_F(CliConversations, ExportToStandardOutputByNameKeepsTheStatusOutOfTheData) {
    import_fixture();
    for (const std::string name : {"/dev/stdout", "/proc/self/fd/1"}) {
        const CliRun run = run_cli("conversations export -o " + name + data());
        ASSERT_EQ(run.status, 0) << name << ": " << run.err;
        const auto doc = nlohmann::json::parse(run.out, nullptr, false);
        ASSERT_FALSE(doc.is_discarded()) << name << ": standard output is not the JSON alone:\n" << run.out;
        EXPECT_EQ(without_time(doc), without_time(nlohmann::json::parse(kExport))) << name;
        EXPECT_EQ(run.err, "Exported 2 conversations to " + name + "\n") << name;
    }
    // "-" is standard output too, and says nothing else at all.
    const CliRun dash = run_cli("conversations export -o -" + data());
    ASSERT_EQ(dash.status, 0) << dash.err;
    EXPECT_EQ(nlohmann::json::parse(dash.out)["conversations"].size(), 2u);
    EXPECT_TRUE(dash.err.empty()) << dash.err;
    // Another device keeps the line on standard output.
    const CliRun null = run_cli("conversations export -o /dev/null" + data());
    ASSERT_EQ(null.status, 0) << null.err;
    EXPECT_EQ(null.out, "Exported 2 conversations to /dev/null\n");
}

TEST_F(CliConversations, MarkdownByFlagOrByExtension) {
    import_fixture();
    const CliRun run = run_cli("conversations export --format md --utc --id 2" + data());
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out,
              "# Second\n\n*2024-05-01 14:16 UTC*\n\n**You**\n\nHi\n\n**Assistant**\n\nHel\n\n"
              "*Stopped before the end.*\n\n*m · via http://box:8000/v1 · 1 token*\n");
    const CliRun plain = run_cli("conversations export --format markdown --no-stats --id 2" + data());
    ASSERT_EQ(plain.status, 0) << plain.err;
    EXPECT_EQ(plain.out.find("tokens"), std::string::npos) << plain.out;

    const CliRun file = run_cli("conversations export -o " + quoted(dir_ / "all.md") + data());
    ASSERT_EQ(file.status, 0) << file.err;
    const std::string md = test::read_file(dir_ / "all.md");
    EXPECT_EQ(md.rfind("# Código ✓ \"quoted\" 🚀\n", 0), 0u) << md;
    EXPECT_NE(md.find("```c\nint main(void) { return 0; }\n```\n"), std::string::npos) << md;
    EXPECT_NE(md.find("*Failed: out of memory on cuda:0*"), std::string::npos) << md;
    EXPECT_NE(md.find("\n---\n\n# Second\n"), std::string::npos) << md;
}

TEST_F(CliConversations, ImportsAChatFromStandardInput) {
    const CliRun run =
        run_cli("conversations import -" + data(), std::string(R"([{"role": "user", "content": "Why is the sky blue?"},
                                              {"role": "assistant", "content": "Rayleigh scattering."}])"));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_NE(run.out.find("Imported 1 conversation (2 messages)"), std::string::npos) << run.out;
    const CliRun out = run_cli("conversations export" + data());
    ASSERT_EQ(out.status, 0) << out.err;
    EXPECT_EQ(nlohmann::json::parse(out.out)["conversations"][0]["title"], "Why is the sky blue?");
}

TEST_F(CliConversations, UsesTheAppsDataFolderByDefault) {
    const char* saved = std::getenv("XDG_DATA_HOME");
    const std::string previous = saved != nullptr ? saved : "";
    ::setenv("XDG_DATA_HOME", (dir_ / "xdg").c_str(), 1);
    const CliRun run = run_cli("conversations import -", std::string(R"([{"role": "user", "content": "x"}])"));
    if (saved != nullptr) {
        ::setenv("XDG_DATA_HOME", previous.c_str(), 1);
    } else {
        ::unsetenv("XDG_DATA_HOME");
    }
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_TRUE(fs::exists(dir_ / "xdg" / "powerhouse" / "powerhouse.db"));
}

TEST_F(CliConversations, RefusalsNameThePlaceAndChangeNothing) {
    import_fixture();
    const CliRun before = run_cli("conversations export" + data());
    ASSERT_EQ(before.status, 0) << before.err;

    test::write_file(dir_ / "robot.json", R"({"format": "powerhouse.conversations", "version": 1, "conversations": [
        {"title": "fine", "messages": [{"role": "user", "content": "ok"}]},
        {"title": "bad", "messages": [{"role": "user", "content": "ok"}, {"role": "robot", "content": "beep"}]}]})");
    CliRun run = run_cli("conversations import " + quoted(dir_ / "robot.json") + data());
    EXPECT_EQ(run.status, 1);
    EXPECT_EQ(run.err, "error: " + (dir_ / "robot.json").string() +
                           ": conversations[1].messages[1].role: \"robot\" is not one of system, user, assistant\n");
    EXPECT_TRUE(run.out.empty()) << run.out;

    test::write_file(dir_ / "new.json", R"({"format": "powerhouse.conversations", "version": 3, "conversations": []})");
    run = run_cli("conversations import " + quoted(dir_ / "new.json") + data());
    EXPECT_EQ(run.status, 1);
    EXPECT_NE(run.err.find("this one reads version 1"), std::string::npos) << run.err;

    test::write_file(dir_ / "broken.json", "{\"format\": \"powerhouse.conversations\", ");
    run = run_cli("conversations import " + quoted(dir_ / "broken.json") + data());
    EXPECT_EQ(run.status, 1);
    EXPECT_NE(run.err.find("broken.json: not valid JSON: parse error at line 1"), std::string::npos) << run.err;

    run = run_cli("conversations import " + quoted(dir_ / "missing.json") + data());
    EXPECT_EQ(run.status, 1);
    EXPECT_NE(run.err.find("cannot open"), std::string::npos) << run.err;

    const CliRun after = run_cli("conversations export" + data());
    EXPECT_EQ(without_time(nlohmann::json::parse(after.out)), without_time(nlohmann::json::parse(before.out)));

    // Usage: a subcommand is needed, the format is json or md, a file to import.
    EXPECT_EQ(run_cli("conversations" + data()).status, 2);
    EXPECT_EQ(run_cli("conversations export --format pdf" + data()).status, 2);
    EXPECT_EQ(run_cli("conversations import" + data()).status, 2);
}

// An import refused into a data folder without a database leaves no database (and no folder)
// behind, and one refused into an existing database leaves that database where it was.
TEST_F(CliConversations, AFailedImportLeavesNoFileBehind) {
    test::write_file(dir_ / "robot.json", R"([{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}])");
    test::write_file(dir_ / "broken.json", "{\"format\": ");

    // The folder does not exist: neither it nor the database appears.
    CliRun run = run_cli("conversations import " + quoted(dir_ / "broken.json") + " --data-dir " +
                         quoted(dir_ / "new" / "data"));
    EXPECT_EQ(run.status, 1);
    EXPECT_NE(run.err.find("not valid JSON"), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(dir_ / "new"));

    // The folder exists, empty: it stays empty.
    fs::create_directories(dir_ / "empty");
    run = run_cli("conversations import " + quoted(dir_ / "robot.json") + " --data-dir " + quoted(dir_ / "empty"));
    EXPECT_EQ(run.status, 1);
    EXPECT_NE(run.err.find("[1].role"), std::string::npos) << run.err;
    EXPECT_EQ(files_in(dir_ / "empty"), 0u);
    // ... and the export that follows says there is nothing, rather than finding an empty file.
    run = run_cli("conversations export --data-dir " + quoted(dir_ / "empty"));
    EXPECT_NE(run.err.find("powerhouse.db does not exist"), std::string::npos) << run.err;

    // A database that existed stays, with what it held, and nothing is made beside it.
    import_fixture();
    const size_t files = files_in(dir_ / "data");
    run = run_cli("conversations import " + quoted(dir_ / "robot.json") + data());
    EXPECT_EQ(run.status, 1);
    EXPECT_EQ(files_in(dir_ / "data"), files);
    run = run_cli("conversations export" + data());
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(nlohmann::json::parse(run.out)["conversations"].size(), 2u);

    // A successful import into a new folder leaves the database alone, no temporary file.
    run = run_cli("conversations import " + quoted(dir_ / "in.json") + " --data-dir " + quoted(dir_ / "fresh" / "d"));
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(files_in(dir_ / "fresh" / "d"), 1u);
    EXPECT_TRUE(fs::exists(dir_ / "fresh" / "d" / "powerhouse.db"));
}

TEST_F(CliConversations, AFailedExportLeavesNoFileBehind) {
    import_fixture();
    // An unknown conversation: the file already there stays as it was.
    fs::create_directories(dir_ / "out");
    test::write_file(dir_ / "out" / "keep.json", "old");
    CliRun run = run_cli("conversations export --id 1 --id 99 -o " + quoted(dir_ / "out" / "keep.json") + data());
    EXPECT_EQ(run.status, 1);
    EXPECT_EQ(run.err, "error: no conversation 99\n");
    EXPECT_EQ(test::read_file(dir_ / "out" / "keep.json"), "old");
    EXPECT_EQ(files_in(dir_ / "out"), 1u);

    // A folder that does not exist: nothing written anywhere.
    run = run_cli("conversations export -o " + quoted(dir_ / "nowhere" / "x.json") + data());
    EXPECT_EQ(run.status, 1);
    // The error names the file asked for, not the temporary file written beside it.
    EXPECT_NE(run.err.find("cannot write " + (dir_ / "nowhere" / "x.json").string() + ": No such file or directory"),
              std::string::npos)
        << run.err;
    EXPECT_EQ(run.err.find(".tmp-"), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(dir_ / "nowhere"));

    // A folder: said so.
    run = run_cli("conversations export -o " + quoted(dir_ / "out") + data());
    EXPECT_EQ(run.status, 1);
    EXPECT_NE(run.err.find("it is a folder"), std::string::npos) << run.err;
    EXPECT_EQ(files_in(dir_ / "out"), 1u);

    // A device is written to, not replaced by a file (renamed onto /dev/stdout as root, the
    // temporary file took the device's place): here a link to /dev/null, which stays.
    fs::create_symlink("/dev/null", dir_ / "out" / "null.json");
    run = run_cli("conversations export -o " + quoted(dir_ / "out" / "null.json") + data());
    EXPECT_EQ(run.status, 0) << run.err;
    EXPECT_TRUE(fs::is_symlink(dir_ / "out" / "null.json"));
    EXPECT_EQ(files_in(dir_ / "out"), 2u);

    // A data folder without the app's file: said so, and no database made there.
    run = run_cli("conversations export --data-dir " + quoted(dir_ / "empty"));
    EXPECT_EQ(run.status, 1);
    EXPECT_NE(run.err.find("powerhouse.db does not exist"), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(dir_ / "empty"));
}

}  // namespace
}  // namespace powerhouse
