// MessageTrain: the receiver's sample of the path's rate (docs/protocol.md "Confirmation"),
// the rule of when a train opens, is cut, ends and is spoiled. Pure: the comm passes the
// clock, the kernel's counts and its own counters in; no syscall, no lock, no clock here.
//
// A train is a stretch of time during which the receiver waited for a message (its receive
// was posted before its first frame was read): the bytes the kernel received on the comm's
// data streams meanwhile, over that time, are the rate they crossed the bottleneck at. Every
// message in flight counts, not only the one waited for (several in flight share the link).
//
// Lifecycle, driven by the receiving comm's engine thread:
//   open()    at a message's first frame, when the comm may open one (canOpen());
//   cutDue()  on every payload read of the message (no syscall): a cut is worth a kernel read;
//   cut()     then, with the kernel's count: a part of the message is a sample of its own and
//             the next part starts at once, so a long message (64 MiB at 0.5 Gbit/s with
//             four in flight: four seconds) gives a sample every span, not one at its end;
//   close()   at the message's completion: its last part.
// A part that saw a segment arrive out of order is cut after kLossySpans spans, not one: the
// kernel counts the bytes behind a hole when the hole fills, all at once, so a short part
// across a repair reads far above or below the link (measured: 200 ms parts at 0.17 to 8
// Gbit/s on a 1 Gbit/s link whose bottleneck dropped); a longer one averages the holes at its
// two ends out. For the same reason a message that ends sooner than that with a segment out
// of order (its train, or its last part) is no sample: its train holds the repair's round
// trip, so a 2.5 MiB message that crosses a 1 Gbit/s, 50 ms link in 21 ms reads about a third
// of the link. Under 0.1 % random loss 85 % of such messages saw one and pulled the estimate
// (a high quantile) below what clean transfers read (docs/arbitration.md "Under random
// loss"). A path that reorders without losing (netem jitter) makes every short message
// lossy here: no estimate from them, and grants go back unheld (the rule for an unknown
// rate). A stream reset, a duplicate or a parked stream's backlog read during the part
// spoils it and ends the message's train (the backlog arrived before the part began).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "atlas/common/clock.h"

namespace atlas::transport {

// A train part is cut after this long unless a caller says otherwise (the receivers'
// ConfirmCadence::train_span_ns): a megabyte even at 40 Mbit/s, five samples a second.
inline constexpr Nanos kDefaultTrainSpanNs = 200 * kNsPerMs;

// What the kernel received on a comm's data streams (TCP_INFO, summed over the streams). The
// kernel's count, not the engine's reads: a read completes a whole 512 KiB piece at a time, so
// with pieces of the next message completing right after this one's, trains of 2.5 MiB
// messages counted by reads measured 0.2 to 35 Gbit/s on a 1 Gbit/s link.
struct KernelCount {
    uint64_t bytes = 0;         // tcpi_bytes_received
    uint64_t out_of_order = 0;  // tcpi_rcv_ooopack (0 before Linux 5.4: no part is lossy)
};

// The comm's own counters that spoil a train when they move.
struct TrainSpoilers {
    uint64_t stream_resets = 0;
    uint64_t duplicate_bytes = 0;
    uint64_t unparks = 0;  // frames read from a parked stream (a backlog burst)
    bool operator==(const TrainSpoilers&) const = default;
};

struct TrainSample {
    uint64_t bytes = 0;
    Nanos dispersion_ns = 0;
};

struct TrainRules {
    // Smallest sample: shorter trains are read jitter.
    static constexpr uint64_t kMinBytes = 1ull << 20;
    // Trains open at most this often: each costs 2 x nstreams getsockopt calls, which a fast
    // LAN comm moving 1 MiB messages every 100 us must not pay per message.
    static constexpr Nanos kMinGapNs = 5 * kNsPerMs;
    // A part that saw a segment out of order is cut after this many spans.
    static constexpr int kLossySpans = 5;
    // Parts are cut after this long (0: one train per message); the cadence's train_span_ns.
    Nanos span_ns = kDefaultTrainSpanNs;
};

// One comm's train state (one train at a time per comm).
class MessageTrain {
  public:
    explicit MessageTrain(TrainRules rules = {}) : rules_(rules) {}

    // May a message of `total` bytes whose first frame is read now open a train? Not while
    // one is open, not for a message below a sample's size or read from a parked stream
    // (its bytes piled up in the kernel while no receive was posted), at most every kMinGapNs.
    bool canOpen(uint64_t total, bool from_parked, Nanos now) const;
    // Opens it for message `seq`; `payload` is the comm's payload byte count now.
    void open(uint64_t seq, Nanos now, const KernelCount& kernel, uint64_t payload,
              const TrainSpoilers& spoilers);
    bool isOpen() const { return first_ns_ >= 0; }
    uint64_t seq() const { return seq_; }

    // Is a cut due (the open part has run its spans and a sample's worth was read)? Cheap:
    // called on every payload read of the message.
    bool cutDue(Nanos now, uint64_t payload) const;
    // The cut, with the kernel's count (nullopt: the kernel could not be read). Returns the
    // finished part's sample, if it is one; the next part starts at `now`, or the open part
    // runs on to kLossySpans when it saw a segment out of order, or the train ends when it
    // was spoiled.
    std::optional<TrainSample> cut(Nanos now, const std::optional<KernelCount>& kernel,
                                   uint64_t payload, const TrainSpoilers& spoilers);
    // The message completed with `result` bytes: its last part's sample, if it is one. The
    // train is closed afterwards.
    std::optional<TrainSample> close(Nanos now, uint64_t result,
                                     const std::optional<KernelCount>& kernel,
                                     const TrainSpoilers& spoilers);

  private:
    std::optional<TrainSample> sample(Nanos now, const KernelCount& kernel) const;

    TrainRules rules_;
    uint64_t seq_ = 0;
    Nanos first_ns_ = -1;  // the open part's start; -1: no train open
    Nanos next_open_ns_ = 0;
    int spans_ = 1;
    KernelCount kernel_;
    uint64_t payload_ = 0;
    TrainSpoilers spoilers_;
};

// GateStalls: the sender's half of the train rule. A receiver's train is a sample of the path
// only while the sender had the message's bytes to send; when the flow's admission gate
// stopped it in the middle of a message (its grant's budget spent or its slot over, the
// rest waiting for the next turn), the train that spans the wait measured the wait. Left
// in, such samples feed back: a low estimate shrinks the byte budget, every message is cut
// into turns with a hold between them, and every train says the rate is low (measured: the
// estimate fell to 4 Mbit/s on a 1 Gbit/s link, 2.5 MiB transfers took 5 s each, and it
// never recovered). What such a sample still says is the policy's (sched::gateLimitedSample).
//
// The sender's engine records each such stall (begin() once the gate refused it with a
// message partly striped and every piece striped before is through: in the kernel, then
// sent and acknowledged, at the time the receiver had the last byte; end() when it may send
// again: while the streams or their sockets still hold bytes the link is fed, and a spent
// budget stops the engine with tens of MiB queued); when a train arrives it asks stalledNs(): how
// much of the time the train's bytes can have been sent in (from 2 RTT before its
// dispersion up to now: the confirmation carrying it may wait up to an RTT) the stalls
// covered, each counted from half an RTT after it began (the bytes already on the wire keep
// arriving for a one-way delay), less one RTT in all (the window's ends are that uncertain).
// It errs short: counted from the stops themselves, the corrected trains of a lone granted
// flow came out above the link (1.33 Gbit/s on 1) and kept lifting the estimate after a
// rate step. Pure: times are the caller's; the last kKept stalls
// are enough for one train.
class GateStalls {
  public:
    static constexpr size_t kKept = 8;
    void begin(Nanos now);  // no-op while one is open
    void end(Nanos now);    // no-op unless one is open
    bool open() const { return open_from_ >= 0; }
    Nanos stalledNs(Nanos now, Nanos dispersion_ns, Nanos rtt_ns) const;

  private:
    struct Stall {
        Nanos begin = 0;
        Nanos end = 0;
    };
    std::array<Stall, kKept> kept_{};
    size_t next_ = 0;
    size_t count_ = 0;
    Nanos open_from_ = -1;
};

}  // namespace atlas::transport
