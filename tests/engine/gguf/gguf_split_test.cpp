// Split models (NAME-00001-of-0000N.gguf, as llama.cpp's gguf-split writes them) read as
// one model, from any of their parts; broken sets are refused with a clear reason.
#include <gtest/gtest.h>

#include "gguf/gguf_model.h"
#include "gguf/gguf_writer.h"
#include "support/test_support.h"

namespace powerhouse {
namespace {

GgufWriter::FillFn fill_with_index() {
    return [](size_t index, const GgufTensorSpec& spec, std::span<std::byte> out) -> Result<void> {
        for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>(spec.name.size() + index + i);
        return {};
    };
}

struct PartPlan {
    uint16_t split_no;
    uint16_t split_count;
    std::vector<std::string> tensors;
};

// Writes one part; the first part also carries the model's metadata.
void write_part(const std::filesystem::path& path, const PartPlan& plan, int32_t tensors_total) {
    GgufWriter writer;
    if (plan.split_no == 0) writer.metadata().set_string("general.architecture", "llama");
    writer.metadata().set(kSplitNoKey, GgufValue{plan.split_no});
    writer.metadata().set(kSplitCountKey, GgufValue{plan.split_count});
    writer.metadata().set(kSplitTensorsCountKey, GgufValue{tensors_total});
    for (const std::string& name : plan.tensors) ASSERT_TRUE(writer.add_tensor({name, GgmlType::f32, {8, 2}}).ok());
    Result<void> written = writer.write_file(path, fill_with_index());
    ASSERT_TRUE(written.ok()) << written.error().message;
}

class GgufSplit : public ::testing::Test {
protected:
    void SetUp() override {
        write_part(split_path(prefix(), 1, 3), {0, 3, {"a", "b"}}, 5);
        write_part(split_path(prefix(), 2, 3), {1, 3, {"c"}}, 5);
        write_part(split_path(prefix(), 3, 3), {2, 3, {"d", "e"}}, 5);
    }
    std::filesystem::path prefix() const { return dir_ / "Model-Q4_K_M"; }
    test::TempDir dir_;
};

TEST(GgufSplitName, ParsesLlamaCppNames) {
    auto split = parse_split_name("/m/Llama-3-70B-00002-of-00003.gguf");
    ASSERT_TRUE(split.has_value());
    EXPECT_EQ(split->prefix, std::filesystem::path("/m/Llama-3-70B"));
    EXPECT_EQ(split->index, 2);
    EXPECT_EQ(split->count, 3);
    EXPECT_EQ(split_path("/m/x", 1, 12), std::filesystem::path("/m/x-00001-of-00012.gguf"));
    EXPECT_FALSE(parse_split_name("/m/model.gguf").has_value());
    EXPECT_FALSE(parse_split_name("/m/m-00004-of-00003.gguf").has_value());
    EXPECT_FALSE(parse_split_name("/m/m-00000-of-00003.gguf").has_value());
    EXPECT_FALSE(parse_split_name("/m/m-1-of-3.gguf").has_value());
}

TEST_F(GgufSplit, OpensAsOneModelFromAnyPart) {
    for (int first = 1; first <= 3; ++first) {
        Result<GgufModel> model = GgufModel::open(split_path(prefix(), first, 3));
        ASSERT_TRUE(model.ok()) << model.error().message;
        EXPECT_EQ(model->parts().size(), 3u);
        EXPECT_EQ(model->metadata().get_string("general.architecture"), "llama");
        ASSERT_EQ(model->tensors().size(), 5u);
        const std::vector<std::string> names = {"a", "b", "c", "d", "e"};
        const std::vector<uint32_t> files = {0, 0, 1, 2, 2};
        for (size_t i = 0; i < 5; ++i) {
            const GgufTensorInfo* t = model->find_tensor(names[i]);
            ASSERT_NE(t, nullptr);
            EXPECT_EQ(t->file_index, files[i]);
            // Data comes from the right part: the writer's pattern uses the index within it.
            const size_t index_in_part = i == 0 ? 0 : i == 1 ? 1 : i == 2 ? 0 : i - 3;
            EXPECT_EQ(t->data[5], static_cast<std::byte>(1 + index_in_part + 5));
        }
        uint64_t sizes = 0;
        for (const auto& part : model->parts()) sizes += part.file_size();
        EXPECT_EQ(model->total_file_size(), sizes);
    }
}

TEST_F(GgufSplit, MissingPartIsNamed) {
    std::filesystem::remove(split_path(prefix(), 2, 3));
    Result<GgufModel> model = GgufModel::open(split_path(prefix(), 1, 3));
    ASSERT_FALSE(model.ok());
    EXPECT_NE(model.error().message.find("part 2 of 3"), std::string::npos) << model.error().message;
    EXPECT_NE(model.error().message.find("Model-Q4_K_M-00002-of-00003.gguf"), std::string::npos);
}

TEST_F(GgufSplit, RenamedPartIsRefused) {
    std::filesystem::rename(split_path(prefix(), 1, 3), dir_ / "renamed.gguf");
    Result<GgufModel> model = GgufModel::open(dir_ / "renamed.gguf");
    ASSERT_FALSE(model.ok());
    EXPECT_NE(model.error().message.find("split into 3 files"), std::string::npos) << model.error().message;
}

TEST_F(GgufSplit, PartsOfDifferentModelsAreRefused) {
    // Part 2 claims to be part 3.
    write_part(split_path(prefix(), 2, 3), {2, 3, {"c"}}, 5);
    Result<GgufModel> model = GgufModel::open(split_path(prefix(), 1, 3));
    ASSERT_FALSE(model.ok());
    EXPECT_NE(model.error().message.find("expected part 2 of 3"), std::string::npos) << model.error().message;
}

TEST_F(GgufSplit, DuplicateTensorAcrossPartsIsRefused) {
    write_part(split_path(prefix(), 3, 3), {2, 3, {"d", "a"}}, 5);
    Result<GgufModel> model = GgufModel::open(split_path(prefix(), 1, 3));
    ASSERT_FALSE(model.ok());
    EXPECT_NE(model.error().message.find("tensor 'a' also appears"), std::string::npos) << model.error().message;
}

TEST_F(GgufSplit, TensorCountMismatchIsRefused) {
    write_part(split_path(prefix(), 3, 3), {2, 3, {"d"}}, 5);
    Result<GgufModel> model = GgufModel::open(split_path(prefix(), 1, 3));
    ASSERT_FALSE(model.ok());
    EXPECT_NE(model.error().message.find("has 5 tensors but its 3 parts hold 4"), std::string::npos)
        << model.error().message;
}

TEST(GgufModelOpen, ErrorsNameTheFile) {
    test::TempDir dir;
    Result<GgufModel> missing = GgufModel::open(dir / "nope.gguf");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code, ErrorCode::io);
    EXPECT_NE(missing.error().message.find("nope.gguf"), std::string::npos);

    test::write_file(dir / "empty.gguf", "");
    Result<GgufModel> empty = GgufModel::open(dir / "empty.gguf");
    ASSERT_FALSE(empty.ok());
    EXPECT_NE(empty.error().message.find("is empty"), std::string::npos);

    Result<GgufModel> folder = GgufModel::open(dir.path());
    ASSERT_FALSE(folder.ok());
    EXPECT_NE(folder.error().message.find("not a regular file"), std::string::npos);

    test::write_file(dir / "text.gguf", "hello, this is not a model");
    Result<GgufModel> text = GgufModel::open(dir / "text.gguf");
    ASSERT_FALSE(text.ok());
    EXPECT_EQ(text.error().message.rfind("text.gguf: header: magic is \"hell\"", 0), 0u) << text.error().message;
}

}  // namespace
}  // namespace powerhouse
