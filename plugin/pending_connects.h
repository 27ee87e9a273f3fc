// Connection attempts in progress: connect() calls NCCL has not yet seen complete.
//
// Why: the transport keeps a connector (sockets, handshake state) in the scratch bytes of the
// handle buffer it is given, and NCCL calls connect() again with the same buffer until it
// completes. NCCL gives up on an attempt by no longer calling (an abort during setup), so a
// connector kept in NCCL's buffer would leak, and a later connect() with that buffer would
// resume from freed state. Here the transport works on a private copy of the handle that the
// plugin owns; NCCL's buffer carries only a handle-table token (HandleKind::kConnect) at the
// same offset, so a stale buffer is recognised from the table alone. finalize(ctx) reclaims
// the attempts of its context; the last release reclaims the rest (v8..v10 have no finalize).
//
// Threads: every call runs under the caller's lock (plugin/state.h's g_mutex), except that the
// transport may work on PendingConnect::handle between resume() and finish() outside it: NCCL
// resumes an attempt on one thread and does not finalize its context meanwhile.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_set>

#include "atlas/common/status.h"
#include "plugin/handle_table.h"
#include "transport/net.h"

namespace atlas::plugin {

struct PendingConnect {
    void* token = nullptr;
    const void* ctx = nullptr;  // NCCL's context (nullptr on the v8..v10 paths)
    std::array<uint8_t, transport::kHandleSize> handle{};  // what the transport works on
};

class PendingConnects {
  public:
    explicit PendingConnects(HandleTable* table) : table_(table) {}
    ~PendingConnects();  // frees what is left without the transport (reclaim() first)
    PendingConnects(const PendingConnects&) = delete;
    PendingConnects& operator=(const PendingConnects&) = delete;

    // The attempt that NCCL's buffer names, or a new one (its token written into the buffer)
    // when the buffer is fresh from listen. kInternal for a token this plugin no longer has
    // (reclaimed, or from an earlier load) or one begun under another context.
    Status resume(const void* ctx, uint8_t nccl_handle[transport::kHandleSize],
                  PendingConnect** out);
    // The attempt is over (connected or failed; the transport freed its connector): forgets
    // it and clears the token from NCCL's buffer, which is then like one fresh from listen.
    void finish(PendingConnect* pc, uint8_t nccl_handle[transport::kHandleSize]);
    // Gives up the attempts of `ctx` (every one when `all`): the transport frees their
    // connectors, their tokens die. Returns how many there were.
    int reclaim(const void* ctx, bool all, transport::Transport* transport);

    size_t size() const { return live_.size(); }

  private:
    HandleTable* table_;
    std::unordered_set<PendingConnect*> live_;
};

}  // namespace atlas::plugin
