#include "plugin/pending_connects.h"

#include <cstring>
#include <memory>

namespace atlas::plugin {
namespace {

// NCCL's buffer while an attempt is in progress: the token in the handle's scratch field
// (transport/net.h), which the listener zeroed.
constexpr uint32_t kPendingMagic = 0x43505441;  // "ATPC"
constexpr size_t kOffset = transport::kHandleScratchOffset;

}  // namespace

PendingConnects::~PendingConnects() {
    for (PendingConnect* pc : live_) {
        (void)table_->remove(HandleKind::kConnect, pc->token);
        delete pc;
    }
}

Status PendingConnects::resume(const void* ctx, uint8_t nccl_handle[transport::kHandleSize],
                               PendingConnect** out) {
    if (void* token = transport::handleScratchGet(nccl_handle, kPendingMagic)) {
        auto* pc = static_cast<PendingConnect*>(table_->find(HandleKind::kConnect, token));
        if (pc == nullptr) {
            return Status(Code::kInternal,
                          "the handle carries a connection attempt this plugin no longer has "
                          "(given up and reclaimed at finalize, or from an earlier load of the "
                          "plugin); connect needs a handle fresh from listen");
        }
        if (pc->ctx != ctx) {
            return Status(Code::kInternal,
                          "connect resumed under another context than the one it began with");
        }
        *out = pc;
        return Status::ok();
    }
    auto pc = std::make_unique<PendingConnect>();
    pc->ctx = ctx;
    // The listener's part only: the scratch stays zero for the transport's connector.
    std::memcpy(pc->handle.data(), nccl_handle, kOffset);
    auto token = table_->add(HandleKind::kConnect, pc.get());
    if (!token) {
        return token.status();
    }
    pc->token = token.value();
    try {
        live_.insert(pc.get());
    } catch (...) {
        (void)table_->remove(HandleKind::kConnect, pc->token);
        throw;
    }
    transport::handleScratchSet(nccl_handle, kPendingMagic, pc->token);
    *out = pc.release();
    return Status::ok();
}

void PendingConnects::finish(PendingConnect* pc, uint8_t nccl_handle[transport::kHandleSize]) {
    (void)table_->remove(HandleKind::kConnect, pc->token);
    live_.erase(pc);
    delete pc;
    transport::handleScratchSet(nccl_handle, kPendingMagic, nullptr);
}

int PendingConnects::reclaim(const void* ctx, bool all, transport::Transport* transport) {
    int n = 0;
    for (auto it = live_.begin(); it != live_.end();) {
        PendingConnect* pc = *it;
        if (!all && pc->ctx != ctx) {
            ++it;
            continue;
        }
        it = live_.erase(it);
        (void)table_->remove(HandleKind::kConnect, pc->token);
        transport->abandonConnect(pc->handle.data());
        delete pc;
        ++n;
    }
    return n;
}

}  // namespace atlas::plugin
