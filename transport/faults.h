// Fault injection for tests (the transport's test seam, docs/protocol.md "Fault injection").
// TEST-ONLY: the plugin accepts a fault plan (ATLAS_FAULTS) only when the process also sets
// ATLAS_TEST_MODE=1, and refuses to initialise otherwise; loopback tests set
// TransportConfig::faults directly. An empty plan costs one well-predicted branch per I/O.
//
// Plan grammar: faults separated by ';', each `kind:key=value,key=value,...`:
//   reset:stream=K[,after=BYTES][,side=send|recv]   abortive close (RST) of stream K once
//                                                   BYTES moved on it
//   stall:stream=K,ms=T[,after=BYTES][,side=send|recv]  stream K (the incarnation live then)
//                                                   moves nothing for T ms
//   drop:ms=T[,after=BYTES]                         every stream reset, and every rejoin dial
//                                                   fails as unreachable for T ms (an outage)
//   flip:stream=K[,after=BYTES][,part=header|payload]   one byte of the next data frame sent
//                                                   on stream K is flipped on the wire
// K is the comm's stream index (0 = control, 1..N = data streams); BYTES takes K/M/G suffixes
// (binary); "moved" counts payload bytes accepted by the kernel (send side) or read from the
// socket (recv side), over all incarnations of the stream, or of every stream for `drop`.
// `side` says which comm of a pair acts (default send); drop and flip act on the send side.
// Each fault fires once per comm.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"

namespace atlas::transport {

struct FaultSpec {
    enum class Kind { kReset, kStall, kDrop, kFlip };
    Kind kind = Kind::kReset;
    int stream = -1;  // -1 for drop
    uint64_t after_bytes = 0;
    Nanos duration_ns = 0;  // stall, drop
    bool recv_side = false;
    bool payload = true;  // flip: payload byte (true) or header byte (false)
};

// Parses a plan; the error names the offending fault and what is accepted.
Result<std::vector<FaultSpec>> parseFaultPlan(std::string_view text);
std::string describeFault(const FaultSpec& f);

// One comm's faults (those of its side), with their trigger state. Engine thread only.
class FaultInjector {
  public:
    FaultInjector(const std::vector<FaultSpec>& plan, bool send_side);
    bool empty() const { return faults_.empty(); }

    struct Fired {
        std::bitset<65> reset;  // bit K: reset stream K now (K <= wire::kMaxStreams)
        bool drop = false;      // reset every stream; dials blocked (see dialBlocked)
    };
    // `n` payload bytes moved on stream `index` at `now`. Fires what crossed its threshold.
    Fired onBytes(int index, uint64_t n, Nanos now);
    // Inside a drop window: a rejoin dial must fail as if the path were down.
    bool dialBlocked(Nanos now) const { return now < drop_until_; }
    Nanos dropEnds() const { return drop_until_; }
    // Stream `index` is stalled until the returned time (0: not stalled).
    Nanos stalledUntil(int index, Nanos now) const;
    // A new incarnation of stream `index` joined: a stall of the old one does not carry over.
    void clearStall(int index);
    // A flip is armed on stream `index`: consumed by the next data frame sent there.
    bool takeFlip(int index, bool* payload);

  private:
    struct Armed {
        FaultSpec spec;
        bool fired = false;
    };
    std::vector<Armed> faults_;
    std::vector<uint64_t> moved_;  // per stream index
    uint64_t total_ = 0;
    Nanos drop_until_ = 0;
    std::vector<Nanos> stall_until_;
    std::vector<int> flips_;  // per stream: armed flips, payload=1 header=2 (bit set)
};

}  // namespace atlas::transport
