// The plugin's WAN classifier and flow classes (ATLAS_DC_MAP, ATLAS_WAN_RTT_US,
// ATLAS_FLOW_CLASS, trafficClass), the ATLAS_* wiring, and the daemon's options.
#include <gtest/gtest.h>

#include <map>

#include "arbiter/options.h"
#include "options/help.h"
#include "plugin/params.h"
#include "plugin/wan/admission.h"
#include "plugin/wan/dc_map.h"
#include "plugin/wan/flow_class.h"
#include "support/doc_blocks.h"

namespace atlas::plugin::wan {
namespace {

transport::SocketAddress addr(const std::string& host, uint16_t port = 1000) {
    auto a = transport::SocketAddress::parse(host, port);
    EXPECT_TRUE(a.isOk()) << host;
    return a.value();
}

TEST(DcMapTest, LongestPrefixWinsAndOrderIsFirstAppearance) {
    auto m = DcMap::parse("10.1.0.0/16=east, 10.2.0.0/16=west,10.1.5.0/24=edge,fd00::/8=v6");
    ASSERT_TRUE(m.isOk()) << m.status().toString();
    EXPECT_EQ(m->names(), (std::vector<std::string>{"east", "west", "edge", "v6"}));
    EXPECT_EQ(m->lookup(addr("10.1.2.3")), 0u);
    EXPECT_EQ(m->lookup(addr("10.1.5.9")), 2u);
    EXPECT_EQ(m->lookup(addr("10.2.0.1")), 1u);
    EXPECT_EQ(m->lookup(addr("::ffff:10.2.0.1")), 1u) << "v4-mapped v6 matches v4 prefixes";
    EXPECT_EQ(m->lookup(addr("fd12::1")), 3u);
    EXPECT_FALSE(m->lookup(addr("10.3.0.1")).has_value());
    EXPECT_TRUE(DcMap::parse("").value().empty());
    EXPECT_TRUE(DcMap::parse(" , ").value().empty());
}

TEST(DcMapTest, RejectsTyposWithTheEntryInTheMessage) {
    for (const char* bad :
         {"10.1.0.0=east", "10.1.0.0/16", "10.1.0.0/33=a", "10.1.2.3/16=a", "10.1.0.0/16=bad name",
          "nothost/8=a", "10.1.0.0/16=a,10.1.0.0/16=b", "10.1.0.0/16=waytoolongdcname1"}) {
        auto m = DcMap::parse(bad);
        ASSERT_FALSE(m.isOk()) << bad;
        EXPECT_EQ(m.status().code(), Code::kInvalidUsage);
        EXPECT_NE(m.status().message().find("ATLAS_DC_MAP"), std::string::npos);
    }
}

transport::CommInfo info(const std::string& local, const std::string& peer, Nanos rtt) {
    transport::CommInfo i;
    i.local = addr(local);
    i.peer = addr(peer, 2000);
    i.rtt_ns = rtt;
    return i;
}

TEST(ClassifyTest, MapDecidesWhenSetElseRtt) {
    auto m = DcMap::parse("10.1.0.0/16=east,10.2.0.0/16=west").value();
    auto v = classify(m, 2 * kNsPerMs, info("10.1.0.1", "10.2.0.1", 0));
    EXPECT_TRUE(v.wan);
    EXPECT_EQ(v.link, "east->west");
    EXPECT_FALSE(classify(m, 2 * kNsPerMs, info("10.1.0.1", "10.1.9.9", 90 * kNsPerMs)).wan)
        << "same DC is never WAN, whatever the RTT";
    EXPECT_FALSE(classify(m, 2 * kNsPerMs, info("10.1.0.1", "10.7.0.1", 90 * kNsPerMs)).wan)
        << "outside the map is not WAN";
    DcMap none;
    auto r = classify(none, 2 * kNsPerMs, info("10.1.0.1", "10.2.3.4", 50 * kNsPerMs));
    EXPECT_TRUE(r.wan);
    EXPECT_EQ(r.link, "wan->10.2.0.0/16");
    EXPECT_TRUE(arbiter::validLinkName(r.link));
    EXPECT_FALSE(classify(none, 2 * kNsPerMs, info("10.1.0.1", "10.2.3.4", kNsPerMs)).wan);
    EXPECT_TRUE(classify(none, 0, info("10.1.0.1", "10.2.3.4", 0)).wan)
        << "0: every comm is WAN (loopback handshakes measure 0)";
}

TEST(FlowClassTest, TrafficClassEncodingRoundTrips) {
    for (arbiter::WireClass c : {arbiter::WireClass{0, 0, 0}, arbiter::WireClass{3, 1, 1},
                                 arbiter::WireClass{kMaxPipeline, kMaxStage, 1}}) {
        auto d = decodeTrafficClass(encodeTrafficClass(c));
        ASSERT_TRUE(d.has_value());
        EXPECT_EQ(*d, c);
    }
    EXPECT_FALSE(decodeTrafficClass(-1).has_value());
    EXPECT_EQ(encodeTrafficClass({2, 3, 1}), 2 * 256 + 3 * 2 + 1);
}

TEST(FlowClassTest, ParseAndRules) {
    auto s = parseFlowClass("7:2:bwd");
    ASSERT_TRUE(s.isOk());
    ASSERT_TRUE(s.value().has_value());
    EXPECT_EQ(s.value()->pipeline, 7);
    EXPECT_EQ(s.value()->stage, 2);
    EXPECT_EQ(s.value()->direction, 1);
    EXPECT_FALSE(parseFlowClass("7:2").value()->direction.has_value());
    EXPECT_FALSE(parseFlowClass("").value().has_value());
    for (const char* bad : {"7", "a:1", "1:128", "1:2:up", "-1:0", "1:2:fwd:x"}) {
        EXPECT_FALSE(parseFlowClass(bad).isOk()) << bad;
    }
    const auto peer = addr("10.2.0.1");
    ClassInputs in;
    in.peer = &peer;
    in.local_dc = 1;
    in.peer_dc = 0;
    const char* rule = "";
    // Automatic: stage = local DC index, backward towards an earlier DC.
    auto a = deriveClass(in, &rule);
    EXPECT_STREQ(rule, "auto");
    EXPECT_EQ(a.stage, 1);
    EXPECT_EQ(a.direction, 1);
    auto a2 = deriveClass(in, &rule);
    EXPECT_EQ(a.pipeline, a2.pipeline) << "stable";
    in.comm_id = 0xabcdef;
    EXPECT_NE(deriveClass(in, &rule).pipeline, a.pipeline) << "commId decides when known";
    // ATLAS_FLOW_CLASS without direction: direction still derived.
    in.env = FlowClassSpec{4, 0, std::nullopt};
    auto e = deriveClass(in, &rule);
    EXPECT_STREQ(rule, "ATLAS_FLOW_CLASS");
    EXPECT_EQ(e, (arbiter::WireClass{4, 0, 1}));
    // trafficClass beats everything.
    in.traffic_class = encodeTrafficClass({9, 5, 0});
    EXPECT_EQ(deriveClass(in, &rule), (arbiter::WireClass{9, 5, 0}));
    EXPECT_STREQ(rule, "trafficClass");
}

TEST(WanConfigTest, RegistryValuesReachTheConfig) {
    std::map<std::string, std::string> env = {
        {"ATLAS_DC_MAP", "10.1.0.0/16=a,10.2.0.0/16=b"},
        {"ATLAS_SHARING", "workload"},
        {"ATLAS_ARBITER_CONNECT", "10.1.0.1:7450"},
        {"ATLAS_SLOT_MS", "40"},
        {"ATLAS_FLOW_CLASS", "1:0"},
        {"ATLAS_NODE_SHM", "test-x"},
        {"ATLAS_HANDOFF_LEAD_US", "3500"},
    };
    auto parsed = parseParams([&](const char* k) -> const char* {
        auto it = env.find(k);
        return it == env.end() ? nullptr : it->second.c_str();
    });
    ASSERT_TRUE(parsed.status().isOk()) << parsed.status().toString();
    auto c = configFromParams(parsed.params);
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_EQ(c->sharing, Sharing::kWorkload);
    EXPECT_EQ(c->arbiter_host, "10.1.0.1");
    EXPECT_EQ(c->arbiter_port, 7450);
    EXPECT_EQ(c->slot_ns, 40 * kNsPerMs);
    EXPECT_EQ(c->dc_map.names().size(), 2u);
    EXPECT_EQ(c->shm_prefix, "test-x");
    EXPECT_TRUE(c->measure_rate);  // ATLAS_LINK_RATE=measured by default
    EXPECT_EQ(c->handoff_lead_ns, 3500 * kNsPerUs);
    ASSERT_TRUE(c->flow_class.has_value());
    EXPECT_EQ(c->flow_class->pipeline, 1);

    const std::vector<std::pair<std::string, std::string>> bad_values = {
        {"ATLAS_SHARING", "spatial"},
        {"ATLAS_LINK_RATE", "guessed"},
        {"ATLAS_ARBITER_CONNECT", "nohostport"},
        {"ATLAS_ARBITER_CONNECT", "h:0"},
        {"ATLAS_NODE_SHM", "../x"},
        {"ATLAS_DC_MAP", "x"}};
    for (const auto& [k, v] : bad_values) {
        auto e2 = env;
        e2[k] = v;
        auto p2 = parseParams([&](const char* key) -> const char* {
            auto it = e2.find(key);
            return it == e2.end() ? nullptr : it->second.c_str();
        });
        ASSERT_TRUE(p2.status().isOk());
        auto bad = configFromParams(p2.params);
        ASSERT_FALSE(bad.isOk()) << k << "=" << v;
        EXPECT_NE(bad.status().message().find(k), std::string::npos) << bad.status().message();
    }
}

TEST(WanConfigTest, WanFlowsAreGatedByAnArbiterOrASharingOtherThanFair) {
    WanConfig c;
    EXPECT_FALSE(c.gatesWanFlows()) << "fair, node-local: no gating";
    c.sharing = Sharing::kTemporal;
    EXPECT_TRUE(c.gatesWanFlows());
    c.sharing = Sharing::kWorkload;
    EXPECT_TRUE(c.gatesWanFlows());
    c.sharing = Sharing::kFair;
    c.arbiter_host = "10.1.0.1";
    EXPECT_TRUE(c.gatesWanFlows()) << "an arbiter's policy decides";
}

TEST(DaemonOptionsTest, FlagsBeatEnvironmentAndValuesAreChecked) {
    std::map<std::string, std::string> env = {{"ATLAS_SHARING", "workload"},
                                              {"ATLAS_ARBITER_LISTEN", "127.0.0.1:9000"}};
    auto envfn = [&](const char* k) -> const char* {
        auto it = env.find(k);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    auto o = arbiter::parseOptions({}, envfn);
    ASSERT_TRUE(o.isOk()) << o.status().toString();
    EXPECT_EQ(o->server.core.policy, sched::PolicyKind::kWorkload);
    EXPECT_EQ(o->server.port, 9000);
    EXPECT_EQ(o->server.core.policy_config.max_slot_ns, 250 * kNsPerMs);
    auto o2 = arbiter::parseOptions({"--sharing", "fair", "--listen", "[::1]:0", "--slot-ms", "0",
                                     "--lease-ms", "100", "--max-wait-ms", "40"},
                                    envfn);
    ASSERT_TRUE(o2.isOk()) << o2.status().toString();
    EXPECT_EQ(o2->server.core.policy, sched::PolicyKind::kFair);
    EXPECT_EQ(o2->server.host, "::1");
    EXPECT_EQ(o2->server.core.policy_config.max_slot_ns, 0);
    EXPECT_EQ(o2->server.heartbeat_ns, 20 * kNsPerMs);
    EXPECT_EQ(o2->server.core.policy_config.max_wait_ns, 40 * kNsPerMs);
    for (std::vector<std::string> bad :
         std::vector<std::vector<std::string>>{{"--sharing", "spatial"},
                                               {"--lease-ms", "5"},
                                               {"--listen", "x"},
                                               {"--heartbeat-ms", "900"},
                                               {"--bogus"},
                                               {"--slot-ms"},
                                               {"--max-wait-ms", "-1"}}) {
        EXPECT_FALSE(arbiter::parseOptions(bad, envfn).isOk()) << bad[0];
    }
}

TEST(DaemonOptionsTest, DefaultsAreTheSchedulersAndTheOldListenNameWarns) {
    auto none = [](const char*) -> const char* { return nullptr; };
    auto d = arbiter::parseOptions({}, none);
    ASSERT_TRUE(d.isOk()) << d.status().toString();
    EXPECT_EQ(d->server.core.policy, sched::kDefaultSharing);
    EXPECT_EQ(d->server.core.policy_config.max_slot_ns, sched::kDefaultMaxSlotNs);
    EXPECT_EQ(d->server.port, 7450);

    // ATLAS_ARBITER is the plugins' connect address; the daemon still reads it as its listen
    // address, with a warning, unless ATLAS_ARBITER_LISTEN is set.
    std::map<std::string, std::string> env = {{"ATLAS_ARBITER", "127.0.0.1:9001"}};
    auto envfn = [&](const char* k) -> const char* {
        auto it = env.find(k);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    std::vector<std::string> warnings;
    auto old = arbiter::parseOptions({}, envfn, &warnings);
    ASSERT_TRUE(old.isOk()) << old.status().toString();
    EXPECT_EQ(old->server.port, 9001);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("ATLAS_ARBITER is deprecated: use ATLAS_ARBITER_LISTEN"),
              std::string::npos);
    env["ATLAS_ARBITER_LISTEN"] = "127.0.0.1:9002";
    auto both = arbiter::parseOptions({}, envfn, &warnings);
    ASSERT_TRUE(both.isOk());
    EXPECT_EQ(both->server.port, 9002);
    // The flag beats both.
    auto flag = arbiter::parseOptions({"--listen=127.0.0.1:9003"}, envfn);
    ASSERT_TRUE(flag.isOk());
    EXPECT_EQ(flag->server.port, 9003);
}

TEST(DaemonOptionsTest, EveryProblemIsReportedAtOnce) {
    auto none = [](const char*) -> const char* { return nullptr; };
    auto r =
        arbiter::parseOptions({"--slot-ms", "2.5", "--lease-ms", "5", "--sharng", "fair"}, none);
    ASSERT_FALSE(r.isOk());
    const std::string m = r.status().message();
    EXPECT_NE(m.find("--slot-ms='2.5' is invalid: expected whole milliseconds in 0..3600000"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("--lease-ms='5' is out of range"), std::string::npos) << m;
    EXPECT_NE(m.find("unknown option '--sharng' (did you mean --sharing?)"), std::string::npos)
        << m;
}

TEST(DaemonOptionsTest, DocsFlagTableIsTheRegistry) {
    EXPECT_TRUE(atlas::testing::docBlockMatches(
        std::string(ATLAS_SOURCE_DIR) + "/docs/arbitration.md", "atlas-arbiter",
        options::markdown(arbiter::optionTable())));
}

}  // namespace
}  // namespace atlas::plugin::wan
