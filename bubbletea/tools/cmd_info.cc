// `info` (what a segment says about itself) and `dump` (copy a segment's bytes to a file,
// for post-mortem analysis and fuzz seeds).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include "bubbletea/tools/cli_common.h"
#include "bubbletea/tools/commands.h"
#include "channel/channel_reader.h"

namespace atlas::bubbletea::tools {

namespace {

void printInfo(channel::ChannelReader& r, const std::string& label, bool image) {
    const channel::SegmentInfo& info = r.info();
    const Nanos now = monotonicNowNs();
    std::printf("%s\n", label.c_str());
    // Times in an image are relative to this host's CLOCK_MONOTONIC, so "ago" values are
    // only meaningful for an image dumped on this host since its last boot.
    std::printf(
        "  generation %" PRIu64 ", writer pid %d (%s), started %s ago, %s\n", info.generation,
        info.writer_pid, image ? "image: not checked" : (r.writerAlive() ? "alive" : "gone"),
        formatDuration(now - info.writer_start_ns).c_str(), channel::lifecycleName(r.lifecycle()));
    std::printf("  rings: %u window cells, %u idle cells; %" PRIu64 " bytes\n",
                info.window_capacity, info.idle_capacity, info.layout_size);
    const channel::WriterCounters wc = r.writerCounters();
    std::printf("  published: %" PRIu64 " idle intervals, %" PRIu64 " prediction sets (%" PRIu64
                " window records), %" PRIu64 " rejected; last write %s ago\n",
                wc.idle_records, wc.prediction_sets, wc.window_records, wc.rejected_records,
                formatDuration(now - wc.last_write_ns).c_str());
    auto state = r.readState();
    if (state.isOk()) {
        const auto& s = state.value();
        std::printf("  state: %s (%s) for %s; period %s, confidence %.0f%%\n",
                    channel::stateName(s.state), channel::reasonName(s.reason),
                    formatDuration(now - s.since_ns).c_str(),
                    s.stats.period_ns > 0 ? formatDuration(s.stats.period_ns).c_str() : "unknown",
                    channel::fromPpm(s.stats.period_confidence_ppm) * 100);
    } else {
        std::printf("  state: %s\n", state.status().message().c_str());
    }
    auto set = r.readPredictions();
    if (set.isOk()) {
        std::printf("  current prediction set %" PRIu64 ": %zu window(s)\n", set.value().set_id,
                    set.value().windows.size());
    } else {
        std::printf("  predictions: %s\n", set.status().message().c_str());
    }
}

}  // namespace

int cmdInfo(int argc, char** argv) {
    auto specs = channelFlags();
    specs.push_back({"image", true, "FILE", "validate a segment image written by 'dump'"});
    specs.push_back({"help", false, "", "show this help"});
    auto args = Args::parse(argc, argv, 2, specs);
    if (!args.isOk()) {
        return usageError("info", args.status());
    }
    const Args& a = args.value();
    if (a.has("help")) {
        std::printf(
            "usage: atlas-bubbles info [--channel NAME | --rank N]... | --image FILE\n"
            "Validates channel segments and prints what their headers say. Exits 1 when a\n"
            "segment is missing, foreign, truncated or of another ABI version.\n\n%s",
            formatFlags(specs).c_str());
        return kExitOk;
    }
    if (a.has("image")) {
        auto bytes = readFile(a.get("image"));
        if (!bytes.isOk()) {
            return fail("info", bytes.status().message());
        }
        auto r = channel::ChannelReader::fromImage(bytes.value().data(), bytes.value().size());
        if (!r.isOk()) {
            return fail("info", r.status().message());
        }
        printInfo(r.value(), "image " + a.get("image"), /*image=*/true);
        return kExitOk;
    }
    auto names = selectChannels(a);
    if (!names.isOk()) {
        return names.status().code() == Code::kInvalidArgument
                   ? usageError("info", names.status())
                   : fail("info", names.status().message());
    }
    int rc = kExitOk;
    for (const std::string& name : names.value()) {
        auto r = channel::ChannelReader::open(name);
        if (!r.isOk()) {
            rc = fail("info", r.status().message());
            continue;
        }
        printInfo(r.value(), name, /*image=*/false);
    }
    return rc;
}

int cmdDump(int argc, char** argv) {
    std::vector<FlagSpec> specs = {{"channel", true, "NAME", "channel to copy"},
                                   {"out", true, "FILE", "where to write the bytes"},
                                   {"help", false, "", "show this help"}};
    auto args = Args::parse(argc, argv, 2, specs);
    if (!args.isOk()) {
        return usageError("dump", args.status());
    }
    const Args& a = args.value();
    if (a.has("help")) {
        std::printf(
            "usage: atlas-bubbles dump --channel NAME --out FILE\n"
            "Copies the raw bytes of a segment (valid or not) to FILE, for post-mortem\n"
            "analysis with 'info --image FILE' or as a fuzz seed. A copy taken while the\n"
            "writer runs may hold half-written records; readers reject those as usual.\n\n%s",
            formatFlags(specs).c_str());
        return kExitOk;
    }
    if (!a.has("channel") || !a.has("out")) {
        return usageError("dump", {Code::kInvalidArgument, "--channel and --out are required"});
    }
    const std::string name = a.get("channel");
    const int fd = ::shm_open(name.c_str(), O_RDONLY, 0);
    if (fd < 0) {
        return fail("dump", Status::fromErrno("cannot open " + name, errno).message());
    }
    struct stat st {};
    std::string bytes;
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
        bytes.resize(static_cast<size_t>(st.st_size));
        size_t done = 0;
        while (done < bytes.size()) {
            const ssize_t n =
                ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
            if (n <= 0) {
                break;
            }
            done += static_cast<size_t>(n);
        }
        bytes.resize(done);
    }
    ::close(fd);
    if (Status s = writeFile(a.get("out"), bytes); !s.isOk()) {
        return fail("dump", s.message());
    }
    std::printf("wrote %zu bytes of %s to %s\n", bytes.size(), name.c_str(), a.get("out").c_str());
    return kExitOk;
}

}  // namespace atlas::bubbletea::tools
