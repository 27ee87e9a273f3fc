#include "tests/package/package_checks.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tests/package/run_command.h"

namespace atlas::package_test {
namespace {

std::string docdir(const std::string& package) {
    return "usr/share/doc/" + package + "/";
}

void addDocs(Expected* e, const char* pages) {
    e->files.insert(docdir(e->package) + "copyright");
    for (const std::string& p : splitList(pages)) {
        e->files.insert(docdir(e->package) + p);
    }
}

bool exists(const std::string& path, int mode) {
    return ::access(path.c_str(), mode) == 0;
}

// [Section] -> (key, value) in file order; comments and blank lines dropped.
std::map<std::string, std::vector<std::pair<std::string, std::string>>> parseUnit(
    const std::string& text) {
    std::map<std::string, std::vector<std::pair<std::string, std::string>>> out;
    std::string section;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] == '#' || line[0] == ';') {
            continue;
        }
        if (line.front() == '[' && line.back() == ']') {
            section = line.substr(1, line.size() - 2);
            continue;
        }
        const size_t eq = line.find('=');
        if (eq != std::string::npos) {
            out[section].emplace_back(line.substr(0, eq), line.substr(eq + 1));
        }
    }
    return out;
}

std::vector<std::string> valuesOf(const std::vector<std::pair<std::string, std::string>>& entries,
                                  const std::string& key) {
    std::vector<std::string> v;
    for (const auto& [k, val] : entries) {
        if (k == key) {
            v.push_back(val);
        }
    }
    return v;
}

}  // namespace

std::vector<std::string> splitList(const std::string& list) {
    std::vector<std::string> out;
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');) {
        if (!item.empty()) {
            out.push_back(item);
        }
    }
    return out;
}

std::vector<Expected> expectedPackages() {
    std::vector<Expected> all;
    Expected plugin;
    plugin.package = "libnccl-net-atlas";
    plugin.section = "libs";
    plugin.files = {"usr/" + std::string(ATLAS_INSTALL_LIBDIR) + "/libnccl-net-atlas.so"};
    addDocs(&plugin, ATLAS_DOCS_PLUGIN);
    plugin.depends = {"libc6", "libstdc++6", "libgcc-s1", "liburing2", "libssl3"};
    plugin.control_files = {{"triggers", "activate-noawait ldconfig\n"}};
    all.push_back(plugin);

    Expected tools;
    tools.package = "atlas-tools";
    tools.section = "net";
    for (const std::string& t : splitList(ATLAS_PACKAGED_TOOLS)) {
        tools.files.insert("usr/bin/" + t);
    }
    addDocs(&tools, ATLAS_DOCS_TOOLS);
    tools.depends = {"libc6", "libstdc++6"};
    all.push_back(tools);

    Expected bt;
    bt.package = "atlas-bubbletea";
    bt.section = "net";
    bt.files = {"usr/bin/bubbletea",
                std::string(ATLAS_SYSTEMD_UNITDIR).substr(1) + "/bubbletea@.service",
                "etc/atlas/bubbletea.conf", docdir(bt.package) + "examples/bubbletea-0.conf"};
    addDocs(&bt, ATLAS_DOCS_BUBBLETEA);
    bt.depends = {"libc6", "libstdc++6", "liburing2", "libssl3"};
    bt.control_files = {{"conffiles", "/etc/atlas/bubbletea.conf\n"}};
    all.push_back(bt);
    return all;
}

std::set<std::string> parseListing(const std::string& listing, std::vector<std::string>* problems) {
    std::set<std::string> files, dirs;
    std::istringstream lines(listing);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream f(line);
        std::string perms, owner, size, date, time, path;
        f >> perms >> owner >> size >> date >> time;
        std::getline(f, path);
        path.erase(0, path.find_first_not_of(' '));
        if (path.rfind("./", 0) == 0) {
            path.erase(0, 2);
        }
        if (!path.empty() && path.back() == '/') {
            path.pop_back();
        }
        if (owner != "root/root") {
            problems->push_back(path + ": owner " + owner);
        }
        if (perms.empty() || (perms[0] != 'd' && perms[0] != '-')) {
            problems->push_back(path + ": neither a directory nor a regular file (" + perms + ")");
            continue;
        }
        if (perms[0] == 'd') {
            if (perms != "drwxr-xr-x") {
                problems->push_back(path + "/: mode " + perms);
            }
            if (!path.empty()) {
                dirs.insert(path);
            }
            continue;
        }
        const bool program = path.rfind("usr/bin/", 0) == 0;
        const char* want = program ? "-rwxr-xr-x" : "-rw-r--r--";
        if (perms != want) {
            problems->push_back(path + ": mode " + perms + ", want " + want);
        }
        files.insert(path);
    }
    for (const std::string& d : dirs) {
        const bool used = std::any_of(files.begin(), files.end(), [&](const std::string& f) {
            return f.rfind(d + "/", 0) == 0;
        });
        if (!used) {
            problems->push_back(d + "/: empty directory");
        }
    }
    return files;
}

std::map<std::string, std::string> parseControl(const std::string& text) {
    std::map<std::string, std::string> fields;
    std::string last;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (!line.empty() && line[0] == ' ' && !last.empty()) {
            fields[last] += "\n" + line.substr(1);
            continue;
        }
        const size_t colon = line.find(':');
        if (colon == std::string::npos) {
            continue;
        }
        last = line.substr(0, colon);
        std::string value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        fields[last] = value;
    }
    return fields;
}

std::vector<std::string> listDir(const std::string& dir) {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (dirent* e = ::readdir(d)) {
            const std::string n = e->d_name;
            if (n != "." && n != "..") {
                names.push_back(n);
            }
        }
        ::closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
}

bool isElf(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    in.read(magic, 4);
    return in.gcount() == 4 && magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' &&
           magic[3] == 'F';
}

std::string canonical(const std::string& path) {
    char buf[PATH_MAX];
    return ::realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
}

std::vector<std::string> loaderSearchDirs(const std::string& program) {
    std::vector<std::string> dirs;
    // The interpreter the program asks for: "[Requesting program interpreter: /lib64/...]".
    CommandResult l = runCommand({ATLAS_READELF, "-W", "-l", program});
    const size_t at = l.out.find("program interpreter: ");
    if (at != std::string::npos) {
        const size_t from = at + 21;
        const std::string interp = l.out.substr(from, l.out.find(']', from) - from);
        CommandResult d = runCommand({interp, "--list-diagnostics"});
        std::istringstream lines(d.out);
        for (std::string line; std::getline(lines, line);) {
            // path.system_dirs[0x1]="/usr/lib/x86_64-linux-gnu/"
            if (line.rfind("path.system_dirs[", 0) == 0) {
                const size_t q = line.find('"');
                dirs.push_back(line.substr(q + 1, line.rfind('"') - q - 1));
            }
        }
    }
    // ldconfig -v lists each directory it indexes as "DIR: (from FILE:LINE)".
    CommandResult c =
        runCommand({haveProgram("ldconfig") ? "ldconfig" : "/sbin/ldconfig", "-v", "-N", "-X"});
    std::istringstream lines(c.out);
    for (std::string line; std::getline(lines, line);) {
        if (!line.empty() && line[0] == '/' && line.find(": (from ") != std::string::npos) {
            dirs.push_back(line.substr(0, line.find(':')));
        }
    }
    return dirs;
}

ElfFacts elfFacts(const std::string& readelf, const std::string& path) {
    ElfFacts facts;
    CommandResult r = runCommand({readelf, "-W", "-d", "-S", path});
    if (r.exit_code != 0) {
        facts.error = readelf + " " + path + ": " + r.describe();
        return facts;
    }
    auto bracketed = [](const std::string& line) {
        const size_t a = line.find('['), b = line.rfind(']');
        return a != std::string::npos && b > a ? line.substr(a + 1, b - a - 1) : std::string();
    };
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
        if (line.find("(SONAME)") != std::string::npos) {
            facts.soname = bracketed(line);
        } else if (line.find("(RPATH)") != std::string::npos ||
                   line.find("(RUNPATH)") != std::string::npos) {
            facts.rpath = bracketed(line);
        } else if (line.find(" .symtab ") != std::string::npos ||
                   line.find(" .debug_") != std::string::npos) {
            facts.has_debug_info = true;
        }
    }
    return facts;
}

std::string checkUnit(const std::string& unit, const std::string& bubbletea,
                      const std::string& confdir, const std::string& root,
                      const std::string& scratch) {
    std::ostringstream problems;
    auto sections = parseUnit(unit);
    const auto& service = sections["Service"];

    const std::vector<std::string> exec = valuesOf(service, "ExecStart");
    if (exec.size() != 1) {
        problems << "want one ExecStart, have " << exec.size() << "\n";
    } else {
        const std::string& cmd = exec[0];
        const std::string program = cmd.substr(0, cmd.find(' '));
        if (program != bubbletea) {
            problems << "ExecStart runs " << program << ", want " << bubbletea << "\n";
        }
        if (!exists(root + bubbletea, X_OK)) {
            problems << "ExecStart's " << root + bubbletea << " is not an installed program\n";
        }
        for (const char* arg : {" --local-rank %i", " --listen ${BUBBLETEA_LISTEN}"}) {
            if (cmd.find(arg) == std::string::npos) {
                problems << "ExecStart lacks '" << arg + 1 << "': " << cmd << "\n";
            }
        }
    }
    const std::vector<std::string> env_files = valuesOf(service, "EnvironmentFile");
    const std::vector<std::string> want_files = {"-" + confdir + "/bubbletea.conf",
                                                 confdir + "/bubbletea-%i.conf"};
    if (env_files != want_files) {
        problems << "EnvironmentFile lines differ from -" << confdir << "/bubbletea.conf, "
                 << confdir << "/bubbletea-%i.conf\n";
    }
    if (!exists(root + confdir + "/bubbletea.conf", R_OK)) {
        problems << root + confdir + "/bubbletea.conf is not installed\n";
    }
    const std::vector<std::string> env = valuesOf(service, "Environment");
    if (env.empty() || env[0].find("CUDA_VISIBLE_DEVICES=%i") == std::string::npos) {
        problems << "no Environment=CUDA_VISIBLE_DEVICES=%i\n";
    }
    for (const std::string& doc : valuesOf(sections["Unit"], "Documentation")) {
        if (doc.rfind("file:", 0) == 0 && !exists(root + doc.substr(5), R_OK)) {
            problems << "Documentation " << doc << " is not installed\n";
        }
    }
    const std::vector<std::pair<std::string, std::string>> hardening = {
        {"DynamicUser", "yes"},          {"NoNewPrivileges", "yes"},
        {"ProtectSystem", "strict"},     {"ProtectHome", "read-only"},
        {"PrivateTmp", "yes"},           {"ProtectKernelTunables", "yes"},
        {"ProtectKernelModules", "yes"}, {"ProtectControlGroups", "yes"},
        {"RestrictSUIDSGID", "yes"},     {"CapabilityBoundingSet", ""}};
    for (const auto& [key, value] : hardening) {
        const std::vector<std::string> v = valuesOf(service, key);
        if (v.size() != 1 || v[0] != value) {
            problems << "want " << key << "=" << value << "\n";
        }
    }
    for (const char* key : {"PrivateDevices", "DevicePolicy", "DeviceAllow", "ProtectClock",
                            "MemoryDenyWriteExecute"}) {
        if (!valuesOf(service, key).empty()) {
            problems << key << "= would hide the GPU or break the CUDA driver\n";
        }
    }
    if (valuesOf(sections["Install"], "WantedBy") !=
        std::vector<std::string>{"multi-user.target"}) {
        problems << "want WantedBy=multi-user.target\n";
    }

    if (haveProgram("systemd-analyze")) {
        // verify checks every key and that ExecStart's program exists; give it the root's.
        std::string copy = unit;
        if (!root.empty()) {
            const size_t at = copy.find("ExecStart=" + bubbletea);
            if (at != std::string::npos) {
                copy.replace(at + 10, bubbletea.size(), root + bubbletea);
            }
        }
        const std::string dir = scratch + "/verify";
        ::mkdir(dir.c_str(), 0755);
        writeFile(dir + "/bubbletea@0.service", copy);
        CommandResult v =
            runCommand({"systemd-analyze", "verify", "--man=no", dir + "/bubbletea@0.service"});
        if (v.exit_code != 0 || !v.err.empty()) {
            problems << "systemd-analyze verify: " << v.describe() << "\n";
        }
    }
    return problems.str();
}

}  // namespace atlas::package_test
