# powerhouse_test_suites(TARGET [LABELS label...] [ENVIRONMENT var=value...]): one ctest
# case per GoogleTest suite of TARGET, found when ctest runs (as gtest_discover_tests'
# PRE_TEST mode finds them, but per suite rather than per test).
#
# Why per suite: a test program's start is not free. Under AddressSanitizer an empty start
# of a test program takes 0.24 s, and several build tables of cases as they start (the
# chat-template fixtures: 0.3 s a start). One process per test made these starts about a
# third of CI's test time. A suite is one process now, and the output of a failed suite
# names the failed test.
#
# A program that ran only skipped tests exits with 77 (tests/support/gtest_main.cpp), which
# ctest reports as skipped. A regular expression on "[  SKIPPED ]" is not used: ctest lets it
# win over a failed exit, and one suite can hold both a skipped and a failed test.

set(POWERHOUSE_TEST_SUITES_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/PowerhouseTestSuitesAdd.cmake")

function(powerhouse_test_suites target)
    cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "LABELS;ENVIRONMENT")
    set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
    set(list_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_list.cmake")
    # ctest reads include_file before it runs anything; the listing runs then, so a program
    # rebuilt after configure is listed as it is now.
    file(GENERATE OUTPUT "${include_file}" CONTENT
"set(suites_target \"${target}\")
set(suites_executable \"$<TARGET_FILE:${target}>\")
set(suites_working_directory \"${CMAKE_CURRENT_BINARY_DIR}\")
set(suites_labels \"${arg_LABELS}\")
set(suites_environment \"${arg_ENVIRONMENT}\")
set(suites_output \"${list_file}\")
include(\"${POWERHOUSE_TEST_SUITES_SCRIPT}\")
include(\"${list_file}\")
")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
