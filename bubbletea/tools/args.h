// The command line of the atlas-bubbles subcommands, on the options layer (options/): each
// subcommand declares its flags; "--name value", "--name=value", boolean "--name",
// repeatable flags and positional words; an undeclared flag is an error that suggests the
// nearest declared one, and every problem is reported at once. The typed getters use the
// layer's strict parsers (no trailing garbage, hex, inf or overflow).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "atlas/common/status.h"

namespace atlas::bubbletea::tools {

struct FlagSpec {
    std::string name;  // without the leading "--"
    bool takes_value = true;
    std::string value_name;  // for help, e.g. "MS"
    std::string help;
};

// A flag's former name, refused with an error that names the new one (options::kRenamed).
// Both without the leading "--".
struct RenamedFlag {
    std::string from;
    std::string to;
};

class Args {
  public:
    // Parses argv[first..argc). Errors (kInvalidArgument): unknown flag, missing value, a
    // renamed flag's old name.
    static Result<Args> parse(int argc, char** argv, int first, const std::vector<FlagSpec>& specs,
                              const std::vector<RenamedFlag>& renamed = {});

    bool has(const std::string& name) const { return values_.count(name) != 0; }
    // The last value given for a flag, or `fallback`.
    std::string get(const std::string& name, const std::string& fallback = "") const;
    const std::vector<std::string>& all(const std::string& name) const;
    const std::vector<std::string>& positional() const { return positional_; }

    // Typed getters: kInvalidArgument with the flag's name when the value does not parse
    // or is outside [min, max].
    Result<double> getDouble(const std::string& name, double fallback, double min,
                             double max) const;
    Result<int64_t> getInt(const std::string& name, int64_t fallback, int64_t min,
                           int64_t max) const;

    // Records one occurrence (the options table's setter).
    void add(const std::string& name, std::string value) {
        values_[name].push_back(std::move(value));
    }

  private:
    std::map<std::string, std::vector<std::string>> values_;
    std::vector<std::string> positional_;
};

// "  --name VALUE   help" lines for a usage text.
std::string formatFlags(const std::vector<FlagSpec>& specs,
                        const std::vector<RenamedFlag>& renamed = {});

}  // namespace atlas::bubbletea::tools
