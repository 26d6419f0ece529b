// What the desktop app's C++ tests share: a store in a temporary folder.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

#include "store/store.h"
#include "support/test_support.h"

namespace powerhouse::test {

// The store of a temporary folder; a test that cannot open it stops there.
inline store::Store open_store(const TempDir& dir) {
    auto s = store::Store::open(dir / "p.db");
    if (!s) {
        ADD_FAILURE() << s.error().message;
        std::abort();
    }
    return std::move(s).value();
}

}  // namespace powerhouse::test
