#include "tcpcc/loader.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <mutex>

extern "C" {
// tcpcc/embed.S: the object compiled from atlas_rate.bpf.c.
extern const unsigned char atlas_rate_bpf_begin[];
extern const unsigned char atlas_rate_bpf_end[];
}

namespace atlas::tcpcc {
namespace {

// libbpf's messages of the calls in flight (the verifier's log among them): a failed load
// returns only an errno, and the reason is in what libbpf printed.
std::mutex g_log_mu;
std::string* g_log = nullptr;

int collectLibbpfPrint(enum libbpf_print_level level, const char* fmt, va_list args) {
    if (level == LIBBPF_DEBUG) {
        return 0;
    }
    char line[1024];
    const int n = std::vsnprintf(line, sizeof(line), fmt, args);
    if (g_log != nullptr && n > 0) {
        g_log->append(line);
    }
    return n;
}

// Runs `fn` with libbpf's messages collected; returns them (the last 2 KiB: the verifier's
// conclusion is at the end).
template <typename Fn>
std::string withLibbpfLog(Fn&& fn) {
    std::lock_guard<std::mutex> lock(g_log_mu);
    std::string log;
    g_log = &log;
    libbpf_print_fn_t old = libbpf_set_print(collectLibbpfPrint);
    fn();
    libbpf_set_print(old);
    g_log = nullptr;
    constexpr size_t kKeep = 2048;
    return log.size() > kKeep ? "..." + log.substr(log.size() - kKeep) : log;
}

Status unavailable(const std::string& what, int err, const std::string& log) {
    std::string hint;
    if (err == EPERM || err == EACCES) {
        hint = "; needs CAP_BPF and CAP_NET_ADMIN (run as root)";
    } else if (::access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
        hint = "; the kernel has no BTF (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF)";
    } else if (err == EEXIST) {
        hint = "; a congestion control of that name is registered already";
    }
    std::string msg = what + ": " + std::strerror(err) + hint;
    if (!log.empty()) {
        msg += "\n" + log;  // its lines say "libbpf: ..." themselves
    }
    return Status(Code::kUnavailable, msg);
}

}  // namespace

bool isRegistered() {
    std::ifstream in("/proc/sys/net/ipv4/tcp_available_congestion_control");
    std::string name;
    while (in >> name) {
        if (name == kName) {
            return true;
        }
    }
    return false;
}

Status registerToldRateCc(bool* already) {
    if (already != nullptr) {
        *already = isRegistered();
        if (*already) {
            return Status::ok();
        }
    }
    int err = 0;  // errno of the step that failed
    const char* step = nullptr;
    const std::string log = withLibbpfLog([&err, &step] {
        LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = kName);
        bpf_object* obj = bpf_object__open_mem(
            atlas_rate_bpf_begin, static_cast<size_t>(atlas_rate_bpf_end - atlas_rate_bpf_begin),
            &opts);
        if (obj == nullptr) {
            err = errno;
            step = "opening the embedded atlas_rate object";
            return;
        }
        bpf_map* map = nullptr;
        bpf_link* link = nullptr;
        if (const int rc = bpf_object__load(obj); rc != 0) {
            err = -rc;
            step = "loading atlas_rate (the kernel's verifier)";
        } else if ((map = bpf_object__find_map_by_name(obj, kName)) == nullptr) {
            err = ENOENT;
            step = "finding the atlas_rate struct_ops map";
        } else if ((link = bpf_map__attach_struct_ops(map)) == nullptr) {
            err = errno;
            step = "registering atlas_rate";
        } else {
            // The registration outlives this process: the kernel holds a registered
            // struct_ops map itself, so the link is let go without unregistering.
            bpf_link__disconnect(link);
            bpf_link__destroy(link);
        }
        bpf_object__close(obj);
    });
    return step == nullptr ? Status::ok() : unavailable(step, err, log);
}

Status unregisterToldRateCc(bool* found) {
    bool any = false;
    uint32_t id = 0;
    int rc = 0;
    while ((rc = bpf_map_get_next_id(id, &id)) == 0) {
        const int fd = bpf_map_get_fd_by_id(id);
        if (fd < 0) {
            if (errno == ENOENT) {
                continue;  // gone meanwhile
            }
            return unavailable("listing BPF maps", errno, "");
        }
        bpf_map_info info{};
        uint32_t len = sizeof(info);
        const bool ours = bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
                          info.type == BPF_MAP_TYPE_STRUCT_OPS && std::string(info.name) == kName;
        int err = 0;
        if (ours) {
            const uint32_t zero = 0;
            err = bpf_map_delete_elem(fd, &zero) == 0 ? 0 : errno;
        }
        ::close(fd);
        // ENOENT: never registered; EINPROGRESS: unregistered already, and its memory not
        // yet freed (sockets, or the kernel's grace period, still hold it).
        if (err != 0 && err != ENOENT && err != EINPROGRESS) {
            return unavailable("unregistering atlas_rate", err, "");
        }
        any = any || (ours && err == 0);
    }
    if (rc != -ENOENT) {  // the end of the list, or why the listing stopped
        return unavailable("listing BPF maps", -rc, "");
    }
    if (found != nullptr) {
        *found = any;
    }
    return Status::ok();
}

}  // namespace atlas::tcpcc
