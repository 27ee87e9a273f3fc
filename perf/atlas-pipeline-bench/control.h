// The control channel between the orchestrating parent and each stage process: a socketpair
// carrying length-prefixed frames {u32 type, u32 length, payload} (the bootstrap NCCL would
// do over its own network: connection handles, barriers, results). Both ends are ours, but
// lengths are still bounded so a confused peer cannot make the other allocate without limit.
#pragma once

#include <cstdint>
#include <string>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"

namespace atlas::pipebench {

enum class Msg : uint32_t {
    kHandles = 1,  // stage -> parent: its listen handles (act_in, grad_in), 128 bytes each
    kPeers,        // parent -> stage: the handles it connects to (next's act_in, prev's grad_in)
    kReady,        // stage -> parent: comms up, buffers registered
    kGo,           // parent -> stage: start iteration (u32 index)
    kIterDone,     // stage -> parent: IterReport
    kResult,       // stage -> parent: JSON with the stage's timeline
    kError,        // stage -> parent: text; the run fails
};

struct Frame {
    Msg type = Msg::kError;
    std::string payload;
};

constexpr uint32_t kMaxFrame = 64u << 20;

Status sendFrame(int fd, Msg type, const std::string& payload);
// Waits until deadline_ns (CLOCK_MONOTONIC); kTimeout when it passes, kRemote on EOF.
Result<Frame> recvFrame(int fd, Nanos deadline_ns);

// What a stage reports at the end of each iteration (all times CLOCK_MONOTONIC ns, which is
// system-wide, so the parent can compare stages).
struct IterReport {
    uint32_t iteration = 0;
    int64_t start_ns = 0;
    int64_t end_ns = 0;    // its last op done and every send completed
    int64_t busy_ns = 0;   // compute
    int64_t wait_ns = 0;   // blocked on a receive (the stage's bubbles inside the iteration)
    int64_t drain_ns = 0;  // waiting for its own sends to complete at the end
};

}  // namespace atlas::pipebench
