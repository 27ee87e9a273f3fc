// Plugin logging: everything the .so says goes through the ncclDebugLogger_t that NCCL passes
// to init, with the message prefix "NET/Atlas : ". WARN is sent with NCCL_ALL flags (always
// shown), INFO with NCCL_NET|NCCL_INIT, TRACE compiles out unless the CMake option ATLAS_TRACE
// is ON (ATLAS_TRACE_ENABLED=1).
//
// Threads: every function here may be called from any thread at any time, also before init
// and after the last finalize (messages are then dropped unless the stderr mirror is on).
// The logger pointer is an atomic; NCCL's logger itself is thread-safe.
#pragma once

#include <string>

#include "atlas/common/log.h"
#include "atlas/nccl/types.h"

#ifndef ATLAS_TRACE_ENABLED
#define ATLAS_TRACE_ENABLED 0
#endif

namespace atlas::plugin {

// The flags INFO messages carry (NCCL filters them with NCCL_DEBUG_SUBSYS).
constexpr unsigned long kInfoFlags = NCCL_NET | NCCL_INIT;
constexpr const char* kLogPrefix = "NET/Atlas : ";

// Installs NCCL's logger. nullptr means "NCCL gave none": messages then go nowhere, or to
// stderr when the mirror is enabled. The function pointer must stay callable until replaced
// (NCCL's logger lives in libnccl, which outlives the plugin).
void setNcclLogger(ncclDebugLogger_t fn);
ncclDebugLogger_t ncclLogger();

// ATLAS_DEBUG_STDERR: when NCCL gave no logger, also print to stderr.
void setStderrMirror(bool on);

// Formats printf-style (truncating at 1 KiB) and forwards one line with the "NET/Atlas : "
// prefix. `flags` is the NCCL subsystem mask; file/line identify the call site. Never
// allocates or throws, so the error path of the ABI firewall can use it.
__attribute__((format(printf, 5, 6))) void logMessage(ncclDebugLogLevel level, unsigned long flags,
                                                      const char* file, int line, const char* fmt,
                                                      ...) noexcept;
void logString(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
               const std::string& msg) noexcept;

// An atlas::Logger that forwards to the same sink, for transport/ and other libraries the
// plugin composes. kWarn -> WARN, kInfo -> INFO, kTrace -> TRACE (dropped unless compiled in).
// The Logger holds no state of its own, so it may outlive init/finalize cycles.
Logger makeLibraryLogger();

}  // namespace atlas::plugin

#define ATLAS_WARN(...) \
    ::atlas::plugin::logMessage(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define ATLAS_INFO(...)                                                                         \
    ::atlas::plugin::logMessage(NCCL_LOG_INFO, ::atlas::plugin::kInfoFlags, __func__, __LINE__, \
                                __VA_ARGS__)
#if ATLAS_TRACE_ENABLED
#define ATLAS_TRACE(...)                                                                         \
    ::atlas::plugin::logMessage(NCCL_LOG_TRACE, ::atlas::plugin::kInfoFlags, __func__, __LINE__, \
                                __VA_ARGS__)
#else
// Compiled out, but the arguments are still type-checked against the format.
#define ATLAS_TRACE(...)                                                                       \
    do {                                                                                       \
        if (false) {                                                                           \
            ::atlas::plugin::logMessage(NCCL_LOG_TRACE, ::atlas::plugin::kInfoFlags, __func__, \
                                        __LINE__, __VA_ARGS__);                                \
        }                                                                                      \
    } while (0)
#endif
