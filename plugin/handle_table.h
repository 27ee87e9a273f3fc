// The opaque handles NCCL holds: tokens into a table the plugin owns.
//
// Why: NCCL passes back whatever it got from init, listen, connect, accept and regMr. A stale
// handle (closed twice, used after finalize), a foreign one (another plugin's pointer, garbage)
// or one of the wrong kind (a recv comm given to isend) must be answered with an error, never
// with a read of freed memory. So NCCL never gets a pointer: it gets a token, and a token is
// checked against this table alone; the object behind it is touched only once the token is
// known to be live.
//
// Token (64 bits), a value no user-space pointer can have (bit 63 set is the kernel half of
// the address space on x86-64 and AArch64), never NULL and never NCCL's (void*)0x1 sentinel:
//   bit 63      1
//   bits 60-62  kind (HandleKind)
//   bits 20-59  serial: a process-wide counter, starting at a per-load random value
//   bits 0-19   entry index
// An entry remembers the whole token it was issued with, so a stale token does not match even
// after its entry was reused: it would have to come back with the same serial, that is after
// 2^40 (about 10^12) handles; NCCL creates a few per connection. Requests (kRequest) use the
// same tag bits with their own layout (plugin/requests.h): they name their comm's entry.
//
// Cost: find() is lock-free and O(1): two dependent loads (the entry's chunk, the entry) and a
// compare (perf/micro/handles_bench). add() and remove() take a mutex; they run at connection
// setup and teardown only.
//
// Storage: chunks of entries, allocated on first use and never moved, so readers need no lock;
// they are freed only by releaseStorage() at unload, when nothing is live. The table itself
// has a constexpr constructor and a trivial destructor: it can live in a global that the
// library destructor still uses after C++ static destruction.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>

#include "atlas/common/status.h"

namespace atlas::plugin {

enum class HandleKind : uint8_t {
    kCtx = 1,      // v11/v12 init context
    kListen = 2,   // listen comm
    kSend = 3,     // send comm
    kRecv = 4,     // recv comm
    kMr = 5,       // regMr handle
    kConnect = 6,  // a connect() in progress (the token sits in NCCL's handle scratch)
    kRequest = 7,  // isend/irecv request (layout in plugin/requests.h)
};

const char* handleKindName(HandleKind kind);

class HandleTable {
  public:
    static constexpr int kIndexBits = 20;
    static constexpr uint32_t kCapacity = 1u << kIndexBits;  // handles live at once
    static constexpr int kKindShift = 60;
    static constexpr uint64_t kTagBit = 1ull << 63;
    static constexpr int kSerialBits = 40;

    // The tag bits of a token of `kind` (bit 63 and the kind).
    static constexpr uint64_t tagOf(HandleKind kind) {
        return kTagBit | (static_cast<uint64_t>(kind) << kKindShift);
    }
    // The kind bits of any value (0 when it is not tagged as one of ours).
    static HandleKind kindOf(uint64_t token) {
        return (token & kTagBit) != 0 ? static_cast<HandleKind>((token >> kKindShift) & 7)
                                      : HandleKind{};
    }
    static uint32_t indexOf(uint64_t token) {
        return static_cast<uint32_t>(token & (kCapacity - 1));
    }

    constexpr HandleTable() = default;
    HandleTable(const HandleTable&) = delete;
    HandleTable& operator=(const HandleTable&) = delete;

    // Registers `obj` (not nullptr) and returns its token; kSystem when kCapacity handles are
    // live or memory runs out.
    Result<void*> add(HandleKind kind, void* obj);
    // The object of a live token of `kind`; nullptr for anything else. Lock-free, O(1).
    void* find(HandleKind kind, const void* token) const noexcept;
    // The object in entry `index` and the kind of its live token; nullptr when the entry is free.
    // For tokens that embed an entry index (requests name their comm).
    void* findAt(uint32_t index, HandleKind* kind) const noexcept;
    // Unregisters a live token of `kind` and returns its object (the caller frees it);
    // nullptr, and nothing changes, for anything else.
    void* remove(HandleKind kind, const void* token);
    // Unregisters every live token of `kind`, calling fn(object) for each (under the table's
    // lock: fn must not use the table).
    void removeAll(HandleKind kind, const std::function<void(void*)>& fn);

    size_t live() const;
    // Frees the chunks when no token is live (library unload); false (and nothing freed)
    // otherwise. No other call may run concurrently.
    bool releaseStorage();

  private:
    static constexpr int kChunkBits = 10;
    static constexpr uint32_t kChunkEntries = 1u << kChunkBits;
    static constexpr uint32_t kChunks = kCapacity / kChunkEntries;

    struct Entry {
        std::atomic<uint64_t> token{0};   // the live token, 0 when free
        std::atomic<void*> obj{nullptr};  // written before token is published
        uint32_t next_free = 0;           // free list link (index + 1); guarded by mu_
    };
    struct Chunk {
        Entry entries[kChunkEntries];
    };

    const Entry* entryAt(uint32_t index) const noexcept;
    Entry* entryLocked(uint32_t index);

    std::atomic<Chunk*> chunks_[kChunks] = {};
    mutable std::mutex mu_;
    uint32_t free_head_ = 0;    // first free entry (index + 1), 0 when none; guarded by mu_
    uint32_t high_water_ = 0;   // entries ever used; guarded by mu_
    uint64_t next_serial_ = 0;  // 0: not seeded yet; guarded by mu_
    size_t live_ = 0;           // guarded by mu_
};

}  // namespace atlas::plugin
