// Helpers shared by the test programs: where test data lives, temporary folders.
#pragma once

#include <filesystem>
#include <string>

namespace powerhouse::test {

// tests/data in the source tree.
std::filesystem::path data_dir();
// ../shared/testdata (vocab files, chat templates).
std::filesystem::path shared_testdata_dir();
// The SmolLM2-135M-Instruct Q4_1 file fetched by scripts/fetch-test-model:
// $POWERHOUSE_TEST_MODEL, else ${XDG_CACHE_HOME:-~/.cache}/powerhouse/test-models/...
std::filesystem::path test_model_path();
// A fresh, empty folder under the build tree, removed when the object dies.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& bytes);

// What a test program returns after RUN_ALL_TESTS() gave `result`: 77 (ctest's "skipped",
// see cmake/PowerhouseTestSuites.cmake) when every test that ran was skipped, else `result`.
int exit_code_after_tests(int result);

}  // namespace powerhouse::test
