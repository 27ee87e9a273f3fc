// Recorder: follows one or more bubble channels by polling ChannelReaders and accumulates
// everything they publish into a Timeline. Used by `record`, `stats live` and `watch`.
// Single-threaded; poll() never blocks. Channels that do not exist yet (or whose writer
// restarts) are retried on every poll, so a recorder may start before its writers.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "atlas/common/clock.h"
#include "channel/channel_reader.h"
#include "bubbletea/tools/timeline.h"

namespace atlas::bubbletea::tools {

class Recorder {
  public:
    struct Channel {
        ChannelTimeline timeline;
        std::optional<channel::ChannelReader> reader;
        channel::ReadCursor observed_cursor;
        channel::ReadCursor window_cursor;
        std::optional<RecordedSet> pending;  // set whose records are still arriving
        std::optional<channel::StateSnapshot> last_state;
        std::optional<channel::PredictionSet> current;  // latest readPredictions()
        std::string last_error;  // why the channel is not attached (empty when attached)
        Nanos last_refresh_ns = 0;
    };

    Recorder(std::vector<std::string> names, Nanos start_ns);

    // Reads everything new from every channel. `now_ns` stamps state changes whose writer
    // did not say when they happened.
    void poll(Nanos now_ns);
    Timeline timeline(Nanos end_ns) const;
    const std::vector<std::unique_ptr<Channel>>& channels() const { return channels_; }

  private:
    void pollChannel(Channel& c, Nanos now_ns);
    void addWindowRecord(Channel& c, const channel::WindowRecordView& v, uint64_t generation);

    Nanos start_ns_;
    std::vector<std::unique_ptr<Channel>> channels_;
};

}  // namespace atlas::bubbletea::tools
