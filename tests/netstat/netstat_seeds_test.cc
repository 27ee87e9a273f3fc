// The seed corpus of fuzz_netstat_segment (tests/fuzz/corpus/fuzz_netstat_segment/): valid
// segment images written by the real StatsWriter (comms with streams, WAN and not, released
// records, a closed segment) and corruptions of them, one per rule of parseSegment. Here the
// images are generated and each must parse, or be rejected, as its name says; the committed
// seeds are checked the same way. To regenerate the committed seeds after a format change:
//   ATLAS_NETSTAT_WRITE_SEEDS=tests/fuzz/corpus/fuzz_netstat_segment
//       build/tests/netstat/netstat_segment_test --gtest_filter='NetstatSeeds.*'
// (one command line).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "netstat/reader.h"
#include "netstat/render.h"
#include "netstat/writer.h"

namespace atlas::netstat {
namespace {

using Image = std::vector<uint64_t>;  // 8-byte aligned, as a mapping is

struct Seed {
    std::string name;
    Image image;
    size_t size = 0;  // bytes of `image` that belong to the seed
};

Image readAll(const std::string& path, size_t* size) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Image img((bytes.size() + 7) / 8 + 1);
    std::memcpy(img.data(), bytes.data(), bytes.size());
    *size = bytes.size();
    return img;
}

SegmentHeader& header(Image& img) {
    return *reinterpret_cast<SegmentHeader*>(img.data());
}

CommRecord& comm(Image& img, uint32_t index) {
    const SegmentHeader& h = header(img);
    const Layout l = expectedLayout(h.comm_capacity, h.stream_capacity);
    return *reinterpret_cast<CommRecord*>(reinterpret_cast<uint8_t*>(img.data()) + l.comms_offset +
                                          index * l.comm_stride);
}

// A segment image built by the real writer: `fill` claims and samples records; the host,
// process, pid and clocks are then fixed so the seeds do not depend on the machine.
Seed written(const std::string& name, uint32_t comms, uint32_t streams,
             const std::function<void(StatsWriter&)>& fill) {
    char tmpl[] = "/tmp/atlas-netstat-seeds.XXXXXX";
    EXPECT_NE(mkdtemp(tmpl), nullptr);
    WriterConfig wc;
    wc.dir = tmpl;
    wc.comm_capacity = comms;
    wc.stream_capacity = streams;
    wc.name = "atlas-netstat-seed";
    Seed s;
    s.name = name;
    {
        auto w = StatsWriter::create(wc);
        EXPECT_TRUE(w.isOk()) << w.status().toString();
        fill(*w.value());
        s.image = readAll(w.value()->path(), &s.size);
    }
    (void)rmdir(tmpl);
    SegmentHeader& h = header(s.image);
    std::memset(h.host, 0, sizeof(h.host));
    std::memset(h.process, 0, sizeof(h.process));
    std::strcpy(h.host, "seed-host");
    std::strcpy(h.process, "python");
    h.pid = 4242;
    h.start_mono_ns = 1'000'000'000;
    h.start_real_ns = 1'800'000'000'000'000'000;
    h.heartbeat_ns.store(2'000'000'000, std::memory_order_relaxed);
    return s;
}

CommIdentity identity(uint64_t session, Role role, int nstreams, bool wan) {
    CommIdentity id;
    id.comm_id = 0x41544c4153000001;
    id.session_id = session;
    id.role = role;
    id.nstreams = nstreams;
    id.traffic = wan ? kTrafficPipeline : kTrafficDataParallel;
    id.priority = wan ? 0 : 1;
    id.wan = wan;
    id.handshake_rtt_ns = wan ? 50'000'000 : 40'000;
    id.open_ns = 1'100'000'000;
    id.peer = "10.2.1.1:39001";
    id.local = "10.1.1.1:40112";
    id.link = wan ? "dc0->dc1" : "";
    return id;
}

// Samples every stream of `r` (stream 0 without TCP_INFO, as a control stream that failed
// to read) and counts `messages` completed messages of 1 MiB.
void sampleAll(StatsWriter& w, CommRecord* r, int nstreams, int messages) {
    StreamSink sink(&w, r);
    for (int i = 0; i <= nstreams; ++i) {
        StreamSample s;
        s.stream = i;
        s.bytes = static_cast<uint64_t>(i) << 20;
        s.tcp_info_ok = i > 0;
        s.tcp.at_ns = 1'900'000'000;
        s.tcp.state = 1;
        s.tcp.rtt_us = 50'000 + i * 100;
        s.tcp.rttvar_us = 250;
        s.tcp.min_rtt_us = 50'000;
        s.tcp.snd_cwnd = 4000 + i;
        s.tcp.snd_mss = 1448;
        s.tcp.unacked = 100;
        s.tcp.total_retrans = i;
        s.tcp.bytes_retrans = i * 1448;
        s.tcp.delivery_rate = 120'000'000;
        s.tcp.pacing_rate = 130'000'000;
        s.tcp.delivery_rate_app_limited = i == 1;
        sink.stream(s);
    }
    CommEngineCounters c;
    c.gate_waits = 3;
    c.gate_grants = 5;
    sink.engine(c, 1'950'000'000);
    for (int m = 0; m < messages; ++m) {
        StatsWriter::completed(*r, 1 << 20, 1'990'000'000);
    }
}

// Valid images, then corruptions of the two-comm one. Names say what the reader must do:
// valid_* parse (with the comm count in `comms`), bad_* are rejected.
std::vector<Seed> generate(std::map<std::string, size_t>* comms) {
    std::vector<Seed> seeds;
    seeds.push_back(written("valid_empty", 2, 3, [](StatsWriter&) {}));
    (*comms)["valid_empty"] = 0;
    seeds.push_back(written("valid_send_2streams", 2, 3, [](StatsWriter& w) {
        sampleAll(w, w.claim(identity(0x6c1f, kRoleSend, 2, false)), 2, 7);
    }));
    (*comms)["valid_send_2streams"] = 1;
    seeds.push_back(written("valid_wan_send_recv", 3, 9, [](StatsWriter& w) {
        sampleAll(w, w.claim(identity(0x77, kRoleSend, 8, true)), 8, 40);
        sampleAll(w, w.claim(identity(0x77, kRoleRecv, 8, true)), 8, 40);
        w.header().auth_failures.store(2, std::memory_order_relaxed);
    }));
    (*comms)["valid_wan_send_recv"] = 2;
    seeds.push_back(written("valid_released_and_reused", 2, 3, [](StatsWriter& w) {
        CommRecord* a = w.claim(identity(1, kRoleSend, 1, false));
        CommRecord* b = w.claim(identity(2, kRoleRecv, 2, false));
        sampleAll(w, a, 1, 1);
        w.release(a);  // odd generation: skipped
        sampleAll(w, b, 2, 2);
        w.release(b);
        sampleAll(w, w.claim(identity(3, kRoleSend, 2, true)), 2, 3);  // reuses a record
        (void)w.claim(identity(4, kRoleSend, 1, false));               // full: dropped
    }));
    (*comms)["valid_released_and_reused"] = 2;
    Seed closed = written("valid_closed", 1, 2, [](StatsWriter& w) {
        sampleAll(w, w.claim(identity(9, kRoleRecv, 1, false)), 1, 1);
    });
    header(closed.image).state.store(kSegmentClosed, std::memory_order_relaxed);
    seeds.push_back(closed);
    (*comms)["valid_closed"] = 1;

    const Seed base = seeds[2];
    auto corrupt = [&](const std::string& name, const std::function<void(Seed&)>& edit) {
        Seed s = base;
        s.name = name;
        edit(s);
        seeds.push_back(s);
    };
    corrupt("bad_magic", [](Seed& s) { header(s.image).magic.store(0x1234); });
    corrupt("bad_not_initialised", [](Seed& s) { header(s.image).magic.store(0); });
    corrupt("bad_abi_version", [](Seed& s) { header(s.image).abi_version = 2; });
    corrupt("bad_header_size", [](Seed& s) { header(s.image).header_size = 128; });
    corrupt("bad_record_size", [](Seed& s) { header(s.image).comm_record_size = 256; });
    corrupt("bad_comms_offset", [](Seed& s) { header(s.image).comms_offset = 512; });
    corrupt("bad_zero_capacity", [](Seed& s) { header(s.image).comm_capacity = 0; });
    corrupt("bad_huge_capacity", [](Seed& s) { header(s.image).comm_capacity = 1u << 30; });
    corrupt("bad_stream_capacity", [](Seed& s) { header(s.image).stream_capacity = 66; });
    corrupt("bad_layout_size", [](Seed& s) { header(s.image).layout_size += 128; });
    corrupt("bad_truncated", [](Seed& s) { s.size -= 64; });
    corrupt("bad_header_only", [](Seed& s) { s.size = kHeaderSize; });
    corrupt("bad_short_header", [](Seed& s) { s.size = 100; });
    corrupt("bad_role", [](Seed& s) { comm(s.image, 1).role.store(7); });
    corrupt("bad_traffic", [](Seed& s) { comm(s.image, 0).traffic.store(3); });
    corrupt("bad_nstreams", [](Seed& s) { comm(s.image, 0).nstreams.store(9); });
    // nstreams + 1 wraps to 0: must not pass the bound and index 2^32 stream records.
    corrupt("bad_nstreams_wraps", [](Seed& s) { comm(s.image, 1).nstreams.store(~0ull); });
    // Accepted, but shown as '?': text that is not printable ASCII.
    corrupt("valid_unprintable_text", [](Seed& s) {
        comm(s.image, 0).peer[0].store(0x0a0d1b0201ull);
        std::memset(header(s.image).host, 0x07, 8);
    });
    (*comms)["valid_unprintable_text"] = 2;
    return seeds;
}

void expectAsNamed(const std::string& name, const void* data, size_t size,
                   const std::map<std::string, size_t>& comms) {
    Result<ProcessView> p = parseSegment(data, size);
    if (name.rfind("bad_", 0) == 0) {
        EXPECT_FALSE(p.isOk()) << name << " was accepted";
        return;
    }
    ASSERT_EQ(name.rfind("valid_", 0), 0u) << "seed names start with valid_ or bad_: " << name;
    ASSERT_TRUE(p.isOk()) << name << ": " << p.status().toString();
    auto it = comms.find(name);
    if (it != comms.end()) {
        EXPECT_EQ(p.value().comms.size(), it->second) << name;
    }
    for (const CommView& c : p.value().comms) {
        EXPECT_EQ(c.streams.size(), c.nstreams + 1u) << name;
        for (char ch : c.peer + c.local + c.link) {
            EXPECT_TRUE(ch >= 0x20 && ch < 0x7f) << name;
        }
    }
    EXPECT_FALSE(renderTable({p.value()}, 0).empty()) << name;
    EXPECT_FALSE(renderPrometheus({p.value()}).empty()) << name;
}

TEST(NetstatSeeds, GeneratedImagesParseAsNamed) {
    std::map<std::string, size_t> comms;
    const std::vector<Seed> seeds = generate(&comms);
    for (const Seed& s : seeds) {
        expectAsNamed(s.name, s.image.data(), s.size, comms);
    }
    if (const char* dir = std::getenv("ATLAS_NETSTAT_WRITE_SEEDS")) {
        for (const Seed& s : seeds) {
            std::ofstream(std::string(dir) + "/" + s.name, std::ios::binary | std::ios::trunc)
                .write(reinterpret_cast<const char*>(s.image.data()),
                       static_cast<std::streamsize>(s.size));
        }
    }
}

TEST(NetstatSeeds, CommittedSeedsParseAsNamed) {
    std::map<std::string, size_t> comms;
    (void)generate(&comms);
    size_t valid = 0, bad = 0;
    for (const auto& e : std::filesystem::directory_iterator(ATLAS_NETSTAT_SEED_DIR)) {
        const std::string name = e.path().filename().string();
        size_t size = 0;
        const Image img = readAll(e.path().string(), &size);
        expectAsNamed(name, img.data(), size, comms);
        (name.rfind("bad_", 0) == 0 ? bad : valid) += 1;
    }
    EXPECT_GE(valid, 5u);
    EXPECT_GE(bad, 10u);
}

}  // namespace
}  // namespace atlas::netstat
