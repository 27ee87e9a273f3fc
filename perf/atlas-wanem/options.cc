#include "perf/atlas-wanem/options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string_view>

namespace atlas::wanem {
namespace {

constexpr double kMaxDelayMs = 10000;
constexpr double kMaxRateMbit = 400000;  // 400 Gbit/s
constexpr double kMinRateMbit = 0.01;
constexpr uint32_t kMaxPaths = 64;
constexpr size_t kIfNameMax = 15;  // IFNAMSIZ - 1
// Assumed forwarding rate of an uncapped path when sizing its delay line: above what the
// emulator reaches on the development machines (about 13 Gbit/s).
constexpr double kUncappedSizingBps = 16e9;

Status bad(std::string_view flag, std::string_view value, std::string_view accepted) {
    return {Code::kInvalidArgument, std::string(flag) + ": invalid value '" + std::string(value) +
                                        "'; accepted: " + std::string(accepted)};
}

bool toDouble(std::string_view text, double& out) {
    if (text.empty() || text.size() > 64) {
        return false;
    }
    const std::string s(text);
    char* end = nullptr;
    errno = 0;
    out = std::strtod(s.c_str(), &end);
    return errno == 0 && end == s.c_str() + s.size() && std::isfinite(out);
}

bool toU64(std::string_view text, uint64_t& out) {
    if (text.empty() || text.size() > 20 || text[0] == '-' || text[0] == '+') {
        return false;
    }
    const std::string s(text);
    char* end = nullptr;
    errno = 0;
    out = std::strtoull(s.c_str(), &end, 0);
    return errno == 0 && end == s.c_str() + s.size();
}

Status number(std::string_view flag, std::string_view text, double lo, double hi,
              std::string_view accepted, double& out) {
    double v = 0;
    if (!toDouble(text, v) || v < lo || v > hi) {
        return bad(flag, text, accepted);
    }
    out = v;
    return Status::ok();
}

template <typename T>
Status integer(std::string_view flag, std::string_view text, uint64_t lo, uint64_t hi,
               std::string_view accepted, T& out) {
    uint64_t v = 0;
    if (!toU64(text, v) || v < lo || v > hi) {
        return bad(flag, text, accepted);
    }
    out = static_cast<T>(v);
    return Status::ok();
}

// "V" or "AB:BA".
Status perDir(std::string_view flag, std::string_view text, double lo, double hi,
              std::string_view accepted, PerDir<double>& out) {
    const size_t colon = text.find(':');
    if (colon == std::string_view::npos) {
        ATLAS_RETURN_IF_ERROR(number(flag, text, lo, hi, accepted, out[0]));
        out[1] = out[0];
        return Status::ok();
    }
    ATLAS_RETURN_IF_ERROR(number(flag, text.substr(0, colon), lo, hi, accepted, out[0]));
    return number(flag, text.substr(colon + 1), lo, hi, accepted, out[1]);
}

Status perDirList(std::string_view flag, std::string_view text, double lo, double hi,
                  std::string_view accepted, std::vector<PerDir<double>>& out) {
    out.clear();
    size_t start = 0;
    while (true) {
        const size_t comma = text.find(',', start);
        const std::string_view item = text.substr(start, comma - start);
        PerDir<double> v{};
        ATLAS_RETURN_IF_ERROR(perDir(flag, item, lo, hi, accepted, v));
        out.push_back(v);
        if (out.size() > kMaxPaths) {
            return bad(flag, text, "at most 64 values");
        }
        if (comma == std::string_view::npos) {
            break;
        }
        start = comma + 1;
    }
    return Status::ok();
}

Status rateValue(std::string_view flag, std::string_view text, PerDir<double>& out) {
    constexpr std::string_view kAccepted = "0 (no cap) or 0.01..400000 Mbit/s, as V or A2B:B2A";
    ATLAS_RETURN_IF_ERROR(perDir(flag, text, 0, kMaxRateMbit, kAccepted, out));
    for (double v : out) {
        if (v != 0 && v < kMinRateMbit) {
            return bad(flag, text, kAccepted);
        }
    }
    return Status::ok();
}

Status ifName(std::string_view flag, std::string_view text, std::string& out) {
    const bool ok = !text.empty() && text.size() <= kIfNameMax &&
                    std::all_of(text.begin(), text.end(),
                                [](char c) {
                                    return std::isalnum(static_cast<unsigned char>(c)) ||
                                           c == '-' || c == '_' || c == '.';
                                }) &&
                    text != "." && text != "..";
    if (!ok) {
        return bad(flag, text, "an interface name of 1..15 characters [A-Za-z0-9_.-]");
    }
    out = std::string(text);
    return Status::ok();
}

Status nsName(std::string_view flag, std::string_view text, std::string& out) {
    if (text.empty() || text.size() > 4096 || text.find('\0') != std::string_view::npos) {
        return bad(flag, text, "a namespace name from `ip netns list` or a path to a netns file");
    }
    if (text[0] != '/' &&
        (text.find('/') != std::string_view::npos || text == "." || text == "..")) {
        return bad(flag, text, "a namespace name without '/' or an absolute path");
    }
    out = std::string(text);
    return Status::ok();
}

struct Flag {
    const char* name;
    const char* metavar;  // nullptr: takes no value
    const char* help;
    std::function<Status(Options&, std::string_view)> apply;
};

const std::vector<Flag>& flags() {
    static const std::vector<Flag> table = {
        {"--ns-a", "NS", "Namespace of side A (name under /run/netns or a path). Required.",
         [](Options& o, std::string_view v) { return nsName("--ns-a", v, o.ns_a); }},
        {"--ns-b", "NS", "Namespace of side B. Required; must differ from --ns-a.",
         [](Options& o, std::string_view v) { return nsName("--ns-b", v, o.ns_b); }},
        {"--dev-a", "NAME",
         "TUN device created in A (1..15 chars [A-Za-z0-9_.-]). Default wanem-a.",
         [](Options& o, std::string_view v) { return ifName("--dev-a", v, o.dev_a); }},
        {"--dev-b", "NAME", "TUN device created in B. Default wanem-b.",
         [](Options& o, std::string_view v) { return ifName("--dev-b", v, o.dev_b); }},
        {"--delay-ms", "MS[:MS]",
         "One-way propagation delay, 0..10000 ms (RTT = sum of both directions). Default 0.",
         [](Options& o, std::string_view v) {
             return perDir("--delay-ms", v, 0, kMaxDelayMs, "0..10000 ms, as V or A2B:B2A",
                           o.delay_ms);
         }},
        {"--jitter-ms", "MS[:MS]",
         "Delay varies uniformly by +-MS, 0..delay; never reorders a path. Default 0.",
         [](Options& o, std::string_view v) {
             return perDir("--jitter-ms", v, 0, kMaxDelayMs, "0..delay ms, as V or A2B:B2A",
                           o.jitter_ms);
         }},
        {"--rate-mbit", "R[:R]",
         "Bottleneck rate in Mbit/s counting wire bytes (IP headers per segment + "
         "--l2-overhead); 0 = no cap, else 0.01..400000. Default 0.",
         [](Options& o, std::string_view v) { return rateValue("--rate-mbit", v, o.rate_mbit); }},
        {"--buf-ms", "MS[:MS]",
         "Drop-tail bottleneck buffer as ms of link time, 0.01..60000. Default: 2 x one-way "
         "delay (about 1 BDP), at least 5 ms and 4 full-size segments.",
         [](Options& o, std::string_view v) {
             PerDir<double> d{};
             ATLAS_RETURN_IF_ERROR(
                 perDir("--buf-ms", v, 0.01, 60000, "0.01..60000 ms, as V or A2B:B2A", d));
             o.buf_ms = d;
             return Status::ok();
         }},
        {"--buf-kb", "KB[:KB]",
         "Drop-tail bottleneck buffer in KiB, 2..4194304 (instead of --buf-ms).",
         [](Options& o, std::string_view v) {
             PerDir<double> d{};
             ATLAS_RETURN_IF_ERROR(
                 perDir("--buf-kb", v, 2, 4194304, "2..4194304 KiB, as V or A2B:B2A", d));
             o.buf_kb = d;
             return Status::ok();
         }},
        {"--loss", "P[:P]",
         "Bernoulli loss probability per TCP segment (GSO packets are cut in userspace), "
         "0..1. Default 0.",
         [](Options& o, std::string_view v) {
             return perDir("--loss", v, 0, 1, "a probability 0..1, as V or A2B:B2A", o.loss);
         }},
        {"--paths", "K",
         "Parallel paths, 1..64. Each TCP/UDP flow's 5-tuple is hashed onto one path; each "
         "path has its own bottleneck queue and delay. Default 1.",
         [](Options& o, std::string_view v) {
             return integer("--paths", v, 1, kMaxPaths, "an integer 1..64", o.paths);
         }},
        {"--path-rate-mbit", "R,R,..",
         "Per-path rate (K values, each R or A2B:B2A, 0 = no cap); overrides --rate-mbit.",
         [](Options& o, std::string_view v) {
             auto st =
                 perDirList("--path-rate-mbit", v, 0, kMaxRateMbit,
                            "K comma-separated rates 0 or 0.01..400000 Mbit/s", o.path_rate_mbit);
             ATLAS_RETURN_IF_ERROR(st);
             for (const auto& r : o.path_rate_mbit) {
                 for (double x : r) {
                     if (x != 0 && x < kMinRateMbit) {
                         return bad("--path-rate-mbit", v, "rates 0 or 0.01..400000 Mbit/s");
                     }
                 }
             }
             return Status::ok();
         }},
        {"--path-delay-ms", "MS,MS,..",
         "Per-path one-way delay (K values, each MS or A2B:B2A); overrides --delay-ms.",
         [](Options& o, std::string_view v) {
             return perDirList("--path-delay-ms", v, 0, kMaxDelayMs,
                               "K comma-separated delays 0..10000 ms", o.path_delay_ms);
         }},
        {"--split", "MODE",
         "How GSO packets are cut when segments drop: 'runs' (default; survivors stay GSO "
         "runs, fast) or 'segments' (with loss > 0 every segment is written on its own).",
         [](Options& o, std::string_view v) {
             if (v == "runs") {
                 o.split = SplitMode::kRuns;
             } else if (v == "segments") {
                 o.split = SplitMode::kSegments;
             } else {
                 return bad("--split", v, "'runs' or 'segments'");
             }
             return Status::ok();
         }},
        {"--l2-overhead", "BYTES",
         "Bytes added to each segment's wire size (38 models Ethernet framing), 0..128. "
         "Default 0 (the cap counts IP bytes).",
         [](Options& o, std::string_view v) {
             return integer("--l2-overhead", v, 0, 128, "an integer 0..128", o.l2_overhead);
         }},
        {"--hash-seed", "N", "Seed of the flow-to-path hash, 0..4294967295. Default 0.",
         [](Options& o, std::string_view v) {
             return integer("--hash-seed", v, 0, UINT32_MAX, "an integer 0..4294967295",
                            o.hash_seed);
         }},
        {"--seed", "N",
         "Seed for loss and jitter, 0..2^64-1. Default: random (reported in the stats).",
         [](Options& o, std::string_view v) {
             uint64_t s = 0;
             ATLAS_RETURN_IF_ERROR(integer("--seed", v, 0, UINT64_MAX, "an integer 0..2^64-1", s));
             o.seed = s;
             return Status::ok();
         }},
        {"--mtu", "BYTES", "MTU of both devices, 576..65535. Default 1500 (MSS 1448).",
         [](Options& o, std::string_view v) {
             return integer("--mtu", v, 576, 65535, "an integer 576..65535", o.mtu);
         }},
        {"--txqueuelen", "N",
         "TX queue length of both devices, 1..1000000. TUN drops when this ring is full, so "
         "keep it far above the emulated buffer. Default 10000.",
         [](Options& o, std::string_view v) {
             return integer("--txqueuelen", v, 1, 1000000, "an integer 1..1000000", o.txqueuelen);
         }},
        {"--timer-slack-ns", "NS",
         "Timer slack of the direction threads, 1..10000000 ns. Default 1000.",
         [](Options& o, std::string_view v) {
             return integer("--timer-slack-ns", v, 1, 10000000, "an integer 1..10000000",
                            o.timer_slack_ns);
         }},
        {"--spin-us", "US",
         "Busy-poll for the last US microseconds before a delivery, 0..10000 (costs CPU). "
         "Default 0.",
         [](Options& o, std::string_view v) {
             return integer("--spin-us", v, 0, 10000, "an integer 0..10000", o.spin_us);
         }},
        {"--batch", "N", "Frames read or written per wakeup at most, 1..4096. Default 256.",
         [](Options& o, std::string_view v) {
             return integer("--batch", v, 1, 4096, "an integer 1..4096", o.batch);
         }},
        {"--rt-priority", "N",
         "Run the direction threads SCHED_FIFO at priority 1..99 (0 = normal scheduling, the "
         "default). Keeps delay and rate accurate when other processes load the CPUs; falls "
         "back to normal scheduling with a warning when not permitted.",
         [](Options& o, std::string_view v) {
             return integer("--rt-priority", v, 0, 99, "an integer 0..99", o.rt_priority);
         }},
        {"--ring-mb", "MB",
         "Delay-line memory per path and direction, 4..65536 MiB (reserved lazily). Default: "
         "2 x (rate x (delay + jitter) + buffer) + 16 MiB; uncapped paths assume 16 Gbit/s.",
         [](Options& o, std::string_view v) {
             double mb = 0;
             ATLAS_RETURN_IF_ERROR(number("--ring-mb", v, 4, 65536, "4..65536 MiB", mb));
             o.ring_mb = mb;
             return Status::ok();
         }},
        {"--stats", "FILE",
         "Write the JSON counters to FILE (atomically replaced) instead of stdout.",
         [](Options& o, std::string_view v) {
             if (v.empty()) {
                 return bad("--stats", v, "a file path");
             }
             o.stats_path = std::string(v);
             return Status::ok();
         }},
        {"--ready-file", "FILE",
         "Create FILE (containing the pid) once both devices exist and forwarding runs.",
         [](Options& o, std::string_view v) {
             if (v.empty()) {
                 return bad("--ready-file", v, "a file path");
             }
             o.ready_file = std::string(v);
             return Status::ok();
         }},
        {"--check", nullptr, "Validate the flags and exit (status 0 when valid); creates nothing.",
         [](Options& o, std::string_view) {
             o.check = true;
             return Status::ok();
         }},
        {"--help", nullptr, "Print this help and exit.",
         [](Options& o, std::string_view) {
             o.help = true;
             return Status::ok();
         }},
        {"--version", nullptr, "Print the version and exit.",
         [](Options& o, std::string_view) {
             o.version = true;
             return Status::ok();
         }},
    };
    return table;
}

Status validate(const Options& o) {
    if (o.ns_a.empty() || o.ns_b.empty()) {
        return {Code::kInvalidArgument, "--ns-a and --ns-b are required"};
    }
    if (namespacePath(o.ns_a) == namespacePath(o.ns_b)) {
        return {Code::kInvalidArgument,
                "--ns-a and --ns-b name the same namespace; traffic between two addresses of "
                "one namespace never crosses the emulated link"};
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

std::string namespacePath(const std::string& ns) {
    return !ns.empty() && ns[0] == '/' ? ns : "/run/netns/" + ns;
}

Result<Options> parseOptions(int argc, const char* const* argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        std::string_view value;
        bool has_inline = false;
        if (const size_t eq = arg.find('=');
            arg.rfind("--", 0) == 0 && eq != std::string_view::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_inline = true;
        }
        if (arg == "-h") {
            arg = "--help";
        }
        const auto& table = flags();
        const auto it =
            std::find_if(table.begin(), table.end(), [&](const Flag& f) { return arg == f.name; });
        if (it == table.end()) {
            return Status(Code::kInvalidArgument, "unknown option '" + std::string(argv[i]) + "'");
        }
        if (it->metavar == nullptr) {
            if (has_inline) {
                return Status(Code::kInvalidArgument, std::string(it->name) + " takes no value");
            }
        } else if (!has_inline) {
            if (i + 1 >= argc) {
                return Status(Code::kInvalidArgument,
                              std::string(it->name) + " needs a value (" + it->metavar + ")");
            }
            value = argv[++i];
        }
        ATLAS_RETURN_IF_ERROR(it->apply(o, value));
    }
    if (o.help || o.version) {
        return o;
    }
    ATLAS_RETURN_IF_ERROR(validate(o));
    return o;
}

std::string helpText() {
    std::string s =
        "Usage: atlas-wanem --ns-a NS --ns-b NS [options]\n"
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
        "\nOptions:\n";
    for (const Flag& f : flags()) {
        std::string head = std::string("  ") + f.name;
        if (f.metavar != nullptr) {
            head += std::string(" ") + f.metavar;
        }
        s += head;
        if (head.size() < 26) {
            s += std::string(26 - head.size(), ' ');
        } else {
            s += "\n" + std::string(26, ' ');
        }
        // Wrap the description at ~100 columns.
        std::string_view text = f.help;
        size_t col = 26;
        while (!text.empty()) {
            const size_t sp = text.find(' ');
            const std::string_view word = text.substr(0, sp);
            if (col + word.size() > 98 && col > 26) {
                s += "\n" + std::string(26, ' ');
                col = 26;
            }
            s += word;
            col += word.size();
            if (sp == std::string_view::npos) {
                break;
            }
            s += ' ';
            ++col;
            text = text.substr(sp + 1);
        }
        s += '\n';
    }
    return s;
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
    return c;
}

}  // namespace atlas::wanem
