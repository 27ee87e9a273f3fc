#include "plugin/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace atlas::plugin {
namespace {

// Atomics with trivial destructors: safe to read from threads still running while the
// library is being unloaded, and from the library destructor itself.
std::atomic<ncclDebugLogger_t> g_logger{nullptr};
std::atomic<bool> g_stderr_mirror{false};

const char* levelName(ncclDebugLogLevel level) {
    switch (level) {
        case NCCL_LOG_WARN:
            return "WARN";
        case NCCL_LOG_INFO:
            return "INFO";
        case NCCL_LOG_TRACE:
            return "TRACE";
        default:
            return "LOG";
    }
}

void librarySink(void*, LogLevel level, const char* file, int line, const char* msg) {
    switch (level) {
        case LogLevel::kWarn:
            logMessage(NCCL_LOG_WARN, NCCL_ALL, file, line, "%s", msg);
            break;
        case LogLevel::kInfo:
            logMessage(NCCL_LOG_INFO, kInfoFlags, file, line, "%s", msg);
            break;
        case LogLevel::kTrace:
            if (ATLAS_TRACE_ENABLED) {
                logMessage(NCCL_LOG_TRACE, kInfoFlags, file, line, "%s", msg);
            }
            break;
    }
}

}  // namespace

void setNcclLogger(ncclDebugLogger_t fn) {
    g_logger.store(fn, std::memory_order_release);
}

ncclDebugLogger_t ncclLogger() {
    return g_logger.load(std::memory_order_acquire);
}

void setStderrMirror(bool on) {
    g_stderr_mirror.store(on, std::memory_order_relaxed);
}

namespace {

void emit(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
          const char* msg) noexcept {
    ncclDebugLogger_t fn = g_logger.load(std::memory_order_acquire);
    if (fn != nullptr) {
        // The message is passed as an argument, never as the format: it may contain '%'.
        fn(level, flags, file, line, "%s%s", kLogPrefix, msg);
    } else if (g_stderr_mirror.load(std::memory_order_relaxed)) {
        std::fprintf(stderr, "%s%s %s\n", kLogPrefix, levelName(level), msg);
    }
}

}  // namespace

void logString(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
               const std::string& msg) noexcept {
    emit(level, flags, file, line, msg.c_str());
}

void logMessage(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                const char* fmt, ...) noexcept {
    if (g_logger.load(std::memory_order_acquire) == nullptr &&
        !g_stderr_mirror.load(std::memory_order_relaxed)) {
        return;  // nobody listens: skip the formatting
    }
    char buf[1024];  // longer messages are truncated
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    emit(level, flags, file, line, buf);
}

Logger makeLibraryLogger() {
    return Logger(&librarySink, nullptr);
}

}  // namespace atlas::plugin
