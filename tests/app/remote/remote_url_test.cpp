// Base and metrics URLs: normalised the way people write them, refused when they cannot be
// right, and judged for plain http to another machine.
#include <gtest/gtest.h>

#include <string>

#include "remote/remote_url.h"

namespace powerhouse::remote {
namespace {

std::string base(const std::string& url) {
    Result<std::string> r = normalize_base_url(url);
    return r ? *r : "error: " + r.error().message;
}

TEST(RemoteUrl, BaseUrlsEndInTheirApiVersion) {
    EXPECT_EQ(base("http://127.0.0.1:8000"), "http://127.0.0.1:8000/v1");
    EXPECT_EQ(base("http://127.0.0.1:8000/"), "http://127.0.0.1:8000/v1");
    EXPECT_EQ(base("  http://127.0.0.1:8000/v1/  "), "http://127.0.0.1:8000/v1");
    EXPECT_EQ(base("HTTPS://GPU-Node:443/v1"), "https://gpu-node:443/v1");
    EXPECT_EQ(base("http://h:8000/v1/chat/completions"), "http://h:8000/v1");
    EXPECT_EQ(base("http://h:8000/v1/models"), "http://h:8000/v1");
    EXPECT_EQ(base("http://h/api/v2"), "http://h/api/v2");
    EXPECT_EQ(base("http://[::1]:8080"), "http://[::1]:8080/v1");
    EXPECT_EQ(base("http://h:8000/chat/completions"), "http://h:8000/v1");
}

// A base URL with a path is a provider's documented one, or a proxy's: it is used as written
// (a pasted endpoint cut off), never given a "/v1" the server does not serve.
TEST(RemoteUrl, ABaseUrlWithAPathIsUsedAsGiven) {
    const std::string gemini = "https://generativelanguage.googleapis.com/v1beta/openai";
    EXPECT_EQ(base(gemini), gemini);
    EXPECT_EQ(base(gemini + "/"), gemini);
    EXPECT_EQ(base(gemini + "/chat/completions"), gemini);
    EXPECT_EQ(base(gemini + "/models"), gemini);
    EXPECT_EQ(base("http://h/openai"), "http://h/openai");  // a proxy's prefix
    EXPECT_EQ(base("http://h/openai/v1"), "http://h/openai/v1");
    EXPECT_EQ(base("https://gateway.example/v1/account/gateway/openai"),
              "https://gateway.example/v1/account/gateway/openai");
    // Normalising a normalised URL changes nothing (the CLI and RemoteEngine::create both do).
    for (const std::string& url :
         {std::string("http://h:8000"), std::string("http://h/openai/"), gemini + "/chat/completions"}) {
        EXPECT_EQ(base(base(url)), base(url)) << url;
    }
}

TEST(RemoteUrl, BadUrlsAreRefusedWithoutEchoingSecrets) {
    EXPECT_NE(base("127.0.0.1:8000").find("write it with http:// or https://"), std::string::npos);
    EXPECT_NE(base("ftp://h/v1").find("not an http:// or https:// URL"), std::string::npos);
    EXPECT_NE(base("http:///v1").find("names no host"), std::string::npos);
    EXPECT_NE(base("http://h:80x/v1").find("port must be a number"), std::string::npos);
    EXPECT_NE(base("http://h:-1/v1").find("port must be a number"), std::string::npos);
}

// A port is checked by its value, not by its count of digits.
TEST(RemoteUrl, PortsOutsideTheirRangeAreRefused) {
    for (const char* url : {"http://h:65536/v1", "http://h:70000/v1", "http://h:99999/v1", "http://[::1]:80000/v1",
                            "http://h:0/v1", "http://h:123456/v1", "http://h:99999999999999999999/v1"}) {
        const std::string refused = base(url);
        EXPECT_NE(refused.find("is a number from 1 to 65535"), std::string::npos) << url << ": " << refused;
        EXPECT_FALSE(split_url(url).ok()) << url;
        EXPECT_FALSE(normalize_metrics_url(url).ok()) << url;
    }
    EXPECT_EQ(base("http://h:65535/v1"), "http://h:65535/v1");
    EXPECT_EQ(base("http://h:1"), "http://h:1/v1");
    EXPECT_EQ(base("http://[::1]:8080/v1"), "http://[::1]:8080/v1");
    EXPECT_NE(base("http://h/v1?key=1").find("query"), std::string::npos);
    const std::string credentials = base("http://alice:s3cret@h/v1");
    EXPECT_NE(credentials.find("holds credentials"), std::string::npos);
    EXPECT_EQ(credentials.find("s3cret"), std::string::npos);
    // Without its scheme too: the URL is not echoed, its password with it.
    const std::string bare = base("alice:s3cret@h:8000/v1");
    EXPECT_NE(bare.find("holds credentials"), std::string::npos) << bare;
    EXPECT_NE(bare.find("write it with http:// or https://"), std::string::npos) << bare;
    EXPECT_EQ(bare.find("s3cret"), std::string::npos) << bare;
}

TEST(RemoteUrl, MetricsUrlsGetTheirDefaultPath) {
    EXPECT_EQ(*normalize_metrics_url("http://gpu-node:9400"), "http://gpu-node:9400/metrics");
    EXPECT_EQ(*normalize_metrics_url("http://gpu-node:9400/"), "http://gpu-node:9400/metrics");
    EXPECT_EQ(*normalize_metrics_url("http://h:8000/metrics"), "http://h:8000/metrics");
    EXPECT_EQ(*normalize_metrics_url("http://h:8000/custom/path"), "http://h:8000/custom/path");
}

TEST(RemoteUrl, PlainHttpToAnotherMachineIsWarnedAbout) {
    EXPECT_TRUE(plain_http_warning("http://10.0.0.5:8000/v1"));
    EXPECT_TRUE(plain_http_warning("http://gpu-node/v1"));
    EXPECT_NE(plain_http_warning("http://10.0.0.5:8000/v1")->find("API key"), std::string::npos);
    EXPECT_FALSE(plain_http_warning("https://10.0.0.5:8000/v1"));
    EXPECT_FALSE(plain_http_warning("http://127.0.0.1:8000/v1"));
    EXPECT_FALSE(plain_http_warning("http://127.1.2.3:8000/v1"));
    EXPECT_FALSE(plain_http_warning("http://localhost:8000/v1"));
    EXPECT_FALSE(plain_http_warning("http://[::1]:8000/v1"));
    EXPECT_TRUE(is_loopback_host("::1"));
    EXPECT_FALSE(is_loopback_host("128.0.0.1"));
}

}  // namespace
}  // namespace powerhouse::remote
