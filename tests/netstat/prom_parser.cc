#include "tests/netstat/prom_parser.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

namespace atlas::netstat::test {
namespace {

bool isNameStart(char c, bool colon) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}
bool isNameChar(char c, bool colon) {
    return isNameStart(c, colon) || (c >= '0' && c <= '9');
}

bool parseName(const std::string& s, size_t* i, bool colon, std::string* out) {
    if (*i >= s.size() || !isNameStart(s[*i], colon)) {
        return false;
    }
    size_t j = *i;
    while (j < s.size() && isNameChar(s[j], colon)) {
        ++j;
    }
    *out = s.substr(*i, j - *i);
    *i = j;
    return true;
}

bool parseValue(const std::string& t, double* v) {
    if (t == "+Inf" || t == "Inf") {
        *v = INFINITY;
        return true;
    }
    if (t == "-Inf") {
        *v = -INFINITY;
        return true;
    }
    if (t == "NaN") {
        *v = NAN;
        return true;
    }
    if (t.empty()) {
        return false;
    }
    char* end = nullptr;
    *v = std::strtod(t.c_str(), &end);
    return end != nullptr && *end == '\0' && std::isfinite(*v);
}

// The family a sample name belongs to (histogram/summary suffixes are not used here).
std::string familyOf(const std::string& name) {
    return name;
}

}  // namespace

std::vector<PromSample> PromParse::find(const std::string& name,
                                        const std::map<std::string, std::string>& match) const {
    std::vector<PromSample> out;
    for (const PromSample& s : samples) {
        if (s.name != name) {
            continue;
        }
        bool all = true;
        for (const auto& [k, v] : match) {
            auto it = s.labels.find(k);
            all = all && it != s.labels.end() && it->second == v;
        }
        if (all) {
            out.push_back(s);
        }
    }
    return out;
}

PromParse parsePrometheus(const std::string& text) {
    PromParse r;
    std::set<std::string> helped;
    std::set<std::string> closed;  // families whose block ended
    std::set<std::string> series;
    std::string current;
    std::istringstream in(text);
    std::string line;
    int n = 0;
    auto err = [&](const std::string& what) {
        r.errors.push_back("line " + std::to_string(n) + ": " + what + ": '" + line + "'");
    };
    auto enter = [&](const std::string& fam) {
        if (fam != current) {
            if (!current.empty()) {
                closed.insert(current);
            }
            if (closed.count(fam) != 0) {
                err("family " + fam + " appears in two blocks");
            }
            current = fam;
        }
    };
    if (!text.empty() && text.back() != '\n') {
        r.errors.push_back("the text does not end with a newline");
    }
    while (std::getline(in, line)) {
        ++n;
        if (line.empty()) {
            continue;
        }
        if (line[0] == '#') {
            std::istringstream ls(line);
            std::string hash, kw, name;
            ls >> hash >> kw >> name;
            if (hash != "#" || (kw != "HELP" && kw != "TYPE")) {
                continue;  // a plain comment
            }
            size_t i = 0;
            std::string parsed;
            if (!parseName(name, &i, true, &parsed) || i != name.size()) {
                err("bad metric name in " + kw);
                continue;
            }
            enter(name);
            if (kw == "HELP") {
                if (!helped.insert(name).second) {
                    err("second HELP for " + name);
                }
            } else {
                std::string type;
                ls >> type;
                std::string extra;
                if (!(type == "counter" || type == "gauge" || type == "histogram" ||
                      type == "summary" || type == "untyped") ||
                    (ls >> extra)) {
                    err("bad TYPE");
                }
                if (r.types.count(name) != 0) {
                    err("second TYPE for " + name);
                }
                if (r.find(name).size() > 0) {
                    err("TYPE after samples of " + name);
                }
                if (type == "counter" &&
                    (name.size() < 6 || name.compare(name.size() - 6, 6, "_total") != 0)) {
                    err("counter " + name + " does not end in _total");
                }
                r.types[name] = type;
            }
            continue;
        }
        PromSample s;
        size_t i = 0;
        if (!parseName(line, &i, true, &s.name)) {
            err("bad metric name");
            continue;
        }
        if (i < line.size() && line[i] == '{') {
            ++i;
            bool bad = false;
            while (i < line.size() && line[i] != '}') {
                std::string lname;
                if (!parseName(line, &i, false, &lname) || lname.rfind("__", 0) == 0) {
                    bad = true;
                    break;
                }
                if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
                    bad = true;
                    break;
                }
                i += 2;
                std::string value;
                bool closed_quote = false;
                while (i < line.size()) {
                    const char c = line[i++];
                    if (c == '"') {
                        closed_quote = true;
                        break;
                    }
                    if (c == '\\') {
                        if (i >= line.size()) {
                            break;
                        }
                        const char e = line[i++];
                        if (e == '\\' || e == '"') {
                            value += e;
                        } else if (e == 'n') {
                            value += '\n';
                        } else {
                            bad = true;
                            break;
                        }
                    } else {
                        value += c;
                    }
                }
                if (bad || !closed_quote || !s.labels.emplace(lname, value).second) {
                    bad = true;
                    break;
                }
                if (i < line.size() && line[i] == ',') {
                    ++i;
                }
            }
            if (bad || i >= line.size() || line[i] != '}') {
                err("bad label set");
                continue;
            }
            ++i;
        }
        if (i >= line.size() || line[i] != ' ') {
            err("no space before the value");
            continue;
        }
        std::istringstream vs(line.substr(i + 1));
        std::string value, ts, extra;
        vs >> value >> ts >> extra;
        if (!parseValue(value, &s.value) || !extra.empty() ||
            (!ts.empty() && ts.find_first_not_of("-0123456789") != std::string::npos)) {
            err("bad value or timestamp");
            continue;
        }
        const std::string fam = familyOf(s.name);
        if (r.types.count(fam) == 0) {
            err("sample before its TYPE line");
        }
        enter(fam);
        std::string key = s.name;
        for (const auto& [k, v] : s.labels) {
            key += "\x1f" + k + "=" + v;
        }
        if (!series.insert(key).second) {
            err("duplicate series");
        }
        if (r.types[fam] == "counter" && s.value < 0) {
            err("negative counter");
        }
        r.samples.push_back(std::move(s));
    }
    return r;
}

}  // namespace atlas::netstat::test
