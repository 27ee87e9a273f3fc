// Rejoiner: re-establishes lost streams of live comms (docs/protocol.md, "Rejoin").
//
// NCCL closes the listen comm right after accept, so a lost stream cannot come back through
// it. Instead each process runs one rejoin listener per local address it listens on (an
// ephemeral port, advertised to the connector in HelloAck and bound into the listener's MAC),
// owned by this object for the Transport's lifetime. When a send comm loses a stream, its
// engine asks for a dial attempt; the connector side redials the receiving process's rejoin
// listener, both ends run the rejoin handshake (authenticated like the first connection, with
// fresh nonces), and the new socket is handed to the owning comm's engine thread, which takes
// the stream back. Only the connector dials: the listener of a comm never needs to know where
// its connector's process listens.
//
// Threads: one thread of its own, sleeping in poll() (listeners, handshakes in progress, a wake
// eventfd). It owns sockets only while their handshake runs, as setup code does on NCCL's
// thread at first connect; once a stream is ready it is delivered to the comm's engine as a
// command (Engine::deliver) and never touched here again.
// Lifetime rule: every delivery is made under mutex_, only to a registered comm; unregister()
// takes mutex_ too, so once it returns nothing more is delivered to that comm. A comm
// unregisters before its engine releases it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/auth.h"
#include "transport/hs_conn.h"
#include "transport/net.h"
#include "transport/socket_util.h"
#include "transport/wire.h"

namespace atlas::transport {

class CommCore;
class Engine;

// The outcome of one rejoin, delivered to the comm's engine.
struct StreamArrival {
    int index = 0;
    uint32_t epoch = 0;
    Fd fd;  // valid on success
    Status status = Status::ok();
    // Retrying cannot help: the receiving comm is closed, its process is gone (connection
    // refused by the rejoin listener) or it failed authentication.
    bool fatal = false;
};

class Rejoiner {
  public:
    static Result<std::unique_ptr<Rejoiner>> start(const TransportConfig& config);
    ~Rejoiner();  // joins the thread; every comm must have unregistered
    Rejoiner(const Rejoiner&) = delete;
    Rejoiner& operator=(const Rejoiner&) = delete;

    // Any thread: the port of the rejoin listener on `local`'s address (created on first use).
    Result<uint16_t> listenerPort(const SocketAddress& local);

    // Any thread: registers a comm; deliveries for it go to `engine`. Returns its token.
    uint64_t registerComm(CommCore* comm, Engine* engine);
    // A receiving comm accepts rejoins of its streams 0..nstreams (data streams + control).
    void addSession(uint64_t token, uint64_t session_id, const AuthContext& auth, int nstreams);
    // After return no delivery for `token` is made; its dials and handshakes are dropped.
    void unregister(uint64_t token);

    // Engine thread of a send comm: one attempt to reopen stream `index` as `epoch`. The
    // outcome (a stream or a failure) is delivered to the comm's engine, within `deadline`.
    struct Dial {
        uint64_t token = 0;
        SocketAddress peer;  // the receiving process's rejoin listener
        uint64_t session_id = 0;
        AuthContext auth;
        int index = 0;
        uint32_t epoch = 0;
        Nanos deadline = 0;
    };
    void dial(const Dial& d);

  private:
    explicit Rejoiner(const TransportConfig& config);
    void run();
    void wake();

    struct Listener {
        SocketAddress addr;
        Fd fd;
        uint16_t port = 0;
    };
    struct Registered {
        CommCore* comm = nullptr;
        Engine* engine = nullptr;
    };
    struct Session {
        uint64_t token = 0;
        AuthContext auth;
        int nstreams = 0;
        std::vector<uint32_t> max_epoch;  // per stream index: highest epoch accepted
    };
    // A connection to a rejoin listener, listener side.
    struct Inbound {
        HsConn conn;
        Nanos deadline = 0;
        bool have_hello = false;
        wire::RejoinHello hello;
        RejoinNonces nonces;
        bool refusing = false;  // Ack with a refusal queued: close once flushed
    };
    // A dial, connector side.
    struct Outbound {
        Dial d;
        HsConn conn;
        bool connected = false;
        bool proof_queued = false;
        RejoinNonces nonces;
    };

    void acceptAll(int listen_fd, Nanos now);
    bool serveInbound(Inbound& in, Nanos now);     // false: finished with (handed over/dropped)
    bool serveOutbound(Outbound& out, Nanos now);  // false: finished with (delivered)
    void deliver(uint64_t token, StreamArrival a);
    void fail(Outbound& out, Status st, bool fatal);
    void warnStranger(int fd, const std::string& why);

    const TransportConfig config_;
    std::thread thread_;
    Fd wake_fd_;

    std::mutex mutex_;
    bool stop_ = false;                     // guarded by mutex_
    std::vector<Listener> listeners_;       // guarded by mutex_ (fds live until destruction)
    bool listeners_changed_ = false;        // guarded by mutex_
    std::map<uint64_t, Registered> comms_;  // guarded by mutex_
    std::map<uint64_t, Session> sessions_;  // by session id; guarded by mutex_
    std::vector<Dial> dial_queue_;          // guarded by mutex_
    uint64_t next_token_ = 1;               // guarded by mutex_

    // Rejoiner thread only.
    std::list<Inbound> inbound_;
    std::list<Outbound> outbound_;
    std::vector<int> listen_fds_;
    int warnings_ = 0;
};

}  // namespace atlas::transport
