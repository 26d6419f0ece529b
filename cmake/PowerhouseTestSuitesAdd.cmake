# Run by ctest (through the include file that powerhouse_test_suites writes): lists the
# suites of one GoogleTest program and writes the ctest cases, one per suite, to
# ${suites_output}. Inputs: suites_target, suites_executable, suites_working_directory,
# suites_labels, suites_environment, suites_output.

set(script "")
if(NOT EXISTS "${suites_executable}")
    # Not built: one case that fails and says so, as gtest_discover_tests does.
    string(APPEND script "add_test([=[${suites_target}_NOT_BUILT]=] [=[${suites_target}_NOT_BUILT]=])\n")
    file(WRITE "${suites_output}" "${script}")
    return()
endif()

execute_process(COMMAND "${suites_executable}" --gtest_list_tests
    WORKING_DIRECTORY "${suites_working_directory}"
    TIMEOUT 60
    OUTPUT_VARIABLE listing ERROR_VARIABLE listing_errors RESULT_VARIABLE listed)
if(NOT listed EQUAL 0)
    message(FATAL_ERROR "${suites_executable} --gtest_list_tests failed (${listed}):\n${listing}\n${listing_errors}")
endif()

# Suites are the lines that do not start with a space: "Suite.", "Prefix/Suite.",
# "Suite/0.  # TypeParam = ...". The tests under them start with two spaces.
string(REPLACE "\n" ";" lines "${listing}")
foreach(line IN LISTS lines)
    if(line MATCHES "^([^ #][^ ]*)\\.( .*)?$")
        set(suite "${CMAKE_MATCH_1}")
        string(APPEND script
            "add_test([=[${suite}]=] [==[${suites_executable}]==] [==[--gtest_filter=${suite}.*]==])\n"
            "set_tests_properties([=[${suite}]=] PROPERTIES WORKING_DIRECTORY [==[${suites_working_directory}]==]"
            " SKIP_RETURN_CODE 77 LABELS [==[${suites_labels}]==]")
        if(suites_environment)
            string(APPEND script " ENVIRONMENT [==[${suites_environment}]==]")
        endif()
        string(APPEND script ")\n")
    endif()
endforeach()
file(WRITE "${suites_output}" "${script}")
