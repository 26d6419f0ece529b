// main() of the GoogleTest programs that need no other: GoogleTest's own, but a run whose
// every test was skipped (a GPU test without a GPU) exits with 77, which ctest counts as
// skipped (cmake/PowerhouseTestSuites.cmake says why an exit code and not the output).
#include "support/test_support.h"

#include <gtest/gtest.h>

int main(int argc, char** argv) {
    testing::InitGoogleTest(&argc, argv);
    return powerhouse::test::exit_code_after_tests(RUN_ALL_TESTS());
}
