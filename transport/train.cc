#include "transport/train.h"

#include "transport/wire.h"

namespace atlas::transport {

bool MessageTrain::canOpen(uint64_t total, bool from_parked, Nanos now) const {
    return !isOpen() && !from_parked && total >= TrainRules::kMinBytes && now >= next_open_ns_;
}

void MessageTrain::open(uint64_t seq, Nanos now, const KernelCount& kernel, uint64_t payload,
                        const TrainSpoilers& spoilers) {
    seq_ = seq;
    first_ns_ = now;
    next_open_ns_ = now + TrainRules::kMinGapNs;
    spans_ = 1;
    kernel_ = kernel;
    payload_ = payload;
    spoilers_ = spoilers;
}

bool MessageTrain::cutDue(Nanos now, uint64_t payload) const {
    // The engine's read count says whether a sample's worth has arrived (no getsockopt); the
    // sample itself is the kernel's count.
    return isOpen() && rules_.span_ns > 0 && payload - payload_ >= TrainRules::kMinBytes &&
           now >= first_ns_ + spans_ * rules_.span_ns;
}

std::optional<TrainSample> MessageTrain::cut(Nanos now, const std::optional<KernelCount>& kernel,
                                             uint64_t payload, const TrainSpoilers& spoilers) {
    if (!isOpen()) {
        return std::nullopt;
    }
    if (!kernel || spoilers != spoilers_) {
        first_ns_ = -1;  // spoiled: this message gives no more samples
        return std::nullopt;
    }
    if (kernel->out_of_order != kernel_.out_of_order && spans_ < TrainRules::kLossySpans) {
        spans_ = TrainRules::kLossySpans;  // lossy: runs on (see the header)
        return std::nullopt;
    }
    std::optional<TrainSample> s = sample(now, *kernel);
    // The message is still arriving and its receiver still waits: the next part starts where
    // this one ended, from the same kernel count (no read of its own).
    first_ns_ = now;
    spans_ = 1;
    kernel_ = *kernel;
    payload_ = payload;
    return s;
}

std::optional<TrainSample> MessageTrain::close(Nanos now, uint64_t result,
                                               const std::optional<KernelCount>& kernel,
                                               const TrainSpoilers& spoilers) {
    if (!isOpen()) {
        return std::nullopt;
    }
    std::optional<TrainSample> s;
    if (result >= TrainRules::kMinBytes && kernel && spoilers == spoilers_) {
        s = sample(now, *kernel);
    }
    first_ns_ = -1;  // closed whatever follows: the next message's first frame may open one
    return s;
}

std::optional<TrainSample> MessageTrain::sample(Nanos now, const KernelCount& kernel) const {
    if (kernel.bytes < kernel_.bytes) {
        return std::nullopt;  // a stream's counter went back: not one socket any more
    }
    const uint64_t bytes = kernel.bytes - kernel_.bytes;
    const Nanos dispersion = now - first_ns_;
    if (bytes < TrainRules::kMinBytes || dispersion <= 0 ||
        static_cast<uint64_t>(dispersion) > wire::kMaxTrainNs) {
        return std::nullopt;
    }
    // Lossy and shorter than kLossySpans spans: a repair's round trip in a short train (see
    // the header). A lossy cut is only due after that long; this catches a message's end.
    const Nanos span = rules_.span_ns > 0 ? rules_.span_ns : kDefaultTrainSpanNs;
    if (kernel.out_of_order != kernel_.out_of_order &&
        dispersion < TrainRules::kLossySpans * span) {
        return std::nullopt;
    }
    return TrainSample{bytes, dispersion};
}

void GateStalls::begin(Nanos now) {
    if (open_from_ < 0) {
        open_from_ = now;
    }
}

void GateStalls::end(Nanos now) {
    if (open_from_ < 0) {
        return;
    }
    kept_[next_] = Stall{open_from_, now};
    next_ = (next_ + 1) % kKept;
    count_ = count_ < kKept ? count_ + 1 : kKept;
    open_from_ = -1;
}

Nanos GateStalls::stalledNs(Nanos now, Nanos dispersion_ns, Nanos rtt_ns) const {
    const Nanos from = now - dispersion_ns - 2 * rtt_ns;
    Nanos covered = 0;
    // The bytes on the wire when the engine stopped still arrive for about a one-way delay:
    // the receiver's gap starts that much later.
    auto add = [&](Nanos b, Nanos e) {
        b += rtt_ns / 2;
        b = b > from ? b : from;
        e = e < now ? e : now;
        covered += e > b ? e - b : 0;
    };
    for (size_t i = 0; i < count_; ++i) {
        add(kept_[i].begin, kept_[i].end);
    }
    if (open_from_ >= 0) {
        add(open_from_, now);
    }
    // Less one RTT: what is left is a wait for certain (the window's ends are an RTT wide).
    return covered > rtt_ns ? covered - rtt_ns : 0;
}

}  // namespace atlas::transport
