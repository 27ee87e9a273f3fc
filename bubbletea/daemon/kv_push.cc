#include "bubbletea/daemon/kv_push.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace atlas::bubbletea {
namespace {

std::string endpointKey(const std::string& host, uint16_t port) {
    return host + ":" + std::to_string(port);
}

}  // namespace

KvPusher::KvPusher(const KvPushConfig& config) : config_(config) {}

Result<std::unique_ptr<KvPusher>> KvPusher::create(const KvPushConfig& config) {
    std::unique_ptr<KvPusher> p(new KvPusher(config));
    transport::TransportConfig tc;
    tc.engine_threads = std::max(1, config.engine_threads);
    tc.timeout_ms = static_cast<int>(std::clamp<Nanos>(config.timeout_ns / kNsPerMs, 100, 3600000));
    tc.auth_key = config.auth_key;
    tc.nstreams = config.transport_streams;
    tc.logger = config.logger;
    auto t = transport::Transport::create(tc);
    if (!t.isOk()) {
        return t.status();
    }
    p->transport_ = std::move(t.value());
    p->thread_ = std::thread([raw = p.get()] { raw->run(); });
    return p;
}

KvPusher::~KvPusher() {
    stop();
}

void KvPusher::push(KvPushJob job) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!stopping_) {
            queue_.push_back(std::move(job));
            cv_.notify_one();
            return;
        }
    }
    job.done(Status{Code::kUnavailable, "KV pusher is shutting down"});
}

size_t KvPusher::queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
}

void KvPusher::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
        cv_.notify_all();
    }
    if (thread_.joinable()) {
        thread_.join();
    }
}

void KvPusher::run() {
    for (;;) {
        KvPushJob job;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (stopping_) {
                break;
            }
            job = std::move(queue_.front());
            queue_.pop_front();
        }
        auto result = transfer(job);
        job.done(std::move(result));
    }
    std::deque<KvPushJob> left;
    {
        std::lock_guard<std::mutex> lock(mu_);
        left.swap(queue_);
    }
    for (auto& job : left) {
        job.done(Status{Code::kUnavailable, "KV pusher is shutting down"});
    }
    for (auto& [key, ep] : endpoints_) {
        if (ep.comm) {
            (void)ep.comm->close();
        }
    }
    endpoints_.clear();
}

void KvPusher::dropEndpoint(const std::string& key) {
    auto it = endpoints_.find(key);
    if (it == endpoints_.end()) {
        return;
    }
    if (it->second.comm) {
        (void)it->second.comm->close();
    }
    endpoints_.erase(it);
}

Status KvPusher::connect(const std::string& host, uint16_t port, Nanos deadline_ns, Endpoint* ep) {
    auto sock = kv::connectTcp(host, port, deadline_ns);
    if (!sock.isOk()) {
        return sock.status();
    }
    ep->control = std::move(sock.value());
    const auto hello = kv::encodeHello({});
    ATLAS_RETURN_IF_ERROR(kv::sendAll(ep->control, hello.data(), hello.size(), deadline_ns));
    std::array<uint8_t, kv::kReplyBytes> reply_bytes{};
    ATLAS_RETURN_IF_ERROR(
        kv::recvAll(ep->control, reply_bytes.data(), reply_bytes.size(), deadline_ns));
    auto reply = kv::decodeReply(reply_bytes);
    if (!reply.isOk()) {
        return reply.status();
    }
    if (reply.value().status != kv::ReplyStatus::kOk) {
        return {Code::kRemote, "endpoint refused the connection (busy or failing)"};
    }
    uint8_t handle[transport::kHandleSize];
    std::memcpy(handle, reply.value().handle.data(), sizeof(handle));
    kv::PollBackoff backoff;
    while (ep->comm == nullptr) {
        ATLAS_RETURN_IF_ERROR(transport_->connect(handle, &ep->comm));
        if (ep->comm != nullptr) {
            break;
        }
        if (monotonicNowNs() > deadline_ns) {
            return {Code::kTimeout, "transport connect timed out"};
        }
        backoff.pause();
    }
    return Status::ok();
}

Status KvPusher::send(Endpoint& ep, const void* data, size_t size, Nanos deadline_ns) {
    transport::Request* req = nullptr;
    kv::PollBackoff post_backoff;
    while (req == nullptr) {
        ATLAS_RETURN_IF_ERROR(ep.comm->isend(data, size, &req));
        if (req == nullptr) {
            if (monotonicNowNs() > deadline_ns) {
                return {Code::kTimeout, "timed out waiting for a free send request"};
            }
            post_backoff.pause();
        }
    }
    kv::PollBackoff backoff;
    for (;;) {
        bool done = false;
        size_t sent = 0;
        ATLAS_RETURN_IF_ERROR(transport::test(req, &done, &sent));
        if (done) {
            return Status::ok();
        }
        if (monotonicNowNs() > deadline_ns) {
            // The request stays owned by the comm; dropping the endpoint closes it.
            return {Code::kTimeout, "KV send timed out"};
        }
        backoff.pause();
    }
}

Result<KvPushReceipt> KvPusher::transfer(KvPushJob& job) {
    const Nanos start = monotonicNowNs();
    const Nanos deadline = start + config_.timeout_ns;
    const std::string key = endpointKey(job.host, job.port);
    job.header.payload_bytes = job.payload.size();
    job.header.checksum = kv::computeChecksum(job.header.checksum_kind, job.payload);
    const std::vector<uint8_t> header = kv::encodeHeader(job.header);
    auto fail = [&](const Status& st) -> Status {
        dropEndpoint(key);
        return {st.code() == Code::kOk ? Code::kRemote : st.code(),
                "KV push to decode endpoint " + key + " failed: " + st.message()};
    };
    for (int attempt = 0; attempt < 2; ++attempt) {
        const bool reused = endpoints_.count(key) != 0;
        if (!reused) {
            Endpoint ep;
            Status st = connect(job.host, job.port, deadline, &ep);
            if (!st.isOk()) {
                if (ep.comm) {
                    (void)ep.comm->close();
                }
                return fail(st);
            }
            endpoints_.emplace(key, std::move(ep));
        }
        Endpoint& ep = endpoints_.at(key);
        Status st = send(ep, header.data(), header.size(), deadline);
        if (st.isOk()) {
            st = send(ep, job.payload.data(), job.payload.size(), deadline);
        }
        if (!st.isOk()) {
            // The endpoint may have refused the header (bad header, too large, wrong model)
            // and closed the data comm: its nack on the control connection says why.
            std::array<uint8_t, kv::kAckBytes> early{};
            const Nanos nack_deadline = std::min(deadline, monotonicNowNs() + 200 * kNsPerMs);
            if (kv::recvAll(ep.control, early.data(), early.size(), nack_deadline).isOk()) {
                auto nack = kv::decodeAck(early);
                if (nack.isOk() && nack.value().transfer_id == job.header.transfer_id &&
                    nack.value().status != kv::AckStatus::kOk) {
                    return fail({Code::kRemote, std::string("endpoint rejected the KV cache: ") +
                                                    kv::ackStatusName(nack.value().status) + " (" +
                                                    nack.value().message + ")"});
                }
            }
            if (reused && attempt == 0) {
                dropEndpoint(key);
                continue;  // a stale cached connection: try once more on a fresh one
            }
            return fail(st);
        }
        std::array<uint8_t, kv::kAckBytes> ack_bytes{};
        bool eof_at_start = false;
        st = kv::recvAll(ep.control, ack_bytes.data(), ack_bytes.size(), deadline, &eof_at_start);
        if (!st.isOk()) {
            if (reused && attempt == 0 && eof_at_start) {
                // The endpoint had closed the cached connection (e.g. it restarted) before
                // our bytes arrived. At-least-once: the transfer_id lets it drop duplicates.
                dropEndpoint(key);
                continue;
            }
            return fail(st);
        }
        auto ack = kv::decodeAck(ack_bytes);
        if (!ack.isOk()) {
            return fail(ack.status());
        }
        if (ack.value().transfer_id != job.header.transfer_id) {
            return fail({Code::kRemote, "ack for another transfer"});
        }
        if (ack.value().status != kv::AckStatus::kOk) {
            return fail(
                {Code::kRemote,
                 std::string("endpoint rejected the KV cache: ") +
                     kv::ackStatusName(ack.value().status) +
                     (ack.value().message.empty() ? "" : " (" + ack.value().message + ")")});
        }
        KvPushReceipt receipt;
        receipt.endpoint = key;
        receipt.transfer_id = job.header.transfer_id;
        receipt.bytes = job.payload.size();
        receipt.elapsed_ns = monotonicNowNs() - start;
        return receipt;
    }
    return fail({Code::kRemote, "connection lost twice"});
}

}  // namespace atlas::bubbletea
