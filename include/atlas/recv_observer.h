// RecvObserver: lets the plugin watch when receives are posted and when their data lands,
// which is when the GPU is waiting (the bubble measurement, docs/bubbles.md). Declared here
// so transport/ can call it without knowing who listens.
//
// Threads: posted() runs on the poster (NCCL's progress thread) inside irecv; arrived(),
// completed() and closed() run on the comm's engine thread, in that order for one receive.
// Implementations must be lock-free and allocation-free (they sit on the data path) and tolerate
// the two threads concurrently.
#pragma once

#include <cstdint>

#include "atlas/common/clock.h"

namespace atlas {

class RecvObserver {
  public:
    virtual ~RecvObserver() = default;
    // Receive number `seq` of this comm was posted at now_ns.
    virtual void posted(uint64_t seq, Nanos now_ns) noexcept = 0;
    // The first data of receive `seq` reached the comm at now_ns; the message is `bytes` long.
    // Called once per receive, before completed(); when its data arrived before the receive
    // was posted, at the time the receive took it (just after posted()).
    virtual void arrived(uint64_t seq, uint64_t bytes, Nanos now_ns) noexcept = 0;
    // All data of receive `seq` has landed in the posted buffer at now_ns.
    virtual void completed(uint64_t seq, Nanos now_ns) noexcept = 0;
    // The comm is closing or failed: receives still pending will never complete. Called
    // once; the observer is destroyed right after, on the same thread.
    virtual void closed(Nanos now_ns) noexcept = 0;
};

}  // namespace atlas
