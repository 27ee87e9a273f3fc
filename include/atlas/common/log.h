// Logging sink injected into libraries. Libraries never print: they call a Logger, which the
// plugin routes into NCCL's ncclDebugLogger_t (the only sink allowed inside the .so) and which
// tools route to stderr. A default-constructed Logger drops everything.
#pragma once

#include <cstdarg>
#include <cstdio>

namespace atlas {

enum class LogLevel : int { kWarn = 2, kInfo = 3, kTrace = 5 };

// Thread-safe as long as the sink function is (NCCL's logger and stderr both are).
class Logger {
public:
    using SinkFn = void (*)(void* ctx, LogLevel level, const char* file, int line, const char* msg);

    Logger() = default;
    Logger(SinkFn fn, void* ctx) : fn_(fn), ctx_(ctx) {}

    bool enabled() const { return fn_ != nullptr; }

    __attribute__((format(printf, 5, 6))) void log(LogLevel level, const char* file, int line,
                                                   const char* fmt, ...) const {
        if (fn_ == nullptr) {
            return;
        }
        char buf[1024];
        va_list ap;
        va_start(ap, fmt);
        std::vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        fn_(ctx_, level, file, line, buf);
    }

    // A sink that writes "[atlas] LEVEL msg" lines to stderr, for tools and tests.
    static Logger stderrLogger(LogLevel max_level = LogLevel::kInfo) {
        static LogLevel level_store;
        level_store = max_level;
        return Logger(
            [](void* ctx, LogLevel level, const char*, int, const char* msg) {
                if (static_cast<int>(level) > static_cast<int>(*static_cast<LogLevel*>(ctx))) {
                    return;
                }
                const char* name = level == LogLevel::kWarn ? "WARN" : level == LogLevel::kInfo ? "INFO" : "TRACE";
                std::fprintf(stderr, "[atlas] %s %s\n", name, msg);
            },
            &level_store);
    }

private:
    SinkFn fn_ = nullptr;
    void* ctx_ = nullptr;
};

}  // namespace atlas

#define ATLAS_LOG_WARN(logger, ...) (logger).log(::atlas::LogLevel::kWarn, __FILE__, __LINE__, __VA_ARGS__)
#define ATLAS_LOG_INFO(logger, ...) (logger).log(::atlas::LogLevel::kInfo, __FILE__, __LINE__, __VA_ARGS__)
#define ATLAS_LOG_TRACE(logger, ...) (logger).log(::atlas::LogLevel::kTrace, __FILE__, __LINE__, __VA_ARGS__)
