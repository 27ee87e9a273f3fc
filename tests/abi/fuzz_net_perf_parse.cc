// Fuzzes what atlas-net-perf parses: bootstrap frame headers and plans (untrusted bytes from
// the peer) and the command-line grammar (sizes, --config, HOST:PORT, whole argument lists).
// The first input byte picks the parser; round trips must reproduce what was decoded.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "perf/atlas-net-perf/bootstrap.h"
#include "perf/atlas-net-perf/options.h"

using namespace atlas::netperf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) {
        return 0;
    }
    const uint8_t selector = data[0] % 6;
    const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
    switch (selector) {
        case 0: {
            atlas::Result<FrameHeader> h = decodeFrameHeader(data + 1, size - 1);
            if (h.isOk()) {
                std::string frame =
                    encodeFrame(h->type, std::string(h->length > 64 ? 64 : h->length, 'x'));
                atlas::Result<FrameHeader> again =
                    decodeFrameHeader(reinterpret_cast<const uint8_t*>(frame.data()), frame.size());
                if (!again.isOk() || again->type != h->type) {
                    std::abort();
                }
            }
            break;
        }
        case 1: {
            atlas::Result<Plan> p = decodePlan(text);
            if (p.isOk()) {
                atlas::Result<Plan> again = decodePlan(encodePlan(*p));
                if (!again.isOk() || again->sizes != p->sizes || again->iters != p->iters ||
                    again->window != p->window || again->kind != p->kind ||
                    again->poll != p->poll) {
                    std::abort();
                }
            }
            break;
        }
        case 2: {
            atlas::Result<std::vector<size_t>> s = parseSizeList(text);
            if (s.isOk()) {
                for (size_t v : *s) {
                    if (v > (size_t{1} << 30)) {
                        std::abort();
                    }
                    (void)formatSize(v);
                }
            }
            break;
        }
        case 3:
            (void)parseConfig(text);
            break;
        case 4:
            (void)parseHostPort(text);
            break;
        default: {
            std::vector<std::string> args;
            std::string cur;
            for (char c : text) {
                if (c == '\0') {
                    args.push_back(cur);
                    cur.clear();
                } else {
                    cur += c;
                }
            }
            args.push_back(cur);
            (void)parseOptions(args);
            break;
        }
    }
    return 0;
}
