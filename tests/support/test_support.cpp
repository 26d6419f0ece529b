#include "support/test_support.h"

#include "powerhouse/model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace powerhouse::test {
namespace fs = std::filesystem;

fs::path data_dir() { return POWERHOUSE_TEST_DATA_DIR; }

fs::path shared_testdata_dir() { return POWERHOUSE_SHARED_TESTDATA_DIR; }

fs::path test_model_path() { return setup_model_path(); }

TempDir::TempDir() {
    static std::atomic<int> counter{0};
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
    path_ = fs::path(POWERHOUSE_BINARY_DIR) / "test-tmp" /
            (name + "." + std::to_string(::getpid()) + "." + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

void write_file(const fs::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

int exit_code_after_tests(int result) {
    const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
    if (result == 0 && unit.skipped_test_count() > 0 && unit.successful_test_count() == 0) {
        return 77;
    }
    return result;
}

}  // namespace powerhouse::test
