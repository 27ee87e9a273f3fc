#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "options/value.h"
#include "transport/auth.h"
#include "transport/reactor.h"
#include "transport/setup.h"
#include "transport/transport_impl.h"
#include "transport/wire.h"

namespace atlas::transport {

namespace {
// Connector state lives in the scratch half of the handle buffer (see wire.h): a magic
// word and a pointer. connect() is called again with the same buffer until it succeeds.
constexpr uint32_t kScratchMagic = 0x53435441;  // "ATCS"
static_assert(wire::kHandlePublicBytes == kHandleScratchOffset);
static_assert(kHandleScratchOffset + 16 <= kHandleSize);

Connector* scratchGet(const uint8_t* handle) {
    return static_cast<Connector*>(handleScratchGet(handle, kScratchMagic));
}

void scratchSet(uint8_t* handle, Connector* c) {
    handleScratchSet(handle, kScratchMagic, c);
}

// The congestion control the streams will ask for: the first of config's preferences (a
// comma list, most wanted first) that the kernel takes on a fresh socket, else empty (the
// kernel's default). No stream fails for it. The answer is kept per list for the process's
// life, so its log line (what is in force; a refusal and its likely cause) comes once per
// process, not once per Transport: the plugin makes one per init, and NCCL inits once per
// communicator.
std::string usableCongestionControl(const TransportConfig& config) {
    static std::mutex mu;
    static std::map<std::string, std::string> decided;  // wanted -> used ("" = the default)
    const std::string& want = config.congestion_control;
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = decided.find(want); it != decided.end()) {
        return it->second;
    }
    auto fd = makeTcpSocket(AF_INET);
    if (!fd.isOk()) {
        fd = makeTcpSocket(AF_INET6);
    }
    if (!fd.isOk()) {
        // Nothing to try it on: every stream tries the first, and keeps the default if not.
        return want.substr(0, want.find(','));
    }
    const std::string system = congestionControl(fd->get());
    std::string& used = decided[want];
    if (want.empty()) {
        ATLAS_LOG_INFO(config.logger,
                       "streams use the kernel's default TCP congestion control %s "
                       "(ATLAS_TCP_CC=system)",
                       system.c_str());
        return used;
    }
    std::string refusals;  // "name: why; ..." of the preferences the kernel refused
    for (const std::string_view item : options::split(want, ',')) {
        const std::string name(item);
        const int err = setCongestionControl(fd->get(), name);
        if (err == 0) {
            ATLAS_LOG_INFO(config.logger,
                           "streams use TCP congestion control %s (kernel default %s)%s%s",
                           name.c_str(), system.c_str(),
                           refusals.empty() ? "" : "; refused: ", refusals.c_str());
            used = name;
            return used;
        }
        const std::string hint =
            name == kToldRateCongestionControl && err == ENOENT
                ? "not registered: atlas-tcp-cc register, as root (docs/tcp-cc.md)"
            : err == ENOENT ? "the kernel has no such module (modprobe tcp_" + name + ")"
            : err == EPERM
                ? "not in net.ipv4.tcp_allowed_congestion_control, and the process lacks "
                  "CAP_NET_ADMIN"
                : "ATLAS_TCP_CC=system uses the default without asking";
        refusals +=
            (refusals.empty() ? "" : "; ") + name + ": " + std::strerror(err) + " (" + hint + ")";
    }
    // Unasked (the default): a host without bbr is ordinary, so INFO. Named: WARN.
    const LogLevel level = config.congestion_control_is_default ? LogLevel::kInfo : LogLevel::kWarn;
    config.logger.log(level, __FILE__, __LINE__,
                      "TCP congestion control '%s' (ATLAS_TCP_CC) refused: %s; streams use "
                      "the kernel's default %s",
                      want.c_str(), refusals.c_str(), system.c_str());
    return used;
}
}  // namespace

void* handleScratchGet(const uint8_t handle[kHandleSize], uint32_t magic) {
    uint32_t found = 0;
    std::memcpy(&found, handle + kHandleScratchOffset, sizeof(found));
    if (found != magic) {
        return nullptr;
    }
    void* value = nullptr;
    std::memcpy(&value, handle + kHandleScratchOffset + 8, sizeof(value));
    return value;
}

void handleScratchSet(uint8_t handle[kHandleSize], uint32_t magic, void* value) {
    const uint32_t stored = value != nullptr ? magic : 0;
    std::memcpy(handle + kHandleScratchOffset, &stored, sizeof(stored));
    std::memcpy(handle + kHandleScratchOffset + 8, &value, sizeof(value));
}

// ---------------------------------------------------------------- Transport

Transport::Transport(const TransportConfig& config)
    : config_(config), impl_(std::make_unique<Impl>()) {
    impl_->config = config;
}

Transport::~Transport() {
    // The rejoiner first: it may still deliver to engines. Engines join in their destructors.
    impl_->rejoiner.reset();
    impl_->engines.clear();
}

Result<std::unique_ptr<Transport>> Transport::create(const TransportConfig& config) {
    if (config.engine_threads < 1 || config.engine_threads > 64) {
        return Status(Code::kInvalidArgument, "engine_threads must be in [1, 64]");
    }
    if (config.encrypt && config.auth_key.empty()) {
        return Status(Code::kInvalidUsage,
                      "encryption (ATLAS_ENCRYPT=1) needs a shared key: set ATLAS_AUTH_KEY or "
                      "ATLAS_AUTH_KEY_FILE on both sides");
    }
    TransportConfig cfg = config;
    cfg.congestion_control = usableCongestionControl(config);
    std::unique_ptr<Transport> t(new Transport(cfg));
    IoBackend want = config.io;
    if (want != IoBackend::kEpoll) {
        Status probe = probeUring();
        if (!probe.isOk()) {
            if (want == IoBackend::kUring) {
                return Status(Code::kUnavailable,
                              "ATLAS_IO=uring but io_uring is unusable: " + probe.message());
            }
            ATLAS_LOG_INFO(config.logger, "io_uring unavailable (%s); using epoll",
                           probe.message().c_str());
            want = IoBackend::kEpoll;
        } else {
            want = IoBackend::kUring;
        }
    }
    for (int i = 0; i < config.engine_threads; ++i) {
        auto e =
            Engine::start(i, want, static_cast<Nanos>(config.spin_us) * kNsPerUs, config.logger);
        if (!e.isOk()) {
            return e.status();
        }
        t->impl_->engines.push_back(std::move(e.value()));
    }
    t->backend_ = t->impl_->engines.front()->backend();
    auto rejoiner = Rejoiner::start(cfg);
    if (!rejoiner.isOk()) {
        return rejoiner.status();
    }
    t->impl_->rejoiner = std::move(rejoiner.value());
    return t;
}

int Transport::liveComms() const {
    return impl_->live_comms.load(std::memory_order_relaxed);
}

Engine& Transport::Impl::pickEngine() {
    // Round-robin: comms of one process spread over the pool.
    const uint32_t i = next_engine.fetch_add(1, std::memory_order_relaxed);
    return *engines[i % engines.size()];
}

void Transport::Impl::fillRecovery(CommParams* params) const {
    params->resend_bytes = config.resend_bytes;
    params->timeout_ns = static_cast<Nanos>(config.timeout_ms) * kNsPerMs;
    params->cadence = config.confirm;
    params->notsent_lowat = static_cast<uint32_t>(std::max<size_t>(config.chunk_bytes, 128 * 1024));
    params->faults = config.faults;
    params->rejoiner = rejoiner.get();
}

std::unique_ptr<SendComm> Transport::Impl::makeSendComm(CommParams params, std::vector<Fd> fds) {
    auto impl = std::make_unique<SendComm::Impl>();
    Engine& e = pickEngine();
    fillRecovery(&params);
    impl->transport = this;
    impl->core = std::make_unique<CommCore>(params, std::move(fds), &e);
    impl->core->setRejoinToken(rejoiner->registerComm(impl->core.get(), &e));
    live_comms.fetch_add(1, std::memory_order_relaxed);
    e.adopt(impl->core.get());
    return std::make_unique<SendComm>(std::move(impl));
}

std::unique_ptr<RecvComm> Transport::Impl::makeRecvComm(CommParams params, std::vector<Fd> fds) {
    auto impl = std::make_unique<RecvComm::Impl>();
    Engine& e = pickEngine();
    fillRecovery(&params);
    impl->transport = this;
    const int nstreams = static_cast<int>(fds.size()) - 1;
    impl->core = std::make_unique<CommCore>(params, std::move(fds), &e);
    const uint64_t token = rejoiner->registerComm(impl->core.get(), &e);
    impl->core->setRejoinToken(token);
    rejoiner->addSession(token, params.info.session_id, params.auth, nstreams);
    live_comms.fetch_add(1, std::memory_order_relaxed);
    e.adopt(impl->core.get());
    return std::make_unique<RecvComm>(std::move(impl));
}

Result<std::unique_ptr<ListenComm>> Transport::listen(const SocketAddress& local,
                                                      uint8_t handle[kHandleSize]) {
    auto fd = makeTcpSocket(local.family());
    if (!fd.isOk()) {
        return fd.status();
    }
    const int one = 1;
    ::setsockopt(fd->get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    // Buffer sizes must be set before listen() so accepted sockets negotiate window scaling
    // for them.
    ATLAS_RETURN_IF_ERROR(
        applyStreamOptions(fd->get(), socketOptions(config_)));
    SocketAddress bind_addr = local;
    if (bind_addr.family() == AF_INET) {
        reinterpret_cast<sockaddr_in*>(&bind_addr.storage)->sin_port = 0;
    } else {
        reinterpret_cast<sockaddr_in6*>(&bind_addr.storage)->sin6_port = 0;
    }
    if (::bind(fd->get(), reinterpret_cast<const sockaddr*>(&bind_addr.storage), bind_addr.len) !=
        0) {
        return Status::fromErrno("bind to " + bind_addr.toString(), errno);
    }
    if (::listen(fd->get(), SOMAXCONN) != 0) {
        return Status::fromErrno("listen on " + bind_addr.toString(), errno);
    }
    auto bound = localAddress(fd->get());
    if (!bound.isOk()) {
        return bound.status();
    }
    auto listen_id = randomU64();
    if (!listen_id.isOk()) {
        return listen_id.status();
    }
    wire::HandleInfo info;
    info.family = static_cast<uint16_t>(bound->family());
    info.port = bound->port();
    if (bound->family() == AF_INET) {
        std::memcpy(info.addr.data(),
                    &reinterpret_cast<const sockaddr_in*>(&bound->storage)->sin_addr, 4);
    } else {
        std::memcpy(info.addr.data(),
                    &reinterpret_cast<const sockaddr_in6*>(&bound->storage)->sin6_addr, 16);
    }
    info.listen_id = listen_id.value();
    // Rejoins of this listener's comms arrive at the process's rejoin listener for the same
    // address: NCCL closes the listen comm right after accept.
    auto rejoin_port = impl_->rejoiner->listenerPort(bound.value());
    if (!rejoin_port.isOk()) {
        return rejoin_port.status();
    }
    wire::encodeHandle(info, handle);
    return std::make_unique<ListenComm>(std::make_unique<ListenComm::Impl>(
        *this, std::move(fd.value()), bound.value(), info.listen_id, rejoin_port.value()));
}

Status Transport::connect(uint8_t handle[kHandleSize], std::unique_ptr<SendComm>* out) {
    *out = nullptr;
    Connector* c = scratchGet(handle);
    if (c == nullptr) {
        wire::HandleInfo info;
        ATLAS_RETURN_IF_ERROR(wire::decodeHandle(handle, &info));
        c = new Connector(*this, info, config_.clock->nowNs());
        scratchSet(handle, c);
    }
    Status st = c->step(out);
    if (!st.isOk() || *out != nullptr) {
        delete c;
        scratchSet(handle, nullptr);
    }
    return st;
}

void Transport::abandonConnect(uint8_t handle[kHandleSize]) {
    delete scratchGet(handle);
    scratchSet(handle, nullptr);
}

// ---------------------------------------------------------------- ListenComm

ListenComm::ListenComm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ListenComm::~ListenComm() = default;
Status ListenComm::accept(std::unique_ptr<RecvComm>* out) {
    *out = nullptr;
    return impl_->accept(out);
}
const SocketAddress& ListenComm::address() const {
    return impl_->addr_;
}
uint16_t ListenComm::rejoinPort() const {
    return impl_->rejoin_port_;
}

// ---------------------------------------------------------------- comms

Status CommHandle::close() {
    if (closed) {
        return Status::ok();
    }
    closed = true;
    // No rejoin may reach the comm once the engine lets go of it (Rejoiner lifetime rule).
    transport->rejoiner->unregister(core->rejoinToken());
    const Nanos timeout = static_cast<Nanos>(transport->config.timeout_ms) * kNsPerMs;
    Status st = core->engine()->release(core.get(), timeout);
    if (!st.isOk()) {
        // The engine may still touch the comm: leak it rather than free memory in use.
        (void)core.release();
        return st;
    }
    core.reset();
    transport->live_comms.fetch_sub(1, std::memory_order_relaxed);
    return Status::ok();
}

SendComm::SendComm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SendComm::~SendComm() {
    (void)impl_->close();
}
Status SendComm::isend(const void* data, size_t size, Request** req) {
    return impl_->core->post(static_cast<uint8_t*>(const_cast<void*>(data)), size, req);
}
Status SendComm::close() {
    return impl_->close();
}
const CommInfo& SendComm::info() const {
    return impl_->core->info();
}
void SendComm::setGate(std::unique_ptr<FlowGate> gate) {
    impl_->core->setGate(std::move(gate));
}
std::function<void()> SendComm::waker() {
    CommCore* core = impl_->core.get();
    return [core] { core->engine()->ring(core); };
}
const RecoveryCounters& SendComm::recovery() const {
    return impl_->core->counters();
}
StreamEventLog& SendComm::streamEvents() {
    return impl_->core->streamEvents();
}

RecvComm::RecvComm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RecvComm::~RecvComm() {
    (void)impl_->close();
}
Status RecvComm::irecv(void* data, size_t capacity, Request** req) {
    return impl_->core->post(static_cast<uint8_t*>(data), capacity, req);
}
Status RecvComm::close() {
    return impl_->close();
}
const CommInfo& RecvComm::info() const {
    return impl_->core->info();
}
void RecvComm::setObserver(std::unique_ptr<RecvObserver> observer) {
    impl_->core->setObserver(std::move(observer));
}
const RecoveryCounters& RecvComm::recovery() const {
    return impl_->core->counters();
}
StreamEventLog& RecvComm::streamEvents() {
    return impl_->core->streamEvents();
}

}  // namespace atlas::transport
