# CUDA detection. POWERHOUSE_CUDA=AUTO builds the CUDA backend when nvcc is found, ON
# requires it, OFF never builds it. The result is POWERHOUSE_CUDA_ENABLED.
#
# Nothing links libcuda (the driver) directly: the runtime API (cudart, static) loads it at
# run time, so the programs start on machines without an NVIDIA driver.

set(POWERHOUSE_CUDA_ENABLED OFF)
if(NOT POWERHOUSE_CUDA STREQUAL "OFF")
    if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS "/usr/local/cuda/bin/nvcc")
        set(CMAKE_CUDA_COMPILER "/usr/local/cuda/bin/nvcc")
    endif()
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
        # CMake 3.25 does not know nvcc's C++20 flag.
        set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
        set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
        set(CMAKE_CUDA_ARCHITECTURES "${POWERHOUSE_CUDA_ARCHS}")
        enable_language(CUDA)
        set(CMAKE_CUDA_STANDARD 20)
        set(CMAKE_CUDA_STANDARD_REQUIRED ON)
        find_package(CUDAToolkit REQUIRED)
        set(POWERHOUSE_CUDA_ENABLED ON)
    elseif(POWERHOUSE_CUDA STREQUAL "ON")
        message(FATAL_ERROR "POWERHOUSE_CUDA=ON but no CUDA compiler (nvcc) was found; "
                            "install the CUDA toolkit or configure with -DPOWERHOUSE_CUDA=OFF")
    else()
        message(STATUS "nvcc not found: building without the CUDA backend")
    endif()
endif()
