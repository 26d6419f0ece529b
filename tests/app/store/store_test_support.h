// What the store's tests share: opening a store or stopping the test, and unwrapping results.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <utility>

#include "store/store.h"

namespace powerhouse::store::test_support {

// The store at `path`; a test that cannot open it stops there.
inline Store open_store(const std::filesystem::path& path, const StoreOptions& options = {}) {
    Result<Store> s = Store::open(path, options);
    if (!s) {
        ADD_FAILURE() << s.error().message;
        std::abort();
    }
    return std::move(s).value();
}

// The value of a result that must hold one.
template <class T>
T ok(Result<T> r) {
    if (!r) {
        ADD_FAILURE() << r.error().message;
        std::abort();
    }
    return std::move(r).value();
}

inline void ok(Result<void> r) { ASSERT_TRUE(r) << r.error().message; }

}  // namespace powerhouse::store::test_support
