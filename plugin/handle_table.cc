#include "plugin/handle_table.h"

#include <chrono>
#include <new>
#include <type_traits>

namespace atlas::plugin {

static_assert(sizeof(void*) == sizeof(uint64_t), "tokens are 64-bit pointers");
static_assert(std::is_trivially_destructible_v<std::mutex>,
              "the table must outlive C++ static destruction (library destructor at exit)");
static_assert(HandleTable::kIndexBits + HandleTable::kSerialBits == HandleTable::kKindShift);

const char* handleKindName(HandleKind kind) {
    switch (kind) {
        case HandleKind::kCtx:
            return "context";
        case HandleKind::kListen:
            return "listen comm";
        case HandleKind::kSend:
            return "send comm";
        case HandleKind::kRecv:
            return "recv comm";
        case HandleKind::kMr:
            return "memory registration";
        case HandleKind::kConnect:
            return "connection attempt";
        case HandleKind::kRequest:
            return "request";
    }
    return "unknown";
}

const HandleTable::Entry* HandleTable::entryAt(uint32_t index) const noexcept {
    // Pairs with the release store that published the chunk.
    const Chunk* c = chunks_[index >> kChunkBits].load(std::memory_order_acquire);
    return c != nullptr ? &c->entries[index & (kChunkEntries - 1)] : nullptr;
}

HandleTable::Entry* HandleTable::entryLocked(uint32_t index) {
    return &chunks_[index >> kChunkBits]
                .load(std::memory_order_relaxed)
                ->entries[index & (kChunkEntries - 1)];
}

Result<void*> HandleTable::add(HandleKind kind, void* obj) {
    std::lock_guard<std::mutex> lock(mu_);
    if (next_serial_ == 0) {
        // A different start per load of the library, so a token kept across dlclose and
        // reload is unlikely to name a new handle.
        const auto t =
            static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
        next_serial_ =
            ((t ^ (t >> 29) ^ reinterpret_cast<uintptr_t>(this)) % ((1ull << kSerialBits) - 1)) + 1;
    }
    uint32_t index = 0;
    if (free_head_ != 0) {
        index = free_head_ - 1;
        free_head_ = entryLocked(index)->next_free;
    } else {
        if (high_water_ == kCapacity) {
            return Status(Code::kSystem, "handle table full (" + std::to_string(kCapacity) +
                                             " comms, registrations and contexts live)");
        }
        index = high_water_;
        std::atomic<Chunk*>& chunk = chunks_[index >> kChunkBits];
        if (chunk.load(std::memory_order_relaxed) == nullptr) {
            auto* c = new (std::nothrow) Chunk();
            if (c == nullptr) {
                return Status(Code::kSystem, "out of memory for the handle table");
            }
            chunk.store(c, std::memory_order_release);
        }
        ++high_water_;
    }
    const uint64_t serial = next_serial_;
    next_serial_ = next_serial_ == (1ull << kSerialBits) - 1 ? 1 : next_serial_ + 1;
    const uint64_t token = tagOf(kind) | (serial << kIndexBits) | index;
    Entry* s = entryLocked(index);
    s->obj.store(obj, std::memory_order_relaxed);
    // Publishes obj to find() (pairs with its acquire load of the token).
    s->token.store(token, std::memory_order_release);
    ++live_;
    return reinterpret_cast<void*>(token);
}

void* HandleTable::find(HandleKind kind, const void* token) const noexcept {
    const auto t = reinterpret_cast<uint64_t>(token);
    if (kindOf(t) != kind) {
        return nullptr;  // NULL, a pointer, garbage or another kind: nothing is read
    }
    const Entry* s = entryAt(indexOf(t));
    if (s == nullptr || s->token.load(std::memory_order_acquire) != t) {
        return nullptr;
    }
    return s->obj.load(std::memory_order_relaxed);
}

void* HandleTable::findAt(uint32_t index, HandleKind* kind) const noexcept {
    if (index >= kCapacity) {
        return nullptr;
    }
    const Entry* s = entryAt(index);
    if (s == nullptr) {
        return nullptr;
    }
    const uint64_t t = s->token.load(std::memory_order_acquire);
    if (t == 0) {
        return nullptr;
    }
    *kind = kindOf(t);
    return s->obj.load(std::memory_order_relaxed);
}

void* HandleTable::remove(HandleKind kind, const void* token) {
    const auto t = reinterpret_cast<uint64_t>(token);
    if (kindOf(t) != kind) {
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(mu_);
    const uint32_t index = indexOf(t);
    if (index >= high_water_) {
        return nullptr;
    }
    Entry* s = entryLocked(index);
    if (s->token.load(std::memory_order_relaxed) != t) {
        return nullptr;
    }
    s->token.store(0, std::memory_order_release);
    void* obj = s->obj.exchange(nullptr, std::memory_order_relaxed);
    s->next_free = free_head_;
    free_head_ = index + 1;
    --live_;
    return obj;
}

void HandleTable::removeAll(HandleKind kind, const std::function<void(void*)>& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint32_t index = 0; index < high_water_; ++index) {
        Entry* s = entryLocked(index);
        const uint64_t t = s->token.load(std::memory_order_relaxed);
        if (t == 0 || kindOf(t) != kind) {
            continue;
        }
        s->token.store(0, std::memory_order_release);
        void* obj = s->obj.exchange(nullptr, std::memory_order_relaxed);
        s->next_free = free_head_;
        free_head_ = index + 1;
        --live_;
        fn(obj);
    }
}

size_t HandleTable::live() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_;
}

bool HandleTable::releaseStorage() {
    std::lock_guard<std::mutex> lock(mu_);
    if (live_ != 0) {
        return false;
    }
    for (std::atomic<Chunk*>& c : chunks_) {
        delete c.exchange(nullptr, std::memory_order_acq_rel);
    }
    free_head_ = 0;
    high_water_ = 0;
    return true;
}

}  // namespace atlas::plugin
