#include "transport/faults.h"

#include <charconv>
#include <optional>

#include "options/value.h"
#include "transport/wire.h"

static_assert(atlas::transport::wire::kMaxStreams + 1 == 65, "FaultInjector::Fired::reset");

namespace atlas::transport {
namespace {

Status bad(std::string_view fault, const std::string& why) {
    return {Code::kInvalidUsage, "fault '" + std::string(fault) + "': " + why +
                                     " (kinds: reset:stream=K[,after=BYTES][,side=send|recv]; "
                                     "stall:stream=K,ms=T[,after=BYTES][,side=send|recv]; "
                                     "drop:ms=T[,after=BYTES]; "
                                     "flip:stream=K[,after=BYTES][,part=header|payload])"};
}

bool parseUint(std::string_view t, uint64_t* out) {
    if (t.empty()) {
        return false;
    }
    const auto r = std::from_chars(t.data(), t.data() + t.size(), *out);
    return r.ec == std::errc() && r.ptr == t.data() + t.size();
}

// The product's one size syntax (options/value.h, as ATLAS_RESEND_BYTES): K/M/G binary.
bool parseBytes(std::string_view t, uint64_t* out) {
    const std::optional<uint64_t> v = options::parseSize(t);
    if (!v) {
        return false;
    }
    *out = *v;
    return true;
}

Result<FaultSpec> parseOne(std::string_view item) {
    const size_t colon = item.find(':');
    const std::string_view kind = item.substr(0, colon);
    FaultSpec f;
    if (kind == "reset") {
        f.kind = FaultSpec::Kind::kReset;
    } else if (kind == "stall") {
        f.kind = FaultSpec::Kind::kStall;
    } else if (kind == "drop") {
        f.kind = FaultSpec::Kind::kDrop;
    } else if (kind == "flip") {
        f.kind = FaultSpec::Kind::kFlip;
    } else {
        return bad(item, "unknown kind '" + std::string(kind) + "'");
    }
    bool have_ms = false;
    std::string_view rest = colon == std::string_view::npos ? "" : item.substr(colon + 1);
    while (!rest.empty()) {
        const size_t comma = rest.find(',');
        const std::string_view kv = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? "" : rest.substr(comma + 1);
        const size_t eq = kv.find('=');
        if (eq == std::string_view::npos) {
            return bad(item, "'" + std::string(kv) + "' is not key=value");
        }
        const std::string_view key = kv.substr(0, eq), val = kv.substr(eq + 1);
        uint64_t v = 0;
        if (key == "stream") {
            if (f.kind == FaultSpec::Kind::kDrop || !parseUint(val, &v) ||
                v > static_cast<uint64_t>(wire::kMaxStreams)) {
                return bad(item, "stream must be 0.." + std::to_string(wire::kMaxStreams) +
                                     " (and drop takes none)");
            }
            f.stream = static_cast<int>(v);
        } else if (key == "after") {
            if (!parseBytes(val, &f.after_bytes)) {
                return bad(item, "after must be a byte count (K/M/G suffixes)");
            }
        } else if (key == "ms") {
            if (!parseUint(val, &v) || v == 0 || v > 3600000 ||
                (f.kind != FaultSpec::Kind::kStall && f.kind != FaultSpec::Kind::kDrop)) {
                return bad(item, "ms must be 1..3600000, for stall and drop only");
            }
            f.duration_ns = static_cast<Nanos>(v) * kNsPerMs;
            have_ms = true;
        } else if (key == "side") {
            if (val != "send" && val != "recv") {
                return bad(item, "side must be send or recv");
            }
            f.recv_side = val == "recv";
            if (f.recv_side &&
                (f.kind == FaultSpec::Kind::kDrop || f.kind == FaultSpec::Kind::kFlip)) {
                return bad(item, "drop and flip act on the send side only");
            }
        } else if (key == "part") {
            if (f.kind != FaultSpec::Kind::kFlip || (val != "header" && val != "payload")) {
                return bad(item, "part must be header or payload, for flip only");
            }
            f.payload = val == "payload";
        } else {
            return bad(item, "unknown key '" + std::string(key) + "'");
        }
    }
    if (f.kind != FaultSpec::Kind::kDrop && f.stream < 0) {
        return bad(item, "stream=K is required");
    }
    if ((f.kind == FaultSpec::Kind::kStall || f.kind == FaultSpec::Kind::kDrop) && !have_ms) {
        return bad(item, "ms=T is required");
    }
    return f;
}

}  // namespace

Result<std::vector<FaultSpec>> parseFaultPlan(std::string_view text) {
    std::vector<FaultSpec> plan;
    while (!text.empty()) {
        const size_t semi = text.find(';');
        const std::string_view item = text.substr(0, semi);
        text = semi == std::string_view::npos ? "" : text.substr(semi + 1);
        if (item.empty()) {
            continue;
        }
        if (plan.size() >= 64) {
            return Status(Code::kInvalidUsage, "more than 64 faults in one plan");
        }
        auto f = parseOne(item);
        if (!f.isOk()) {
            return f.status();
        }
        plan.push_back(f.value());
    }
    return plan;
}

std::string describeFault(const FaultSpec& f) {
    static const char* const kNames[] = {"reset", "stall", "drop", "flip"};
    std::string s = kNames[static_cast<int>(f.kind)];
    s += ":";
    if (f.stream >= 0) {
        s += "stream=" + std::to_string(f.stream) + ",";
    }
    s += "after=" + std::to_string(f.after_bytes);
    if (f.duration_ns > 0) {
        s += ",ms=" + std::to_string(f.duration_ns / kNsPerMs);
    }
    if (f.kind == FaultSpec::Kind::kFlip) {
        s += f.payload ? ",part=payload" : ",part=header";
    } else if (f.kind != FaultSpec::Kind::kDrop) {
        s += f.recv_side ? ",side=recv" : ",side=send";
    }
    return s;
}

FaultInjector::FaultInjector(const std::vector<FaultSpec>& plan, bool send_side)
    : moved_(wire::kMaxStreams + 1, 0),
      stall_until_(wire::kMaxStreams + 1, 0),
      flips_(wire::kMaxStreams + 1, 0) {
    for (const FaultSpec& f : plan) {
        if (f.recv_side != !send_side) {
            continue;
        }
        faults_.push_back({f, false});
    }
}

FaultInjector::Fired FaultInjector::onBytes(int index, uint64_t n, Nanos now) {
    Fired out;
    if (index < 0 || index > wire::kMaxStreams) {
        return out;
    }
    moved_[static_cast<size_t>(index)] += n;
    total_ += n;
    for (Armed& a : faults_) {
        if (a.fired) {
            continue;
        }
        const FaultSpec& f = a.spec;
        if (f.kind == FaultSpec::Kind::kDrop) {
            if (total_ >= f.after_bytes) {
                a.fired = true;
                out.drop = true;
                drop_until_ = now + f.duration_ns;
            }
            continue;
        }
        if (f.stream != index || moved_[static_cast<size_t>(index)] < f.after_bytes) {
            continue;
        }
        a.fired = true;
        switch (f.kind) {
            case FaultSpec::Kind::kReset:
                out.reset.set(static_cast<size_t>(index));
                break;
            case FaultSpec::Kind::kStall:
                stall_until_[static_cast<size_t>(index)] = now + f.duration_ns;
                break;
            case FaultSpec::Kind::kFlip:
                flips_[static_cast<size_t>(index)] |= f.payload ? 1 : 2;
                break;
            case FaultSpec::Kind::kDrop:
                break;
        }
    }
    return out;
}

Nanos FaultInjector::stalledUntil(int index, Nanos now) const {
    if (index < 0 || index > wire::kMaxStreams) {
        return 0;
    }
    const Nanos t = stall_until_[static_cast<size_t>(index)];
    return t > now ? t : 0;
}

void FaultInjector::clearStall(int index) {
    if (index >= 0 && index <= wire::kMaxStreams) {
        stall_until_[static_cast<size_t>(index)] = 0;
    }
}

bool FaultInjector::takeFlip(int index, bool* payload) {
    if (index < 0 || index > wire::kMaxStreams) {
        return false;
    }
    int& f = flips_[static_cast<size_t>(index)];
    if (f == 0) {
        return false;
    }
    *payload = (f & 1) != 0;
    f &= *payload ? ~1 : ~2;
    return true;
}

}  // namespace atlas::transport
