// Reusable ABI scenarios, written against NetApi so the same scenario runs on every table
// version (v8..v11) and io backend. Each returns OK or a Status that says what went wrong;
// gtest assertions live in the *_test.cc files. Each in-process scenario creates and closes its
// own comms; none of them starts threads or sleeps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "plugin_host/plugin_host.h"

namespace atlas::abi {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;

// 0, 1, 127..129, around the inline threshold (4 KiB), 64 KiB +-1, around the striping chunk
// (512 KiB), 1 MiB, and odd multi-MiB sizes (3 MiB+7, 17 MiB+13).
const std::vector<size_t>& coreSizes();
// The seed of message `index` of `size` bytes, so a misrouted message never matches.
uint64_t messageSeed(size_t size, size_t index);

// Byte-exact transfers of each size over one comm pair; the receive capacity equals the size
// and the 64 bytes after it must stay untouched.
Status sizesInProcess(NetApi& net, void* ctx, const std::vector<size_t>& sizes,
                      const Deadline& deadline);
// Receive capacity larger than the send: test() reports the real size, the rest of the buffer
// is untouched.
Status recvLargerThanSend(NetApi& net, void* ctx, const Deadline& deadline);
// A send larger than the posted receive must fail the receive (irecv or test) with
// ncclInvalidUsage; afterwards nothing hangs (the send completes or fails once the receiver
// closed). `send_first` posts the send before the receive.
Status truncation(NetApi& net, void* ctx, size_t send_size, size_t capacity, bool send_first,
                  const Deadline& deadline);
// 32 outstanding isend and irecv per comm; the 33rd of each returns a NULL request without
// error; completion in posting order (sizes differ per message); a freed request is reusable.
Status outstandingRequests(NetApi& net, void* ctx, const Deadline& deadline);
// *request preset to NCCL_NET_OPTIONAL_RECV_COMPLETION (0x1) before irecv (v9+).
Status optionalRecvSentinel(NetApi& net, void* ctx, const Deadline& deadline);
// test(req, &done, NULL) on both sides.
Status nullSizes(NetApi& net, void* ctx, const Deadline& deadline);
// Close a sendComm with a 64 MiB isend in flight and a recvComm with an irecv posted, unmap
// the buffers, then a fresh pair must still transfer correctly.
Status closeWithRequestsInFlight(NetApi& net, void* ctx, const Deadline& deadline);

// Two-process halves of sizesInProcess. The receiver listens on dev 0, writes the handle to
// `fd`, accepts, receives every size, then sends one byte on `fd`; the sender reads the
// handle, connects, sends every size and waits for that byte before closing.
Status sizesReceiver(NetApi& net, void* ctx, int fd, const std::vector<size_t>& sizes,
                     const Deadline& deadline);
Status sizesSender(NetApi& net, void* ctx, int fd, const std::vector<size_t>& sizes,
                   const Deadline& deadline);

// Sender (a child, with the ATLAS_FAULTS plan of the environment acting on its send comm)
// and receiver (the calling process) move `sizes` one message at a time, byte-checked; the
// sender then checks that its log holds every line of `sender_log_must_have` (gtest
// assertions in the caller's process).
void transferWithSenderFaults(const std::vector<size_t>& sizes, const Deadline& deadline,
                              const std::vector<std::string>& sender_log_must_have);

// Checks a received buffer: [0, size) holds messageSeed's pattern, [size, size + tail) still
// holds the `junk_seed` pattern written before the receive.
Status checkReceived(const uint8_t* dst, size_t size, uint64_t seed, size_t tail,
                     uint64_t junk_seed);

}  // namespace atlas::abi
