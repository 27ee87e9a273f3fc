#include "netstat/reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace atlas::netstat {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;
constexpr uint64_t kMaxSegmentBytes = 1ull << 31;

Status bad(const std::string& what) {
    return Status(Code::kRemote, "stats segment: " + what);
}

uint64_t ld(const Word& w) {
    return w.load(kRelaxed);
}

std::string loadText(const Word* words, size_t nwords) {
    std::string out;
    for (size_t i = 0; i < nwords; ++i) {
        const uint64_t w = ld(words[i]);
        for (int b = 0; b < 8; ++b) {
            const char c = static_cast<char>((w >> (8 * b)) & 0xff);
            if (c == '\0') {
                return out;
            }
            out += (c >= 0x20 && c < 0x7f) ? c : '?';
        }
    }
    return out;
}

std::string plainText(const char* p, size_t n) {
    std::string out;
    for (size_t i = 0; i < n && p[i] != '\0'; ++i) {
        out += (p[i] >= 0x20 && p[i] < 0x7f) ? p[i] : '?';
    }
    return out;
}

StreamView readStream(const StreamRecord& r) {
    StreamView v;
    v.stream = static_cast<uint32_t>(std::min<uint64_t>(ld(r.stream), kMaxStreamRecords));
    v.valid = ld(r.valid) == 1;
    v.bytes = ld(r.bytes);
    v.rtt_us = ld(r.rtt_us);
    v.rttvar_us = ld(r.rttvar_us);
    v.min_rtt_us = ld(r.min_rtt_us);
    v.snd_cwnd = ld(r.snd_cwnd);
    v.snd_mss = ld(r.snd_mss);
    v.unacked = ld(r.unacked);
    v.total_retrans = ld(r.total_retrans);
    v.bytes_retrans = ld(r.bytes_retrans);
    v.delivery_rate = ld(r.delivery_rate);
    v.pacing_rate = ld(r.pacing_rate);
    const uint64_t st = ld(r.tcp_state);
    v.tcp_state = static_cast<uint32_t>(st & 0xff);
    v.ca_state = static_cast<uint32_t>((st >> 8) & 0xff);
    v.app_limited = ((st >> 16) & 1) != 0;
    v.sample_ns = ld(r.sample_ns);
    return v;
}

}  // namespace

Result<ProcessView> parseSegment(const void* data, size_t size) {
    if (data == nullptr || size < kHeaderSize) {
        return bad("shorter than its header (" + std::to_string(size) + " bytes)");
    }
    if (reinterpret_cast<uintptr_t>(data) % alignof(SegmentHeader) != 0) {
        return bad("misaligned image");
    }
    const auto& h = *static_cast<const SegmentHeader*>(data);
    // N1: acquire, so the identity block below is the writer's.
    const uint64_t magic = h.magic.load(std::memory_order_acquire);
    if (magic != kMagic) {
        return bad(magic == 0 ? "not initialised yet" : "bad magic");
    }
    if (h.abi_version != kAbiVersion) {
        return bad("ABI version " + std::to_string(h.abi_version) + ", this reader knows " +
                   std::to_string(kAbiVersion));
    }
    if (h.header_size != kHeaderSize || h.comm_record_size != sizeof(CommRecord) ||
        h.stream_record_size != sizeof(StreamRecord) || h.comms_offset != kHeaderSize) {
        return bad("record sizes or offsets differ from this reader's ABI");
    }
    if (h.comm_capacity == 0 || h.comm_capacity > kMaxComms || h.stream_capacity == 0 ||
        h.stream_capacity > kMaxStreamRecords) {
        return bad("capacities out of range");
    }
    const Layout layout = expectedLayout(h.comm_capacity, h.stream_capacity);
    if (h.layout_size != layout.size || layout.size > size) {
        return bad("layout (" + std::to_string(layout.size) + " bytes) does not match the " +
                   "header or exceeds the file (" + std::to_string(size) + " bytes)");
    }
    ProcessView p;
    p.pid = h.pid;
    p.host = plainText(h.host, sizeof(h.host));
    p.process = plainText(h.process, sizeof(h.process));
    p.start_mono_ns = h.start_mono_ns;
    p.start_real_ns = h.start_real_ns;
    p.heartbeat_ns = ld(h.heartbeat_ns);
    p.auth_failures = ld(h.auth_failures);
    p.comms_dropped = ld(h.comms_dropped);
    p.closed = ld(h.state) == kSegmentClosed;
    const auto* base = static_cast<const uint8_t*>(data) + layout.comms_offset;
    for (uint32_t i = 0; i < h.comm_capacity; ++i) {
        const auto& r =
            *reinterpret_cast<const CommRecord*>(base + uint64_t{i} * layout.comm_stride);
        // N2: acquire pairs with the claim's release store of the even generation.
        const uint64_t g1 = r.gen.load(std::memory_order_acquire);
        if (g1 == 0 || (g1 & 1) != 0) {
            continue;
        }
        CommView c;
        c.index = i;
        c.comm_id = ld(r.comm_id);
        c.session_id = ld(r.session_id);
        const uint64_t role = ld(r.role);
        const uint64_t traffic = ld(r.traffic);
        const uint64_t nstreams = ld(r.nstreams);
        c.dev = static_cast<uint32_t>(std::min<uint64_t>(ld(r.dev), 1u << 20));
        c.priority = static_cast<uint32_t>(std::min<uint64_t>(ld(r.priority), 255));
        c.wan = ld(r.wan) == 1;
        c.handshake_rtt_ns = ld(r.handshake_rtt_ns);
        c.open_ns = ld(r.open_ns);
        c.peer = loadText(r.peer, kTextWords);
        c.local = loadText(r.local, kTextWords);
        c.link = loadText(r.link, kLinkWords);
        c.bytes = ld(r.bytes);
        c.messages = ld(r.messages);
        c.last_done_ns = ld(r.last_done_ns);
        c.gate_waits = ld(r.gate_waits);
        c.gate_grants = ld(r.gate_grants);
        c.sample_ns = ld(r.sample_ns);
        c.resets = ld(r.resets);
        c.rejoins = ld(r.rejoins);
        c.resent_bytes = ld(r.resent_bytes);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (r.gen.load(kRelaxed) != g1) {
            continue;  // reused while we copied: the next read sees the new comm
        }
        if (role > kRoleRecv || traffic > kTrafficDataParallel) {
            return bad("comm record " + std::to_string(i) + " has an unknown role or traffic kind");
        }
        // Stream record 0 is the control stream, so nstreams data streams need nstreams + 1
        // records; compared without the + 1, which wraps for nstreams = 2^64 - 1.
        if (nstreams >= h.stream_capacity) {
            return bad("comm record " + std::to_string(i) + " claims " + std::to_string(nstreams) +
                       " streams, more than the segment holds");
        }
        c.role = static_cast<Role>(role);
        c.traffic = static_cast<Traffic>(traffic);
        c.nstreams = static_cast<uint32_t>(nstreams);
        const auto* streams = reinterpret_cast<const StreamRecord*>(
            reinterpret_cast<const uint8_t*>(&r) + sizeof(CommRecord));
        for (uint32_t s = 0; s <= c.nstreams; ++s) {
            c.streams.push_back(readStream(streams[s]));
        }
        p.comms.push_back(std::move(c));
    }
    return p;
}

Result<ProcessView> readSegmentFile(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return Status(Code::kUnavailable, "cannot open " + path + ": " + std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return Status(Code::kRemote, path + ": not a regular file");
    }
    const auto size = static_cast<uint64_t>(st.st_size);
    if (size < kHeaderSize || size > kMaxSegmentBytes) {
        ::close(fd);
        return Status(Code::kRemote, path + ": size " + std::to_string(size) + " out of range");
    }
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) {
        return Status(Code::kSystem, "cannot map " + path + ": " + std::strerror(errno));
    }
    Result<ProcessView> p = parseSegment(map, size);
    ::munmap(map, size);
    if (!p.isOk()) {
        return Status(p.status().code(), path + ": " + p.status().message());
    }
    p.value().path = path;
    p.value().alive =
        p.value().pid > 0 && (::kill(static_cast<pid_t>(p.value().pid), 0) == 0 || errno == EPERM);
    return p;
}

std::vector<std::string> listSegments(const std::string& dir) {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
        return out;
    }
    while (dirent* e = ::readdir(d)) {
        if (std::strncmp(e->d_name, kNamePrefix, std::strlen(kNamePrefix)) == 0) {
            out.push_back(dir + "/" + e->d_name);
        }
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace atlas::netstat
