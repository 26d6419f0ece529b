# Build options. Presets in CMakePresets.json combine them; every option also works alone.

set(POWERHOUSE_CUDA "AUTO" CACHE STRING "Build the CUDA backend: AUTO (when nvcc is found), ON, OFF")
set_property(CACHE POWERHOUSE_CUDA PROPERTY STRINGS AUTO ON OFF)
# CI and development build one architecture (the H200's); release builds the full list.
set(POWERHOUSE_CUDA_ARCHS "90" CACHE STRING "CUDA architectures (CMAKE_CUDA_ARCHITECTURES syntax)")

# OFF is the GPU-machine profile: engine, kernels, CLI and engine/kernel tests only, no Qt,
# SQLite or curl (see DESIGN.md section 6).
option(POWERHOUSE_APP "Build the application layer (app/core, desktop app)" ON)
set(POWERHOUSE_DESKTOP "AUTO" CACHE STRING "Build the desktop app (Qt 6 Quick): AUTO (when Qt is found), ON, OFF")
set_property(CACHE POWERHOUSE_DESKTOP PROPERTY STRINGS AUTO ON OFF)
option(POWERHOUSE_TESTS "Build the tests" ON)
option(POWERHOUSE_BENCHMARKS "Build the Google Benchmark programs (when found)" ON)
option(POWERHOUSE_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(POWERHOUSE_FUZZ "Build libFuzzer targets (needs clang)" OFF)
option(POWERHOUSE_WERROR "Treat warnings as errors" OFF)
# The GoogleTest programs share one precompiled header (tests/CMakeLists.txt). Worth it with
# clang (the asan preset): 14% of the test sources' compile time there; gcc gains a few
# percent, less than making the header costs.
option(POWERHOUSE_TEST_PCH "Test programs share one precompiled header (clang)" OFF)

if(POWERHOUSE_SANITIZE)
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined>
                        $<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=all>
                        $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>)
    add_link_options(-fsanitize=address,undefined -fno-sanitize-recover=all)
endif()

if(POWERHOUSE_FUZZ AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "POWERHOUSE_FUZZ needs clang (libFuzzer): configure with "
                        "-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
endif()
