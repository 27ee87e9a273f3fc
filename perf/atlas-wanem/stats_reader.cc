#include "perf/atlas-wanem/stats_reader.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "perf/atlas-wanem/options.h"

namespace atlas::wanem {
namespace {

using nlohmann::json;

Status bad(const std::string& what) {
    return {Code::kInvalidArgument, "atlas-wanem stats: " + what};
}

const json* field(const json& obj, const char* name) {
    if (!obj.is_object()) {
        return nullptr;
    }
    auto it = obj.find(name);
    return it == obj.end() ? nullptr : &*it;
}

std::string readAll(const std::string& path) {
    std::ifstream f(path);
    if (!f) {
        return {};
    }
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

}  // namespace

Result<LinkSnapshot> parseLinkStats(std::string_view text) {
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
        return bad("not a JSON object");
    }
    const json* tool = field(j, "tool");
    if (tool == nullptr || !tool->is_string() || tool->get<std::string>() != "atlas-wanem") {
        return bad("'tool' is not \"atlas-wanem\"");
    }
    const json* seq = field(j, "seq");
    if (seq == nullptr || !seq->is_number_unsigned()) {
        return bad("'seq' is missing or not an unsigned integer");
    }
    const json* cfg = field(j, "config");
    const json* ns_a = cfg != nullptr ? field(*cfg, "ns_a") : nullptr;
    const json* ns_b = cfg != nullptr ? field(*cfg, "ns_b") : nullptr;
    if (ns_a == nullptr || ns_b == nullptr || !ns_a->is_string() || !ns_b->is_string()) {
        return bad("'config.ns_a'/'config.ns_b' are missing or not strings");
    }
    const json* dirs = field(j, "directions");
    if (dirs == nullptr || !dirs->is_object()) {
        return bad("'directions' is missing or not an object");
    }
    LinkSnapshot s;
    s.seq = seq->get<uint64_t>();
    for (int d = 0; d < 2; ++d) {
        const json* dir = field(*dirs, kDirName[d]);
        if (dir == nullptr) {
            continue;  // the emulator forwards one direction only
        }
        const std::string where = std::string("'directions.") + kDirName[d];
        const json* wire = field(*dir, "wire_bytes");
        if (wire == nullptr || !wire->is_number_unsigned()) {
            return bad(where + ".wire_bytes' is missing or not an unsigned integer");
        }
        const json* drops = field(*dir, "drops");
        const json* queue = drops != nullptr ? field(*drops, "queue") : nullptr;
        const json* loss = drops != nullptr ? field(*drops, "loss") : nullptr;
        const json* queue_n = queue != nullptr ? field(*queue, "segments") : nullptr;
        const json* loss_n = loss != nullptr ? field(*loss, "segments") : nullptr;
        if (queue_n == nullptr || loss_n == nullptr || !queue_n->is_number_unsigned() ||
            !loss_n->is_number_unsigned()) {
            return bad(where + ".drops.{queue,loss}.segments' are missing or not unsigned");
        }
        const json* paths = field(*dir, "paths");
        if (paths == nullptr || !paths->is_array() || paths->empty()) {
            return bad(where + ".paths' is missing or empty");
        }
        LinkDirection out;
        out.from = (d == 0 ? ns_a : ns_b)->get<std::string>();
        out.to = (d == 0 ? ns_b : ns_a)->get<std::string>();
        out.wire_bytes = wire->get<uint64_t>();
        out.queue_drops = queue_n->get<uint64_t>();
        out.loss_drops = loss_n->get<uint64_t>();
        double bps = 0;
        bool capped = true;
        for (const json& p : *paths) {
            const json* mbit = field(p, "rate_mbit");
            if (mbit == nullptr || !mbit->is_number() || !(mbit->get<double>() >= 0) ||
                !std::isfinite(mbit->get<double>())) {
                return bad(where + ".paths[].rate_mbit' is missing or not a rate");
            }
            capped = capped && mbit->get<double>() > 0;
            bps += mbit->get<double>() * 1e6;
        }
        // A rate step that applied (docs/wan.md) set every path to its rate.
        const json* step = field(*dir, "rate_step");
        if (step != nullptr) {
            const json* applied = field(*step, "applied");
            const json* mbit = field(*step, "mbit");
            if (applied == nullptr || mbit == nullptr || !applied->is_number_unsigned() ||
                !mbit->is_number() || !(mbit->get<double>() >= 0) ||
                !std::isfinite(mbit->get<double>())) {
                return bad(where + ".rate_step' is malformed");
            }
            if (applied->get<uint64_t>() > 0) {
                capped = mbit->get<double>() > 0;
                bps = mbit->get<double>() * 1e6 * static_cast<double>(paths->size());
            }
        }
        out.rate_bps = capped && bps < 1e18 ? static_cast<uint64_t>(std::llround(bps)) : 0;
        s.dirs.push_back(std::move(out));
    }
    if (s.dirs.empty()) {
        return bad("no direction in 'directions'");
    }
    return s;
}

Result<json> awaitStatsDocument(const std::string& path, uint64_t newer_than_seq,
                                Nanos timeout_ns) {
    const Nanos deadline = monotonicNowNs() + timeout_ns;
    do {
        json j = json::parse(readAll(path), nullptr, /*allow_exceptions=*/false);
        const json* seq = j.is_discarded() ? nullptr : field(j, "seq");
        if (seq != nullptr && seq->is_number_unsigned() && seq->get<uint64_t>() > newer_than_seq) {
            return j;
        }
        ::usleep(1000);
    } while (monotonicNowNs() < deadline);
    return Status(Code::kTimeout, "atlas-wanem did not write a stats document newer than seq " +
                                      std::to_string(newer_than_seq) + " to " + path + " within " +
                                      std::to_string(timeout_ns / kNsPerMs) + " ms");
}

Result<LinkSnapshot> snapshotLink(const LinkSource& src, Nanos timeout_ns) {
    uint64_t before = 0;
    if (auto old = parseLinkStats(readAll(src.path))) {
        before = old->seq;
    }
    if (::kill(src.pid, SIGUSR1) != 0) {
        return Status::fromErrno("signal atlas-wanem pid " + std::to_string(src.pid), errno,
                                 errno == ESRCH ? Code::kUnavailable : Code::kSystem);
    }
    auto doc = awaitStatsDocument(src.path, before, timeout_ns);
    if (!doc) {
        return doc.status();
    }
    return parseLinkStats(doc->dump());
}

Result<std::vector<DirectionUse>> linkUse(const LinkSnapshot& before, const LinkSnapshot& after,
                                          Nanos window_ns) {
    if (before.dirs.size() != after.dirs.size()) {
        return bad("two snapshots with different directions");
    }
    std::vector<DirectionUse> out;
    for (size_t i = 0; i < after.dirs.size(); ++i) {
        const LinkDirection& a = before.dirs[i];
        const LinkDirection& b = after.dirs[i];
        if (a.from != b.from || a.to != b.to || b.wire_bytes < a.wire_bytes ||
            b.queue_drops < a.queue_drops || b.loss_drops < a.loss_drops) {
            return bad("two snapshots of different emulator runs (" + a.from + "->" + a.to + ")");
        }
        DirectionUse u;
        u.from = b.from;
        u.to = b.to;
        u.wire_bytes = b.wire_bytes - a.wire_bytes;
        u.queue_drops = b.queue_drops - a.queue_drops;
        u.loss_drops = b.loss_drops - a.loss_drops;
        if (b.rate_bps > 0 && window_ns > 0) {
            u.capacity_bytes =
                static_cast<double>(b.rate_bps) / 8.0 * static_cast<double>(window_ns) / 1e9;
            u.utilization = static_cast<double>(u.wire_bytes) / u.capacity_bytes;
        }
        out.push_back(std::move(u));
    }
    return out;
}

}  // namespace atlas::wanem
