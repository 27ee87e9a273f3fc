#include "bubbletea/tools/recorder.h"

namespace atlas::bubbletea::tools {

namespace {
// How often a healthy channel is checked for a writer restart, death or replacement
// (refresh() costs a shm_open; retirement is also noticed by every read).
constexpr Nanos kRefreshEveryNs = 200 * kNsPerMs;
}  // namespace

Recorder::Recorder(std::vector<std::string> names, Nanos start_ns) : start_ns_(start_ns) {
    for (std::string& name : names) {
        auto c = std::make_unique<Channel>();
        c->timeline.name = std::move(name);
        channels_.push_back(std::move(c));
    }
}

void Recorder::poll(Nanos now_ns) {
    for (auto& c : channels_) {
        pollChannel(*c, now_ns);
    }
}

void Recorder::pollChannel(Channel& c, Nanos now_ns) {
    if (!c.reader) {
        auto r = channel::ChannelReader::open(c.timeline.name);
        if (!r.isOk()) {
            c.last_error = r.status().toString();
            return;
        }
        c.reader.emplace(std::move(r.value()));
        c.last_error.clear();
        c.last_refresh_ns = now_ns;
    } else if (now_ns - c.last_refresh_ns >= kRefreshEveryNs) {
        c.last_refresh_ns = now_ns;
        auto outcome = c.reader->refresh();
        if (!outcome.isOk()) {
            c.last_error = outcome.status().toString();
        }
    }
    channel::ChannelReader& r = *c.reader;
    const channel::SegmentInfo& info = r.info();
    if (c.timeline.writers.empty() || c.timeline.writers.back().generation != info.generation ||
        c.timeline.writers.back().start_ns != info.writer_start_ns) {
        c.timeline.writers.push_back({info.generation, info.writer_pid, info.writer_start_ns});
    }

    auto observed = r.readObservedSince(c.observed_cursor);
    if (observed.isOk()) {
        const auto& batch = observed.value();
        c.timeline.observed.insert(c.timeline.observed.end(), batch.records.begin(),
                                   batch.records.end());
        c.timeline.lost_observed += batch.lost;
        c.timeline.invalid_records += batch.invalid;
    } else {
        c.last_error = observed.status().toString();
    }

    auto windows = r.readWindowsSince(c.window_cursor);
    if (windows.isOk()) {
        const auto& batch = windows.value();
        c.timeline.lost_windows += batch.lost;
        c.timeline.invalid_records += batch.invalid;
        if (batch.lost > 0 || batch.resynced) {
            if (c.pending) {
                ++c.timeline.incomplete_sets;
            }
            c.pending.reset();
        }
        for (const auto& v : batch.records) {
            addWindowRecord(c, v, batch.generation);
        }
    } else {
        c.last_error = windows.status().toString();
    }

    auto current = r.readPredictions();
    if (current.isOk()) {
        c.current = std::move(current.value());
    }

    auto state = r.readState();
    if (state.isOk()) {
        const channel::StateSnapshot& s = state.value();
        if (!c.last_state || c.last_state->state != s.state || c.last_state->reason != s.reason) {
            // The writer's since_ns is when it changed; before the recording began, say so by
            // clamping to the start.
            const Nanos at = s.since_ns > 0 ? std::max(s.since_ns, start_ns_) : now_ns;
            c.timeline.states.push_back({at, s.state, s.reason});
        }
        c.last_state = s;
    }
}

void Recorder::addWindowRecord(Channel& c, const channel::WindowRecordView& v,
                               uint64_t generation) {
    if (c.pending && c.pending->set_id != v.set_id) {
        // A new set started before the pending one completed: records were lost.
        ++c.timeline.incomplete_sets;
        c.pending.reset();
    }
    if (!c.pending) {
        if (v.set_index != 0) {
            // The ring dropped the start of this set (or we joined mid-set).
            return;
        }
        c.pending = RecordedSet{generation, v.set_id, v.published_ns, {}};
    }
    if (v.set_count != 0) {
        c.pending->windows.push_back(v.window);
    }
    if (v.set_count == 0 || v.set_index + 1 == v.set_count) {
        c.timeline.sets.push_back(std::move(*c.pending));
        c.pending.reset();
    }
}

Timeline Recorder::timeline(Nanos end_ns) const {
    Timeline t;
    t.from_ns = start_ns_;
    t.to_ns = end_ns;
    for (const auto& c : channels_) {
        t.channels.push_back(c->timeline);
    }
    return t;
}

}  // namespace atlas::bubbletea::tools
