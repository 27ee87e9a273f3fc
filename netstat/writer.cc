#include "netstat/writer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "netstat/reader.h"

namespace atlas::netstat {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

uint64_t clockNs(clockid_t id) {
    timespec ts{};
    clock_gettime(id, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void storeText(Word* words, size_t nwords, const std::string& text) {
    char buf[kTextWords * 8] = {};
    const size_t cap = std::min(nwords * 8 - 1, sizeof(buf) - 1);
    std::memcpy(buf, text.data(), std::min(text.size(), cap));
    for (size_t i = 0; i < nwords; ++i) {
        uint64_t w = 0;
        std::memcpy(&w, buf + i * 8, 8);
        words[i].store(w, kRelaxed);
    }
}

Status sysError(const std::string& what) {
    return Status(Code::kSystem, what + ": " + std::strerror(errno));
}

}  // namespace

std::string defaultSegmentName() {
    return std::string(kNamePrefix) + std::to_string(::getuid()) + "-" + std::to_string(::getpid());
}

size_t removeDeadSegments(const std::string& dir) {
    // The inverse of defaultSegmentName(), over the files listSegments() finds.
    const std::string mine = dir + "/" + kNamePrefix + std::to_string(::getuid()) + "-";
    size_t removed = 0;
    for (const std::string& path : listSegments(dir)) {
        if (path.size() <= mine.size() || path.compare(0, mine.size(), mine) != 0) {
            continue;
        }
        const char* digits = path.c_str() + mine.size();
        const char* last = path.c_str() + path.size();
        long pid = 0;
        const auto [end, ec] = std::from_chars(digits, last, pid);
        if (ec != std::errc() || end != last || pid <= 0) {
            continue;
        }
        if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH &&
            ::unlink(path.c_str()) == 0) {
            ++removed;
        }
    }
    return removed;
}

Result<std::unique_ptr<StatsWriter>> StatsWriter::create(const WriterConfig& config) {
    if (config.comm_capacity == 0 || config.comm_capacity > kMaxComms ||
        config.stream_capacity == 0 || config.stream_capacity > kMaxStreamRecords) {
        return Status(Code::kInvalidUsage, "stats segment capacity out of range");
    }
    std::unique_ptr<StatsWriter> w(new StatsWriter());
    w->path_ = config.dir + "/" + (config.name.empty() ? defaultSegmentName() : config.name);
    const Layout layout = expectedLayout(config.comm_capacity, config.stream_capacity);
    // Segments of killed processes would otherwise pile up in /dev/shm (and in the tool's list).
    (void)removeDeadSegments(config.dir);
    // The name carries our pid: a file already there is a leftover of a dead process that had
    // the same pid (a live one cannot), so it is replaced.
    (void)::unlink(w->path_.c_str());
    int fd = ::open(w->path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        return sysError("cannot create " + w->path_);
    }
    if (::ftruncate(fd, static_cast<off_t>(layout.size)) != 0) {
        Status st = sysError("cannot size " + w->path_);
        ::close(fd);
        ::unlink(w->path_.c_str());
        return st;
    }
    void* map = ::mmap(nullptr, layout.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) {
        Status st = sysError("cannot map " + w->path_);
        ::unlink(w->path_.c_str());
        return st;
    }
    w->map_ = map;
    w->size_ = layout.size;
    w->header_ = static_cast<SegmentHeader*>(map);
    w->comms_ = static_cast<uint8_t*>(map) + layout.comms_offset;
    w->stride_ = layout.comm_stride;
    w->capacity_ = config.comm_capacity;
    w->stream_capacity_ = config.stream_capacity;
    // The file is zero-filled: every record's gen is 0 (never used).
    SegmentHeader& h = *w->header_;
    h.abi_version = kAbiVersion;
    h.header_size = kHeaderSize;
    h.layout_size = layout.size;
    h.comm_capacity = config.comm_capacity;
    h.stream_capacity = config.stream_capacity;
    h.comm_record_size = sizeof(CommRecord);
    h.stream_record_size = sizeof(StreamRecord);
    h.comms_offset = layout.comms_offset;
    h.pid = ::getpid();
    h.start_mono_ns = clockNs(CLOCK_MONOTONIC);
    h.start_real_ns = clockNs(CLOCK_REALTIME);
    h.clock_id = kClockIdMonotonic;
    (void)::gethostname(h.host, sizeof(h.host) - 1);
    if (FILE* f = std::fopen("/proc/self/comm", "r")) {
        if (std::fgets(h.process, sizeof(h.process), f) != nullptr) {
            h.process[std::strcspn(h.process, "\n")] = '\0';
        }
        std::fclose(f);
    }
    h.heartbeat_ns.store(h.start_mono_ns, kRelaxed);
    h.state.store(kSegmentLive, kRelaxed);
    // N1: everything above is visible to a reader that sees the magic.
    h.magic.store(kMagic, std::memory_order_release);
    for (uint32_t i = config.comm_capacity; i > 0; --i) {
        w->free_.push_back(i - 1);  // claim() pops from the back: record 0 first
    }
    return w;
}

StatsWriter::~StatsWriter() {
    if (header_ != nullptr) {
        header_->state.store(kSegmentClosed, std::memory_order_release);
    }
    if (map_ != nullptr) {
        ::munmap(map_, size_);
    }
    (void)::unlink(path_.c_str());
}

StreamRecord* StatsWriter::streams(CommRecord* record) const {
    return reinterpret_cast<StreamRecord*>(reinterpret_cast<uint8_t*>(record) + sizeof(CommRecord));
}

CommRecord* StatsWriter::claim(const CommIdentity& id) {
    CommRecord* r = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (free_.empty()) {
            header_->comms_dropped.store(header_->comms_dropped.load(kRelaxed) + 1, kRelaxed);
            return nullptr;
        }
        r = reinterpret_cast<CommRecord*>(comms_ + uint64_t{free_.back()} * stride_);
        free_.pop_back();
    }
    // N2: odd while the identity is rewritten.
    const uint64_t g = r->gen.load(kRelaxed);
    const uint64_t odd = (g | 1) + ((g & 1) != 0 ? 2 : 0);
    r->gen.store(odd, kRelaxed);
    std::atomic_thread_fence(std::memory_order_release);
    r->comm_id.store(id.comm_id, kRelaxed);
    r->session_id.store(id.session_id, kRelaxed);
    r->role.store(id.role, kRelaxed);
    r->dev.store(static_cast<uint64_t>(id.dev), kRelaxed);
    r->nstreams.store(static_cast<uint64_t>(id.nstreams), kRelaxed);
    r->traffic.store(id.traffic, kRelaxed);
    r->priority.store(static_cast<uint64_t>(id.priority), kRelaxed);
    r->wan.store(id.wan ? 1 : 0, kRelaxed);
    r->handshake_rtt_ns.store(id.handshake_rtt_ns, kRelaxed);
    r->open_ns.store(id.open_ns, kRelaxed);
    storeText(r->peer, kTextWords, id.peer);
    storeText(r->local, kTextWords, id.local);
    storeText(r->link, kLinkWords, id.link);
    for (Word* c : {&r->bytes, &r->messages, &r->last_done_ns, &r->gate_waits, &r->gate_grants,
                    &r->sample_ns, &r->resets, &r->rejoins, &r->resent_bytes}) {
        c->store(0, kRelaxed);
    }
    StreamRecord* s = streams(r);
    for (uint32_t i = 0; i < stream_capacity_; ++i) {
        s[i].valid.store(0, kRelaxed);
        s[i].stream.store(i, kRelaxed);
        s[i].bytes.store(0, kRelaxed);
    }
    r->gen.store(odd + 1, std::memory_order_release);
    return r;
}

void StatsWriter::release(CommRecord* record) {
    if (record == nullptr) {
        return;
    }
    record->gen.store(record->gen.load(kRelaxed) + 1, std::memory_order_release);  // odd: free
    const auto index =
        static_cast<uint32_t>((reinterpret_cast<uint8_t*>(record) - comms_) / stride_);
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(index);
}

void StatsWriter::completed(CommRecord& r, uint64_t bytes, uint64_t now_ns) {
    r.bytes.store(r.bytes.load(kRelaxed) + bytes, kRelaxed);
    r.messages.store(r.messages.load(kRelaxed) + 1, kRelaxed);
    r.last_done_ns.store(now_ns, kRelaxed);
}

void StreamSink::stream(const StreamSample& s) noexcept {
    if (s.stream < 0 || static_cast<uint32_t>(s.stream) >= writer_->streamCapacity()) {
        return;
    }
    StreamRecord& r = writer_->streams(record_)[s.stream];
    r.bytes.store(s.bytes, kRelaxed);
    if (s.tcp_info_ok) {
        const TcpInfoSample& t = s.tcp;
        r.rtt_us.store(t.rtt_us, kRelaxed);
        r.rttvar_us.store(t.rttvar_us, kRelaxed);
        r.min_rtt_us.store(t.min_rtt_us, kRelaxed);
        r.snd_cwnd.store(t.snd_cwnd, kRelaxed);
        r.snd_mss.store(t.snd_mss, kRelaxed);
        r.total_retrans.store(t.total_retrans, kRelaxed);
        r.bytes_retrans.store(t.bytes_retrans, kRelaxed);
        r.delivery_rate.store(t.delivery_rate, kRelaxed);
        r.pacing_rate.store(t.pacing_rate, kRelaxed);
        r.unacked.store(t.unacked, kRelaxed);
        r.tcp_state.store(uint64_t{t.state} | uint64_t{t.ca_state} << 8 |
                              uint64_t{t.delivery_rate_app_limited ? 1u : 0u} << 16,
                          kRelaxed);
        r.sample_ns.store(static_cast<uint64_t>(t.at_ns), kRelaxed);
        r.valid.store(1, kRelaxed);
    }
}

void StreamSink::engine(const CommEngineCounters& c, Nanos now_ns) noexcept {
    record_->gate_waits.store(c.gate_waits, kRelaxed);
    record_->gate_grants.store(c.gate_grants, kRelaxed);
    record_->resets.store(c.stream_resets, kRelaxed);
    record_->rejoins.store(c.rejoins, kRelaxed);
    record_->resent_bytes.store(c.resent_bytes, kRelaxed);
    record_->sample_ns.store(static_cast<uint64_t>(now_ns), kRelaxed);
    // Several engines write the heartbeat; any recent value will do (a liveness hint).
    writer_->header().heartbeat_ns.store(static_cast<uint64_t>(now_ns), kRelaxed);
}

}  // namespace atlas::netstat
