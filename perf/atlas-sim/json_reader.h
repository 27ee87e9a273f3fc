// A strict reader over one JSON object of an atlas-sim config: typed getters with ranges, a
// choice among named values, and a final check that every key was consumed (a misspelt key
// is an error, not a silent default). The first error is kept; later calls become no-ops.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"

namespace atlas::sim {

class Reader {
    using json = nlohmann::json;

  public:
    Reader(const json* j, std::string path, Status* err)
        : j_(j), path_(std::move(path)), err_(err) {
        if (j_ != nullptr && !j_->is_object()) {
            fail("", "must be an object");
            j_ = nullptr;
        }
    }

    bool present(const char* key) {
        return j_ != nullptr && j_->contains(key) && !(*j_)[key].is_null();
    }

    double num(const char* key, double def, double lo, double hi) {
        const json* v = get(key);
        if (v == nullptr) {
            return def;
        }
        if (!v->is_number()) {
            fail(key, "must be a number");
            return def;
        }
        const double x = v->get<double>();
        if (!(x >= lo && x <= hi)) {
            std::ostringstream os;
            os << "must be in [" << lo << ", " << hi << "]";
            fail(key, os.str());
            return def;
        }
        return x;
    }

    int integer(const char* key, int def, int lo, int hi) {
        const json* v = get(key);
        if (v == nullptr) {
            return def;
        }
        if (!v->is_number_integer() && !(v->is_number_float() && isWhole(v->get<double>()))) {
            fail(key, "must be an integer");
            return def;
        }
        const double x = v->get<double>();
        if (!(x >= lo && x <= hi)) {
            fail(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
            return def;
        }
        return static_cast<int>(x);
    }

    uint64_t bytes(const char* key, uint64_t def) {
        const double x = num(key, static_cast<double>(def), 0.0, 1e15);
        return static_cast<uint64_t>(std::llround(x));
    }

    // Milliseconds (or microseconds with scale 1e3) in the JSON, nanoseconds out.
    Nanos duration(const char* key, Nanos def, double ns_per_unit, double max_units) {
        const double x = num(key, static_cast<double>(def) / ns_per_unit, 0.0, max_units);
        return static_cast<Nanos>(std::llround(x * ns_per_unit));
    }

    bool boolean(const char* key, bool def) {
        const json* v = get(key);
        if (v == nullptr) {
            return def;
        }
        if (!v->is_boolean()) {
            fail(key, "must be true or false");
            return def;
        }
        return v->get<bool>();
    }

    std::string str(const char* key, const std::string& def) {
        const json* v = get(key);
        if (v == nullptr) {
            return def;
        }
        if (!v->is_string()) {
            fail(key, "must be a string");
            return def;
        }
        return v->get<std::string>();
    }

    // A nested value (any type) or nullptr; marks the key as consumed.
    const json* raw(const char* key) { return get(key); }

    std::string sub(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

    void fail(const std::string& key, const std::string& what) {
        if (err_->isOk()) {
            const std::string where = key.empty() ? path_ : sub(key.c_str());
            *err_ = Status(Code::kInvalidUsage, (where.empty() ? "config" : where) + ": " + what);
        }
    }

    // Unknown keys are errors: a misspelt key would otherwise be ignored silently.
    void finish() {
        if (j_ == nullptr) {
            return;
        }
        for (auto it = j_->begin(); it != j_->end(); ++it) {
            if (used_.count(it.key()) == 0) {
                fail(it.key(), "unknown key");
                return;
            }
        }
    }

  private:
    static bool isWhole(double x) { return std::isfinite(x) && std::floor(x) == x; }

    const json* get(const char* key) {
        if (j_ == nullptr) {
            return nullptr;
        }
        used_.insert(key);
        auto it = j_->find(key);
        if (it == j_->end() || it->is_null()) {
            return nullptr;
        }
        return &*it;
    }

    const json* j_;
    std::string path_;
    Status* err_;
    std::set<std::string> used_;
};

// The value of `key` as one of `opts` (by name), `def` when absent; anything else fails.
template <typename E>
E choose(Reader& r, const char* key, E def, std::initializer_list<std::pair<const char*, E>> opts) {
    const nlohmann::json* v = r.raw(key);
    if (v == nullptr) {
        return def;
    }
    std::string names;
    if (v->is_string()) {
        for (const auto& [name, value] : opts) {
            if (v->get<std::string>() == name) {
                return value;
            }
        }
    }
    for (const auto& [name, value] : opts) {
        names += names.empty() ? name : std::string(", ") + name;
    }
    r.fail(key, "must be one of: " + names);
    return def;
}

}  // namespace atlas::sim
