// Helpers for the `wan` tests: a pair of network namespaces joined by a real atlas-wanem
// process, created with a name unique to this test process and removed in the destructor
// (so also when an assertion fails). The emulator gets PR_SET_PDEATHSIG, so it dies with the
// test process; namespaces left behind by a crashed earlier run (dead pid in the name) are
// swept at the next start.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "atlas/common/status.h"

namespace atlas::wanem::test {

// Why the wan tests cannot run here (not root, no /dev/net/tun, `ip netns` unusable, no
// atlas-wanem binary), or nullopt when they can.
std::optional<std::string> wanSkipReason();

// Paths of the emulator binary and the source tree (env ATLAS_WANEM / ATLAS_SOURCE_DIR,
// else the values compiled in by CMake).
std::string wanemBinary();
std::string sourceDir();

// A name prefix no other test process uses: "awt<pid>x<n>".
std::string uniquePrefix();

// Runs argv (execvp, no shell), returns the exit status (or -1). stdout/stderr go to
// `output` when given.
int runCommand(const std::vector<std::string>& argv, std::string* output = nullptr);

// Runs fn() on a new thread that first joins namespace `ns` (setns is per thread), and
// waits for it.
Status runInNamespace(const std::string& ns, const std::function<void()>& fn);

// A socket created inside namespace `ns` (it stays bound to that namespace and can then be
// used from any thread). Returns -1 on failure.
int tcpSocketIn(const std::string& ns);

// A check of a time or a rate that this machine must deliver, run in rounds. This VM's
// hypervisor takes CPU ("steal" in /proc/stat: 35-50 % at times on the 2-core runners), and
// a round measured while the VM was descheduled measures the host, not the code. A round is
// conclusive when its premise held and under kMaxStealFraction of the CPU was stolen.
// Verdict: kPassed at the first conclusive round within bounds; kFailed when conclusive
// rounds ran and none was within; kAllStolen when no round was conclusive (the test then
// skips, naming the figures). A code defect fails every conclusive round.
struct TimedRound {
    bool premise = true;  // e.g. the offered load really exceeded the cap
    bool within = false;  // the bound held
    std::string figures;  // what was measured, for the log
    // figures = the printf-formatted text.
    __attribute__((format(printf, 2, 3))) void describe(const char* fmt, ...);
};
enum class TimedVerdict { kPassed, kFailed, kAllStolen };
inline constexpr double kMaxStealFraction = 0.10;
TimedVerdict runTimedRounds(int max_rounds, const std::function<TimedRound()>& round,
                            std::string* log);

// Share of all CPUs' time the hypervisor took since construction (0 on bare metal).
class StealMeter {
  public:
    StealMeter();
    double stolenFraction() const;

  private:
    static bool read(uint64_t& steal, uint64_t& total);
    uint64_t steal0_ = 0, total0_ = 0;
    bool ok_ = false;
};

class EmulatedLink {
  public:
    // Creates namespaces <prefix>-a and <prefix>-b (lo up, IPv6 off, tcp_no_metrics_save=1).
    explicit EmulatedLink(std::string prefix);
    ~EmulatedLink();
    EmulatedLink(const EmulatedLink&) = delete;
    EmulatedLink& operator=(const EmulatedLink&) = delete;

    // Starts atlas-wanem between the two namespaces with `args` (e.g. --delay-ms 10) and
    // configures 10.1.0.1 (A) <-> 10.2.0.1 (B). Waits for the ready file (5 s).
    Status start(const std::vector<std::string>& args);

    // Counters now (SIGUSR1, waits until a newer document is written).
    Result<nlohmann::json> stats();
    // SIGTERM, wait for exit, return the final counters.
    Result<nlohmann::json> stop();

    const std::string& nsA() const { return ns_a_; }
    const std::string& nsB() const { return ns_b_; }
    static constexpr const char* kAddrA = "10.1.0.1";
    static constexpr const char* kAddrB = "10.2.0.1";

  private:
    Result<nlohmann::json> readStats(uint64_t newer_than_seq);

    std::string prefix_, ns_a_, ns_b_, dir_;
    pid_t pid_ = -1;
    uint64_t last_seq_ = 0;
};

// ip:port as a sockaddr_in.
sockaddr_in addrOf(const char* ip, uint16_t port);
// A listening TCP socket on B's address, created inside B; -1 on failure.
int listenIn(const EmulatedLink& link, uint16_t port);
// A TCP socket created inside A and connected to B's address; -1 on failure.
int connectFrom(const EmulatedLink& link, uint16_t port);

}  // namespace atlas::wanem::test
