# Third-party libraries. Header-only ones (fmt, nlohmann-json, CLI11) come from Debian's
# -dev packages; on the GPU machine, which has no package registry, scripts/device-check
# copies their headers into third_party/include (git-ignored) and carries them along.

set(POWERHOUSE_THIRD_PARTY "${PROJECT_SOURCE_DIR}/third_party" CACHE PATH
    "Fallback folder for dependencies carried to machines without Debian's packages")

find_package(Threads REQUIRED)

# fmt: the compiled library when there is one (libfmt-dev). Its header-only mode compiles
# the formatting code into every source file that includes it, which more than doubled
# their compile time; it stays as the fallback for machines without the package.
find_package(fmt 9 QUIET CONFIG)
add_library(powerhouse_fmt INTERFACE)
add_library(powerhouse::fmt ALIAS powerhouse_fmt)
if(TARGET fmt::fmt)
    target_link_libraries(powerhouse_fmt INTERFACE fmt::fmt)
elseif(TARGET fmt::fmt-header-only)
    target_link_libraries(powerhouse_fmt INTERFACE fmt::fmt-header-only)
else()
    if(NOT EXISTS "${POWERHOUSE_THIRD_PARTY}/include/fmt/format.h")
        message(FATAL_ERROR "fmt not found: install libfmt-dev (scripts/setup does)")
    endif()
    target_include_directories(powerhouse_fmt SYSTEM INTERFACE "${POWERHOUSE_THIRD_PARTY}/include")
    target_compile_definitions(powerhouse_fmt INTERFACE FMT_HEADER_ONLY=1)
endif()

find_package(nlohmann_json 3.10 QUIET CONFIG)
if(NOT TARGET nlohmann_json::nlohmann_json)
    if(NOT EXISTS "${POWERHOUSE_THIRD_PARTY}/include/nlohmann/json.hpp")
        message(FATAL_ERROR "nlohmann-json not found: install nlohmann-json3-dev (scripts/setup does)")
    endif()
    add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
    target_include_directories(nlohmann_json::nlohmann_json SYSTEM INTERFACE
        "${POWERHOUSE_THIRD_PARTY}/include")
endif()

find_package(CLI11 2 QUIET CONFIG)
if(NOT TARGET CLI11::CLI11)
    if(NOT EXISTS "${POWERHOUSE_THIRD_PARTY}/include/CLI/CLI.hpp")
        message(FATAL_ERROR "CLI11 not found: install libcli11-dev (scripts/setup does)")
    endif()
    add_library(CLI11::CLI11 INTERFACE IMPORTED)
    target_include_directories(CLI11::CLI11 SYSTEM INTERFACE "${POWERHOUSE_THIRD_PARTY}/include")
endif()

# The app's store (app/core): SQLite and its C++ wrapper, found here so that the tests
# see their targets too.
if(POWERHOUSE_APP)
    find_package(SQLite3 REQUIRED)
    find_package(SQLiteCpp CONFIG QUIET)
    if(NOT TARGET SQLiteCpp)
        message(FATAL_ERROR "SQLiteCpp not found: install libsqlitecpp-dev (scripts/setup does)")
    endif()
endif()

# Downloads (app/core/library, used by `powerhouse-cli pull` and the app): libcurl for HTTP
# and OpenSSL's libcrypto for sha256. Required in the application profile. The GPU
# machine's profile (POWERHOUSE_APP=OFF) has no curl headers and no package registry
# (DESIGN.md section 6): there the library is built when both are found, and otherwise the
# command line is built without `pull`.
set(POWERHOUSE_DOWNLOADS_ENABLED OFF)
find_package(CURL QUIET)
find_package(OpenSSL QUIET COMPONENTS Crypto)
if(TARGET CURL::libcurl AND TARGET OpenSSL::Crypto)
    set(POWERHOUSE_DOWNLOADS_ENABLED ON)
elseif(POWERHOUSE_APP)
    if(NOT TARGET CURL::libcurl)
        message(FATAL_ERROR "libcurl not found: install libcurl4-openssl-dev (scripts/run and scripts/test do)")
    endif()
    message(FATAL_ERROR "OpenSSL's libcrypto not found: install libssl-dev (scripts/run and scripts/test do)")
else()
    message(STATUS "libcurl or OpenSSL not found: powerhouse-cli is built without `pull` "
                   "(install libcurl4-openssl-dev and libssl-dev)")
endif()

# The API server (app/server, `powerhouse-cli serve`): cpp-httplib from Debian
# (libcpp-httplib-dev, through pkg-config). Required in the application profile; elsewhere
# (the GPU machine) the command line is built without `serve` when it is missing.
set(POWERHOUSE_SERVER_ENABLED OFF)
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
    pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
endif()
if(TARGET PkgConfig::HTTPLIB)
    set(POWERHOUSE_SERVER_ENABLED ON)
elseif(POWERHOUSE_APP)
    message(FATAL_ERROR "cpp-httplib not found: install libcpp-httplib-dev (scripts/run and scripts/test do)")
else()
    message(STATUS "cpp-httplib not found: powerhouse-cli is built without `serve` (install libcpp-httplib-dev)")
endif()

# The desktop app: Qt 6.4 Quick from Debian (qt6-declarative-dev and the QML modules).
set(POWERHOUSE_DESKTOP_ENABLED OFF)
if(POWERHOUSE_APP AND NOT POWERHOUSE_DESKTOP STREQUAL "OFF")
    find_package(Qt6 6.4 QUIET COMPONENTS Core Gui Qml Quick QuickControls2 Test QuickTest)
    if(Qt6Quick_FOUND AND Qt6QuickControls2_FOUND)
        set(POWERHOUSE_DESKTOP_ENABLED ON)
        set(QT_QML_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/qml")
        # Remote engines' API keys live only in the system keyring (QtKeychain over the
        # Secret Service): Debian's qtkeychain-qt6-dev.
        find_package(Qt6Keychain QUIET)
        if(NOT TARGET Qt6Keychain::Qt6Keychain)
            message(FATAL_ERROR "QtKeychain for Qt 6 not found: install qtkeychain-qt6-dev (scripts/run and scripts/test do)")
        endif()
        # AUTOMOC is turned on only where Qt is used (resources/qml, app/desktop): project-wide
        # it would add a moc step to every engine and test target.
    elseif(POWERHOUSE_DESKTOP STREQUAL "ON")
        message(FATAL_ERROR "Qt 6 Quick not found: install qt6-declarative-dev (scripts/setup does)")
    else()
        message(STATUS "Qt 6 Quick not found: the desktop app is not built")
    endif()
endif()

if(POWERHOUSE_TESTS)
    find_package(GTest QUIET)
    if(NOT TARGET GTest::gtest_main)
        # GoogleTest sources (Debian's googletest package installs them under /usr/src).
        foreach(dir "${POWERHOUSE_THIRD_PARTY}/googletest" "/usr/src/googletest")
            if(EXISTS "${dir}/CMakeLists.txt")
                set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
                add_subdirectory("${dir}" "${PROJECT_BINARY_DIR}/_deps/googletest" EXCLUDE_FROM_ALL)
                break()
            endif()
        endforeach()
    endif()
    if(NOT TARGET GTest::gtest_main AND NOT TARGET gtest_main)
        message(FATAL_ERROR "GoogleTest not found: install libgtest-dev (scripts/setup does)")
    endif()
    if(NOT TARGET GTest::gtest_main)
        add_library(GTest::gtest_main ALIAS gtest_main)
        add_library(GTest::gtest ALIAS gtest)
    endif()
endif()

if(POWERHOUSE_BENCHMARKS)
    find_package(benchmark QUIET CONFIG)
    if(NOT TARGET benchmark::benchmark)
        message(STATUS "Google Benchmark not found: benchmark programs are not built")
    endif()
endif()
