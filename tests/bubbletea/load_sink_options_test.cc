// kv-sink's and bubbletea-load's command lines on the options layer: strict values (both
// used std::stod/stoi, which threw on garbage and took "12abc" as 12), every problem at
// once, and their tables in docs/bubbletea.md generated from the registries.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "options/help.h"
#include "perf/bubbletea-load/options.h"
#include "perf/kv-sink/options.h"
#include "support/doc_blocks.h"

namespace atlas {
namespace {

TEST(KvSinkOptions, ValuesAndKeyFile) {
    auto d = kvsink::parseOptions({});
    ASSERT_TRUE(d.isOk());
    EXPECT_EQ(d.value().listen, "127.0.0.1:7100");
    EXPECT_EQ(d.value().timeout_ms, 10000);
    const std::string key = ::testing::TempDir() + "/kv-sink-options-test.key";
    std::ofstream(key) << "two-part\nkey\n";
    auto k = kvsink::parseOptions({"--auth-key-file", key, "--send-to", "tcp://h:1"});
    ASSERT_TRUE(k.isOk()) << k.status().toString();
    EXPECT_EQ(k.value().auth_key, "two-part\nkey");  // bubbletea's rule, not the first line
    std::remove(key.c_str());
    auto bad =
        kvsink::parseOptions({"--timeout-ms", "12abc", "--checksum", "md5", "--count", "-1"});
    ASSERT_FALSE(bad.isOk());
    for (const char* part : {"--timeout-ms='12abc' is invalid", "--checksum='md5' is invalid",
                             "--count='-1' is invalid"}) {
        EXPECT_NE(bad.status().message().find(part), std::string::npos) << bad.status().message();
    }
}

TEST(BubbleteaLoadOptions, ValuesAndUrl) {
    auto d = bubbletea_load::parseOptions({"--url", "http://10.0.0.5:9000/v1"});
    ASSERT_TRUE(d.isOk()) << d.status().toString();
    EXPECT_EQ(d.value().host, "10.0.0.5");
    EXPECT_EQ(d.value().port, "9000");
    EXPECT_EQ(bubbletea_load::parseOptions({"--url", "h"}).value().port, "80");
    EXPECT_TRUE(bubbletea_load::parsePromptDist("lognormal:1024:0.8").has_value());
    for (const char* bad : {"fixed:abc", "fixed:0", "uniform:5", "normal:1", "fixed:1:2"}) {
        EXPECT_FALSE(bubbletea_load::parsePromptDist(bad)) << bad;
    }
    auto bad =
        bubbletea_load::parseOptions({"--rate", "fast", "--connections", "0", "--url", "h:x"});
    ASSERT_FALSE(bad.isOk());
    for (const char* part : {"--rate='fast' is invalid", "--connections='0' is out of range",
                             "--url='h:x' is invalid"}) {
        EXPECT_NE(bad.status().message().find(part), std::string::npos) << bad.status().message();
    }
}

TEST(LoadSinkOptions, DocsTablesAreTheRegistries) {
    const std::string doc = std::string(ATLAS_SOURCE_DIR) + "/docs/bubbletea.md";
    EXPECT_TRUE(testing::docBlockMatches(doc, "kv-sink", options::markdown(kvsink::optionTable())));
    EXPECT_TRUE(testing::docBlockMatches(doc, "bubbletea-load",
                                         options::markdown(bubbletea_load::optionTable())));
}

}  // namespace
}  // namespace atlas
