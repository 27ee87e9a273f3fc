// Interface selection (ATLAS_SOCKET_IFNAME syntax, default rule, families, limits) and the
// sysfs-derived properties, on fake interface lists and fake sysfs trees.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "plugin/devices.h"
#include "plugin_test_util.h"

namespace atlas::plugin {
namespace {

using testutil::FakeInterfaceSource;
using testutil::kLoopback;
using testutil::kUp;
using testutil::TempDir;

std::vector<std::string> names(const std::vector<Device>& devs) {
    std::vector<std::string> out;
    for (const Device& d : devs) {
        out.push_back(d.name);
    }
    return out;
}

std::vector<std::string> select(const FakeInterfaceSource& src, const std::string& spec,
                                AddressFamily family = AddressFamily::kAny) {
    DiscoveryOptions opts;
    opts.ifname_spec = spec;
    opts.family = family;
    opts.sysfs_net_root = "/nonexistent-atlas-sysfs";
    auto devs = discoverDevices(opts, src);
    EXPECT_TRUE(devs.isOk()) << devs.status().toString();
    return devs.isOk() ? names(devs.value()) : std::vector<std::string>{};
}

using Names = std::vector<std::string>;

TEST(IfnameMatcherTest, PrefixList) {
    IfnameMatcher m = IfnameMatcher::parse("eth,ib");
    EXPECT_FALSE(m.empty());
    EXPECT_FALSE(m.exclude());
    EXPECT_FALSE(m.exact());
    EXPECT_TRUE(m.matches("eth0"));
    EXPECT_TRUE(m.matches("eth"));
    EXPECT_TRUE(m.matches("ib1"));
    EXPECT_FALSE(m.matches("ens3"));
    EXPECT_FALSE(m.matches("et"));
}

TEST(IfnameMatcherTest, Exclude) {
    IfnameMatcher m = IfnameMatcher::parse("^docker,lo");
    EXPECT_TRUE(m.exclude());
    EXPECT_FALSE(m.matches("docker0"));
    EXPECT_FALSE(m.matches("lo"));
    EXPECT_TRUE(m.matches("eth0"));
}

TEST(IfnameMatcherTest, Exact) {
    IfnameMatcher m = IfnameMatcher::parse("=eth0,ib0");
    EXPECT_TRUE(m.exact());
    EXPECT_TRUE(m.matches("eth0"));
    EXPECT_TRUE(m.matches("ib0"));
    EXPECT_FALSE(m.matches("eth0.100"));
    EXPECT_FALSE(m.matches("eth"));
}

TEST(IfnameMatcherTest, ExcludeExact) {
    IfnameMatcher m = IfnameMatcher::parse("^=eth0");
    EXPECT_TRUE(m.exclude());
    EXPECT_TRUE(m.exact());
    EXPECT_FALSE(m.matches("eth0"));
    EXPECT_TRUE(m.matches("eth0.100"));
    EXPECT_TRUE(m.matches("eth1"));
    // '=' before '^' is not the combined form: "^eth0" becomes a literal exact name.
    IfnameMatcher literal = IfnameMatcher::parse("=^eth0");
    EXPECT_FALSE(literal.exclude());
    EXPECT_TRUE(literal.matches("^eth0"));
    EXPECT_FALSE(literal.matches("eth0"));
}

TEST(IfnameMatcherTest, EmptySpecsAndEmptyTokens) {
    for (const char* spec : {"", "^", "=", "^=", ",", ",,"}) {
        EXPECT_TRUE(IfnameMatcher::parse(spec).empty()) << "'" << spec << "'";
    }
    IfnameMatcher m = IfnameMatcher::parse("eth,,ib,");
    EXPECT_EQ(m.names(), (Names{"eth", "ib"}));
}

FakeInterfaceSource typicalHost() {
    FakeInterfaceSource src;
    src.add("lo", "127.0.0.1", kLoopback)
        .add("eth0", "10.0.0.2")
        .add("docker0", "172.17.0.1")
        .add("virbr0", "192.168.122.1")
        .add("eth1", "10.0.1.2", IFF_UP)  // up but no carrier
        .add("ens3", "fe80::1")           // only a link-local address
        .add("ens4", "fe80::4")
        .add("ens4", "2001:db8::4")
        .add("lo", "::1", kLoopback);
    return src;
}

TEST(DiscoverDevicesTest, DefaultRuleSkipsLoopbackVirtualDownAndLinkLocal) {
    EXPECT_EQ(select(typicalHost(), ""), (Names{"eth0", "ens4"}));
}

TEST(DiscoverDevicesTest, FirstEligibleAddressWins) {
    FakeInterfaceSource src;
    src.add("eth0", "fe80::9")
        .add("eth0", "10.0.0.2")
        .add("eth0", "10.0.0.3")
        .add("eth0", "fd00::2");
    DiscoveryOptions opts;
    auto devs = discoverDevices(opts, src);
    ASSERT_TRUE(devs.isOk());
    ASSERT_EQ(devs->size(), 1u);
    EXPECT_EQ(devs->front().addressString(), "10.0.0.2");

    opts.family = AddressFamily::kInet6;
    devs = discoverDevices(opts, src);
    ASSERT_TRUE(devs.isOk());
    EXPECT_EQ(devs->front().addressString(), "fd00::2");
    EXPECT_EQ(devs->front().addr.ss_family, AF_INET6);
    EXPECT_EQ(devs->front().addr_len, sizeof(sockaddr_in6));
}

TEST(DiscoverDevicesTest, FamilyFilter) {
    EXPECT_EQ(select(typicalHost(), "", AddressFamily::kInet), (Names{"eth0"}));
    EXPECT_EQ(select(typicalHost(), "", AddressFamily::kInet6), (Names{"ens4"}));
}

TEST(DiscoverDevicesTest, FallsBackToLoopback) {
    FakeInterfaceSource src;
    src.add("lo", "127.0.0.1", kLoopback)
        .add("docker0", "172.17.0.1")
        .add("virbr0", "192.168.122.1");
    EXPECT_EQ(select(src, ""), (Names{"lo"}));
    // With AF_INET6 the loopback fallback uses ::1.
    FakeInterfaceSource v6;
    v6.add("lo", "127.0.0.1", kLoopback).add("lo", "::1", kLoopback);
    DiscoveryOptions opts;
    opts.family = AddressFamily::kInet6;
    auto devs = discoverDevices(opts, v6);
    ASSERT_TRUE(devs.isOk());
    EXPECT_EQ(devs->front().addressString(), "::1");
}

TEST(DiscoverDevicesTest, ExplicitSpecs) {
    FakeInterfaceSource src = typicalHost();
    EXPECT_EQ(select(src, "lo"), (Names{"lo"}));
    EXPECT_EQ(select(src, "docker,virbr"), (Names{"docker0", "virbr0"}));
    EXPECT_EQ(select(src, "^eth,ens"), (Names{"lo", "docker0", "virbr0"}));
    EXPECT_EQ(select(src, "=eth0,ens4"), (Names{"eth0", "ens4"}));
    EXPECT_EQ(select(src, "^=eth0"), (Names{"lo", "docker0", "virbr0", "ens4"}));
    // An interface without an eligible address is never selected, even when named.
    EXPECT_EQ(select(src, "ens,eth"), (Names{"eth0", "ens4"}));
    // A spec with no names falls back to the default rule.
    EXPECT_EQ(select(src, "^"), (Names{"eth0", "ens4"}));
}

TEST(DiscoverDevicesTest, NothingSelectedIsUnavailable) {
    DiscoveryOptions opts;
    opts.ifname_spec = "ib";
    auto devs = discoverDevices(opts, typicalHost());
    ASSERT_FALSE(devs.isOk());
    EXPECT_EQ(devs.status().code(), Code::kUnavailable);
    const std::string msg = devs.status().message();
    EXPECT_NE(msg.find("ATLAS_SOCKET_IFNAME='ib'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("eth0(10.0.0.2)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("eth1(10.0.1.2, not up+running)"), std::string::npos) << msg;

    FakeInterfaceSource none;
    auto empty = discoverDevices(DiscoveryOptions{}, none);
    ASSERT_FALSE(empty.isOk());
    EXPECT_NE(empty.status().message().find("interfaces seen: none"), std::string::npos);
}

TEST(DiscoverDevicesTest, SourceErrorsPropagate) {
    FakeInterfaceSource src;
    src.failWith(Status(Code::kSystem, "getifaddrs: boom"));
    auto devs = discoverDevices(DiscoveryOptions{}, src);
    ASSERT_FALSE(devs.isOk());
    EXPECT_EQ(devs.status().code(), Code::kSystem);
    EXPECT_EQ(devs.status().message(), "getifaddrs: boom");
}

TEST(DiscoverDevicesTest, AtMostSixteenDevicesInOrder) {
    FakeInterfaceSource src;
    for (int i = 0; i < 20; ++i) {
        src.add("eth" + std::to_string(i), "10.0.0." + std::to_string(i + 1));
    }
    DiscoveryOptions opts;
    auto devs = discoverDevices(opts, src);
    ASSERT_TRUE(devs.isOk());
    ASSERT_EQ(devs->size(), static_cast<size_t>(kMaxDevices));
    for (int i = 0; i < kMaxDevices; ++i) {
        EXPECT_EQ((*devs)[i].index, i);
        EXPECT_EQ((*devs)[i].name, "eth" + std::to_string(i));
    }
}

TEST(DiscoverDevicesTest, SystemSourceListsSomething) {
    // The real getifaddrs: every container has at least a loopback interface.
    auto listed = SystemInterfaceSource::instance().list();
    ASSERT_TRUE(listed.isOk()) << listed.status().toString();
    if (listed->empty()) {
        GTEST_SKIP() << "no IPv4/IPv6 address on any interface in this environment";
    }
    for (const IfAddr& a : listed.value()) {
        EXPECT_FALSE(a.name.empty());
        EXPECT_TRUE(a.addr.ss_family == AF_INET || a.addr.ss_family == AF_INET6);
    }
}

TEST(SysfsTest, ParseSpeed) {
    EXPECT_EQ(parseSpeedMbps("25000\n"), 25000);
    EXPECT_EQ(parseSpeedMbps("100000"), 100000);
    EXPECT_EQ(parseSpeedMbps("-1\n"), kDefaultSpeedMbps);
    EXPECT_EQ(parseSpeedMbps("0"), kDefaultSpeedMbps);
    EXPECT_EQ(parseSpeedMbps(""), kDefaultSpeedMbps);
    EXPECT_EQ(parseSpeedMbps("fast"), kDefaultSpeedMbps);
    EXPECT_EQ(parseSpeedMbps("10000 Mb/s"), kDefaultSpeedMbps);
    EXPECT_EQ(parseSpeedMbps("99999999999"), INT_MAX);
}

TEST(SysfsTest, FakeTreeGivesSpeedAndPciPath) {
    TempDir root;
    const auto net = root.path() / "class/net";
    const auto pci = root.path() / "devices/pci0000:00/0000:00:03.0";
    std::filesystem::create_directories(pci);
    root.write("class/net/eth0/speed", "25000\n");
    std::filesystem::create_directory_symlink(pci, net / "eth0/device");
    root.write("class/net/eth1/speed", "-1\n");         // link without carrier
    std::filesystem::create_directories(net / "eth2");  // no speed file, no device
    root.write("class/net/eth3/speed", "100000\n");

    FakeInterfaceSource src;
    src.add("eth0", "10.0.0.2")
        .add("eth1", "10.0.1.2")
        .add("eth2", "10.0.2.2")
        .add("eth3", "10.0.3.2");
    DiscoveryOptions opts;
    opts.sysfs_net_root = net.string();
    auto devs = discoverDevices(opts, src);
    ASSERT_TRUE(devs.isOk()) << devs.status().toString();
    ASSERT_EQ(devs->size(), 4u);
    EXPECT_EQ((*devs)[0].speed_mbps, 25000);
    EXPECT_EQ((*devs)[0].pci_path, std::filesystem::canonical(pci).string());
    EXPECT_EQ((*devs)[1].speed_mbps, kDefaultSpeedMbps);
    EXPECT_EQ((*devs)[1].pci_path, "");
    EXPECT_EQ((*devs)[2].speed_mbps, kDefaultSpeedMbps);
    EXPECT_EQ((*devs)[2].pci_path, "");
    EXPECT_EQ((*devs)[3].speed_mbps, 100000);
    EXPECT_EQ(readSpeedMbps(net.string(), "missing0"), kDefaultSpeedMbps);
    EXPECT_EQ(readPciPath(net.string(), "missing0"), "");
}

}  // namespace
}  // namespace atlas::plugin
