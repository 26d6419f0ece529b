// The program that holds the test programs' shared precompiled header (POWERHOUSE_TEST_PCH,
// tests/CMakeLists.txt): it is built, never run. GoogleTest's main comes from
// powerhouse_test_main; it has no tests.
