#include "bubbletea/tools/args.h"

#include "options/help.h"
#include "options/table.h"

namespace atlas::bubbletea::tools {
namespace {

// A table built at run time from a subcommand's specs: every flag records its raw text and
// the typed getters below parse it.
options::Table<Args> tableOf(const std::vector<FlagSpec>& specs,
                             const std::vector<RenamedFlag>& renamed,
                             std::vector<std::string>* names) {
    options::Table<Args> t;
    // Room for the renamed names too: the table's names are views into *names.
    names->reserve(specs.size() + 2 * renamed.size());
    for (const FlagSpec& s : specs) {
        names->push_back("--" + s.name);
    }
    for (size_t i = 0; i < specs.size(); ++i) {
        const FlagSpec& s = specs[i];
        options::Option<Args> o;
        o.name = (*names)[i];
        o.field = s.name;
        o.type = s.takes_value ? "string" : "switch";
        o.metavar = s.value_name.c_str();
        o.doc = s.help.c_str();
        o.takes_value = s.takes_value;
        const std::string name = s.name;
        o.set = [name](std::string_view text, Args& a) {
            a.add(name, std::string(text));
            return std::string();
        };
        o.show = [](const Args&) { return std::string(); };
        o.is_default = [name](const Args& a) { return !a.has(name); };
        t.options.push_back(std::move(o));
        if (s.name == "help") {
            t.aliases.push_back({"-h", "--help", false});
        }
    }
    for (const RenamedFlag& r : renamed) {
        names->push_back("--" + r.from);
        const std::string_view from = names->back();
        names->push_back("--" + r.to);
        t.aliases.push_back(options::makeAlias(from, names->back(), options::kRenamed));
    }
    return t;
}

std::string range(const std::string& lo, const std::string& hi) {
    return " in " + lo + ".." + hi;
}

}  // namespace

Result<Args> Args::parse(int argc, char** argv, int first, const std::vector<FlagSpec>& specs,
                         const std::vector<RenamedFlag>& renamed) {
    std::vector<std::string> names;
    const options::Table<Args> table = tableOf(specs, renamed, &names);
    options::Parsed<Args> p;
    options::readArgs(table, std::vector<std::string>(argv + first, argv + argc), &p);
    ATLAS_RETURN_IF_ERROR(p.status());
    p.config.positional_ = p.positional;
    return std::move(p.config);
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

namespace {

// One value of flag `name`, parsed strictly and range-checked; the message names the flag.
template <typename T>
Result<T> checkedValue(const std::string& name, const std::string& text, const std::optional<T>& v,
                       T min, T max, const std::string& accepted) {
    const char* why = !v ? " is invalid: expected " : " is out of range: expected ";
    if (!v || *v < min || *v > max) {
        return Status(Code::kInvalidArgument,
                      "--" + name + "=" + options::quote(text) + why + accepted);
    }
    return *v;
}

}  // namespace

Result<double> Args::getDouble(const std::string& name, double fallback, double min,
                               double max) const {
    if (!has(name)) {
        return fallback;
    }
    const std::string text = get(name);
    return checkedValue(name, text, options::parseDouble(text), min, max,
                        "a number" + range(options::formatDouble(min), options::formatDouble(max)));
}

Result<int64_t> Args::getInt(const std::string& name, int64_t fallback, int64_t min,
                             int64_t max) const {
    if (!has(name)) {
        return fallback;
    }
    const std::string text = get(name);
    return checkedValue(name, text, options::parseSigned(text), min, max,
                        "an integer" + range(std::to_string(min), std::to_string(max)));
}

std::string formatFlags(const std::vector<FlagSpec>& specs,
                        const std::vector<RenamedFlag>& renamed) {
    std::vector<std::string> names;
    const options::Table<Args> table = tableOf(specs, renamed, &names);
    return options::flagHelp(table);
}

}  // namespace atlas::bubbletea::tools
