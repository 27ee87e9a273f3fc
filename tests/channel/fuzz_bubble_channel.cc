// libFuzzer target: arbitrary bytes as a bubble channel segment image. The reader must
// reject invalid images with a Status and, for images that validate, read every ring and
// the state block without crashing and without returning records that break the format's
// invariants. Registered in tests/fuzz/targets.cmake; seeds in
// tests/fuzz/corpus/fuzz_bubble_channel/ (valid images, cut and corrupted ones).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "channel/channel_reader.h"

namespace {

void check(bool ok) {
    if (!ok) {
        std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace atlas::channel;
    auto opened = ChannelReader::fromImage(data, size);
    if (!opened.isOk()) {
        check(!opened.status().message().empty());
        return 0;
    }
    ChannelReader& r = opened.value();
    const SegmentInfo& info = r.info();
    check(info.layout_size <= size);
    check(info.window_capacity >= kMinWindowCapacity && info.window_capacity <= kMaxWindowCapacity);
    check(info.idle_capacity >= kMinIdleCapacity && info.idle_capacity <= kMaxIdleCapacity);

    auto set = r.readPredictions();
    if (set.isOk()) {
        check(set.value().windows.size() <= maxPredictionSet(info.window_capacity));
        for (const PredictedWindow& w : set.value().windows) {
            check(w.end_ns >= w.start_ns && w.confidence_ppm <= kPpmOne);
        }
    }
    ReadCursor observed_cursor;
    auto observed = r.readObservedSince(observed_cursor);
    if (observed.isOk()) {
        check(observed.value().records.size() <= info.idle_capacity);
        for (const IdleInterval& i : observed.value().records) {
            check(i.end_ns >= i.start_ns);
            // ABI v2 transfer fields: both unknown (0), or a start in (0, end_ns] with bytes.
            // An unknown transfer is valid whatever the interval's times.
            check((i.transfer_start_ns == 0) == (i.transfer_bytes == 0));
            check(i.transfer_start_ns == 0 ||
                  (i.transfer_start_ns > 0 && i.transfer_start_ns <= i.end_ns));
        }
    }
    // A cursor far ahead of the head must resync, not read out of bounds.
    ReadCursor ahead{info.generation, info.writer_start_ns, ~0ull - 3};
    auto resync = r.readObservedSince(ahead, 16);
    check(!resync.isOk() || resync.value().records.size() <= 16);
    ReadCursor window_cursor;
    auto windows = r.readWindowsSince(window_cursor);
    if (windows.isOk()) {
        check(windows.value().records.size() <= info.window_capacity);
        for (const WindowRecordView& v : windows.value().records) {
            check(v.set_count <= maxPredictionSet(info.window_capacity));
            check(v.set_count == 0 || v.set_index < v.set_count);
        }
    }
    (void)r.readState();
    (void)r.writerCounters();
    (void)r.lifecycle();
    auto refreshed = r.refresh();
    check(refreshed.isOk() && refreshed.value() == RefreshOutcome::kUnchanged);
    return 0;
}
