// KvStore: KV caches kept for pull (GET /v1/kv/{id}) when a request asks for remote decode
// but names no push endpoint and the daemon has no --decode-url.
//
// Each entry is the exact bytes a push would send: the encoded kv::KvHeader followed by the
// payload, so a puller validates it with the same decoder. A pull is one-shot (the entry is
// removed when fetched); entries expire after the TTL; when the byte budget is exceeded the
// oldest entries are evicted first.
//
// Threads: every method is thread-safe (one mutex); none blocks beyond it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "atlas/common/clock.h"

namespace atlas::bubbletea {

class KvStore {
  public:
    KvStore(uint64_t capacity_bytes, Nanos ttl_ns);

    // Stores `blob` under `id` until now + ttl. False (nothing stored) when the blob alone
    // exceeds the capacity or the id is taken.
    bool put(const std::string& id, std::string blob, Nanos now_ns);
    // Removes and returns the entry, unless missing or expired.
    std::optional<std::string> take(const std::string& id, Nanos now_ns);
    // Drops expired entries; returns how many.
    size_t sweep(Nanos now_ns);

    Nanos ttlNs() const { return ttl_ns_; }
    uint64_t bytes() const;
    size_t entries() const;
    uint64_t evicted() const;

  private:
    struct Entry {
        std::string blob;
        Nanos expires_ns;
        uint64_t seq;
    };
    void dropOldestLocked();

    const uint64_t capacity_bytes_;
    const Nanos ttl_ns_;
    mutable std::mutex mu_;
    std::map<std::string, Entry> entries_;                // guarded by mu_
    std::deque<std::pair<uint64_t, std::string>> order_;  // (seq, id), oldest first; mu_
    uint64_t bytes_ = 0;                                  // guarded by mu_
    uint64_t next_seq_ = 0;                               // guarded by mu_
    uint64_t evicted_ = 0;                                // guarded by mu_
};

}  // namespace atlas::bubbletea
