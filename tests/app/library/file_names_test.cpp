// The pieces a download is checked and named with: SHA-256 against published vectors,
// hashes as servers write them, and file names from URLs and Content-Disposition made safe.
#include <gtest/gtest.h>

#include <atomic>

#include "library/file_names.h"
#include "library/sha256.h"
#include "support/test_support.h"

namespace powerhouse::library {
namespace {

TEST(Sha256, KnownVectors) {
    // FIPS 180-2 examples.
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, IncrementalEqualsOneShotAndHexDoesNotEndIt) {
    std::string data;
    for (int i = 0; i < 100000; ++i) data += static_cast<char>(i * 7 + 3);
    Sha256 hash;
    hash.update(data.substr(0, 12345));
    EXPECT_EQ(hash.hex(), sha256_hex(data.substr(0, 12345)));
    hash.update(data.substr(12345));
    EXPECT_EQ(hash.hex(), sha256_hex(data));
    hash.reset();
    EXPECT_EQ(hash.hex(), sha256_hex(""));
}

TEST(Sha256, Files) {
    test::TempDir dir;
    test::write_file(dir / "f", "abcdef");
    EXPECT_EQ(sha256_file(dir / "f").value(), sha256_hex("abcdef"));
    EXPECT_EQ(sha256_file(dir / "f", 3).value(), sha256_hex("abc"));
    EXPECT_FALSE(sha256_file(dir / "f", 10));  // shorter than asked
    EXPECT_EQ(sha256_file(dir / "missing").error().code, ErrorCode::io);
    std::atomic<bool> cancel{true};
    EXPECT_EQ(sha256_file(dir / "f", std::nullopt, &cancel).error().code, ErrorCode::cancelled);
}

TEST(Sha256, NormalizedAsServersAndUsersWriteThem) {
    const std::string hex = "baf58d2e23d4920f4098f4313a8ddceba592eaa8710b1f8f583ea6c47a7d8701";
    std::string upper = hex;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(normalize_sha256(hex), hex);
    EXPECT_EQ(normalize_sha256(upper), hex);
    EXPECT_EQ(normalize_sha256("\"" + hex + "\""), hex);  // an ETag
    EXPECT_EQ(normalize_sha256("sha256:" + hex), hex);
    EXPECT_FALSE(normalize_sha256("W/\"" + hex + "\""));  // a weak tag names no exact bytes
    EXPECT_FALSE(normalize_sha256(hex.substr(1)));
    EXPECT_FALSE(normalize_sha256("\"a5bfa1c4f6e0b5f3e31a8d2fd0e2b4b2e44e2ac1\""));  // a git sha1
    EXPECT_FALSE(normalize_sha256(hex.substr(1) + "g"));
}

TEST(FileNames, FromUrls) {
    EXPECT_EQ(file_name_from_url("https://huggingface.co/a/b/resolve/main/Model-Q4_K_M.gguf?download=true"),
              "Model-Q4_K_M.gguf");
    EXPECT_EQ(file_name_from_url("https://example.com/files/my%20model.gguf#frag"), "my model.gguf");
    EXPECT_EQ(file_name_from_url("https://example.com/"), "");
    EXPECT_EQ(file_name_from_url("https://example.com"), "");
}

TEST(FileNames, FromContentDisposition) {
    EXPECT_EQ(file_name_from_content_disposition("attachment; filename=\"model.gguf\""), "model.gguf");
    EXPECT_EQ(file_name_from_content_disposition("attachment; filename=model.gguf"), "model.gguf");
    EXPECT_EQ(file_name_from_content_disposition(
                  "attachment; filename*=UTF-8''Mod%C3%A8le%20Q4.gguf; filename=\"Modele Q4.gguf\""),
              "Mod\xC3\xA8le Q4.gguf");  // the extended form wins wherever it stands
    EXPECT_EQ(file_name_from_content_disposition("inline; filename=\"a;b \\\"c\\\".gguf\""), "a;b \"c\".gguf");
    EXPECT_EQ(file_name_from_content_disposition("attachment"), "");
    EXPECT_EQ(file_name_from_content_disposition(""), "");
}

TEST(FileNames, ServerNamesCannotLeaveTheFolder) {
    EXPECT_EQ(safe_file_name("model.gguf"), "model.gguf");
    EXPECT_EQ(safe_file_name("../../.bashrc"), "");
    EXPECT_EQ(safe_file_name("../../etc/model.gguf"), "model.gguf");
    EXPECT_EQ(safe_file_name("C:\\Users\\x\\model.gguf"), "model.gguf");
    EXPECT_EQ(safe_file_name(".."), "");
    EXPECT_EQ(safe_file_name("."), "");
    EXPECT_EQ(safe_file_name("dir/"), "");
    EXPECT_EQ(safe_file_name("bad\nname.gguf"), "");
    EXPECT_EQ(safe_file_name(std::string(256, 'a')), "");
}

}  // namespace
}  // namespace powerhouse::library
