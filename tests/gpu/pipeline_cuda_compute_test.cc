// atlas-pipeline-bench --compute cuda: the GEMM calibration rule with an injected timer (no
// GPU), the per-stage --compute list, and the run-time error where there is no GPU (on a GPU
// machine that case is skipped and a real compute period is timed instead).
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

#include "perf/atlas-pipeline-bench/cuda_calibration.h"
#include "perf/atlas-pipeline-bench/cuda_compute.h"
#include "perf/atlas-pipeline-bench/options.h"

namespace atlas::pipebench {
namespace {

// A fake GPU: each batch of n GEMMs takes launch + n * per_gemm, plus scripted extras.
struct FakeGpu {
    Nanos launch_ns = 8 * kNsPerUs;
    double per_gemm_ns = 31'000;
    std::vector<Nanos> extra;  // added to the k-th timed batch (0-based), if present
    std::vector<int> batches;  // every batch size asked for
    Result<Nanos> operator()(int n) {
        const size_t k = batches.size();
        batches.push_back(n);
        Nanos t = launch_ns + static_cast<Nanos>(per_gemm_ns * n);
        if (k < extra.size()) {
            t += extra[k];
        }
        return t;
    }
};

TEST(CudaCalibration, FindsTheGemmTimeFromDoublingBatches) {
    FakeGpu gpu;
    auto c = calibrateGemms([&](int n) { return gpu(n); });
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    // 31 us per GEMM: 1024 GEMMs are the first batch of at least 20 ms.
    EXPECT_EQ(c->batch, 1024);
    EXPECT_EQ(c->samples, 5);
    // The launch overhead is spread over the batch: within 0.1%.
    EXPECT_NEAR(c->ns_per_gemm, 31'000, 31);
    EXPECT_LT(c->spread, 1e-9);
    // warm-up 16, then 1, 2, 4, ..., 1024, then 5 x 1024
    ASSERT_GE(gpu.batches.size(), 2u);
    EXPECT_EQ(gpu.batches.front(), 16);
    EXPECT_EQ(gpu.batches[1], 1);
    EXPECT_EQ(gpu.batches.back(), 1024);
    EXPECT_EQ(gpu.batches.size(), 1u + 11u + 5u);
}

TEST(CudaCalibration, TheMedianIgnoresAStalledBatch) {
    FakeGpu gpu;
    // Timed batches: warm-up, 11 doubling batches, then the 5 samples (indices 12..16); the
    // second sample stalls by 50 ms (another process had the GPU).
    gpu.extra.assign(17, 0);
    gpu.extra[13] = 50 * kNsPerMs;
    auto c = calibrateGemms([&](int n) { return gpu(n); });
    ASSERT_TRUE(c.isOk());
    EXPECT_NEAR(c->ns_per_gemm, 31'000, 31);
    EXPECT_GT(c->spread, 1.0);  // reported, so the caller can see a noisy calibration
}

TEST(CudaCalibration, StopsAtTheBatchCapAndTheTimeBound) {
    FakeGpu gpu;
    gpu.per_gemm_ns = 10;  // so fast that no batch reaches 20 ms
    CalibrationConfig cfg;
    cfg.max_batch = 256;
    auto c = calibrateGemms([&](int n) { return gpu(n); }, cfg);
    ASSERT_TRUE(c.isOk());
    EXPECT_EQ(c->batch, 256);
    for (int n : gpu.batches) {
        EXPECT_LE(n, 256);
    }
    FakeGpu slow;
    slow.per_gemm_ns = 2e9;  // 2 s per GEMM: sampling stops after max_total_ns (5 s)
    auto s = calibrateGemms([&](int n) { return slow(n); });
    ASSERT_TRUE(s.isOk());
    EXPECT_EQ(s->batch, 1);
    EXPECT_EQ(s->samples, 3);
}

TEST(CudaCalibration, TimerErrorsAndNonsenseDurationsAreErrors) {
    auto err = calibrateGemms(
        [](int) -> Result<Nanos> { return Status(Code::kSystem, "cudaEventSynchronize: boom"); });
    ASSERT_FALSE(err.isOk());
    EXPECT_NE(err.status().message().find("boom"), std::string::npos);
    auto zero = calibrateGemms([](int) -> Result<Nanos> { return Nanos{0}; });
    ASSERT_FALSE(zero.isOk());
    EXPECT_NE(zero.status().message().find("positive"), std::string::npos)
        << zero.status().message();
}

TEST(CudaCalibration, GemmsPerPeriodRounds) {
    EXPECT_EQ(gemmsFor(20 * kNsPerMs, 31'000), 645);  // 645.16
    EXPECT_EQ(gemmsFor(40 * kNsPerMs, 31'000), 1290);
    EXPECT_EQ(gemmsFor(1000, 31'000), 1);  // a positive period runs at least one
    EXPECT_EQ(gemmsFor(0, 31'000), 0);
    EXPECT_EQ(gemmsFor(20 * kNsPerMs, 0), 0);
}

TEST(PipelineBenchCompute, PerStageListAndCudaFlags) {
    auto c = parseArgs({"-P", "3", "--compute", "cuda,spin", "--cuda-ns-per-gemm", "31000.5"});
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_EQ(c->computeOf(0), Compute::kCuda);
    EXPECT_EQ(c->computeOf(1), Compute::kSpin);
    EXPECT_EQ(c->computeOf(2), Compute::kSpin);  // the last entry repeats
    EXPECT_EQ(computeText(c.value()), "cuda,spin");
    EXPECT_DOUBLE_EQ(c->cuda_ns_per_gemm, 31000.5);
    auto one = parseArgs({"--compute", "sleep"});
    ASSERT_TRUE(one.isOk());
    EXPECT_EQ(one->compute, Compute::kSleep);
    EXPECT_EQ(one->computeOf(1), Compute::kSleep);
    EXPECT_EQ(computeText(one.value()), "sleep");
    EXPECT_EQ(parseArgs({}).value().computeOf(1), Compute::kSpin);
    for (const char* bad : {"gpu", "cuda,", ",spin", "cuda,,spin"}) {
        auto r = parseArgs({"--compute", bad});
        ASSERT_FALSE(r.isOk()) << bad;
        // The options layer's wording: the flag, the value and what each item may be.
        EXPECT_NE(r.status().message().find("--compute='" + std::string(bad) +
                                            "' is invalid: expected comma-separated, each one "
                                            "of spin|yield|sleep|cuda"),
                  std::string::npos)
            << r.status().message();
    }
    for (const char* bad : {"0", "-5", "abc", "1e12"}) {
        auto r = parseArgs({"--cuda-ns-per-gemm", bad});
        ASSERT_FALSE(r.isOk()) << bad;
        EXPECT_NE(r.status().message().find("--cuda-ns-per-gemm"), std::string::npos);
    }
}

bool haveGpu() {
    auto c = CudaCompute::create(0, 1000);
    return c.isOk();
}

TEST(PipelineBenchCompute, NoGpuIsAClearError) {
    auto c = CudaCompute::create(0, 0);
    if (c.isOk()) {
        GTEST_SKIP() << "a GPU is present: " << c.value()->describe();
    }
    const Status st = c.status();
    EXPECT_EQ(st.code(), Code::kUnavailable);
    const std::string& m = st.message();
    EXPECT_NE(m.find("--compute cuda"), std::string::npos) << m;
    EXPECT_TRUE(m.find("no CUDA device") != std::string::npos ||
                m.find("built without CUDA") != std::string::npos)
        << m;
}

TEST(PipelineBenchCompute, TheBenchReportsTheMissingGpuAndExits) {
    if (haveGpu()) {
        GTEST_SKIP() << "a GPU is present";
    }
    char tmpl[] = "/tmp/atlas-pipebench-cuda-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    const std::string cmd = std::string("timeout 60 ") + ATLAS_PIPEBENCH_EXE + " --plugin " +
                            ATLAS_PLUGIN_SO +
                            " -D 1 -P 2 -M 1 --iterations 1 --warmup 0 --compute cuda,spin "
                            "--quiet >" +
                            dir + "/out 2>" + dir + "/err";
    const int st = std::system(cmd.c_str());
    std::ifstream in(dir + "/err");
    std::stringstream err;
    err << in.rdbuf();
    std::system(("rm -rf '" + dir + "'").c_str());
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 1) << err.str();
    EXPECT_NE(err.str().find("stage 0: unavailable: --compute cuda"), std::string::npos)
        << err.str();
}

TEST(PipelineBenchCompute, OnAGpuAPeriodTakesItsTime) {
    auto c = CudaCompute::create(0, 0);
    if (!c.isOk()) {
        GTEST_SKIP() << "no GPU: " << c.status().message();
    }
    const Nanos t0 = monotonicNowNs();
    ASSERT_TRUE(c.value()->run(50 * kNsPerMs).isOk());
    const double ms = static_cast<double>(monotonicNowNs() - t0) / 1e6;
    EXPECT_GT(ms, 40.0) << c.value()->describe();
    EXPECT_LT(ms, 80.0) << c.value()->describe();
}

}  // namespace
}  // namespace atlas::pipebench
