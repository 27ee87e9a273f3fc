// The stats segment: writer and reader agree (include/atlas/netstat.h), the reader rejects
// what does not follow the ABI, released records disappear, and both views render what the
// records hold (the Prometheus text checked by a strict parser).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "netstat/reader.h"
#include "netstat/render.h"
#include "netstat/writer.h"
#include "tests/netstat/prom_parser.h"

namespace atlas::netstat {
namespace {

class Segment : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/atlas-netstat-test.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override { (void)rmdir(dir_.c_str()); }

    std::unique_ptr<StatsWriter> writer(uint32_t comms = 4, uint32_t streams = 5) {
        WriterConfig c;
        c.dir = dir_;
        c.comm_capacity = comms;
        c.stream_capacity = streams;
        auto w = StatsWriter::create(c);
        EXPECT_TRUE(w.isOk()) << w.status().toString();
        return w.isOk() ? std::move(w.value()) : nullptr;
    }

    static CommIdentity identity(uint64_t session, Role role, int nstreams) {
        CommIdentity id;
        id.comm_id = 0xabc;
        id.session_id = session;
        id.role = role;
        id.nstreams = nstreams;
        id.traffic = kTrafficPipeline;
        id.priority = 0;
        id.wan = true;
        id.handshake_rtt_ns = 50'000'000;
        id.peer = "10.2.0.1:4000";
        id.local = "10.1.0.1:5000";
        id.link = "dc0->dc1";
        return id;
    }

    std::string dir_;
};

TEST_F(Segment, WriterAndReaderAgree) {
    auto w = writer();
    ASSERT_NE(w, nullptr);
    CommRecord* r = w->claim(identity(0x1234, kRoleSend, 2));
    ASSERT_NE(r, nullptr);
    StatsWriter::completed(*r, 1000, 5);
    StatsWriter::completed(*r, 24, 6);
    StreamSink sink(w.get(), r);
    StreamSample s;
    s.stream = 1;
    s.bytes = 900;
    s.tcp_info_ok = true;
    s.tcp.rtt_us = 50123;
    s.tcp.snd_cwnd = 42;
    s.tcp.snd_mss = 1448;
    s.tcp.delivery_rate = 125'000'000;
    s.tcp.total_retrans = 3;
    sink.stream(s);
    sink.engine({7, 8}, 99);

    auto p = readSegmentFile(w->path());
    ASSERT_TRUE(p.isOk()) << p.status().toString();
    EXPECT_EQ(p->pid, getpid());
    EXPECT_TRUE(p->alive);
    ASSERT_EQ(p->comms.size(), 1u);
    const CommView& c = p->comms[0];
    EXPECT_EQ(c.session_id, 0x1234u);
    EXPECT_EQ(c.bytes, 1024u);
    EXPECT_EQ(c.messages, 2u);
    EXPECT_EQ(c.gate_waits, 7u);
    EXPECT_EQ(c.gate_grants, 8u);
    EXPECT_EQ(c.peer, "10.2.0.1:4000");
    EXPECT_EQ(c.link, "dc0->dc1");
    EXPECT_EQ(c.traffic, kTrafficPipeline);
    ASSERT_EQ(c.streams.size(), 3u);  // control + 2 data streams
    EXPECT_FALSE(c.streams[0].valid);
    EXPECT_TRUE(c.streams[1].valid);
    EXPECT_EQ(c.streams[1].snd_cwnd, 42u);
    EXPECT_EQ(c.streams[1].rtt_us, 50123u);
    EXPECT_EQ(c.streams[1].bytes, 900u);

    const std::string table = renderTable({*p}, 0);
    EXPECT_NE(table.find("send 10.1.0.1:5000 -> 10.2.0.1:4000"), std::string::npos) << table;
    EXPECT_NE(table.find("pipeline traffic"), std::string::npos) << table;

    const std::string prom = renderPrometheus({*p});
    test::PromParse parsed = test::parsePrometheus(prom);
    ASSERT_TRUE(parsed.ok()) << parsed.errors[0] << "\n" << prom;
    auto rtt = parsed.find("atlas_stream_rtt_seconds", {{"stream", "1"}, {"link", "dc0->dc1"}});
    ASSERT_EQ(rtt.size(), 1u);
    EXPECT_DOUBLE_EQ(rtt[0].value, 0.050123);
    EXPECT_EQ(rtt[0].labels.at("comm"), "0000000000001234");
    EXPECT_EQ(rtt[0].labels.at("peer"), "10.2.0.1:4000");
    EXPECT_EQ(parsed.find("atlas_stream_cwnd_segments")[0].value, 42);
    EXPECT_EQ(parsed.find("atlas_comm_bytes_total")[0].value, 1024);
    EXPECT_EQ(parsed.types["atlas_comm_bytes_total"], "counter");
    // A stream without a TCP_INFO sample has bytes but no RTT series.
    EXPECT_EQ(parsed.find("atlas_stream_rtt_seconds", {{"stream", "0"}}).size(), 0u);
    EXPECT_EQ(parsed.find("atlas_stream_bytes_total", {{"stream", "0"}}).size(), 1u);
}

TEST_F(Segment, ReleasedRecordsVanishAndAreReused) {
    auto w = writer(2);
    ASSERT_NE(w, nullptr);
    CommRecord* a = w->claim(identity(1, kRoleSend, 1));
    CommRecord* b = w->claim(identity(2, kRoleRecv, 1));
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(w->claim(identity(3, kRoleSend, 1)), nullptr) << "capacity is 2";
    StatsWriter::completed(*a, 10, 1);
    w->release(a);
    auto p = readSegmentFile(w->path());
    ASSERT_TRUE(p.isOk());
    ASSERT_EQ(p->comms.size(), 1u);
    EXPECT_EQ(p->comms[0].session_id, 2u);
    EXPECT_EQ(p->comms_dropped, 1u);
    CommRecord* c = w->claim(identity(4, kRoleSend, 1));
    ASSERT_EQ(c, a) << "the released record is reused";
    p = readSegmentFile(w->path());
    ASSERT_TRUE(p.isOk());
    ASSERT_EQ(p->comms.size(), 2u);
    EXPECT_EQ(p->comms[0].bytes, 0u) << "a reused record starts from zero";
}

TEST_F(Segment, FileRemovedWhenTheWriterGoes) {
    std::string path;
    {
        auto w = writer();
        ASSERT_NE(w, nullptr);
        path = w->path();
        EXPECT_EQ(listSegments(dir_), std::vector<std::string>{path});
    }
    EXPECT_TRUE(listSegments(dir_).empty());
    EXPECT_FALSE(readSegmentFile(path).isOk());
}

// A process killed with SIGKILL leaves its segment behind; the next writer in that directory
// removes it, and leaves alone the segment of a live pid, another user's and a foreign name.
TEST_F(Segment, SegmentsOfDeadProcessesAreRemoved) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        _exit(0);
    }
    ASSERT_EQ(waitpid(child, nullptr, 0), child);  // reaped: the pid is gone
    const std::string prefix = dir_ + "/" + kNamePrefix + std::to_string(getuid()) + "-";
    const std::string dead = prefix + std::to_string(child);
    const std::string live = prefix + std::to_string(getppid());
    const std::string other_user =
        dir_ + "/" + kNamePrefix + std::to_string(getuid() + 1) + "-" + std::to_string(child);
    const std::string foreign = prefix + "12x";
    for (const std::string& p : {dead, live, other_user, foreign}) {
        std::ofstream(p) << "x";
    }
    {
        auto w = writer();
        ASSERT_NE(w, nullptr);
        EXPECT_NE(access(dead.c_str(), F_OK), 0) << "a dead process's segment was kept";
        EXPECT_EQ(access(live.c_str(), F_OK), 0);
        EXPECT_EQ(access(other_user.c_str(), F_OK), 0);
        EXPECT_EQ(access(foreign.c_str(), F_OK), 0);
    }
    for (const std::string& p : {live, other_user, foreign}) {
        (void)unlink(p.c_str());
    }
}

// Every header field a reader depends on is checked; each corruption names its problem.
TEST_F(Segment, ReaderRejectsImagesOffTheAbi) {
    auto w = writer(2, 3);
    ASSERT_NE(w, nullptr);
    ASSERT_NE(w->claim(identity(9, kRoleSend, 2)), nullptr);
    const Layout layout = expectedLayout(2, 3);
    std::vector<uint64_t> good(layout.size / 8);
    std::memcpy(good.data(), &w->header(), layout.size);
    ASSERT_TRUE(parseSegment(good.data(), layout.size).isOk());

    struct Case {
        const char* what;
        std::function<void(uint8_t*)> corrupt;
        size_t size;
    };
    const std::vector<Case> cases = {
        {"bad magic", [](uint8_t* b) { b[0] ^= 1; }, layout.size},
        {"ABI version", [](uint8_t* b) { reinterpret_cast<SegmentHeader*>(b)->abi_version = 2; },
         layout.size},
        {"record sizes",
         [](uint8_t* b) { reinterpret_cast<SegmentHeader*>(b)->comm_record_size = 8; },
         layout.size},
        {"capacities", [](uint8_t* b) { reinterpret_cast<SegmentHeader*>(b)->comm_capacity = 0; },
         layout.size},
        {"layout", [](uint8_t* b) { reinterpret_cast<SegmentHeader*>(b)->comm_capacity = 3; },
         layout.size},
        {"exceeds the file", [](uint8_t*) {}, layout.size - 8},
        {"claims",
         [](uint8_t* b) { reinterpret_cast<CommRecord*>(b + kHeaderSize)->nstreams.store(3); },
         layout.size},
        {"unknown role",
         [](uint8_t* b) { reinterpret_cast<CommRecord*>(b + kHeaderSize)->role.store(7); },
         layout.size},
        {"shorter than its header", [](uint8_t*) {}, 100},
    };
    for (const Case& c : cases) {
        std::vector<uint64_t> img = good;
        c.corrupt(reinterpret_cast<uint8_t*>(img.data()));
        auto r = parseSegment(img.data(), c.size);
        ASSERT_FALSE(r.isOk()) << c.what;
        EXPECT_NE(r.status().message().find(c.what), std::string::npos)
            << c.what << ": " << r.status().message();
    }
    // A record caught mid-rewrite (odd generation) is skipped, not an error.
    std::vector<uint64_t> img = good;
    reinterpret_cast<CommRecord*>(reinterpret_cast<uint8_t*>(img.data()) + kHeaderSize)
        ->gen.fetch_add(1);
    auto r = parseSegment(img.data(), layout.size);
    ASSERT_TRUE(r.isOk());
    EXPECT_TRUE(r->comms.empty());
}

TEST(PromParser, RejectsWhatAScraperRejects) {
    const char* bad[] = {
        "x 1\n",                                       // no TYPE
        "# TYPE x gauge\nx{a=\"1\"} one\n",            // value
        "# TYPE x gauge\nx{a=\"\\t\"} 1\n",            // escape
        "# TYPE x gauge\nx{a=\"1\",a=\"2\"} 1\n",      // duplicate label
        "# TYPE x gauge\nx 1\nx 2\n",                  // duplicate series
        "# TYPE x counter\nx 1\n",                     // counter without _total
        "# TYPE x gauge\n# TYPE y gauge\ny 1\nx 1\n",  // split family
        "# TYPE x gauge\nx{1a=\"v\"} 1\n",             // label name
        "# TYPE x gauge\nx 1",                         // no final newline
    };
    for (const char* t : bad) {
        EXPECT_FALSE(test::parsePrometheus(t).ok()) << t;
    }
    EXPECT_TRUE(
        test::parsePrometheus("# HELP x h\n# TYPE x gauge\nx{a=\"q\\\"\\\\\\n\"} 1e-3\n").ok());
}

}  // namespace
}  // namespace atlas::netstat
