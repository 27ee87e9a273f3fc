#include "bubbletea/daemon/kv_store.h"

namespace atlas::bubbletea {

KvStore::KvStore(uint64_t capacity_bytes, Nanos ttl_ns)
    : capacity_bytes_(capacity_bytes), ttl_ns_(ttl_ns) {}

void KvStore::dropOldestLocked() {
    // order_ may hold ids already taken or re-used: skip entries whose seq does not match.
    while (!order_.empty()) {
        auto [seq, id] = order_.front();
        order_.pop_front();
        auto it = entries_.find(id);
        if (it != entries_.end() && it->second.seq == seq) {
            bytes_ -= it->second.blob.size();
            entries_.erase(it);
            ++evicted_;
            return;
        }
    }
}

bool KvStore::put(const std::string& id, std::string blob, Nanos now_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    if (blob.size() > capacity_bytes_ || entries_.count(id) != 0) {
        return false;
    }
    while (bytes_ + blob.size() > capacity_bytes_ && !entries_.empty()) {
        dropOldestLocked();
    }
    const uint64_t seq = next_seq_++;
    bytes_ += blob.size();
    entries_.emplace(id, Entry{std::move(blob), now_ns + ttl_ns_, seq});
    order_.emplace_back(seq, id);
    return true;
}

std::optional<std::string> KvStore::take(const std::string& id, Nanos now_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
        return std::nullopt;
    }
    bytes_ -= it->second.blob.size();
    std::optional<std::string> out;
    if (it->second.expires_ns > now_ns) {
        out = std::move(it->second.blob);
    }
    entries_.erase(it);
    return out;
}

size_t KvStore::sweep(Nanos now_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->second.expires_ns <= now_ns) {
            bytes_ -= it->second.blob.size();
            it = entries_.erase(it);
            ++n;
        } else {
            ++it;
        }
    }
    // Forget order records of entries that are gone, so order_ stays bounded.
    while (!order_.empty()) {
        auto it = entries_.find(order_.front().second);
        if (it != entries_.end() && it->second.seq == order_.front().first) {
            break;
        }
        order_.pop_front();
    }
    return n;
}

uint64_t KvStore::bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
}

size_t KvStore::entries() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
}

uint64_t KvStore::evicted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return evicted_;
}

}  // namespace atlas::bubbletea
