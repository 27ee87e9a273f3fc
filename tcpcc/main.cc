// atlas-tcp-cc: registers atlas_rate, the told-rate TCP congestion control, with this host's
// kernel (docs/tcp-cc.md). Once per host, as root; the plugin's streams then run it with
// ATLAS_TCP_CC=atlas_rate, and are paced by the plugin while their flow holds the WAN link.
#include <cstdio>
#include <cstring>
#include <string>

#include "tcpcc/loader.h"

namespace {

const char kUsage[] =
    "usage: atlas-tcp-cc COMMAND\n"
    "  register     register atlas_rate with the kernel (root: CAP_BPF, CAP_NET_ADMIN);\n"
    "               nothing to do when it is registered already\n"
    "  unregister   unregister it (sockets that run it keep it until they close)\n"
    "  status       say whether the kernel lists it (exit 0) or not (exit 1)\n"
    "Streams select it with ATLAS_TCP_CC=atlas_rate (docs/tcp-cc.md).\n";

// The end of register and unregister: the error, or the name and `yes` or `no` as `flag`
// says.
int report(const atlas::Status& st, bool flag, const char* yes, const char* no) {
    if (!st.isOk()) {
        std::fprintf(stderr, "atlas-tcp-cc: %s\n", st.message().c_str());
        return 1;
    }
    std::printf("atlas-tcp-cc: %s %s\n", atlas::tcpcc::kName, flag ? yes : no);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string cmd = argc == 2 ? argv[1] : "";
    if (cmd == "--help" || cmd == "-h") {
        std::fputs(kUsage, stdout);
        return 0;
    }
    if (cmd == "register") {
        bool already = false;
        const atlas::Status st = atlas::tcpcc::registerToldRateCc(&already);
        return report(st, already, "was registered already", "registered");
    }
    if (cmd == "unregister") {
        bool found = false;
        const atlas::Status st = atlas::tcpcc::unregisterToldRateCc(&found);
        return report(st, found, "unregistered", "was not registered by a struct_ops map");
    }
    if (cmd == "status") {
        const bool on = atlas::tcpcc::isRegistered();
        std::printf("atlas-tcp-cc: %s is %s\n", atlas::tcpcc::kName,
                    on ? "registered" : "not registered");
        return on ? 0 : 1;
    }
    std::fprintf(stderr, "atlas-tcp-cc: %s\n%s",
                 argc < 2   ? "a command is needed"
                 : argc > 2 ? "one command only"
                            : ("unknown command '" + cmd + "'").c_str(),
                 kUsage);
    return 2;
}
