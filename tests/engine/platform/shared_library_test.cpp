// SharedLibrary (platform/shared_library.h) on a real shared object: the fake NVML module
// that the telemetry tests load in place of the driver's library.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>

#include "platform/shared_library.h"

namespace powerhouse {
namespace {

using InitFunction = int (*)();

TEST(SharedLibrary, OpensLooksUpAndMovesOwnership) {
    Result<SharedLibrary> library = SharedLibrary::open(FAKE_NVML_PATH);
    ASSERT_TRUE(library.ok()) << library.error().message;
    EXPECT_TRUE(static_cast<bool>(*library));
    EXPECT_EQ(library->file(), FAKE_NVML_PATH);
    EXPECT_TRUE(std::filesystem::equivalent(library->loaded_path(), FAKE_NVML_PATH)) << library->loaded_path();
    EXPECT_NE(library->symbol<InitFunction>("nvmlInit_v2"), nullptr);
    EXPECT_EQ(library->symbol<InitFunction>("no_such_function_here"), nullptr);

    SharedLibrary moved = std::move(*library);
    EXPECT_TRUE(static_cast<bool>(moved));
    EXPECT_FALSE(static_cast<bool>(*library));  // NOLINT(bugprone-use-after-move): the moved-from state is the point
    EXPECT_EQ(library->symbol<InitFunction>("nvmlInit_v2"), nullptr);
    EXPECT_NE(moved.symbol<InitFunction>("nvmlInit_v2"), nullptr);

    SharedLibrary empty;
    EXPECT_FALSE(static_cast<bool>(empty));
    empty = std::move(moved);
    EXPECT_NE(empty.symbol<InitFunction>("nvmlInit_v2"), nullptr);
}

TEST(SharedLibrary, AFileThatDoesNotLoadIsAnErrorWithTheLoadersWords) {
    Result<SharedLibrary> missing = SharedLibrary::open("/nonexistent/libpowerhouse-missing.so.1");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code, ErrorCode::io);
    EXPECT_NE(missing.error().message.find("libpowerhouse-missing.so.1"), std::string::npos) << missing.error().message;
}

}  // namespace
}  // namespace powerhouse
