// Deterministic event queue on virtual time: events pop in (time, insertion order), so equal
// times resolve the same way on every run and platform.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "atlas/common/clock.h"

namespace atlas::sim {

struct Event {
    Nanos time_ns = 0;
    uint64_t seq = 0;
    uint32_t type = 0;
    uint32_t a = 0;
    uint64_t b = 0;
};

class EventQueue {
  public:
    void push(Nanos time_ns, uint32_t type, uint32_t a = 0, uint64_t b = 0) {
        heap_.push(Event{time_ns, next_seq_++, type, a, b});
    }
    bool empty() const { return heap_.empty(); }
    const Event& top() const { return heap_.top(); }
    Event pop() {
        Event e = heap_.top();
        heap_.pop();
        return e;
    }
    uint64_t pushed() const { return next_seq_; }

  private:
    struct Later {
        bool operator()(const Event& x, const Event& y) const {
            return x.time_ns != y.time_ns ? x.time_ns > y.time_ns : x.seq > y.seq;
        }
    };
    std::priority_queue<Event, std::vector<Event>, Later> heap_;
    uint64_t next_seq_ = 0;
};

}  // namespace atlas::sim
