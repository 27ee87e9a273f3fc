#include "perf/atlas-wanem/options.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string_view>

#include "options/help.h"

namespace atlas::options {
template <>
struct EnumChoices<wanem::SplitMode> {
    static constexpr EnumChoice<wanem::SplitMode> kValues[] = {
        {"runs", wanem::SplitMode::kRuns},
        {"segments", wanem::SplitMode::kSegments},
    };
};
}  // namespace atlas::options

namespace atlas::wanem {
namespace {

using namespace options::kinds;

constexpr double kMaxDelayMs = 10000;
constexpr double kMaxRateMbit = 400000;  // 400 Gbit/s
constexpr double kMinRateMbit = 0.01;
constexpr uint32_t kMaxPaths = 64;
constexpr size_t kIfNameMax = 15;  // IFNAMSIZ - 1
// Assumed forwarding rate of an uncapped path when sizing its delay line: above what the
// emulator reaches on the development machines (about 13 Gbit/s).
constexpr double kUncappedSizingBps = 16e9;

// "V" (both directions) or "A2B:B2A", each a number in lo..hi.
struct PerDirNumber : Base {
    using Value = PerDir<double>;
    using Bound = double;
    static constexpr const char* kType = "per-direction number";
    static std::optional<Value> parse(std::string_view t) {
        const size_t colon = t.find(':');
        const auto a = options::parseDouble(t.substr(0, colon));
        const auto b =
            colon == std::string_view::npos ? a : options::parseDouble(t.substr(colon + 1));
        return a && b ? std::optional<Value>(Value{*a, *b}) : std::nullopt;
    }
    static bool inRange(const Value& v, double lo, double hi) {
        return v[0] >= lo && v[0] <= hi && v[1] >= lo && v[1] <= hi;
    }
    static std::string accepted(double lo, double hi) {
        return options::formatDouble(lo) + ".." + options::formatDouble(hi) + ", as V or A2B:B2A";
    }
    static std::string format(const Value& v) {
        return v[0] == v[1] ? options::formatDouble(v[0])
                            : options::formatDouble(v[0]) + ":" + options::formatDouble(v[1]);
    }
};

// A rate: 0 (no cap) or lo..hi Mbit/s, per direction.
struct PerDirRate : PerDirNumber {
    static bool inRange(const Value& v, double lo, double hi) {
        return std::all_of(v.begin(), v.end(),
                           [&](double x) { return x == 0 || (x >= lo && x <= hi); });
    }
    static std::string accepted(double lo, double hi) {
        return "0 (no cap) or " + PerDirNumber::accepted(lo, hi);
    }
};

// A TUN device name: 1..15 characters [A-Za-z0-9_.-].
struct IfName : String {
    static constexpr const char* kType = "interface";
    static std::optional<Value> parse(std::string_view t) {
        const bool ok = !t.empty() && t.size() <= kIfNameMax && t != "." && t != ".." &&
                        std::all_of(t.begin(), t.end(), [](char c) {
                            return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' ||
                                   c == '_' || c == '.';
                        });
        return ok ? std::optional<Value>(std::string(t)) : std::nullopt;
    }
    static std::string accepted(int, int) {
        return "an interface name of 1..15 characters [A-Za-z0-9_.-]";
    }
};

// A namespace: a name from `ip netns list` (no '/') or an absolute path to a netns file.
struct NsName : String {
    static constexpr const char* kType = "namespace";
    static std::optional<Value> parse(std::string_view t) {
        if (t.empty() || t.size() > 4096 || t.find('\0') != std::string_view::npos) {
            return std::nullopt;
        }
        if (t[0] != '/' && (t.find('/') != std::string_view::npos || t == "." || t == "..")) {
            return std::nullopt;
        }
        return std::string(t);
    }
    static std::string accepted(int, int) {
        return "a namespace name without '/' or an absolute path to a netns file";
    }
};

#define ATLAS_WANEM_OPTIONS(X)                                                                    \
    X("--ns-a", NsName, ns_a, 0, 0, "NS",                                                         \
      "Namespace of side A (name under /run/netns or a path). Required.")                         \
    X("--ns-b", NsName, ns_b, 0, 0, "NS",                                                         \
      "Namespace of side B. Required; must differ from --ns-a.")                                  \
    X("--dev-a", IfName, dev_a, 0, 0, "NAME", "TUN device created in A.")                         \
    X("--dev-b", IfName, dev_b, 0, 0, "NAME", "TUN device created in B.")                         \
    X("--delay-ms", PerDirNumber, delay_ms, 0, kMaxDelayMs, "MS[:MS]",                            \
      "One-way propagation delay in ms (RTT = sum of both directions).")                          \
    X("--jitter-ms", PerDirNumber, jitter_ms, 0, kMaxDelayMs, "MS[:MS]",                          \
      "Delay varies uniformly by +-MS, at most the delay; never reorders a path.")                \
    X("--rate-mbit", PerDirRate, rate_mbit, kMinRateMbit, kMaxRateMbit, "R[:R]",                  \
      "Bottleneck rate in Mbit/s counting wire bytes (IP headers per segment + --l2-overhead).")  \
    X("--buf-ms", Optional<PerDirNumber>, buf_ms, 0.01, 60000, "MS[:MS]",                         \
      "Drop-tail bottleneck buffer as ms of link time. Default: 2 x one-way delay (about 1 "      \
      "BDP), at least 5 ms and 4 full-size segments.")                                            \
    X("--buf-kb", Optional<PerDirNumber>, buf_kb, 2, 4194304, "KB[:KB]",                          \
      "Drop-tail bottleneck buffer in KiB (instead of --buf-ms).")                                \
    X("--rate-step-s", Optional<Double>, rate_step_s, 0.001, 86400, "S",                          \
      "Change the rate mid-run: S seconds after start every path's rate becomes "                 \
      "--rate-step-mbit. The buffer keeps its size in bytes; bytes already queued keep their "    \
      "departure times.")                                                                         \
    X("--rate-step-mbit", Optional<PerDirRate>, rate_step_mbit, kMinRateMbit, kMaxRateMbit,       \
      "R[:R]", "The rate after --rate-step-s (both or neither).")                                 \
    X("--loss", PerDirNumber, loss, 0, 1, "P[:P]",                                                \
      "Bernoulli loss probability per TCP segment (GSO packets are cut in userspace).")           \
    X("--paths", Uint, paths, 1, kMaxPaths, "K",                                                  \
      "Parallel paths. Each TCP/UDP flow's 5-tuple is hashed onto one path; each path has its "   \
      "own bottleneck queue and delay.")                                                          \
    X("--path-rate-mbit", List<PerDirRate>, path_rate_mbit, kMinRateMbit, kMaxRateMbit, "R,R,..", \
      "Per-path rate (K values); overrides --rate-mbit.")                                         \
    X("--path-delay-ms", List<PerDirNumber>, path_delay_ms, 0, kMaxDelayMs, "MS,MS,..",           \
      "Per-path one-way delay (K values); overrides --delay-ms.")                                 \
    X("--split", Enum<SplitMode>, split, 0, 0, "MODE",                                            \
      "How GSO packets are cut when segments drop: runs (survivors stay GSO runs, fast) or "      \
      "segments (with loss > 0 every segment is written on its own).")                            \
    X("--l2-overhead", Uint, l2_overhead, 0, 128, "BYTES",                                        \
      "Bytes added to each segment's wire size (38 models Ethernet framing; 0: the cap counts "   \
      "IP bytes).")                                                                               \
    X("--hash-seed", Uint, hash_seed, 0, UINT32_MAX, "N", "Seed of the flow-to-path hash.")       \
    X("--seed", Optional<Uint>, seed, 0, UINT64_MAX, "N",                                         \
      "Seed for loss and jitter. Default: random (reported in the stats).")                       \
    X("--mtu", Uint, mtu, 576, 65535, "BYTES", "MTU of both devices (1500: MSS 1448).")           \
    X("--txqueuelen", Uint, txqueuelen, 1, 1000000, "N",                                          \
      "TX queue length of both devices. TUN drops when this ring is full, so keep it far above "  \
      "the emulated buffer.")                                                                     \
    X("--timer-slack-ns", Uint, timer_slack_ns, 1, 10000000, "NS",                                \
      "Timer slack of the direction threads.")                                                    \
    X("--spin-us", Uint, spin_us, 0, 10000, "US",                                                 \
      "Busy-poll for the last US microseconds before a delivery (costs CPU).")                    \
    X("--batch", Uint, batch, 1, 4096, "N", "Frames read or written per wakeup at most.")         \
    X("--rt-priority", Uint, rt_priority, 0, 99, "N",                                             \
      "Run the direction threads SCHED_FIFO at this priority (0 = normal scheduling). Keeps "     \
      "delay and rate accurate when other processes load the CPUs; falls back to normal "         \
      "scheduling with a warning when not permitted.")                                            \
    X("--ring-mb", Optional<Double>, ring_mb, 4, 65536, "MB",                                     \
      "Delay-line memory per path and direction in MiB (reserved lazily). Default: 2 x (rate x "  \
      "(delay + jitter) + buffer) + 16 MiB; uncapped paths assume 16 Gbit/s.")                    \
    X("--stats", Path, stats_path, 0, 0, "FILE",                                                  \
      "Write the JSON counters to FILE (atomically replaced) instead of stdout.")                 \
    X("--ready-file", Path, ready_file, 0, 0, "FILE",                                             \
      "Create FILE (containing the pid) once both devices exist and forwarding runs.")            \
    X("--check", Switch, check, 0, 0, "",                                                         \
      "Validate the flags and exit (status 0 when valid); creates nothing.")                      \
    X("--help", Switch, help, 0, 0, "", "Print this help and exit.")                              \
    X("--version", Switch, version, 0, 0, "", "Print the version and exit.")

#define ATLAS_WANEM_ALIASES(X) X("-h", "--help", false)

Status validate(const Options& o) {
    if (o.ns_a.empty() || o.ns_b.empty()) {
        return {Code::kInvalidArgument, "--ns-a and --ns-b are required"};
    }
    if (namespacePath(o.ns_a) == namespacePath(o.ns_b)) {
        return {Code::kInvalidArgument,
                "--ns-a and --ns-b name the same namespace; traffic between two addresses of "
                "one namespace never crosses the emulated link"};
    }
    if (o.rate_step_s.has_value() != o.rate_step_mbit.has_value()) {
        return {Code::kInvalidArgument,
                "--rate-step-s and --rate-step-mbit go together: when, and the rate from then on"};
    }
    if (o.buf_ms && o.buf_kb) {
        return {Code::kInvalidArgument, "--buf-ms and --buf-kb are mutually exclusive"};
    }
    if (!o.path_rate_mbit.empty() && o.path_rate_mbit.size() != o.paths) {
        return {Code::kInvalidArgument, "--path-rate-mbit has " +
                                            std::to_string(o.path_rate_mbit.size()) +
                                            " values but --paths is " + std::to_string(o.paths)};
    }
    if (!o.path_delay_ms.empty() && o.path_delay_ms.size() != o.paths) {
        return {Code::kInvalidArgument, "--path-delay-ms has " +
                                            std::to_string(o.path_delay_ms.size()) +
                                            " values but --paths is " + std::to_string(o.paths)};
    }
    for (int d = 0; d < 2; ++d) {
        for (uint32_t p = 0; p < o.paths; ++p) {
            const double delay = o.path_delay_ms.empty() ? o.delay_ms[d] : o.path_delay_ms[p][d];
            if (o.jitter_ms[d] > delay) {
                return {Code::kInvalidArgument, std::string("--jitter-ms (") + kDirName[d] +
                                                    ") exceeds the one-way delay " + "of path " +
                                                    std::to_string(p) +
                                                    "; jitter must be 0..delay"};
            }
        }
    }
    return Status::ok();
}

}  // namespace

const options::Table<Options>& optionTable() {
    static const auto table =
        ATLAS_OPTIONS_TABLE(Options, ATLAS_WANEM_OPTIONS, ATLAS_WANEM_ALIASES);
    return table;
}

std::string namespacePath(const std::string& ns) {
    return !ns.empty() && ns[0] == '/' ? ns : "/run/netns/" + ns;
}

Result<Options> parseOptions(int argc, const char* const* argv) {
    options::Parsed<Options> p;
    options::readArgs(optionTable(), std::vector<std::string>(argv + 1, argv + argc), &p);
    for (const std::string& word : p.positional) {
        p.errors.push_back("unexpected argument '" + word + "'");
    }
    ATLAS_RETURN_IF_ERROR(p.status());
    if (p.config.help || p.config.version) {
        return p.config;
    }
    ATLAS_RETURN_IF_ERROR(validate(p.config));
    return p.config;
}

std::string helpText() {
    return "Usage: atlas-wanem --ns-a NS --ns-b NS [options]\n"
           "\n"
           "Userspace WAN link emulator between two network namespaces. Creates TUN device\n"
           "--dev-a inside namespace A and --dev-b inside B (IFF_VNET_HDR + TSO offload, so it\n"
           "moves 64 KB GSO packets), brings them up, and forwards A->B and B->A on one thread\n"
           "each through: per-segment loss -> drop-tail bottleneck at --rate-mbit -> one-way\n"
           "delay (+ jitter). The devices vanish when the process exits. Addresses and routes\n"
           "are configured by the caller, e.g.\n"
           "  ip -n A addr add 10.1.0.1 peer 10.2.0.1 dev wanem-a\n"
           "\n"
           "Per-direction values are V (both directions) or A2B:B2A. Needs root (CAP_NET_ADMIN\n"
           "and CAP_SYS_ADMIN for setns) and /dev/net/tun.\n"
           "\n"
           "Signals: SIGUSR1 prints the JSON counters; SIGINT/SIGTERM print them and exit.\n"
           "Exit status: 0 after a signal, 1 on a runtime failure, 2 on bad options.\n"
           "\nOptions:\n" +
           options::flagHelp(optionTable());
}

LinkParams linkParams(const Options& o, int dir, uint32_t path) {
    LinkParams lp;
    const double rate_mbit =
        o.path_rate_mbit.empty() ? o.rate_mbit[dir] : o.path_rate_mbit[path][dir];
    const double delay_ms = o.path_delay_ms.empty() ? o.delay_ms[dir] : o.path_delay_ms[path][dir];
    lp.rate_bps = rate_mbit * 1e6;
    lp.delay_ns = static_cast<Nanos>(std::llround(delay_ms * 1e6));
    lp.jitter_ns = static_cast<Nanos>(std::llround(o.jitter_ms[dir] * 1e6));
    // A buffer below four full-size segments (plus headers) could never pass a GSO burst.
    const double min_bytes = 4.0 * (o.mtu + o.l2_overhead);
    double bytes = 0;
    if (o.buf_kb) {
        bytes = (*o.buf_kb)[dir] * 1024.0;
    } else {
        const double ms = o.buf_ms ? (*o.buf_ms)[dir] : std::max(2 * delay_ms, 5.0);
        bytes = lp.rate_bps / 8.0 * ms / 1e3;
    }
    lp.buffer_bytes = static_cast<uint64_t>(std::max(bytes, min_bytes));
    return lp;
}

size_t ringBytes(const Options& o, int dir, uint32_t path) {
    if (o.ring_mb) {
        return static_cast<size_t>(*o.ring_mb * 1024 * 1024);
    }
    const LinkParams lp = linkParams(o, dir, path);
    const double seconds = static_cast<double>(lp.delay_ns + lp.jitter_ns) / 1e9;
    double bytes = 0;
    if (lp.rate_bps > 0) {
        // Factor 2: a record of a small frame (an ACK) takes ~1.5x its wire bytes.
        bytes = 2.0 * (lp.rate_bps / 8.0 * seconds + static_cast<double>(lp.buffer_bytes));
    } else {
        bytes = 1.25 * kUncappedSizingBps / 8.0 * seconds;
    }
    bytes += 16.0 * 1024 * 1024;
    return static_cast<size_t>(std::min(bytes, 64.0 * 1024 * 1024 * 1024));
}

PipelineConfig pipelineConfig(const Options& o, int dir, uint64_t rng_seed) {
    PipelineConfig c;
    for (uint32_t p = 0; p < o.paths; ++p) {
        c.paths.push_back(linkParams(o, dir, p));
        c.ring_bytes.push_back(ringBytes(o, dir, p));
    }
    c.loss = o.loss[dir];
    c.split = o.split;
    c.l2_overhead_bytes = o.l2_overhead;
    c.hash_seed = o.hash_seed;
    c.rng_seed = rng_seed;
    if (o.rate_step_mbit) {
        c.rate_step_bps = (*o.rate_step_mbit)[dir] * 1e6;  // rate_step_at_ns: set by the caller
    }
    return c;
}

}  // namespace atlas::wanem
