#include "platform/shared_library.h"

#include <link.h>

#include <utility>

namespace powerhouse {

SharedLibrary::SharedLibrary(void* handle, std::string file) : handle_(handle), file_(std::move(file)) {}

SharedLibrary::~SharedLibrary() {
    close();
}

SharedLibrary::SharedLibrary(SharedLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), file_(std::move(other.file_)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& other) noexcept {
    if (this != &other) {
        close();
        handle_ = std::exchange(other.handle_, nullptr);
        file_ = std::move(other.file_);
    }
    return *this;
}

void SharedLibrary::close() noexcept {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = nullptr;
}

Result<SharedLibrary> SharedLibrary::open(const std::string& file, int flags) {
    void* handle = dlopen(file.c_str(), flags);
    if (handle == nullptr) {
        // Read at once: the next dl* call on this thread replaces it.
        const char* text = dlerror();
        return make_error(ErrorCode::io, text != nullptr ? text : "unknown error");
    }
    return SharedLibrary(handle, file);
}

std::string SharedLibrary::loaded_path() const {
    link_map* map = nullptr;
    if (handle_ != nullptr && dlinfo(handle_, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
        map->l_name[0] != '\0') {
        return map->l_name;
    }
    return file_;
}

}  // namespace powerhouse
