// HsConn: a socket in handshake, with buffered non-blocking reads and writes of handshake
// messages (wire::HsHeader + body). Used by setup (NCCL's service thread) and the rejoiner.
// Not thread-safe; one owner at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "atlas/common/status.h"
#include "transport/socket_util.h"
#include "transport/wire.h"

namespace atlas::transport {

// A socket in handshake: buffered non-blocking reads and writes of handshake messages.
class HsConn {
  public:
    HsConn() = default;
    explicit HsConn(Fd fd) : fd_(std::move(fd)) {}

    int fd() const { return fd_.get(); }
    Fd takeFd() { return std::move(fd_); }
    bool hasOutput() const { return out_off_ < out_.size(); }
    bool hasInput() const { return !in_.empty(); }

    void queue(const uint8_t* bytes, size_t len) { out_.insert(out_.end(), bytes, bytes + len); }
    // Writes what the socket accepts now.
    Status flush();
    // Reads what is available now, buffering at most `limit` bytes in all (a caller that must
    // not consume the stream bytes behind a handshake message passes its exact size); *eof is
    // set when the peer closed.
    Status fill(bool* eof, size_t limit = 4 * wire::kHsMaxMessage);
    // Pops one complete message if buffered. Returns false (and OK) if incomplete.
    Result<bool> take(wire::HsHeader* header, std::vector<uint8_t>* body);
    // fill() then take(): a read error, or the message if one is complete now.
    Result<bool> receive(wire::HsHeader* header, std::vector<uint8_t>* body, bool* eof,
                         size_t limit = 4 * wire::kHsMaxMessage) {
        ATLAS_RETURN_IF_ERROR(fill(eof, limit));
        return take(header, body);
    }

  private:
    Fd fd_;
    std::vector<uint8_t> in_;
    std::vector<uint8_t> out_;
    size_t out_off_ = 0;
};

// Encodes a handshake message and queues it for flush().
template <typename Msg>
void queueMsg(HsConn& c, const Msg& m) {
    uint8_t buf[wire::kHsMaxMessage];
    const size_t n = wire::encode(m, buf);
    c.queue(buf, n);
}

// Decodes `body` as the handshake message `type` the caller waits for; any other message is
// a protocol error naming `what`.
template <typename Msg>
Status expectMsg(const wire::HsHeader& h, const std::vector<uint8_t>& body, wire::HsType type,
                 Msg* out, const char* what) {
    if (h.type != type) {
        return {Code::kRemote,
                std::string("unexpected handshake message while waiting for ") + what};
    }
    return wire::decode(std::span<const uint8_t>(body), out);
}

}  // namespace atlas::transport
