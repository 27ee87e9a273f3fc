// Status and Result<T>: the error vocabulary inside Atlas.
//
// Contract: internal functions return [[nodiscard]] Status/Result; retriable conditions
// (EAGAIN, ring full, not granted) are ordinary return values, never exceptions. Exceptions
// are reserved for the truly fatal (allocation failure, broken invariants) and are caught at
// the C ABI firewall (plugin/) and mapped to ncclResult_t. An OK Status holds no string, so
// the success path never allocates.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

namespace atlas {

// Error classes, chosen so the plugin can map them 1:1 onto ncclResult_t.
enum class Code : unsigned char {
    kOk = 0,
    kSystem,           // a syscall or system library failed (ncclSystemError)
    kInternal,         // the caller broke the API contract, or an invariant broke (ncclInternalError)
    kInvalidArgument,  // a bad value from the caller (ncclInvalidArgument)
    kInvalidUsage,     // user misconfiguration, e.g. message truncation, bad env var (ncclInvalidUsage)
    kRemote,           // peer closed/reset/timed out, or sent something invalid (ncclRemoteError)
    kTimeout,          // a deadline passed (maps to ncclRemoteError at the ABI)
    kUnavailable,      // a feature or device is absent (e.g. io_uring disabled)
};

const char* codeName(Code code);

class [[nodiscard]] Status {
public:
    Status() = default;
    Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

    static Status ok() { return {}; }
    // A failed syscall: "<what>: <strerror(err)> (errno N)".
    static Status fromErrno(const std::string& what, int err, Code code = Code::kSystem) {
        return {code, what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")"};
    }

    bool isOk() const { return code_ == Code::kOk; }
    explicit operator bool() const { return isOk(); }
    Code code() const { return code_; }
    const std::string& message() const { return message_; }
    std::string toString() const {
        return isOk() ? std::string("OK") : std::string(codeName(code_)) + ": " + message_;
    }

private:
    Code code_ = Code::kOk;
    std::string message_;
};

inline const char* codeName(Code code) {
    switch (code) {
        case Code::kOk: return "ok";
        case Code::kSystem: return "system error";
        case Code::kInternal: return "internal error";
        case Code::kInvalidArgument: return "invalid argument";
        case Code::kInvalidUsage: return "invalid usage";
        case Code::kRemote: return "remote error";
        case Code::kTimeout: return "timeout";
        case Code::kUnavailable: return "unavailable";
    }
    return "unknown";
}

// Result<T>: a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
    Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

    bool isOk() const { return v_.index() == 0; }
    explicit operator bool() const { return isOk(); }
    T& value() & { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    const T& value() const& { return std::get<0>(v_); }
    T* operator->() { return &value(); }
    T& operator*() { return value(); }
    Status status() const { return isOk() ? Status::ok() : std::get<1>(v_); }

private:
    std::variant<T, Status> v_;
};

}  // namespace atlas

// Propagate a non-OK Status to the caller.
#define ATLAS_RETURN_IF_ERROR(expr)              \
    do {                                         \
        ::atlas::Status atlas_status_ = (expr);  \
        if (!atlas_status_.isOk()) {             \
            return atlas_status_;                \
        }                                        \
    } while (0)
