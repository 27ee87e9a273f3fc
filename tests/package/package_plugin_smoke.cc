// The ABI smoke test against an installed plugin, found the way NCCL finds it:
//   package_plugin_smoke NCCL_NET_PLUGIN_VALUE EXPECTED_DIR
// opens the plugin with NCCL's name rule for NCCL_NET_PLUGIN (src/plugin/plugin_open.cc:
// dlopen(value), then, for a value without '/' that is not already "lib*.so",
// dlopen("libnccl-net-<value>.so"); both RTLD_NOW | RTLD_LOCAL and through the loader's search
// rules), checks the library it got lies in EXPECTED_DIR, then drives the v12 table NCCL
// 2.30+ uses: init, devices, getProperties, listen/connect/accept, byte-exact transfers,
// close, finalize. Exits 0 on success; prints what failed otherwise.
//
// Run by package_install_test in a fresh process whose LD_LIBRARY_PATH points at the scratch
// root's library directory (the loader reads it only at process start).
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "plugin_host/plugin_host.h"
#include "tests/abi/suites.h"

namespace atlas::abi {
namespace {

// NCCL's candidates for one NCCL_NET_PLUGIN entry, in the order it tries them.
std::vector<std::string> ncclCandidates(const std::string& value) {
    std::vector<std::string> names = {value};
    const bool has_slash = value.find('/') != std::string::npos;
    const bool lib_so = value.rfind("lib", 0) == 0 && value.size() >= 3 &&
                        value.compare(value.size() - 3, 3, ".so") == 0;
    if (!has_slash && !lib_so) {
        names.push_back("libnccl-net-" + value + ".so");
    }
    return names;
}

Status run(const std::string& value, const std::string& expected_dir) {
    std::string opened;
    std::string tried;
    for (const std::string& name : ncclCandidates(value)) {
        Result<std::unique_ptr<PluginLibrary>> lib = PluginLibrary::open(name);
        if (lib.isOk()) {
            opened = name;
            break;
        }
        tried += " " + name + " (" + lib.status().message() + ")";
    }
    if (opened.empty()) {
        return Status(Code::kUnavailable, "NCCL_NET_PLUGIN=" + value + ": could not open" + tried);
    }
    const Deadline deadline = Deadline::afterMs(60000);
    Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(opened, 12);
    if (!ep.isOk()) {
        return ep.status();
    }
    Endpoint& e = **ep;
    // Where the loader found it: the directory of the object that holds the v12 table.
    Dl_info info{};
    void* table = e.library().symbol("ncclNetPlugin_v12");
    if (table == nullptr || dladdr(table, &info) == 0 || info.dli_fname == nullptr) {
        return Status(Code::kInternal, "cannot locate ncclNetPlugin_v12 in " + opened);
    }
    const std::string path = info.dli_fname;
    if (path.rfind(expected_dir + "/", 0) != 0) {
        return Status(Code::kInternal,
                      opened + " resolved to " + path + ", not under " + expected_dir);
    }
    for (int v = 8; v <= 12; ++v) {
        const std::string sym = "ncclNetPlugin_v" + std::to_string(v);
        if (e.library().symbol(sym.c_str()) == nullptr) {
            return Status(Code::kInternal, path + " does not export " + sym);
        }
    }
    NetProps props;
    ATLAS_RETURN_IF_ERROR(ncclStatus(e.net().getProperties(0, &props), "getProperties(0)"));
    std::printf("opened %s as %s: %s v%d, %d device(s), dev 0 '%s' %d Mbit/s\n", value.c_str(),
                path.c_str(), e.net().name(), e.net().version(), e.ndev(), props.name.c_str(),
                props.speed_mbps);
    // Inline, striped and odd sizes: the control stream and the data streams both work.
    const std::vector<size_t> sizes = {0, 1, 4 * kKiB + 1, kMiB + 3, 3 * kMiB + 7};
    ATLAS_RETURN_IF_ERROR(sizesInProcess(e.net(), e.ctx(), sizes, deadline));
    return e.finalizeAndClose();
}

}  // namespace
}  // namespace atlas::abi

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s NCCL_NET_PLUGIN_VALUE EXPECTED_DIR\n", argv[0]);
        return 2;
    }
    const atlas::Status st = atlas::abi::run(argv[1], argv[2]);
    if (!st.isOk()) {
        std::fprintf(stderr, "package_plugin_smoke: %s\n", st.toString().c_str());
        return 1;
    }
    std::printf("package_plugin_smoke: ok\n");
    return 0;
}
