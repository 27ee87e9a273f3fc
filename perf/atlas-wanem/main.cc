// atlas-wanem: userspace WAN link emulator between two network namespaces (see --help and
// docs/wan.md). main() wires options, devices, the two direction threads and signals; the
// packet logic lives in atlas_wanem_core.
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "perf/atlas-wanem/forwarder.h"
#include "perf/atlas-wanem/options.h"
#include "perf/atlas-wanem/pipeline.h"
#include "perf/atlas-wanem/stats.h"
#include "perf/atlas-wanem/tun_device.h"

namespace {

using namespace atlas;
using namespace atlas::wanem;

int fail(const std::string& msg, int rc = 1) {
    std::fprintf(stderr, "atlas-wanem: %s\n", msg.c_str());
    return rc;
}

// Replaces `path` atomically so a reader never sees half a document.
bool writeFileAtomically(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << text;
        if (!out.flush()) {
            return false;
        }
    }
    return std::rename(tmp.c_str(), path.c_str()) == 0;
}

uint64_t randomSeed() {
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof(seed), 0) != static_cast<ssize_t>(sizeof(seed))) {
        seed = static_cast<uint64_t>(monotonicNowNs()) ^ static_cast<uint64_t>(getpid());
    }
    return seed;
}

}  // namespace

int main(int argc, char** argv) {
    auto parsed = parseOptions(argc, argv);
    if (!parsed) {
        return fail(parsed.status().message() + "\nTry 'atlas-wanem --help' for the flags.", 2);
    }
    const Options& opt = parsed.value();
    if (opt.help) {
        std::fputs(helpText().c_str(), stdout);
        return 0;
    }
    if (opt.version) {
        std::puts("atlas-wanem 0.1.0");
        return 0;
    }
    if (opt.check) {
        return 0;
    }
    const uint64_t seed = opt.seed ? *opt.seed : randomSeed();

    // Signals go to a signalfd read by main(); block them before any thread exists so the
    // direction threads never see them.
    sigset_t sigs;
    sigemptyset(&sigs);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) {
        sigaddset(&sigs, s);
    }
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    signal(SIGPIPE, SIG_IGN);
    const int sig_fd = signalfd(-1, &sigs, SFD_CLOEXEC);
    const int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    const int fatal_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (sig_fd < 0 || stop_fd < 0 || fatal_fd < 0) {
        return fail("cannot create signalfd/eventfd");
    }

    std::array<std::unique_ptr<DirectionPipeline>, 2> pipes;
    for (int d = 0; d < 2; ++d) {
        // Different seeds per direction so loss patterns are independent.
        PipelineConfig cfg = pipelineConfig(opt, d, seed + static_cast<uint64_t>(d));
        if (opt.rate_step_s) {
            cfg.rate_step_at_ns =
                monotonicNowNs() + static_cast<Nanos>(std::llround(*opt.rate_step_s * 1e9));
        }
        auto p = DirectionPipeline::create(std::move(cfg));
        if (!p) {
            return fail(std::string(kDirName[d]) + ": " + p.status().message());
        }
        pipes[d] = std::move(p.value());
    }

    const TunSettings tun_settings{opt.mtu, opt.txqueuelen};
    auto dev_a = createTunInNamespace(namespacePath(opt.ns_a), opt.ns_a, opt.dev_a, tun_settings);
    if (!dev_a) {
        return fail(dev_a.status().message());
    }
    auto dev_b = createTunInNamespace(namespacePath(opt.ns_b), opt.ns_b, opt.dev_b, tun_settings);
    if (!dev_b) {
        return fail(dev_b.status().message());
    }

    const ForwarderSettings fwd{opt.batch, opt.spin_us, opt.timer_slack_ns, opt.mtu,
                                opt.rt_priority};
    std::array<std::string, 2> errors;
    const std::array<int, 2> in_fd = {dev_a->fd(), dev_b->fd()};
    const std::array<int, 2> out_fd = {dev_b->fd(), dev_a->fd()};
    std::array<std::thread, 2> threads;
    for (int d = 0; d < 2; ++d) {
        threads[d] = std::thread([&, d] {
            const std::string warning = applyThreadSettings(fwd);
            if (!warning.empty()) {
                std::fprintf(stderr, "atlas-wanem: %s: %s\n", kDirName[d], warning.c_str());
            }
            Status st = runDirection(*pipes[d], in_fd[d], out_fd[d], stop_fd, fwd);
            if (!st.isOk()) {
                errors[d] = st.message();
                const uint64_t one = 1;
                (void)!write(fatal_fd, &one, sizeof(one));
            }
        });
    }
    const Nanos start_ns = monotonicNowNs();
    if (!opt.ready_file.empty() &&
        !writeFileAtomically(opt.ready_file, std::to_string(getpid()) + "\n")) {
        std::fprintf(stderr, "atlas-wanem: warning: cannot write --ready-file %s\n",
                     opt.ready_file.c_str());
    }
    std::fprintf(stderr, "atlas-wanem: forwarding %s/%s <-> %s/%s (pid %d, seed %llu)\n",
                 opt.ns_a.c_str(), opt.dev_a.c_str(), opt.ns_b.c_str(), opt.dev_b.c_str(), getpid(),
                 static_cast<unsigned long long>(seed));

    uint64_t seq = 0;
    auto dump = [&](bool final) {
        StatsHeader h;
        h.seq = ++seq;
        h.final = final;
        h.uptime_s = static_cast<double>(monotonicNowNs() - start_ns) / 1e9;
        h.rng_seed = seed;
        h.pid = getpid();
        const auto j = statsJson(h, opt, {pipes[0].get(), pipes[1].get()});
        if (opt.stats_path.empty()) {
            std::printf("%s\n", j.dump().c_str());
            std::fflush(stdout);
        } else if (!writeFileAtomically(opt.stats_path, j.dump(2) + "\n")) {
            std::fprintf(stderr, "atlas-wanem: cannot write --stats %s\n", opt.stats_path.c_str());
        }
    };

    int rc = 0;
    pollfd fds[2] = {{sig_fd, POLLIN, 0}, {fatal_fd, POLLIN, 0}};
    while (true) {
        if (poll(fds, 2, -1) < 0) {
            continue;  // EINTR
        }
        if (fds[1].revents != 0) {
            rc = 1;
            break;
        }
        signalfd_siginfo si{};
        if (read(sig_fd, &si, sizeof(si)) != static_cast<ssize_t>(sizeof(si))) {
            continue;
        }
        if (si.ssi_signo == SIGUSR1) {
            dump(false);
            continue;
        }
        break;  // SIGINT, SIGTERM, SIGHUP
    }
    const uint64_t one = 1;
    (void)!write(stop_fd, &one, sizeof(one));
    for (auto& t : threads) {
        t.join();
    }
    dump(true);
    for (int d = 0; d < 2; ++d) {
        if (!errors[d].empty()) {
            std::fprintf(stderr, "atlas-wanem: %s: %s\n", kDirName[d], errors[d].c_str());
        }
    }
    if (!opt.ready_file.empty()) {
        unlink(opt.ready_file.c_str());
    }
    return rc;
}
