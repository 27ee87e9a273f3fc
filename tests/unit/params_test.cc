// The ATLAS_* registry: every value kind, every error path (message content asserted), the
// cross-variable rules, logging of effective values, the TransportConfig mapping, the
// deprecated spellings, the shared defaults, and that docs/env.md is the registry (its summary
// table regenerated and compared, every catalogued name documented).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "options/env.h"
#include "options/help.h"
#include "plugin/params.h"
#include "plugin_test_util.h"
#include "support/doc_blocks.h"

namespace atlas::plugin {
namespace {

using testutil::TempDir;

// An environment made of a map, so tests never touch the process environment.
struct FakeEnv {
    std::map<std::string, std::string> vars;
    EnvLookup lookup() const {
        return [this](const char* key) -> const char* {
            auto it = vars.find(key);
            return it == vars.end() ? nullptr : it->second.c_str();
        };
    }
};

ParamsParse parseWith(std::map<std::string, std::string> vars) {
    FakeEnv env{std::move(vars)};
    return parseParams(env.lookup());
}

// Parses one variable and returns the single error message ("" when accepted).
std::string errorFor(const std::string& key, const std::string& value) {
    ParamsParse r = parseWith({{key, value}});
    if (r.errors.empty()) {
        return "";
    }
    EXPECT_EQ(r.errors.size(), 1u) << r.status().toString();
    return r.errors.front();
}

void expectRejected(const std::string& key, const std::string& value,
                    const std::string& accepted_fragment) {
    std::string msg = errorFor(key, value);
    ASSERT_FALSE(msg.empty()) << key << "=" << value << " was accepted";
    EXPECT_NE(msg.find(key), std::string::npos) << msg;
    EXPECT_NE(msg.find("'" + value + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(accepted_fragment), std::string::npos) << msg;
}

TEST(ParamsTest, EmptyEnvironmentGivesDefaults) {
    ParamsParse r = parseWith({});
    ASSERT_TRUE(r.status().isOk()) << r.status().toString();
    const Params& p = r.params;
    EXPECT_EQ(p.socket_ifname, "");
    EXPECT_EQ(p.socket_family, AddressFamily::kAny);
    EXPECT_EQ(p.nstreams, 0u);
    EXPECT_EQ(p.max_streams, 64u);
    EXPECT_EQ(p.sockbuf_bytes, 0u);
    EXPECT_EQ(p.chunk_bytes, 512 * kKiB);
    EXPECT_EQ(p.inline_bytes, 4 * kKiB);
    EXPECT_EQ(p.stripe, transport::StripeMode::kLoadAware);
    EXPECT_EQ(p.engine_threads, 2u);
    EXPECT_EQ(p.io, transport::IoBackend::kAuto);
    EXPECT_EQ(p.timeout_ms, 30000u);
    EXPECT_EQ(p.resolved_auth_key, "");
    EXPECT_EQ(p.link_gbps, 0.0);
    EXPECT_FALSE(p.abort_on_error);
    EXPECT_FALSE(p.debug_stderr);
    EXPECT_TRUE(describeParams(p, false).empty());
}

TEST(ParamsTest, RegistryEntriesAreCompleteAndUnique) {
    std::set<std::string> keys;
    std::set<std::string> fields;
    for (const ParamSpec& s : paramTable().options) {
        const std::string key(s.name);
        EXPECT_EQ(key.rfind("ATLAS_", 0), 0u) << key;
        EXPECT_GT(std::string(s.doc).size(), 10u) << key;
        EXPECT_FALSE(s.accepted.empty()) << key;
        EXPECT_TRUE(keys.insert(key).second) << "duplicate " << key;
        EXPECT_TRUE(fields.insert(std::string(s.field)).second) << "duplicate field " << s.field;
        EXPECT_EQ(findParam(key), &s);
        EXPECT_TRUE(options::isKnownEnvName(key)) << key;
    }
    for (const char* key : {"ATLAS_SOCKET_IFNAME", "ATLAS_NSTREAMS", "ATLAS_CHUNK_BYTES",
                            "ATLAS_IO", "ATLAS_AUTH_KEY_FILE", "ATLAS_DEBUG_STDERR"}) {
        EXPECT_EQ(keys.count(key), 1u) << key;
    }
    EXPECT_EQ(findParam("ATLAS_NO_SUCH_THING"), nullptr);
}

TEST(ParamsTest, EmptyValueCountsAsUnset) {
    ParamsParse r = parseWith({{"ATLAS_NSTREAMS", ""}, {"ATLAS_IO", ""}});
    EXPECT_TRUE(r.status().isOk());
    EXPECT_EQ(r.params.nstreams, 0u);
    EXPECT_EQ(r.params.io, transport::IoBackend::kAuto);
}

TEST(ParamsTest, UnsignedValues) {
    ParamsParse r = parseWith(
        {{"ATLAS_NSTREAMS", "8"}, {"ATLAS_ENGINE_THREADS", "16"}, {"ATLAS_TIMEOUT_MS", "100"}});
    ASSERT_TRUE(r.status().isOk()) << r.status().toString();
    EXPECT_EQ(r.params.nstreams, 8u);
    EXPECT_EQ(r.params.engine_threads, 16u);
    EXPECT_EQ(r.params.timeout_ms, 100u);

    expectRejected("ATLAS_NSTREAMS", "-1", "an unsigned integer in 0..64");
    expectRejected("ATLAS_NSTREAMS", "+1", "0..64");
    expectRejected("ATLAS_NSTREAMS", "abc", "0..64");
    expectRejected("ATLAS_NSTREAMS", " 8", "0..64");
    expectRejected("ATLAS_NSTREAMS", "8 ", "0..64");
    expectRejected("ATLAS_NSTREAMS", "0x10", "0..64");
    expectRejected("ATLAS_NSTREAMS", "18446744073709551616", "0..64");  // 2^64 overflows
    expectRejected("ATLAS_ENGINE_THREADS", "0", "1..16");
    expectRejected("ATLAS_ENGINE_THREADS", "17", "1..16");
    expectRejected("ATLAS_TIMEOUT_MS", "99", "100..3600000");
    expectRejected("ATLAS_TIMEOUT_MS", "3600001", "100..3600000");
    expectRejected("ATLAS_HANDOFF_LEAD_US", "1000001", "0..1000000");
    EXPECT_NE(errorFor("ATLAS_NSTREAMS", "65").find("out of range"), std::string::npos);
    EXPECT_NE(errorFor("ATLAS_NSTREAMS", "x").find("is invalid"), std::string::npos);
}

TEST(ParamsTest, SizeValues) {
    ParamsParse r = parseWith(
        {{"ATLAS_CHUNK_BYTES", "64K"}, {"ATLAS_INLINE_BYTES", "0"}, {"ATLAS_SOCKBUF_BYTES", "1G"}});
    ASSERT_TRUE(r.status().isOk()) << r.status().toString();
    EXPECT_EQ(r.params.chunk_bytes, 64 * kKiB);
    EXPECT_EQ(r.params.inline_bytes, 0u);
    EXPECT_EQ(r.params.sockbuf_bytes, kGiB);

    using options::parseSize;
    EXPECT_EQ(parseSize("4096"), 4096u);
    EXPECT_EQ(parseSize("2m"), 2 * kMiB);
    EXPECT_EQ(parseSize("3k"), 3 * kKiB);
    EXPECT_EQ(parseSize("1g"), kGiB);
    EXPECT_EQ(parseSize("64KiB"), 64 * kKiB);  // atlas-net-perf's spellings, binary as well
    EXPECT_EQ(parseSize("64kb"), 64 * kKiB);
    EXPECT_EQ(parseSize("512B"), 512u);
    EXPECT_FALSE(parseSize("K"));
    EXPECT_FALSE(parseSize("B"));
    EXPECT_FALSE(parseSize("1KK"));
    EXPECT_FALSE(parseSize("-4K"));
    EXPECT_FALSE(parseSize("1.5M"));
    EXPECT_FALSE(parseSize("17179869184G"));  // 2^34 GiB overflows uint64

    expectRejected("ATLAS_CHUNK_BYTES", "3K", "a size in 4K..64M");
    expectRejected("ATLAS_CHUNK_BYTES", "1G", "4K..64M");
    expectRejected("ATLAS_CHUNK_BYTES", "12Q", "4K..64M");
    expectRejected("ATLAS_INLINE_BYTES", "65537", "0..64K");
    expectRejected("ATLAS_SOCKBUF_BYTES", "2G", "0..1G");
}

TEST(ParamsTest, BoolValues) {
    for (const char* yes : {"true", "TRUE", "1", "yes", "Yes"}) {
        ParamsParse r = parseWith({{"ATLAS_ABORT_ON_ERROR", yes}});
        ASSERT_TRUE(r.status().isOk()) << yes;
        EXPECT_TRUE(r.params.abort_on_error) << yes;
    }
    for (const char* no : {"false", "False", "0", "no", "NO"}) {
        ParamsParse r = parseWith({{"ATLAS_DEBUG_STDERR", no}});
        ASSERT_TRUE(r.status().isOk()) << no;
        EXPECT_FALSE(r.params.debug_stderr) << no;
    }
    expectRejected("ATLAS_ABORT_ON_ERROR", "2", "one of true|false|1|0|yes|no");
    expectRejected("ATLAS_DEBUG_STDERR", "on", "true|false|1|0|yes|no");
}

TEST(ParamsTest, EnumValues) {
    ParamsParse r = parseWith(
        {{"ATLAS_IO", "EPOLL"}, {"ATLAS_STRIPE", "even"}, {"ATLAS_SOCKET_FAMILY", "AF_INET6"}});
    ASSERT_TRUE(r.status().isOk()) << r.status().toString();
    EXPECT_EQ(r.params.io, transport::IoBackend::kEpoll);
    EXPECT_EQ(r.params.stripe, transport::StripeMode::kEven);
    EXPECT_EQ(r.params.socket_family, AddressFamily::kInet6);
    EXPECT_EQ(parseWith({{"ATLAS_IO", "uring"}}).params.io, transport::IoBackend::kUring);
    EXPECT_EQ(parseWith({{"ATLAS_SOCKET_FAMILY", "af_inet"}}).params.socket_family,
              AddressFamily::kInet);

    expectRejected("ATLAS_IO", "iouring", "one of auto|uring|epoll");
    expectRejected("ATLAS_STRIPE", "random", "one of load|even");
    expectRejected("ATLAS_SOCKET_FAMILY", "inet", "one of any|AF_INET|AF_INET6");
}

TEST(ParamsTest, NumberValues) {
    EXPECT_DOUBLE_EQ(parseWith({{"ATLAS_LINK_GBPS", "2.5"}}).params.link_gbps, 2.5);
    EXPECT_DOUBLE_EQ(parseWith({{"ATLAS_LINK_GBPS", "1e2"}}).params.link_gbps, 100.0);
    for (const char* bad : {"nan", "inf", "1e400", "0x10", "2.5G", ".", "", "1e", "+", " 1",
                            "1."
                            "5.5"}) {
        EXPECT_FALSE(options::parseDouble(bad)) << bad;
    }
    expectRejected("ATLAS_LINK_GBPS", "-1", "a number in 0..100000");
    expectRejected("ATLAS_LINK_GBPS", "fast", "0..100000");
}

TEST(ParamsTest, SignedValues) {
    EXPECT_EQ(parseWith({{"ATLAS_LOCAL_RANK", "3"}}).params.local_rank, 3);
    EXPECT_EQ(parseWith({{"ATLAS_LOCAL_RANK", "-1"}}).params.local_rank, -1);
    expectRejected("ATLAS_LOCAL_RANK", "-2", "an integer in -1..1023");
    expectRejected("ATLAS_LOCAL_RANK", "--1", "-1..1023");
    expectRejected("ATLAS_LOCAL_RANK", "9223372036854775808", "-1..1023");
    expectRejected("ATLAS_LOCAL_RANK", "1 ", "-1..1023");
}

TEST(ParamsTest, StringValuesAreTakenVerbatim) {
    ParamsParse r = parseWith({{"ATLAS_SOCKET_IFNAME", "^=eth0,docker"}});
    ASSERT_TRUE(r.status().isOk());
    EXPECT_EQ(r.params.socket_ifname, "^=eth0,docker");
}

TEST(ParamsTest, AllErrorsAreReportedTogether) {
    ParamsParse r = parseWith({{"ATLAS_NSTREAMS", "many"}, {"ATLAS_IO", "fast"}});
    ASSERT_EQ(r.errors.size(), 2u);
    Status st = r.status();
    EXPECT_EQ(st.code(), Code::kInvalidUsage);
    EXPECT_NE(st.message().find("ATLAS_NSTREAMS='many'"), std::string::npos);
    EXPECT_NE(st.message().find("ATLAS_IO='fast'"), std::string::npos);
    // Invalid values leave the default in place.
    EXPECT_EQ(r.params.nstreams, 0u);
}

TEST(ParamsTest, LongValuesAreTruncatedInMessages) {
    std::string huge(500, 'x');
    std::string msg = errorFor("ATLAS_IO", huge);
    EXPECT_NE(msg.find("..."), std::string::npos);
    EXPECT_LT(msg.size(), 200u);
}

TEST(ParamsTest, NstreamsMayNotExceedMaxStreams) {
    ParamsParse r = parseWith({{"ATLAS_NSTREAMS", "32"}, {"ATLAS_MAX_STREAMS", "8"}});
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_NE(r.errors[0].find("ATLAS_NSTREAMS=32 exceeds ATLAS_MAX_STREAMS=8"), std::string::npos);
    EXPECT_TRUE(parseWith({{"ATLAS_NSTREAMS", "8"}, {"ATLAS_MAX_STREAMS", "8"}}).errors.empty());
}

TEST(ParamsTest, CongestionControlIsANameAutoOrSystem) {
    // Default: every stream asks for bbr, gated or not (docs/env.md "ATLAS_TCP_CC" says why).
    EXPECT_EQ(makeTransportConfig(parseWith({}).params, 0).congestion_control, "bbr");
    EXPECT_EQ(makeTransportConfig(parseWith({}).params, 0, true).congestion_control, "bbr");
    EXPECT_TRUE(makeTransportConfig(parseWith({}).params, 0, true).congestion_control_is_default);
    // auto: atlas_rate first (the told-rate sender, docs/tcp-cc.md) where WAN flows are
    // gated, then bbr when the kernel lacks it; bbr where they are not.
    const Params automatic = parseWith({{"ATLAS_TCP_CC", "auto"}}).params;
    EXPECT_EQ(makeTransportConfig(automatic, 0, true).congestion_control, "atlas_rate,bbr");
    EXPECT_EQ(makeTransportConfig(automatic, 0, false).congestion_control, "bbr");
    ParamsParse r = parseWith({{"ATLAS_TCP_CC", "cubic"}});
    ASSERT_TRUE(r.errors.empty());
    EXPECT_EQ(makeTransportConfig(r.params, 0).congestion_control, "cubic");
    // system: the transport sets none, so the kernel's default applies.
    r = parseWith({{"ATLAS_TCP_CC", "system"}});
    ASSERT_TRUE(r.errors.empty());
    EXPECT_EQ(makeTransportConfig(r.params, 0).congestion_control, "");
    r = parseWith({{"ATLAS_TCP_CC", "atlas_rate,cubic"}});
    ASSERT_TRUE(r.errors.empty()) << "a list, most wanted first";
    EXPECT_EQ(makeTransportConfig(r.params, 0).congestion_control, "atlas_rate,cubic");
    for (const char* bad : {"BBR", "bbr;reboot", "a_name_of_16char", "bbr ", ",bbr", "bbr,",
                            "bbr,,cubic"}) {
        r = parseWith({{"ATLAS_TCP_CC", bad}});
        ASSERT_EQ(r.errors.size(), 1u) << bad;
        EXPECT_NE(r.errors[0].find("ATLAS_TCP_CC"), std::string::npos) << r.errors[0];
        EXPECT_NE(r.errors[0].find("system"), std::string::npos) << r.errors[0];
    }
    EXPECT_TRUE(parseWith({{"ATLAS_TCP_CC", "a_name_of_15chr"}}).errors.empty());
}

TEST(ParamsTest, FaultPlanIsRefusedOutsideTestModeAndParsedInIt) {
    ParamsParse r = parseWith({{"ATLAS_FAULTS", "reset:stream=1,after=1M"}});
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_NE(r.errors[0].find("ATLAS_TEST_MODE=1"), std::string::npos) << r.errors[0];
    EXPECT_TRUE(r.params.resolved_faults.empty());
    r = parseWith({{"ATLAS_FAULTS", "reset:stream=1,after=1M;drop:ms=500"},
                   {"ATLAS_TEST_MODE", "1"}});
    ASSERT_TRUE(r.status().isOk()) << r.status().toString();
    ASSERT_EQ(r.params.resolved_faults.size(), 2u);
    EXPECT_EQ(makeTransportConfig(r.params, 0).faults.size(), 2u);
    r = parseWith({{"ATLAS_FAULTS", "reset:stream=1,after=12Q"}, {"ATLAS_TEST_MODE", "1"}});
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_NE(r.errors[0].find("ATLAS_FAULTS"), std::string::npos) << r.errors[0];
    EXPECT_NE(r.errors[0].find("after"), std::string::npos) << r.errors[0];
}

TEST(ParamsTest, AuthKeyDirect) {
    ParamsParse r = parseWith({{"ATLAS_AUTH_KEY", "s3cret"}});
    ASSERT_TRUE(r.status().isOk());
    EXPECT_EQ(r.params.resolved_auth_key, "s3cret");
    // The key itself never appears in logged values.
    std::vector<std::string> lines = describeParams(r.params, false);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0], "ATLAS_AUTH_KEY=<set, 6 bytes>");
}

TEST(ParamsTest, AuthKeyFile) {
    TempDir dir;
    std::string crlf = dir.write("crlf.key", "topsecret\r\n");
    std::string plain = dir.write("plain.key", "k2");
    std::string empty = dir.write("empty.key", "\n");

    ParamsParse r = parseWith({{"ATLAS_AUTH_KEY_FILE", crlf}});
    ASSERT_TRUE(r.status().isOk()) << r.status().toString();
    EXPECT_EQ(r.params.resolved_auth_key, "topsecret");
    EXPECT_EQ(parseWith({{"ATLAS_AUTH_KEY_FILE", plain}}).params.resolved_auth_key, "k2");

    std::string msg = errorFor("ATLAS_AUTH_KEY_FILE", empty);
    EXPECT_NE(msg.find("ATLAS_AUTH_KEY_FILE='" + empty + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("empty"), std::string::npos) << msg;

    std::string missing = (dir.path() / "nope.key").string();
    msg = errorFor("ATLAS_AUTH_KEY_FILE", missing);
    EXPECT_NE(msg.find("'" + missing + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;

    ParamsParse both = parseWith({{"ATLAS_AUTH_KEY", "a"}, {"ATLAS_AUTH_KEY_FILE", plain}});
    ASSERT_EQ(both.errors.size(), 1u);
    EXPECT_NE(both.errors[0].find("ATLAS_AUTH_KEY and ATLAS_AUTH_KEY_FILE are both set"),
              std::string::npos);
}

TEST(ParamsTest, DescribeListsNonDefaultsOrEverything) {
    ParamsParse r = parseWith({{"ATLAS_NSTREAMS", "4"},
                               {"ATLAS_CHUNK_BYTES", "1048576"},
                               {"ATLAS_IO", "epoll"},
                               {"ATLAS_TIMEOUT_MS", "30000"}});
    ASSERT_TRUE(r.status().isOk());
    std::vector<std::string> lines = describeParams(r.params, false);
    // ATLAS_TIMEOUT_MS was set to its default, so it is not "non-default".
    std::vector<std::string> expected = {"ATLAS_NSTREAMS=4", "ATLAS_CHUNK_BYTES=1M",
                                         "ATLAS_IO=epoll"};
    EXPECT_EQ(lines, expected);
    std::vector<std::string> all = describeParams(r.params, true);
    EXPECT_EQ(all.size(), paramTable().options.size());
    EXPECT_EQ(all.front(), "ATLAS_SOCKET_IFNAME=(unset)");
}

TEST(ParamsTest, FormatSize) {
    using options::formatSize;
    EXPECT_EQ(formatSize(0), "0");
    EXPECT_EQ(formatSize(1000), "1000");
    EXPECT_EQ(formatSize(4096), "4K");
    EXPECT_EQ(formatSize(512 * kKiB), "512K");
    EXPECT_EQ(formatSize(3 * kMiB), "3M");
    EXPECT_EQ(formatSize(2 * kGiB), "2G");
    EXPECT_EQ(formatSize(kMiB + 1), std::to_string(kMiB + 1));
}

TEST(ParamsTest, TransportConfigMapping) {
    ParamsParse r = parseWith({{"ATLAS_ENGINE_THREADS", "3"},
                               {"ATLAS_IO", "epoll"},
                               {"ATLAS_NSTREAMS", "12"},
                               {"ATLAS_MAX_STREAMS", "32"},
                               {"ATLAS_SOCKBUF_BYTES", "8M"},
                               {"ATLAS_CHUNK_BYTES", "256K"},
                               {"ATLAS_INLINE_BYTES", "1K"},
                               {"ATLAS_STRIPE", "even"},
                               {"ATLAS_TIMEOUT_MS", "5000"},
                               {"ATLAS_RESEND_BYTES", "256M"},
                               {"ATLAS_AUTH_KEY", "k"}});
    ASSERT_TRUE(r.status().isOk()) << r.status().toString();
    transport::TransportConfig c = makeTransportConfig(r.params, 25000);
    EXPECT_EQ(c.engine_threads, 3);
    EXPECT_EQ(c.io, transport::IoBackend::kEpoll);
    EXPECT_EQ(c.nstreams, 12);
    EXPECT_EQ(c.max_streams, 32);
    EXPECT_EQ(c.sockbuf_bytes, 8 * kMiB);
    EXPECT_EQ(c.chunk_bytes, 256 * kKiB);
    EXPECT_EQ(c.inline_bytes, kKiB);
    EXPECT_EQ(c.stripe, transport::StripeMode::kEven);
    EXPECT_EQ(c.timeout_ms, 5000);
    EXPECT_EQ(c.auth_key, "k");
    EXPECT_EQ(c.resend_bytes, 256 * kMiB);
    EXPECT_TRUE(c.faults.empty());
    EXPECT_EQ(c.link_bps, 25'000'000'000ull);  // ATLAS_LINK_GBPS unset: the device speed

    Params p;
    p.link_gbps = 2.5;
    EXPECT_EQ(makeTransportConfig(p, 25000).link_bps, 2'500'000'000ull);
    EXPECT_EQ(makeTransportConfig(Params{}, 0).link_bps, 10'000'000'000ull);
}

TEST(ParamsTest, DeprecatedArbiterNameStillConnectsAndWarns) {
    // ATLAS_ARBITER meant "connect to" here and "listen on" in atlas-arbiter; the plugin's
    // name is now ATLAS_ARBITER_CONNECT, the old one still works and warns.
    ParamsParse old = parseWith({{"ATLAS_ARBITER", "10.0.0.1:7450"}});
    ASSERT_TRUE(old.status().isOk()) << old.status().toString();
    EXPECT_EQ(old.params.arbiter, "10.0.0.1:7450");
    ASSERT_EQ(old.warnings.size(), 1u);
    EXPECT_NE(old.warnings[0].find("ATLAS_ARBITER is deprecated: use ATLAS_ARBITER_CONNECT"),
              std::string::npos)
        << old.warnings[0];

    ParamsParse both =
        parseWith({{"ATLAS_ARBITER", "10.0.0.1:1"}, {"ATLAS_ARBITER_CONNECT", "10.0.0.2:2"}});
    EXPECT_EQ(both.params.arbiter, "10.0.0.2:2");
    ASSERT_EQ(both.warnings.size(), 1u);
    EXPECT_NE(both.warnings[0].find("wins"), std::string::npos) << both.warnings[0];

    ParamsParse now = parseWith({{"ATLAS_ARBITER_CONNECT", "10.0.0.2:2"}});
    EXPECT_EQ(now.params.arbiter, "10.0.0.2:2");
    EXPECT_TRUE(now.warnings.empty());
}

TEST(ParamsTest, SharedDefaultsComeFromTheScheduler) {
    // One definition each (scheduler/): the plugin, atlas-arbiter and atlas-sim agree.
    const Params p;
    EXPECT_EQ(static_cast<Nanos>(p.slot_ms) * kNsPerMs, sched::kDefaultMaxSlotNs);
    EXPECT_EQ(sched::PolicyConfig{}.max_slot_ns, sched::kDefaultMaxSlotNs);
    EXPECT_EQ(p.sharing, sched::policyKindName(sched::kDefaultSharing));
    EXPECT_EQ(static_cast<Nanos>(p.bubble_guard_us) * kNsPerUs, sched::kDefaultBubbleGuardNs);
    EXPECT_EQ(sched::BubblePredictorConfig{}.guard_ns, sched::kDefaultBubbleGuardNs);
    EXPECT_EQ(static_cast<Nanos>(p.handoff_lead_us) * kNsPerUs, sched::kDefaultHandoffLeadNs);
}

TEST(ParamsTest, UnknownAtlasVariablesWarnWithTheNearestName) {
    const char* env[] = {"PATH=/bin",
                         "ATLAS_NSTREAM=8",
                         "ATLAS_NSTREAMS=2",
                         "ATLAS_WAN_PREFIX=t1",
                         "ATLAS_COMPLETELY_NEW=1",
                         "ATLAS_NSTREAM=9",
                         "ATLAS_ARBITER=x:1",
                         nullptr};
    std::vector<std::string> w = options::unknownEnvWarnings(env);
    ASSERT_EQ(w.size(), 2u) << ::testing::PrintToString(w);
    EXPECT_NE(w[0].find("ATLAS_NSTREAM is not an Atlas variable (did you mean ATLAS_NSTREAMS?)"),
              std::string::npos)
        << w[0];
    EXPECT_NE(w[1].find("ATLAS_COMPLETELY_NEW is not an Atlas variable;"), std::string::npos)
        << w[1];
}

std::string readDoc(const std::string& rel) {
    std::ifstream in(std::string(ATLAS_SOURCE_DIR) + "/" + rel);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

TEST(ParamsTest, DocsSummaryTableIsTheRegistry) {
    EXPECT_TRUE(testing::docBlockMatches(std::string(ATLAS_SOURCE_DIR) + "/docs/env.md", "plugin",
                                         options::markdown(paramTable(), true)));
}

TEST(ParamsTest, DocsListTheOtherCataloguedVariables) {
    EXPECT_TRUE(testing::docBlockMatches(std::string(ATLAS_SOURCE_DIR) + "/docs/env.md", "others",
                                         options::otherEnvMarkdown()));
}

TEST(ParamsTest, DocsMentionEveryCataloguedVariable) {
    const std::string doc = readDoc("docs/env.md");
    ASSERT_FALSE(doc.empty()) << "docs/env.md is missing";
    for (std::string_view key : options::kKnownEnvNames) {
        // As a heading or table entry in backticks, not just a passing substring.
        EXPECT_NE(doc.find("`" + std::string(key) + "`"), std::string::npos)
            << key << " is not documented in docs/env.md";
    }
}

}  // namespace
}  // namespace atlas::plugin
