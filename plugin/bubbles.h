// Bubble measurement, prediction and publication (docs/bubbles.md).
//
// Measurement: the GPU is idle while it waits for WAN data. Per process, an idle interval
// opens when a WAN receive is posted while no other WAN receive is outstanding, and closes
// when the data of THAT receive has landed (later receives posted meanwhile are prefetches:
// the GPU computes on the first one's data while they arrive). Receives of all WAN recv comms
// are merged. The hooks run on NCCL's progress thread (posted) and the engine threads
// (completed): a few atomics, no lock, no allocation (IdleRecorder).
//
// Prediction and publication run on one background thread (BubblePublisher, started with the
// plugin's global state, joined at teardown): every publish interval it steps scheduler/'s
// BubblePipeline (the whole publishing step: learning, prediction, the publish decision and
// scoring) with the finished waits and the wait open now, and publishes what it decided on
// the bubble channel (include/atlas/bubble_channel.h) for bubbletea and atlas-bubbles: the
// observed waits (with what the step saw of them, so a replay can step exactly as it did),
// the prediction set when it changed, the predictor state and the running accuracy.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/log.h"
#include "atlas/common/status.h"
#include "atlas/recv_observer.h"
#include "channel/channel_writer.h"
#include "scheduler/bubble_pipeline.h"
#include "scheduler/types.h"

namespace atlas::plugin {

// One finished GPU wait and, when seen, the transfer that ended it: the first data of the
// awaited message arrived at transfer_start_ns (clamped to the wait's start when it was
// already there) and the message is transfer_bytes long. Both 0: not seen (the comm closed,
// or a zero-byte message).
struct ObservedWait {
    sched::Interval idle;
    Nanos transfer_start_ns = 0;
    uint64_t transfer_bytes = 0;
};

// The wait open now (start_ns == 0: none), with its transfer once its first data arrived.
using OpenWait = ObservedWait;

// Process-wide recorder of GPU-wait intervals. Producers: any thread (lock-free); consumer:
// the publisher thread only.
class IdleRecorder {
  public:
    // Ring capacity of finished intervals not yet taken by the publisher; overflow drops
    // the newest interval and counts it.
    static constexpr size_t kCapacity = 1024;

    IdleRecorder();

    // `key` identifies one receive across comms (CommIdleObserver packs comm id + seq).
    void posted(uint64_t key, Nanos now_ns) noexcept;
    // The first data of receive `key` (`bytes` long) arrived; kept if it leads the wait.
    void arrived(uint64_t key, uint64_t bytes, Nanos now_ns) noexcept;
    void completed(uint64_t key, Nanos now_ns) noexcept;
    // `pending` receives of a closing comm will never complete.
    void abandoned(uint64_t comm_id, int64_t pending) noexcept;

    // Consumer side.
    bool pop(ObservedWait* out) noexcept;
    uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
    int64_t outstanding() const noexcept { return outstanding_.load(std::memory_order_relaxed); }
    // Waits opened so far (a post that found no receive outstanding). Every opened wait ends
    // in the ring, in dropped(), or abandoned with its closing comm: with no comm closed,
    // opened() == popped + dropped() once no receive is outstanding.
    uint64_t opened() const noexcept { return opened_.load(std::memory_order_relaxed); }
    // The wait open now (start 0: none) and its transfer, as consistent as one re-check of
    // the leader makes it (a wait that ends meanwhile reads as none). A hint read by the
    // publisher: it may be a tick stale, which costs at most that tick of a window.
    OpenWait openWait() const noexcept;

  private:
    void push(const ObservedWait& wait) noexcept;

    std::atomic<int64_t> outstanding_{0};
    std::atomic<uint64_t> opened_{0};
    // The receive that opened the current interval (key + 1; 0 = none) and when it did.
    std::atomic<uint64_t> leader_{0};
    std::atomic<Nanos> start_{0};
    // The leader's first data: written by arrived() on the leader's engine thread, which also
    // runs its completed(); reset by posted() before it publishes a new leader.
    std::atomic<Nanos> transfer_start_{0};
    std::atomic<uint64_t> transfer_bytes_{0};

    // Bounded multi-producer ring (per-cell sequence numbers).
    struct Cell {
        std::atomic<uint64_t> seq{0};
        ObservedWait wait;
    };
    std::array<Cell, kCapacity> cells_{};
    std::atomic<uint64_t> tail_{0};  // next cell producers claim
    uint64_t head_ = 0;              // next cell the consumer reads
    std::atomic<uint64_t> dropped_{0};
};

// One WAN recv comm's observer: forwards to the recorder with a comm-unique key and keeps the
// comm's own outstanding count so a closing comm can hand back what will never complete.
class CommIdleObserver final : public RecvObserver {
  public:
    CommIdleObserver(IdleRecorder* recorder, uint64_t comm_id)
        : recorder_(recorder), comm_id_(comm_id) {}
    void posted(uint64_t seq, Nanos now_ns) noexcept override;
    void arrived(uint64_t seq, uint64_t bytes, Nanos now_ns) noexcept override;
    void completed(uint64_t seq, Nanos now_ns) noexcept override;
    void closed(Nanos now_ns) noexcept override;

    // Keys: 48 bits of comm id, 16 bits of sequence number. The sequence part only has to
    // tell apart the receives of one comm outstanding at once (at most NCCL_NET_MAX_REQUESTS,
    // 32). The comm id is unique for the life of the process: 2^48 ids last 8.9 years even at
    // a million WAN recv comms a second, and each costs a handshake across the WAN.
    static constexpr int kSeqBits = 16;
    static uint64_t key(uint64_t comm_id, uint64_t seq) {
        return (comm_id << kSeqBits) | (seq & ((1ull << kSeqBits) - 1));
    }
    static uint64_t commIdOf(uint64_t key) { return key >> kSeqBits; }
    // A fresh comm id: 1, 2, ... (never 0, never reused).
    static uint64_t nextCommId() noexcept;

  private:
    IdleRecorder* recorder_;
    uint64_t comm_id_;
    std::atomic<int64_t> pending_{0};
};

struct BubbleConfig {
    std::string channel_name;  // resolved (see channel_name.h)
    // Everything about the step, defaults included; its step_interval_ns is the publish tick.
    sched::BubblePipelineConfig pipeline;
};

// Owns the channel writer, the predictor and the publisher thread.
class BubblePublisher {
  public:
    // Creates the channel and starts the thread. `clock` must outlive the publisher.
    static Result<std::unique_ptr<BubblePublisher>> start(const BubbleConfig& config,
                                                          IdleRecorder* recorder,
                                                          const Clock& clock, Logger log);
    // Creates the channel but no thread: tests call step() themselves.
    static Result<std::unique_ptr<BubblePublisher>> manual(const BubbleConfig& config,
                                                           IdleRecorder* recorder,
                                                           const Clock& clock, Logger log);
    ~BubblePublisher();  // stops and joins the thread, marks the channel closed

    // One round: drain, predict, publish. Publisher thread (or a test) only.
    void step();

    const std::string& channelName() const { return writer_.name(); }

  private:
    // The writer's clock: the time of the step being published, so the records of a step
    // (a set's published_ns, the state's since_ns) carry the `now` the pipeline decided at.
    class StepClock final : public Clock {
      public:
        explicit StepClock(Nanos now_ns) : now_(now_ns) {}
        Nanos nowNs() const override { return now_.load(std::memory_order_relaxed); }
        void set(Nanos now_ns) { now_.store(now_ns, std::memory_order_relaxed); }

      private:
        std::atomic<Nanos> now_;
    };

    BubblePublisher(const BubbleConfig& config, IdleRecorder* recorder, const Clock& clock,
                    Logger log, std::unique_ptr<StepClock> step_clock,
                    channel::ChannelWriter writer);
    void run();
    // Takes the finished waits from the recorder into the pipeline and the channel.
    void drain(Nanos now_ns);

    BubbleConfig config_;
    IdleRecorder* recorder_;
    const Clock& clock_;
    Logger log_;
    std::unique_ptr<StepClock> step_clock_;  // outlives writer_ (declared first)
    channel::ChannelWriter writer_;
    sched::BubblePipeline pipeline_;
    std::vector<channel::PredictedWindow> published_;  // scratch
    uint64_t last_dropped_ = 0;

    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace atlas::plugin
