#include "cli/model_copies.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cli/cli_runner.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace powerhouse::test {

std::filesystem::path test_model_with_template(const TempDir& dir, const std::string& chat_template,
                                               const std::string& name) {
    Result<GgufFile> file = GgufFile::open(test_model_path());
    EXPECT_TRUE(file.ok()) << file.error().message;
    if (!file) return {};
    GgufWriter writer(file->alignment());
    for (const auto& [key, value] : file->metadata().entries()) writer.metadata().set(key, value);
    writer.metadata().set_string("tokenizer.chat_template", chat_template);
    for (const GgufTensorInfo& t : file->tensors()) {
        const Result<void> added = writer.add_tensor(
            {std::string(t.name), t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)});
        EXPECT_TRUE(added.ok()) << added.error().message;
    }
    const std::filesystem::path path = dir / name;
    const Result<void> written =
        writer.write_file(path, [&](size_t index, const GgufTensorSpec&, std::span<std::byte> out) {
            std::memcpy(out.data(), file->tensors()[index].data, out.size());
            return Result<void>();
        });
    EXPECT_TRUE(written.ok()) << written.error().message;
    return path;
}

std::string on_two_threads(const std::filesystem::path& model) {
    return "-m " + quoted(model) + " -t 2 --ctx 512 --temp 0";
}

}  // namespace powerhouse::test
