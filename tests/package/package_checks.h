// What package_install_test expects of each Debian package, and the parsers and lintian-like
// checks it applies (dpkg-deb listings and control fields, ELF facts via readelf, the systemd
// unit template). The expected file lists come from the same CMake lists the install rules
// use (compile definitions), plus the fixed layout: /usr/bin, /usr/<libdir>, the unit
// directory, /etc/atlas and /usr/share/doc/<package>.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace atlas::package_test {

struct Expected {
    std::string package;
    std::string section;
    std::set<std::string> files;       // regular files, relative to the root ("usr/bin/x")
    std::vector<std::string> depends;  // packages that must be in Depends, versioned
    std::map<std::string, std::string> control_files;  // besides control and md5sums
};

std::vector<Expected> expectedPackages();

// "a,b,c" -> {a, b, c}
std::vector<std::string> splitList(const std::string& list);

// `dpkg-deb -c` output -> regular file paths (without "./"). Appends to *problems every entry
// that is not root/root, not a directory or a regular file, has a mode other than 0755
// (directories, /usr/bin) or 0644 (other files), or is a directory holding no file.
std::set<std::string> parseListing(const std::string& listing, std::vector<std::string>* problems);

// `dpkg-deb -f` output -> field -> value; continuation lines joined with '\n' (without their
// leading space).
std::map<std::string, std::string> parseControl(const std::string& text);

std::vector<std::string> listDir(const std::string& dir);

bool isElf(const std::string& path);

// The directories the dynamic loader of `program` searches without LD_LIBRARY_PATH: its
// system directories (ld.so --list-diagnostics, glibc 2.33+) and those ldconfig indexes
// into /etc/ld.so.cache.
std::vector<std::string> loaderSearchDirs(const std::string& program);
// realpath(), or `path` itself when it does not resolve.
std::string canonical(const std::string& path);

struct ElfFacts {
    std::string error;  // readelf failed
    std::string soname;
    std::string rpath;            // RPATH or RUNPATH, empty when absent
    bool has_debug_info = false;  // .symtab or .debug_* sections (not stripped)
};
ElfFacts elfFacts(const std::string& readelf, const std::string& path);

// Checks the bubbletea@.service text: ExecStart runs `bubbletea` (which must exist, executable,
// under `root`) with --local-rank %i and the listen address, the two environment files in
// `confdir` (the shared one, which must exist under `root`, optional; the per-GPU one
// required), CUDA_VISIBLE_DEVICES=%i, the hardening options, none of the options that would
// hide the GPU, WantedBy=multi-user.target, and `systemd-analyze verify` clean when present
// (on a copy in `scratch` whose ExecStart names the file under `root`). Returns the problems,
// one per line; empty when none.
std::string checkUnit(const std::string& unit, const std::string& bubbletea,
                      const std::string& confdir, const std::string& root,
                      const std::string& scratch);

}  // namespace atlas::package_test
