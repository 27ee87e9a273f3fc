// The install route end to end: scripts/package builds the three Debian packages from this
// build tree (cmake/AtlasPackaging.cmake), and the test unpacks them into a scratch root with
// dpkg-deb -x, as dpkg would install them, then
//   - opens the plugin by name the way NCCL does for NCCL_NET_PLUGIN=atlas (a fresh process
//     whose LD_LIBRARY_PATH is the root's library directory) and runs the ABI smoke test on
//     it (package_plugin_smoke: init, devices, listen/connect/accept, transfers, finalize);
//   - checks each package like a cheap lintian: the exact file list, owners and modes, the
//     control fields (Depends from dpkg-shlibdeps), maintainer files (the ldconfig trigger,
//     conffiles, md5sums), stripped ELF files without RPATH, the plugin's soname, the tools
//     starting from the root, and the systemd unit template (ExecStart, environment files,
//     hardening; systemd-analyze verify when present);
// and checks the build-tree route, `cmake --install --prefix`, the same way.
//
// Packages are built once per test binary (SetUpTestSuite); about 10-40 s on 2 cores.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/package/package_checks.h"
#include "tests/package/run_command.h"

namespace atlas::package_test {
namespace {

const std::string kLibDir = ATLAS_INSTALL_LIBDIR;    // relative to /usr or the prefix
const std::string kUnitDir = ATLAS_SYSTEMD_UNITDIR;  // absolute (prefix /usr)
const std::string kVersion = std::string(ATLAS_VERSION_STR) + "-1";

class PackageInstall : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        for (const char* tool : {"dpkg-deb", "dpkg-shlibdeps", "file", "cpack", "dpkg"}) {
            if (!haveProgram(tool)) {
                skip_ = std::string(tool) + " is not installed (scripts/deps installs it)";
                return;
            }
        }
        error_ = buildAndUnpack();
    }
    // Packages the build tree into scratch_/deb and unpacks every package into root_;
    // returns what went wrong, or "".
    static std::string buildAndUnpack() {
        char tmpl[] = "/tmp/atlas-package-test-XXXXXX";
        if (::mkdtemp(tmpl) == nullptr) {
            return "mkdtemp failed";
        }
        scratch_ = tmpl;
        CommandResult arch = runCommand({"dpkg", "--print-architecture"});
        if (arch.exit_code != 0) {
            return "dpkg --print-architecture: " + arch.describe();
        }
        arch_ = arch.out.substr(0, arch.out.find('\n'));
        CommandResult pkg =
            runCommand({std::string(ATLAS_SOURCE_DIR) + "/scripts/package", "--no-build",
                        "--build-dir", ATLAS_BINARY_DIR, "--out", scratch_ + "/deb"},
                       {}, 240000);
        if (pkg.exit_code != 0) {
            return "scripts/package: " + pkg.describe();
        }
        packaged_ = pkg.out;
        root_ = scratch_ + "/root";
        if (::mkdir(root_.c_str(), 0755) != 0) {
            return "mkdir " + root_ + " failed";
        }
        for (const Expected& e : expectedPackages()) {
            CommandResult x = runCommand({"dpkg-deb", "-x", deb(e.package), root_});
            if (x.exit_code != 0) {
                return "dpkg-deb -x " + deb(e.package) + ": " + x.describe();
            }
        }
        return "";
    }
    static void TearDownTestSuite() {
        if (!scratch_.empty()) {
            (void)runCommand({"rm", "-rf", scratch_});
        }
    }
    void SetUp() override {
        if (!skip_.empty()) {
            GTEST_SKIP() << skip_;
        }
        ASSERT_TRUE(error_.empty()) << error_;
    }

    static std::string deb(const std::string& package) {
        return scratch_ + "/deb/" + package + "_" + kVersion + "_" + arch_ + ".deb";
    }

    static std::string scratch_, root_, arch_, packaged_, skip_, error_;
};
std::string PackageInstall::scratch_, PackageInstall::root_, PackageInstall::arch_,
    PackageInstall::packaged_, PackageInstall::skip_, PackageInstall::error_;

TEST_F(PackageInstall, ScriptMakesExactlyTheThreePackages) {
    std::set<std::string> listed;
    std::istringstream lines(packaged_);
    for (std::string line; std::getline(lines, line);) {
        listed.insert(line);
    }
    std::set<std::string> want;
    for (const Expected& e : expectedPackages()) {
        want.insert(deb(e.package));
    }
    EXPECT_EQ(listed, want) << packaged_;
}

TEST_F(PackageInstall, PluginOpensByNameFromTheRootAndPassesTheSmokeTest) {
    const std::string libdir = root_ + "/usr/" + kLibDir;
    // NCCL_NET_PLUGIN=atlas: NCCL tries dlopen("atlas"), then dlopen("libnccl-net-atlas.so").
    CommandResult r = runCommand({ATLAS_PACKAGE_SMOKE_PATH, "atlas", libdir},
                                 {{"LD_LIBRARY_PATH", libdir},
                                  {"ATLAS_SOCKET_IFNAME", "lo"},
                                  {"ATLAS_TIMEOUT_MS", "10000"},
                                  {"ATLAS_NETSTAT", "0"}},
                                 120000);
    EXPECT_EQ(r.exit_code, 0) << r.describe() << r.out;
    EXPECT_NE(r.out.find("package_plugin_smoke: ok"), std::string::npos) << r.out;
}

// Installed for real (dpkg -i), the plugin is found without LD_LIBRARY_PATH: its directory is
// one the loader searches by itself, or one ldconfig indexes (the package's trigger runs it).
TEST_F(PackageInstall, PluginDirectoryIsOnTheLoaderPath) {
    const std::vector<std::string> dirs = loaderSearchDirs(ATLAS_PACKAGE_SMOKE_PATH);
    ASSERT_FALSE(dirs.empty());
    const std::string want = canonical("/usr/" + kLibDir);
    bool found = false;
    std::string all;
    for (const std::string& d : dirs) {
        found = found || canonical(d) == want;
        all += " " + d;
    }
    EXPECT_TRUE(found) << "/usr/" << kLibDir << " is not among" << all;
}

TEST_F(PackageInstall, PluginIsNotFoundWithoutTheLoaderPath) {
    // The control for the test above: without LD_LIBRARY_PATH the scratch copy is not what
    // the loader finds (an installed copy elsewhere may be; it must not be the root's).
    const std::string libdir = root_ + "/usr/" + kLibDir;
    CommandResult r = runCommand({ATLAS_PACKAGE_SMOKE_PATH, "atlas", libdir},
                                 {{"LD_LIBRARY_PATH", ""}, {"ATLAS_SOCKET_IFNAME", "lo"}}, 60000);
    EXPECT_NE(r.exit_code, 0) << r.out;
}

TEST_F(PackageInstall, ContentsOwnersAndModes) {
    for (const Expected& e : expectedPackages()) {
        SCOPED_TRACE(e.package);
        CommandResult c = runCommand({"dpkg-deb", "-c", deb(e.package)});
        ASSERT_EQ(c.exit_code, 0) << c.describe();
        std::vector<std::string> problems;
        const std::set<std::string> files = parseListing(c.out, &problems);
        for (const std::string& p : problems) {
            ADD_FAILURE() << p;
        }
        EXPECT_EQ(files, e.files);
    }
}

TEST_F(PackageInstall, ControlFields) {
    for (const Expected& e : expectedPackages()) {
        SCOPED_TRACE(e.package);
        CommandResult c = runCommand({"dpkg-deb", "-f", deb(e.package)});
        ASSERT_EQ(c.exit_code, 0) << c.describe();
        std::map<std::string, std::string> f = parseControl(c.out);
        EXPECT_EQ(f["Package"], e.package);
        EXPECT_EQ(f["Version"], kVersion);
        EXPECT_EQ(f["Architecture"], arch_);
        EXPECT_EQ(f["Section"], e.section);
        EXPECT_EQ(f["Priority"], "optional");
        EXPECT_NE(f["Maintainer"].find('@'), std::string::npos) << f["Maintainer"];
        EXPECT_FALSE(f["Installed-Size"].empty());
        // Synopsis: one line under 80 characters, then an extended description.
        const std::string& d = f["Description"];
        const size_t nl = d.find('\n');
        EXPECT_NE(nl, std::string::npos) << d;
        EXPECT_LT(nl, 80u) << d;
        // Depends from dpkg-shlibdeps: versioned, the C and C++ runtimes and the libraries
        // the ELF files need.
        for (const std::string& dep : e.depends) {
            EXPECT_NE(f["Depends"].find(dep + " (>= "), std::string::npos)
                << dep << " missing from Depends: " << f["Depends"];
        }
    }
}

TEST_F(PackageInstall, MaintainerFiles) {
    for (const Expected& e : expectedPackages()) {
        SCOPED_TRACE(e.package);
        const std::string ctl = scratch_ + "/control-" + e.package;
        CommandResult c = runCommand({"dpkg-deb", "-e", deb(e.package), ctl});
        ASSERT_EQ(c.exit_code, 0) << c.describe();
        std::set<std::string> names;
        for (const std::string& n : listDir(ctl)) {
            names.insert(n);
        }
        std::set<std::string> want = {"control", "md5sums"};
        for (const auto& [name, text] : e.control_files) {
            want.insert(name);
            EXPECT_EQ(readFile(ctl + "/" + name), text) << name;
        }
        // No maintainer scripts: the plugin's ldconfig runs through its trigger.
        EXPECT_EQ(names, want);
        // Every file is in md5sums with its checksum.
        CommandResult m = runCommand(
            {"sh", "-c", "cd '" + root_ + "' && md5sum --quiet --strict -c '" + ctl + "/md5sums'"});
        EXPECT_EQ(m.exit_code, 0) << m.describe() << m.out;
        size_t listed = 0;
        std::istringstream lines(readFile(ctl + "/md5sums"));
        for (std::string line; std::getline(lines, line);) {
            ++listed;
        }
        EXPECT_EQ(listed, e.files.size());
    }
}

TEST_F(PackageInstall, ElfFilesAreStrippedWithoutRpathAndThePluginHasItsSoname) {
    for (const Expected& e : expectedPackages()) {
        for (const std::string& f : e.files) {
            if (!isElf(root_ + "/" + f)) {
                continue;
            }
            SCOPED_TRACE(f);
            const ElfFacts facts = elfFacts(ATLAS_READELF, root_ + "/" + f);
            ASSERT_TRUE(facts.error.empty()) << facts.error;
            EXPECT_FALSE(facts.has_debug_info) << "not stripped";
            EXPECT_TRUE(facts.rpath.empty()) << "RPATH/RUNPATH " << facts.rpath;
            if (f.find("libnccl-net-atlas.so") != std::string::npos) {
                EXPECT_EQ(facts.soname, "libnccl-net-atlas.so");
            }
        }
    }
}

TEST_F(PackageInstall, ToolsRunFromTheRoot) {
    std::vector<std::string> programs = splitList(ATLAS_PACKAGED_TOOLS);
    programs.push_back("bubbletea");
    for (const std::string& p : programs) {
        CommandResult r = runCommand({root_ + "/usr/bin/" + p, "--help"});
        EXPECT_EQ(r.exit_code, 0) << p << ": " << r.describe();
        EXPECT_FALSE(r.out.empty() && r.err.empty()) << p << " printed nothing for --help";
    }
}

TEST_F(PackageInstall, UnitTemplateRunsTheInstalledBinaryPerGpu) {
    const std::string unit = readFile(root_ + kUnitDir + "/bubbletea@.service");
    ASSERT_FALSE(unit.empty());
    EXPECT_TRUE(checkUnit(unit, "/usr/bin/bubbletea", "/etc/atlas", root_, scratch_).empty())
        << checkUnit(unit, "/usr/bin/bubbletea", "/etc/atlas", root_, scratch_);
}

// The build-tree route: cmake --install into a prefix puts the same files under it, the unit
// names the prefix's binary and configuration, and a second install keeps an edited
// configuration file.
TEST_F(PackageInstall, CmakeInstallIntoAPrefix) {
    const std::string prefix = scratch_ + "/prefix";
    CommandResult i = runCommand({"cmake", "--install", ATLAS_BINARY_DIR, "--prefix", prefix});
    ASSERT_EQ(i.exit_code, 0) << i.describe();
    const std::string libdir = prefix + "/" + kLibDir;
    EXPECT_EQ(::access((libdir + "/libnccl-net-atlas.so").c_str(), R_OK), 0);
    for (const std::string& t : splitList(ATLAS_PACKAGED_TOOLS)) {
        EXPECT_EQ(::access((prefix + "/bin/" + t).c_str(), X_OK), 0) << t;
    }
    const std::string unit = readFile(prefix + "/lib/systemd/system/bubbletea@.service");
    ASSERT_FALSE(unit.empty());
    EXPECT_TRUE(
        checkUnit(unit, prefix + "/bin/bubbletea", prefix + "/etc/atlas", "", scratch_).empty())
        << checkUnit(unit, prefix + "/bin/bubbletea", prefix + "/etc/atlas", "", scratch_);

    const std::string conf = prefix + "/etc/atlas/bubbletea.conf";
    ASSERT_FALSE(readFile(conf).empty());
    writeFile(conf, "BUBBLETEA_ARGS=--engine cpu\n");
    CommandResult again = runCommand(
        {"cmake", "--install", ATLAS_BINARY_DIR, "--prefix", prefix, "--component", "bubbletea"});
    ASSERT_EQ(again.exit_code, 0) << again.describe();
    EXPECT_EQ(readFile(conf), "BUBBLETEA_ARGS=--engine cpu\n") << "install overwrote the edit";

    // NCCL_NET_PLUGIN=<absolute path>: NCCL's first candidate, opened as given.
    CommandResult r = runCommand(
        {ATLAS_PACKAGE_SMOKE_PATH, libdir + "/libnccl-net-atlas.so", libdir},
        {{"ATLAS_SOCKET_IFNAME", "lo"}, {"ATLAS_TIMEOUT_MS", "10000"}, {"ATLAS_NETSTAT", "0"}},
        120000);
    EXPECT_EQ(r.exit_code, 0) << r.describe() << r.out;
}

}  // namespace
}  // namespace atlas::package_test
