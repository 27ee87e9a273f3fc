// atlas-nccl-sweep's pure part: nccl-tests' geometry and bus-bandwidth formulas, the data
// pattern and the result checker (against reference collectives computed here, rank by
// rank), the iteration plan, the budget rule, the command line and the report formats.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "perf/gpu-check/sweep_core.h"
#include "perf/gpu-check/sweep_options.h"
#include "perf/gpu-check/sweep_report.h"
#include "support/doc_blocks.h"

namespace atlas::gpucheck {
namespace {

// What every rank's receive buffer holds after a correct collective, computed directly from
// the collectives' definitions over every rank's send buffer (independent of
// expectedOutput()).
std::vector<std::vector<float>> referenceOutputs(Op op, const Geometry& g, int n, uint32_t seed) {
    std::vector<std::vector<float>> in(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
        in[r].resize(g.send_count);
        fillInput(r, seed, in[r]);
    }
    const size_t c = g.param_count;
    std::vector<std::vector<float>> out(static_cast<size_t>(n), std::vector<float>(g.recv_count));
    for (int r = 0; r < n; ++r) {
        for (size_t j = 0; j < g.recv_count; ++j) {
            float v = 0;
            switch (op) {
                case Op::kAllReduce:
                    for (int k = 0; k < n; ++k) {
                        v += in[k][j];
                    }
                    break;
                case Op::kReduceScatter:
                    for (int k = 0; k < n; ++k) {
                        v += in[k][r * c + j];
                    }
                    break;
                case Op::kAllGather:
                    v = in[j / c][j % c];
                    break;
                case Op::kSendRecv:
                    v = in[(r + n - 1) % n][j];
                    break;
                case Op::kAllToAll:
                    v = in[j / c][r * c + j % c];
                    break;
            }
            out[r][j] = v;
        }
    }
    return out;
}

TEST(NcclSweepGeometry, MatchesNcclTests) {
    // all_reduce and sendrecv: the whole buffer both ways.
    Geometry g = geometryFor(Op::kAllReduce, 8, 2);
    EXPECT_EQ(g.send_count, 2u);
    EXPECT_EQ(g.recv_count, 2u);
    EXPECT_EQ(g.param_count, 2u);
    EXPECT_EQ(g.bytes(), 8u);
    // all_gather: count per rank; the size column is the gathered buffer.
    g = geometryFor(Op::kAllGather, 8, 2);
    EXPECT_EQ(g.send_count, 1u);
    EXPECT_EQ(g.recv_count, 2u);
    EXPECT_EQ(g.param_count, 1u);
    EXPECT_EQ(g.bytes(), 8u);
    g = geometryFor(Op::kAllGather, 100, 3);  // 25 elements: 8 per rank
    EXPECT_EQ(g.param_count, 8u);
    EXPECT_EQ(g.bytes(), 96u);
    // reduce_scatter: per-rank count 16-byte aligned, so 8 and 16 B have nothing to move.
    EXPECT_EQ(geometryFor(Op::kReduceScatter, 8, 2).bytes(), 0u);
    EXPECT_EQ(geometryFor(Op::kReduceScatter, 16, 2).bytes(), 0u);
    g = geometryFor(Op::kReduceScatter, 32, 2);
    EXPECT_EQ(g.send_count, 8u);
    EXPECT_EQ(g.recv_count, 4u);
    EXPECT_EQ(g.param_count, 4u);
    EXPECT_EQ(g.bytes(), 32u);
    // alltoall: count per peer.
    g = geometryFor(Op::kAllToAll, 256ull << 20, 2);
    EXPECT_EQ(g.param_count, 32ull << 20);
    EXPECT_EQ(g.send_count, 64ull << 20);
    EXPECT_EQ(g.bytes(), 256ull << 20);
}

TEST(NcclSweepBandwidth, NcclTestsBusBwFormulas) {
    EXPECT_DOUBLE_EQ(busBwFactor(Op::kAllReduce, 2), 1.0);
    EXPECT_DOUBLE_EQ(busBwFactor(Op::kAllReduce, 4), 1.5);
    EXPECT_DOUBLE_EQ(busBwFactor(Op::kAllGather, 2), 0.5);
    EXPECT_DOUBLE_EQ(busBwFactor(Op::kReduceScatter, 4), 0.75);
    EXPECT_DOUBLE_EQ(busBwFactor(Op::kAllToAll, 8), 0.875);
    EXPECT_DOUBLE_EQ(busBwFactor(Op::kSendRecv, 8), 1.0);
    // 256 MiB in 2.147483648 s is 0.125 GB/s algbw (1 Gbit/s).
    const Geometry g = geometryFor(Op::kAllGather, 256ull << 20, 2);
    const Bandwidth b = bandwidthFor(Op::kAllGather, g, 2.147483648, 2);
    EXPECT_NEAR(b.algbw_gbs, 0.125, 1e-12);
    EXPECT_NEAR(b.busbw_gbs, 0.0625, 1e-12);
    const Bandwidth none = bandwidthFor(Op::kAllReduce, g, 0, 2);
    EXPECT_EQ(none.algbw_gbs, 0);
    EXPECT_EQ(none.busbw_gbs, 0);
}

TEST(NcclSweepData, InputsAreSmallIntegersThatDependOnRankIndexAndSeed) {
    size_t differ_rank = 0, differ_seed = 0, differ_index = 0;
    for (size_t i = 0; i < 4096; ++i) {
        const float v = inputValue(0, i, 1);
        ASSERT_EQ(v, std::floor(v));
        ASSERT_GE(v, 0);
        ASSERT_LE(v, 63);
        differ_rank += v != inputValue(1, i, 1);
        differ_seed += v != inputValue(0, i, 2);
        differ_index += v != inputValue(0, i + 1, 1);
    }
    // 1 in 64 coincide by chance; far more than 90% must differ.
    EXPECT_GT(differ_rank, 3900u);
    EXPECT_GT(differ_seed, 3900u);
    EXPECT_GT(differ_index, 3900u);
}

TEST(NcclSweepCheck, ReferenceCollectivesPassOnEveryRank) {
    for (int n : {2, 3, 4}) {
        for (Op op : kAllOps) {
            for (size_t bytes : {size_t{8}, size_t{100}, size_t{4096}, size_t{65536 + 12}}) {
                const Geometry g = geometryFor(op, bytes, n);
                const auto out = referenceOutputs(op, g, n, 7);
                for (int r = 0; r < n; ++r) {
                    const CheckResult c = checkOutput(op, g, r, n, 7, out[r]);
                    EXPECT_EQ(c.wrong, 0u) << opName(op) << " n=" << n << " bytes=" << bytes
                                           << " rank " << r << " first " << c.first_bad;
                }
            }
        }
    }
}

TEST(NcclSweepCheck, CatchesWrongElementsNaNsStaleDataAndMisplacedBlocks) {
    const int n = 2;
    for (Op op : kAllOps) {
        const Geometry g = geometryFor(op, 4096, n);
        auto out = referenceOutputs(op, g, n, 3);
        // one element off
        auto bad = out[1];
        bad[17] += 1;
        CheckResult c = checkOutput(op, g, 1, n, 3, bad);
        EXPECT_EQ(c.wrong, 1u) << opName(op);
        EXPECT_EQ(c.first_bad, 17u);
        EXPECT_EQ(c.got, out[1][17] + 1);
        EXPECT_EQ(c.want, out[1][17]);
        // an element never written (the receive buffer is poisoned with NaN)
        bad = out[0];
        bad.back() = std::numeric_limits<float>::quiet_NaN();
        EXPECT_EQ(checkOutput(op, g, 0, n, 3, bad).wrong, 1u) << opName(op);
        // the data of an earlier check (another seed): nearly everything is wrong
        const auto stale = referenceOutputs(op, g, n, 2);
        EXPECT_GT(checkOutput(op, g, 0, n, 3, stale[0]).wrong, g.recv_count / 2) << opName(op);
        // the other rank's result (swapped ranks)
        if (op != Op::kAllReduce && op != Op::kAllGather) {  // the same on every rank
            EXPECT_GT(checkOutput(op, g, 0, n, 3, out[1]).wrong, g.recv_count / 2) << opName(op);
        }
        // a buffer of the wrong length
        bad = out[0];
        bad.pop_back();
        EXPECT_GT(checkOutput(op, g, 0, n, 3, bad).wrong, 0u);
    }
    // Swapped blocks of an alltoall / all_gather result.
    for (Op op : {Op::kAllToAll, Op::kAllGather}) {
        const Geometry g = geometryFor(op, 4096, n);
        auto out = referenceOutputs(op, g, n, 5)[0];
        std::vector<float> swapped(out.begin() + static_cast<long>(g.param_count), out.end());
        swapped.insert(swapped.end(), out.begin(), out.begin() + static_cast<long>(g.param_count));
        EXPECT_GT(checkOutput(op, g, 0, n, 5, swapped).wrong, g.recv_count / 2) << opName(op);
    }
}

TEST(NcclSweepSizes, DoublingFrom8BTo256MiB) {
    auto s = sweepSizes(8, 256ull << 20, 2);
    ASSERT_TRUE(s.isOk());
    ASSERT_EQ(s->size(), 26u);
    EXPECT_EQ(s->front(), 8u);
    EXPECT_EQ(s->back(), 256ull << 20);
    auto q = sweepSizes(8, 100, 4);  // 8, 32 (128 > 100)
    ASSERT_TRUE(q.isOk());
    EXPECT_EQ(q.value(), (std::vector<size_t>{8, 32}));
    EXPECT_FALSE(sweepSizes(0, 8, 2).isOk());
    EXPECT_FALSE(sweepSizes(16, 8, 2).isOk());
    EXPECT_FALSE(sweepSizes(8, 16, 1).isOk());
    EXPECT_EQ(parseByteSize("256M").value(), 256ull << 20);
    EXPECT_EQ(parseByteSize("8").value(), 8u);
    EXPECT_EQ(parseByteSize("4k").value(), 4096u);
    for (const char* b : {"", "M", "1.5M", "-1", "5G", "12T", "99999999999999999"}) {
        EXPECT_FALSE(parseByteSize(b).isOk()) << b;
    }
}

TEST(NcclSweepPlan, TimedIterationsFillTheTargetAndStopAtTheCap) {
    IterPlan p;
    p.target_s = 0.2;
    p.max_iters = 20;
    EXPECT_EQ(timedIterations(0.05, p), 4);
    EXPECT_EQ(timedIterations(0.001, p), 20);  // capped
    EXPECT_EQ(timedIterations(0.0, p), 20);    // too fast to measure
    EXPECT_EQ(timedIterations(0.2, p), 1);
    EXPECT_EQ(timedIterations(0.21, p), 0);  // the check run's time is the measurement
    EXPECT_EQ(timedIterations(2.0, p), 0);
    p.max_iters = 0;
    EXPECT_EQ(timedIterations(0.05, p), 0);
}

TEST(NcclSweepPlan, BudgetSkipsPointsThatWouldEndLate) {
    EXPECT_TRUE(pointFitsBudget(1000, 0, 50, 2));  // no budget
    EXPECT_TRUE(pointFitsBudget(10, 100, 0, 2));   // first point of an op
    EXPECT_TRUE(pointFitsBudget(10, 100, 40, 2));  // 10 + 80 <= 100
    EXPECT_FALSE(pointFitsBudget(30, 100, 40, 2));
    EXPECT_FALSE(pointFitsBudget(101, 100, 0, 2));   // past the budget
    EXPECT_TRUE(pointFitsBudget(10, 100, 40, 0.5));  // never expects less than the last point
    EXPECT_FALSE(pointFitsBudget(70, 100, 40, 0.5));
}

TEST(NcclSweepOptions, DefaultsNetsAndErrors) {
    auto d = parseSweepArgs({});
    ASSERT_TRUE(d.isOk()) << d.status().toString();
    ASSERT_EQ(d->nets.size(), 2u);
    EXPECT_EQ(d->nets[0].label(), "atlas");
    EXPECT_EQ(d->nets[1].label(), "socket");
    EXPECT_EQ(d->ops.size(), 5u);
    EXPECT_EQ(d->max_bytes, 256ull << 20);
    auto c = parseSweepArgs({"--net", "socket:4x4,atlas", "--ops", "sendrecv,all_reduce", "-b",
                             "1K", "-e", "1M", "--target-ms", "100", "--netns", "a,b", "--env",
                             "ATLAS_LINK_GBPS=1"});
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_EQ(c->nets[0].label(), "socket:4x4");
    EXPECT_EQ(c->nets[0].socket_threads, 4);
    EXPECT_EQ(c->ops, (std::vector<Op>{Op::kSendRecv, Op::kAllReduce}));
    EXPECT_EQ(c->min_bytes, 1024u);
    EXPECT_DOUBLE_EQ(c->iter_plan.target_s, 0.1);
    EXPECT_EQ(c->netns, (std::vector<std::string>{"a", "b"}));
    struct Bad {
        std::vector<std::string> args;
        const char* says;
    };
    for (const Bad& b : std::vector<Bad>{{{"--net", "socket:17x1"}, "1 <= T <= 16"},
                                         {{"--net", "socket:8x9"}, "at most 64 sockets"},
                                         {{"--net", "ib"}, "expected atlas, socket"},
                                         {{"--ops", "all_reduce,all_reduce"}, "listed twice"},
                                         {{"--ops", "broadcast"}, "unknown op"},
                                         {{"-b", "1M", "-e", "1K"}, "below the smallest"},
                                         {{"--netns", "onlyone"}, "two namespaces"},
                                         {{"--env", "NOEQUALS"}, "KEY=VALUE"},
                                         {{"--sim-corrupt", "sendrecv"}, "needs --simulate"},
                                         {{"--timeout"}, "needs a value"},
                                         {{"--bogus"}, "unknown option"}}) {
        auto r = parseSweepArgs(b.args);
        ASSERT_FALSE(r.isOk()) << b.args[0];
        EXPECT_NE(r.status().message().find(b.says), std::string::npos) << r.status().message();
    }
}

TEST(NcclSweepOptions, StrictNumbersAndTheDocsTable) {
    for (const char* v : {"12abc", " 4", "-1", "0x10", "1e400"}) {
        auto r = parseSweepArgs({"--warmup", v});
        ASSERT_FALSE(r.isOk()) << v;
        EXPECT_NE(r.status().message().find("--warmup="), std::string::npos)
            << r.status().message();
    }
    EXPECT_FALSE(parseSweepArgs({"--sim-gbps", "inf"}).isOk());
    EXPECT_TRUE(testing::docBlockMatches(std::string(ATLAS_SOURCE_DIR) + "/docs/gpu-check.md",
                                         "atlas-nccl-sweep", sweepFlagsMarkdown()));
}

std::string valueOf(const RankEnv& e, const std::string& key) {
    std::string v = "<unset>";
    for (const auto& kv : e.set) {
        if (kv.first == key) {
            v = kv.second;
        }
    }
    return v;
}

bool unsets(const RankEnv& e, const std::string& key) {
    for (const std::string& k : e.unset) {
        if (k == key) {
            return true;
        }
    }
    return false;
}

TEST(NcclSweepOptions, RankEnvironmentSelectsTheTransport) {
    SweepOptions o =
        parseSweepArgs({"--addr", "10.1.0.1", "--ifname", "to-dc", "--env", "NCCL_DEBUG=WARN"})
            .value();
    const RankEnv a = rankEnvironment(o, parseNetSpec("atlas").value(), 1, 4242, "/p.so", "/l");
    EXPECT_EQ(valueOf(a, "NCCL_COMM_ID"), "10.1.0.1:4242");
    EXPECT_EQ(valueOf(a, "NCCL_HOSTID"), "hostB");
    EXPECT_EQ(valueOf(a, "NCCL_NET"), "Atlas");
    EXPECT_EQ(valueOf(a, "NCCL_NET_PLUGIN"), "/p.so");
    EXPECT_EQ(valueOf(a, "ATLAS_SOCKET_IFNAME"), "to-dc");
    EXPECT_EQ(valueOf(a, "NCCL_SOCKET_IFNAME"), "to-dc");
    EXPECT_EQ(valueOf(a, "ATLAS_LOCAL_RANK"), "1");
    EXPECT_EQ(valueOf(a, "NCCL_DEBUG"), "WARN");  // --env comes last and wins
    EXPECT_TRUE(unsets(a, "NCCL_SOCKET_NTHREADS"));
    const RankEnv s =
        rankEnvironment(o, parseNetSpec("socket:4x4").value(), 0, 4242, "/p.so", "/l");
    EXPECT_EQ(valueOf(s, "NCCL_NET"), "Socket");
    EXPECT_EQ(valueOf(s, "NCCL_NET_PLUGIN"), "<unset>");
    EXPECT_TRUE(unsets(s, "NCCL_NET_PLUGIN"));
    EXPECT_EQ(valueOf(s, "NCCL_SOCKET_NTHREADS"), "4");
    EXPECT_EQ(valueOf(s, "NCCL_NSOCKS_PERTHREAD"), "4");
    EXPECT_EQ(valueOf(s, "NCCL_HOSTID"), "hostA");
    const RankEnv plain = rankEnvironment(o, parseNetSpec("socket").value(), 0, 1, "", "/l");
    EXPECT_TRUE(unsets(plain, "NCCL_SOCKET_NTHREADS"));
    EXPECT_EQ(expectedNetworkLine(parseNetSpec("atlas").value()), "Using network Atlas");
    EXPECT_EQ(expectedNetworkLine(parseNetSpec("socket:2x2").value()), "Using network Socket");
}

TEST(NcclSweepOptions, EnvFileForOtherNcclPrograms) {
    SweepOptions o = parseSweepArgs({"--net", "socket:2x8", "--print-env", "1", "--ifname", "to-dc",
                                     "--addr", "10.1.0.1"})
                         .value();
    EXPECT_EQ(o.print_env_rank, 1);
    const std::string text = envFileText(o, 1, "", "/logs/x.log");
    // Their own rendezvous: the sweep's bootstrap address must not leak into them.
    EXPECT_EQ(text.rfind("-NCCL_COMM_ID\n", 0), 0u) << text;
    EXPECT_EQ(text.find("NCCL_COMM_ID="), std::string::npos) << text;
    EXPECT_NE(text.find("\nNCCL_NET=Socket\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\nNCCL_SOCKET_NTHREADS=2\nNCCL_NSOCKS_PERTHREAD=8\n"), std::string::npos)
        << text;
    EXPECT_NE(text.find("\n-NCCL_NET_PLUGIN\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\nNCCL_HOSTID=hostB\n"), std::string::npos) << text;
    EXPECT_EQ(ncclLogPath("/d", o.nets[0], 1), "/d/nccl-socket-2x8-rank1.log");
    EXPECT_FALSE(parseSweepArgs({"--print-env", "2"}).isOk());
}

TEST(NcclSweepReport, NcclTestsRowAndFooter) {
    EXPECT_EQ(formatTimeUs(12.3456e-6), "  12.35");
    EXPECT_EQ(formatTimeUs(123.46e-6), "  123.5");  // %7.1f from 100 us
    EXPECT_EQ(formatTimeUs(0.0512), "  51200");
    PointResult p;
    p.net = "atlas";
    p.op = Op::kAllReduce;
    p.requested_bytes = 1 << 20;
    p.geom = geometryFor(Op::kAllReduce, 1 << 20, 2);
    p.time_s = 0.010;
    p.iters = 4;
    // size, count, type, redop, root, time, algbw, busbw, #wrong, iters
    EXPECT_EQ(tableRow(p, 2),
              "     1048576        262144     float     sum      -1    10000    0.10    0.10       "
              "0      4\n");
    PointResult q = p;
    q.wrong = 3;
    const std::string footer = tableFooter({p, q}, 2);
    EXPECT_NE(footer.find("Out of bounds values : 3 FAILED"), std::string::npos) << footer;
    EXPECT_NEAR(averageBusBw({p, q}, 2), 0.1048576, 1e-9);
    EXPECT_NE(tableFooter({p}, 2).find(": 0 OK"), std::string::npos);
    PointResult s = p;
    s.net = "socket:4x4";
    s.time_s = 0.020;
    const std::string cmp = comparisonTable({p}, {s}, 2);
    EXPECT_NE(cmp.find("2.00"), std::string::npos) << cmp;  // twice the busbw
    EXPECT_NE(cmp.find("a = atlas, b = socket:4x4"), std::string::npos) << cmp;
}

TEST(NcclSweepReport, JsonRowsAndEscaping) {
    EXPECT_EQ(jsonEscape("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
    PointResult p;
    p.net = "atlas";
    p.op = Op::kSendRecv;
    p.requested_bytes = 8;
    p.geom = geometryFor(Op::kSendRecv, 8, 2);
    p.time_s = 0.05;
    p.rank_time_s = {0.04, 0.06};
    const std::string j = pointJson(p, 2);
    EXPECT_NE(j.find("\"op\": \"sendrecv\""), std::string::npos) << j;
    EXPECT_NE(j.find("\"time_us\": 50000"), std::string::npos) << j;
    EXPECT_NE(j.find("\"rank_time_us\": [40000, 60000]"), std::string::npos) << j;
    EXPECT_NE(j.find("\"wrong\": 0"), std::string::npos) << j;
}

}  // namespace
}  // namespace atlas::gpucheck
