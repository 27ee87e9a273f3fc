// Stats sampling of a comm (CommCore::setStatsSink / maybeSample): per stream the payload
// bytes it moved and one TCP_INFO reading, per comm the engine's gate counters. Runs on the
// owner engine thread between I/O batches (Engine::run), never on the data path.
#include "atlas/stream_stats.h"
#include "transport/comm_core.h"
#include "transport/tcp_info.h"
#include "transport/transport_impl.h"

namespace atlas::transport {

void CommCore::setStatsSink(std::unique_ptr<CommStatsSink> sink, Nanos interval_ns) {
    if (sink == nullptr || stats_owned_ != nullptr) {
        return;  // once per comm
    }
    stats_interval_ns_ = interval_ns;
    stats_owned_ = std::move(sink);
    // Pairs with the acquire loads in maybeSample/beginClose: the engine sees the interval
    // and a fully constructed sink.
    stats_.store(stats_owned_.get(), std::memory_order_release);
}

void CommCore::maybeSample(Nanos now_ns) {
    CommStatsSink* sink = stats_.load(std::memory_order_acquire);
    if (sink == nullptr || closing_ || now_ns < next_sample_ns_) {
        return;
    }
    next_sample_ns_ = now_ns + stats_interval_ns_;
    sampleStats(*sink, now_ns);
}

void CommCore::sampleStats(CommStatsSink& sink, Nanos now_ns) {
    for (size_t i = 0; i < streams_.size(); ++i) {
        // Per stream index, across its incarnations; a lost stream reports no TCP_INFO until
        // it rejoins.
        const Stream* s = streams_[i].get();
        StreamSample sample;
        sample.stream = static_cast<int>(i);
        sample.bytes = lanes_[i].bytes_before + (s != nullptr ? s->bytes : 0);
        if (s != nullptr && s->fd.valid()) {
            sample.tcp_info_ok = readTcpInfo(s->fd.get(), now_ns, &sample.tcp).isOk();
        }
        sink.stream(sample);
    }
    CommEngineCounters c = engine_counters_;
    c.stream_resets = counters_.stream_resets.load(std::memory_order_relaxed);
    c.rejoins = counters_.rejoins.load(std::memory_order_relaxed);
    c.resent_bytes = counters_.resent_bytes.load(std::memory_order_relaxed);
    sink.engine(c, now_ns);
}

void SendComm::setStatsSink(std::unique_ptr<CommStatsSink> sink, Nanos interval_ns) {
    impl_->core->setStatsSink(std::move(sink), interval_ns);
}

void RecvComm::setStatsSink(std::unique_ptr<CommStatsSink> sink, Nanos interval_ns) {
    impl_->core->setStatsSink(std::move(sink), interval_ns);
}

uint64_t Transport::authFailures() const {
    return impl_->auth_failures.load(std::memory_order_relaxed);
}

}  // namespace atlas::transport
