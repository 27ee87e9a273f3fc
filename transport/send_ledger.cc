#include "transport/send_ledger.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace atlas::transport {

SendLedger::SendLedger(int nstreams, uint64_t store_limit, uint64_t chunk_bytes)
    : logs_(static_cast<size_t>(std::max(1, nstreams))),
      store_limit_(store_limit),
      chunk_bytes_(std::max<uint64_t>(1, chunk_bytes)) {}

SendLedger::Id SendLedger::add(uint32_t index, uint64_t seq, uint64_t total, uint64_t offset,
                               uint32_t length, const uint8_t* src) {
    Id id;
    if (!free_.empty()) {
        id = free_.back();
        free_.pop_back();
    } else {
        id = static_cast<Id>(frames_.size());
        frames_.emplace_back();
    }
    Frame& f = frames_[id];
    f = Frame{};
    f.seq = seq;
    f.total = total;
    f.offset = offset;
    f.length = length;
    f.src = src;
    f.entry = index;
    f.in_entry = true;
    f.in_log = true;
    wire::encodeFrame({wire::FrameType::kData, static_cast<uint32_t>(seq), length, total, offset},
                      f.header);
    Entry& s = entries_[index];
    f.next_in_entry = s.head;
    s.head = id;
    ++s.pieces;
    unconfirmed_bytes_ += length;
    return id;
}

void SendLedger::assign(Id id, int stream) {
    Frame& f = frames_[id];
    Log& l = logs_[static_cast<size_t>(stream)];
    f.stream = stream;
    l.ids.push_back(id);
    l.queued_bytes += f.length;
    l.top_seq = std::max(l.top_seq, static_cast<int64_t>(f.seq));
}

void SendLedger::unplace(Id id) {
    Frame& f = frames_[id];
    f.stream = -1;
    const auto pos = std::lower_bound(resend_.begin(), resend_.end(), id, [this](Id a, Id b) {
        const Frame& x = frames_[a];
        const Frame& y = frames_[b];
        return x.seq != y.seq ? x.seq > y.seq : x.offset > y.offset;
    });
    resend_.insert(pos, id);
}

size_t SendLedger::unsent(int stream) const {
    const Log& l = logs_[static_cast<size_t>(stream)];
    return l.ids.size() - l.accepted - l.in_op;
}

SendLedger::Id SendLedger::unsentAt(int stream, size_t i) const {
    const Log& l = logs_[static_cast<size_t>(stream)];
    return l.ids[l.accepted + l.in_op + i];
}

void SendLedger::startOp(int stream, size_t n) {
    Log& l = logs_[static_cast<size_t>(stream)];
    for (size_t i = 0; i < n; ++i) {
        frames_[l.ids[l.accepted + l.in_op + i]].in_op = true;
    }
    l.in_op += n;
}

void SendLedger::finishOp(int stream, Nanos now) {
    Log& l = logs_[static_cast<size_t>(stream)];
    for (size_t i = 0; i < l.in_op; ++i) {
        Frame& f = frames_[l.ids[l.accepted + i]];
        f.in_op = false;
        l.queued_bytes -= f.length;
        if (!f.accepted_once) {
            f.accepted_once = true;
            f.accepted_at = now;
            if (f.in_entry) {
                ++entries_[f.entry].accepted;
            }
        }
    }
    l.accepted += l.in_op;
    l.in_op = 0;
    popConfirmed(stream, now, nullptr);
}

uint64_t SendLedger::handedFrames(int stream) const {
    const Log& l = logs_[static_cast<size_t>(stream)];
    return l.base + l.accepted + l.in_op;
}

Status SendLedger::confirm(int stream, uint64_t upto, Nanos now, ConfirmResult* out) {
    *out = ConfirmResult{};
    Log& l = logs_[static_cast<size_t>(stream)];
    if (upto > handedFrames(stream)) {
        return {Code::kRemote, "confirmation of " + std::to_string(upto) + " frames on stream " +
                                   std::to_string(stream) + ", which carried only " +
                                   std::to_string(handedFrames(stream))};
    }
    l.confirmed = std::max(l.confirmed, upto);
    popConfirmed(stream, now, out);
    return Status::ok();
}

void SendLedger::popConfirmed(int stream, Nanos now, ConfirmResult* out) {
    Log& l = logs_[static_cast<size_t>(stream)];
    // Frames still inside a send stay until it completes: its iovecs point at them.
    while (l.base < l.confirmed && l.accepted > 0) {
        const Id id = l.ids.front();
        Frame& f = frames_[id];
        l.ids.pop_front();
        --l.accepted;
        ++l.base;
        f.in_log = false;
        f.stream = -1;
        unconfirmed_bytes_ -= f.length;
        if (out != nullptr) {
            ++out->frames;
            out->bytes += f.length;
            out->max_lag_ns = std::max(out->max_lag_ns, now - f.accepted_at);
        }
        // A piece of a message not yet complete locally stays linked to its entry: secure()
        // forgets it without copying.
        if (!f.in_entry) {
            release(id);
        }
    }
    if (l.ids.empty()) {
        l.top_seq = -1;
    }
}

size_t SendLedger::lose(int stream) {
    Log& l = logs_[static_cast<size_t>(stream)];
    const size_t n = l.ids.size();
    for (const Id id : l.ids) {
        Frame& f = frames_[id];
        f.in_op = false;
        f.stream = -1;
        f.resent = true;
        resend_.push_back(id);
    }
    l = Log{};
    // Oldest message first: the receiver's oldest incomplete receive waits on it.
    std::sort(resend_.begin(), resend_.end(), [this](Id a, Id b) {
        const Frame& x = frames_[a];
        const Frame& y = frames_[b];
        return x.seq != y.seq ? x.seq > y.seq : x.offset > y.offset;
    });
    return n;
}

int64_t SendLedger::oldestHandedUnconfirmedSeq(int stream) const {
    const Log& l = logs_[static_cast<size_t>(stream)];
    int64_t m = -1;
    for (size_t i = 0; i < l.accepted + l.in_op; ++i) {
        const auto s = static_cast<int64_t>(frames_[l.ids[i]].seq);
        m = m < 0 ? s : std::min(m, s);
    }
    return m;
}

bool SendLedger::secure(uint32_t index, bool* store_full) {
    *store_full = false;
    Entry& s = entries_[index];
    uint64_t need = 0;
    for (Id id = s.head; id != kNone; id = frames_[id].next_in_entry) {
        const Frame& f = frames_[id];
        if (f.in_op) {
            return false;  // a resend is reading the caller's buffer right now
        }
        if (f.in_log) {
            need += f.length;
        }
    }
    if (store_bytes_ + need > store_limit_ && need > 0) {
        *store_full = true;
        return false;
    }
    for (Id id = s.head; id != kNone;) {
        Frame& f = frames_[id];
        const Id next = f.next_in_entry;
        f.in_entry = false;
        f.next_in_entry = kNone;
        if (!f.in_log) {
            release(id);
        } else if (f.length > 0) {
            f.copy = takeBuffer(f.length, &f.copy_cap);
            std::memcpy(f.copy.get(), f.src, f.length);
            f.src = f.copy.get();
            store_bytes_ += f.copy_cap;
        } else {
            f.src = nullptr;
        }
        id = next;
    }
    s = Entry{};
    return true;
}

void SendLedger::release(Id id) {
    if (holds_ > 0) {
        parked_.push_back(id);
        return;
    }
    Frame& f = frames_[id];
    if (f.copy != nullptr) {
        store_bytes_ -= f.copy_cap;
        giveBuffer(std::move(f.copy), f.copy_cap);
        f.copy_cap = 0;
    }
    f.src = nullptr;
    free_.push_back(id);
}

void SendLedger::unhold() {
    if (holds_ > 0 && --holds_ == 0) {
        std::vector<Id> parked;
        parked.swap(parked_);
        for (const Id id : parked) {
            release(id);
        }
    }
}

std::unique_ptr<uint8_t[]> SendLedger::takeBuffer(size_t len, size_t* cap) {
    if (len == chunk_bytes_ && !cache_.empty()) {
        auto b = std::move(cache_.back());
        cache_.pop_back();
        *cap = len;
        return b;
    }
    *cap = len;
    return std::unique_ptr<uint8_t[]>(new uint8_t[len]);
}

void SendLedger::giveBuffer(std::unique_ptr<uint8_t[]> buf, size_t cap) {
    if (cap == chunk_bytes_ && cache_.size() < kCachedBuffers) {
        cache_.push_back(std::move(buf));
    }
}

}  // namespace atlas::transport
