#include "plugin/params.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "options/value.h"

namespace atlas::plugin {
namespace {

// Reads the key file; the key is its contents without trailing newlines. stdio rather than
// iostreams: this runs inside the NCCL plugin.
Status loadKeyFile(const std::string& path, std::string* key) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
        const int err = errno;
        return Status(Code::kInvalidUsage, "ATLAS_AUTH_KEY_FILE=" + options::quote(path) +
                                               " is invalid: cannot open the file (" +
                                               std::strerror(err) + ")");
    }
    std::string contents;
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0 && contents.size() < (1u << 20)) {
        contents.append(buf, n);
    }
    std::fclose(f);
    while (!contents.empty() && (contents.back() == '\n' || contents.back() == '\r')) {
        contents.pop_back();
    }
    if (contents.empty()) {
        return Status(Code::kInvalidUsage, "ATLAS_AUTH_KEY_FILE=" + options::quote(path) +
                                               " is invalid: the file is empty (it must hold the "
                                               "key)");
    }
    *key = std::move(contents);
    return Status::ok();
}

// A comma list of kernel congestion control names, each 1-15 of a-z, 0-9, _
// (TCP_CA_NAME_MAX is 16 with the NUL); "system" and "auto" are such names too.
bool validCongestionControl(const std::string& list) {
    for (const std::string_view name : options::split(list, ',')) {
        if (name.empty() || name.size() >= 16 || !std::all_of(name.begin(), name.end(), [](char c) {
                return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
            })) {
            return false;
        }
    }
    return true;
}

}  // namespace

const options::Table<Params>& paramTable() {
    static const options::Table<Params> table = [] {
        using Config = Params;
#define ATLAS_PARAM_OPTION(KEY, field, Kind, def, lo, hi, doc) \
    ATLAS_OPTION_MAKE(#KEY, param_kinds::Kind, field, lo, hi, "", doc)
#define ATLAS_PARAM_ALIAS(OLD, NEW) options::Alias{#OLD, #NEW, true},
        return options::Table<Params>{{ATLAS_PARAM_LIST(ATLAS_PARAM_OPTION)},
                                      {ATLAS_PARAM_ALIASES(ATLAS_PARAM_ALIAS)}};
#undef ATLAS_PARAM_OPTION
#undef ATLAS_PARAM_ALIAS
    }();
    return table;
}

const ParamSpec* findParam(std::string_view key) {
    return paramTable().find(key);
}

Status ParamsParse::status() const {
    return options::Parsed<Params>::joinErrors(errors, Code::kInvalidUsage);
}

ParamsParse parseParams(const EnvLookup& env) {
    options::Parsed<Params> parsed;
    options::readEnv(paramTable(), env, &parsed);
    ParamsParse result{std::move(parsed.config), std::move(parsed.errors),
                       std::move(parsed.warnings)};
    Params& p = result.params;
    if (!p.auth_key.empty() && !p.auth_key_file.empty()) {
        result.errors.push_back(
            "ATLAS_AUTH_KEY and ATLAS_AUTH_KEY_FILE are both set: set only one of them");
    } else if (!p.auth_key_file.empty()) {
        Status st = loadKeyFile(p.auth_key_file, &p.resolved_auth_key);
        if (!st.isOk()) {
            result.errors.push_back(st.message());
        }
    } else {
        p.resolved_auth_key = p.auth_key;
    }
    if (!validCongestionControl(p.tcp_cc)) {
        result.errors.push_back("ATLAS_TCP_CC=" + options::quote(p.tcp_cc) +
                                " is invalid: expected a congestion control name (1-15 of "
                                "a-z, 0-9, _; e.g. bbr, cubic, atlas_rate) or a comma list of "
                                "them, auto or system");
    }
    if (p.nstreams > p.max_streams) {
        result.errors.push_back("ATLAS_NSTREAMS=" + std::to_string(p.nstreams) +
                                " exceeds ATLAS_MAX_STREAMS=" + std::to_string(p.max_streams));
    }
    if (p.encrypt && p.resolved_auth_key.empty() && p.auth_key_file.empty()) {
        result.errors.push_back(
            "ATLAS_ENCRYPT=1 needs a shared key: set ATLAS_AUTH_KEY or ATLAS_AUTH_KEY_FILE (the "
            "same on both sides)");
    }
    if (!p.faults.empty()) {
        // The fault seam is for tests only: a production job must never run it by accident.
        auto plan = transport::parseFaultPlan(p.faults);
        if (!p.test_mode) {
            result.errors.push_back(
                "ATLAS_FAULTS is a test-only fault injection plan and is refused unless the "
                "process declares itself a test with ATLAS_TEST_MODE=1");
        } else if (!plan.isOk()) {
            result.errors.push_back("ATLAS_FAULTS: " + plan.status().message());
        } else {
            p.resolved_faults = plan.value();
        }
    }
    return result;
}

std::vector<std::string> describeParams(const Params& params, bool include_defaults) {
    std::vector<std::string> lines;
    for (const ParamSpec& spec : paramTable().options) {
        if (include_defaults || !spec.is_default(params)) {
            const std::string shown = spec.show(params);
            lines.push_back(std::string(spec.name) + "=" + (shown.empty() ? "(unset)" : shown));
        }
    }
    return lines;
}

transport::TransportConfig makeTransportConfig(const Params& p, int device_speed_mbps,
                                               bool gates_wan_flows) {
    transport::TransportConfig c;
    c.engine_threads = static_cast<int>(p.engine_threads);
    c.io = p.io;
    c.nstreams = static_cast<int>(p.nstreams);
    c.max_streams = static_cast<int>(p.max_streams);
    c.sockbuf_bytes = static_cast<size_t>(p.sockbuf_bytes);
    c.chunk_bytes = static_cast<size_t>(p.chunk_bytes);
    c.inline_bytes = static_cast<size_t>(p.inline_bytes);
    c.stripe = p.stripe;
    // auto: a flow that holds the link in turns sends at the measured rate (atlas_rate, when
    // registered: docs/tcp-cc.md); else BBR, whose bandwidth probing suits shared links. Not
    // the default: see docs/env.md "ATLAS_TCP_CC" for where atlas_rate loses.
    if (p.tcp_cc == "auto") {
        c.congestion_control =
            gates_wan_flows ? std::string(transport::kToldRateCongestionControl) + ",bbr" : "bbr";
    } else {
        c.congestion_control = p.tcp_cc == "system" ? std::string() : p.tcp_cc;
    }
    c.congestion_control_is_default = p.tcp_cc == Params{}.tcp_cc;
    c.timeout_ms = static_cast<int>(p.timeout_ms);
    c.auth_key = p.resolved_auth_key;
    c.resend_bytes = p.resend_bytes;
    c.encrypt = p.encrypt;
    c.faults = p.resolved_faults;
    if (p.link_gbps > 0) {
        c.link_bps = static_cast<uint64_t>(std::llround(p.link_gbps * 1e9));
    } else {
        // Below 1 Gbit/s the reported speed is almost always a virtual device's placeholder
        // (TUN reports 10 Mbit/s), not a path rate: treat it as unknown.
        int mbps = device_speed_mbps >= 1000 ? device_speed_mbps : kDefaultSpeedMbps;
        c.link_bps = static_cast<uint64_t>(mbps) * 1'000'000ull;
    }
    return c;
}

}  // namespace atlas::plugin
