// A strict parser of the Prometheus text exposition format (version 0.0.4), for tests: what
// a scraper accepts, plus the rules `promtool check metrics` enforces that matter here. It
// rejects: malformed lines, bad metric or label names, label values with other escapes than
// \\ \" \n, values that are not floats, samples before their family's TYPE, a second TYPE or
// HELP for a family, a family split by another, duplicate series, counters without _total.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace atlas::netstat::test {

struct PromSample {
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0;
};

struct PromParse {
    std::vector<PromSample> samples;
    std::map<std::string, std::string> types;  // family -> counter|gauge|...
    std::vector<std::string> errors;           // "line N: what"
    bool ok() const { return errors.empty(); }
    // Samples of `name` whose labels include every pair of `match`.
    std::vector<PromSample> find(const std::string& name,
                                 const std::map<std::string, std::string>& match = {}) const;
};

PromParse parsePrometheus(const std::string& text);

}  // namespace atlas::netstat::test
