// Helpers for the plugin unit tests: a capturing ncclDebugLogger_t, a scoped environment
// variable, a temp directory, and a fake interface list.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "atlas/nccl/types.h"
#include "plugin/devices.h"
#include "plugin/params.h"

namespace atlas::plugin::testutil {

struct LogEntry {
    ncclDebugLogLevel level;
    unsigned long flags;
    std::string msg;
};

// Records every line the plugin sends to "NCCL". Thread-safe (engine threads may log).
class LogCapture {
  public:
    static void logger(ncclDebugLogLevel level, unsigned long flags, const char*, int,
                       const char* fmt, ...) {
        char buf[2048];
        va_list ap;
        va_start(ap, fmt);
        std::vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        std::lock_guard<std::mutex> lock(mutex());
        entries().push_back({level, flags, buf});
    }
    static void clear() {
        std::lock_guard<std::mutex> lock(mutex());
        entries().clear();
    }
    static std::vector<LogEntry> snapshot() {
        std::lock_guard<std::mutex> lock(mutex());
        return entries();
    }
    // The first entry at `level` whose text contains `needle`.
    static std::optional<LogEntry> find(ncclDebugLogLevel level, const std::string& needle) {
        for (const LogEntry& e : snapshot()) {
            if (e.level == level && e.msg.find(needle) != std::string::npos) {
                return e;
            }
        }
        return std::nullopt;
    }
    static int count(ncclDebugLogLevel level) {
        int n = 0;
        for (const LogEntry& e : snapshot()) {
            n += e.level == level ? 1 : 0;
        }
        return n;
    }

  private:
    static std::mutex& mutex() {
        static std::mutex m;
        return m;
    }
    static std::vector<LogEntry>& entries() {
        static std::vector<LogEntry> e;
        return e;
    }
};

// Sets (or unsets, with nullptr) one environment variable and restores it on scope exit.
class ScopedEnv {
  public:
    ScopedEnv(const char* key, const char* value) : key_(key) {
        if (const char* old = getenv(key)) {
            old_ = old;
        }
        if (value != nullptr) {
            setenv(key, value, 1);
        } else {
            unsetenv(key);
        }
    }
    ~ScopedEnv() {
        if (old_) {
            setenv(key_.c_str(), old_->c_str(), 1);
        } else {
            unsetenv(key_.c_str());
        }
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

  private:
    std::string key_;
    std::optional<std::string> old_;
};

// Unsets every registered ATLAS_* variable for the lifetime of the object, so the host
// environment cannot change what a test observes.
class CleanAtlasEnv {
  public:
    CleanAtlasEnv() {
        for (const ParamSpec& s : paramTable().options) {
            guards_.emplace_back(std::make_unique<ScopedEnv>(std::string(s.name).c_str(), nullptr));
        }
        for (const options::Alias& a : paramTable().aliases) {
            guards_.emplace_back(std::make_unique<ScopedEnv>(std::string(a.name).c_str(), nullptr));
        }
    }

  private:
    std::vector<std::unique_ptr<ScopedEnv>> guards_;
};

class TempDir {
  public:
    TempDir() {
        std::string templ = (std::filesystem::temp_directory_path() / "atlas-test-XXXXXX").string();
        char* made = mkdtemp(templ.data());
        EXPECT_NE(made, nullptr);
        path_ = templ;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path& path() const { return path_; }
    // Writes `contents` to `rel` (creating parent directories) and returns the full path.
    std::string write(const std::string& rel, const std::string& contents) const {
        auto p = path_ / rel;
        std::filesystem::create_directories(p.parent_path());
        FILE* f = std::fopen(p.c_str(), "wb");
        EXPECT_NE(f, nullptr);
        if (f != nullptr) {
            std::fwrite(contents.data(), 1, contents.size(), f);
            std::fclose(f);
        }
        return p.string();
    }

  private:
    std::filesystem::path path_;
};

class FakeInterfaceSource final : public InterfaceSource {
  public:
    Result<std::vector<IfAddr>> list() const override {
        if (!error_.isOk()) {
            return error_;
        }
        return addrs_;
    }
    // flags default to a plain up and running NIC.
    FakeInterfaceSource& add(const std::string& name, const std::string& ip,
                             unsigned flags = IFF_UP | IFF_RUNNING) {
        IfAddr a = makeIfAddr(name, flags, ip);
        EXPECT_EQ(a.name, name) << "bad test address " << ip;
        addrs_.push_back(a);
        return *this;
    }
    void failWith(Status st) { error_ = std::move(st); }

  private:
    std::vector<IfAddr> addrs_;
    Status error_;
};

constexpr unsigned kUp = IFF_UP | IFF_RUNNING;
constexpr unsigned kLoopback = IFF_UP | IFF_RUNNING | IFF_LOOPBACK;

}  // namespace atlas::plugin::testutil
