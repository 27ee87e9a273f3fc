#include "bubbletea/tools/args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace atlas::bubbletea::tools {

Result<Args> Args::parse(int argc, char** argv, int first, const std::vector<FlagSpec>& specs) {
    Args args;
    for (int i = first; i < argc; ++i) {
        std::string word = argv[i];
        if (word.size() < 3 || word.compare(0, 2, "--") != 0) {
            args.positional_.push_back(word);
            continue;
        }
        std::string name = word.substr(2);
        std::string value;
        bool has_inline_value = false;
        if (const auto eq = name.find('='); eq != std::string::npos) {
            value = name.substr(eq + 1);
            name = name.substr(0, eq);
            has_inline_value = true;
        }
        const FlagSpec* spec = nullptr;
        for (const FlagSpec& s : specs) {
            if (s.name == name) {
                spec = &s;
            }
        }
        if (spec == nullptr) {
            return Status(Code::kInvalidArgument, "unknown flag --" + name);
        }
        if (spec->takes_value && !has_inline_value) {
            if (i + 1 >= argc) {
                return Status(Code::kInvalidArgument, "flag --" + name + " needs a value");
            }
            value = argv[++i];
        } else if (!spec->takes_value && has_inline_value) {
            return Status(Code::kInvalidArgument, "flag --" + name + " takes no value");
        }
        args.values_[name].push_back(value);
    }
    return args;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second.back();
}

const std::vector<std::string>& Args::all(const std::string& name) const {
    static const std::vector<std::string> kEmpty;
    auto it = values_.find(name);
    return it == values_.end() ? kEmpty : it->second;
}

Result<double> Args::getDouble(const std::string& name, double fallback, double min,
                               double max) const {
    if (!has(name)) {
        return fallback;
    }
    const std::string text = get(name);
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(v)) {
        return Status(Code::kInvalidArgument, "--" + name + ": '" + text + "' is not a number");
    }
    if (v < min || v > max) {
        return Status(Code::kInvalidArgument, "--" + name + ": " + text + " is outside [" +
                                                  std::to_string(min) + ", " + std::to_string(max) +
                                                  "]");
    }
    return v;
}

Result<int64_t> Args::getInt(const std::string& name, int64_t fallback, int64_t min,
                             int64_t max) const {
    if (!has(name)) {
        return fallback;
    }
    const std::string text = get(name);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0) {
        return Status(Code::kInvalidArgument, "--" + name + ": '" + text + "' is not an integer");
    }
    if (v < min || v > max) {
        return Status(Code::kInvalidArgument, "--" + name + ": " + text + " is outside [" +
                                                  std::to_string(min) + ", " + std::to_string(max) +
                                                  "]");
    }
    return static_cast<int64_t>(v);
}

std::string formatFlags(const std::vector<FlagSpec>& specs) {
    std::string out;
    for (const FlagSpec& s : specs) {
        std::string left = "  --" + s.name + (s.takes_value ? " " + s.value_name : "");
        if (left.size() < 26) {
            left.resize(26, ' ');
        } else {
            left += "\n" + std::string(26, ' ');
        }
        out += left + s.help + "\n";
    }
    return out;
}

}  // namespace atlas::bubbletea::tools
