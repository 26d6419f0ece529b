// A shared library loaded at run time (dlopen), owned: the one place that opens, looks up
// and closes such libraries, for the ones Powerhouse never links so that it starts on
// machines without them (NVML, cuBLAS, NCCL; DESIGN.md section 6). The handle is closed
// when its owner is destroyed, so no error path can leak it or close it twice.
//
// A function pointer looked up with symbol() is valid only while the SharedLibrary that
// gave it is alive (unless the library was opened with RTLD_NODELETE): keep the two
// together.
//
// Thread-safety: open() may be called from any thread (dlerror's text is per thread). A
// SharedLibrary is not modified after open() and its const members may be called from any
// number of threads; moving it or destroying it needs exclusive access.
#pragma once

#include <dlfcn.h>

#include <string>

#include "powerhouse/result.h"

namespace powerhouse {

class SharedLibrary {
public:
    SharedLibrary() = default;  // holds nothing; operator bool is false
    ~SharedLibrary();
    SharedLibrary(SharedLibrary&& other) noexcept;
    SharedLibrary& operator=(SharedLibrary&& other) noexcept;
    SharedLibrary(const SharedLibrary&) = delete;
    SharedLibrary& operator=(const SharedLibrary&) = delete;

    // dlopen(file, flags). `file` is a path or a bare soname, which the dynamic loader
    // searches for (LD_LIBRARY_PATH, the ld.so cache, ...). On failure the error (code io)
    // carries the loader's own message, verbatim, so that callers can quote it in theirs.
    static Result<SharedLibrary> open(const std::string& file, int flags = RTLD_NOW | RTLD_LOCAL);

    // The function (or object) `name` as type F, a pointer type; nullptr when the library
    // lacks it or nothing is held.
    template <class F>
    F symbol(const char* name) const {
        // POSIX guarantees that dlsym's void* converts to a function pointer.
        return handle_ != nullptr ? reinterpret_cast<F>(dlsym(handle_, name)) : nullptr;
    }

    explicit operator bool() const { return handle_ != nullptr; }

    // The name given to open(), e.g. "libcublas.so.13".
    const std::string& file() const { return file_; }
    // The file the loader actually opened, e.g. "/usr/local/cuda/lib64/libcublas.so.13"
    // for a bare soname; file() when the loader cannot tell.
    std::string loaded_path() const;

private:
    SharedLibrary(void* handle, std::string file);
    void close() noexcept;

    void* handle_ = nullptr;  // from dlopen; null when nothing is held
    std::string file_;
};

}  // namespace powerhouse
