// The one local-rank rule (channel/local_rank.h) under the variables each launcher sets, so
// the plugin and bubbletea open the same bubble channel however the job was started.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "atlas/bubble_channel.h"
#include "channel/channel_name.h"
#include "channel/local_rank.h"

namespace atlas::channel {
namespace {

using Vars = std::map<std::string, std::string>;

Result<LocalRank> resolve(const Vars& vars, int configured = -1) {
    return resolveLocalRank(configured, [&vars](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
    });
}

void expectRank(const Vars& vars, int rank, const std::string& source) {
    auto r = resolve(vars);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r.value().rank, rank);
    EXPECT_EQ(r.value().source, source);
}

TEST(LocalRank, EachLauncher) {
    // What each launcher puts into a rank's environment (the global rank variables too, which
    // must not be mistaken for the local one).
    expectRank({{"RANK", "11"}, {"LOCAL_RANK", "3"}, {"LOCAL_WORLD_SIZE", "8"}}, 3, "LOCAL_RANK");
    expectRank({{"OMPI_COMM_WORLD_RANK", "10"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}}, 2,
               "OMPI_COMM_WORLD_LOCAL_RANK");
    expectRank({{"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "1"}}, 1, "SLURM_LOCALID");
    expectRank({{"PMI_RANK", "9"}, {"MPI_LOCALRANKID", "4"}, {"MPI_LOCALNRANKS", "8"}}, 4,
               "MPI_LOCALRANKID");
    expectRank({{"PMI_RANK", "9"}, {"PMI_LOCAL_RANK", "5"}}, 5, "PMI_LOCAL_RANK");
    expectRank({{"MV2_COMM_WORLD_RANK", "7"}, {"MV2_COMM_WORLD_LOCAL_RANK", "6"}}, 6,
               "MV2_COMM_WORLD_LOCAL_RANK");
    expectRank({{"PMI_RANK", "9"}}, 0, "default");
    expectRank({}, 0, "default");
}

TEST(LocalRank, NestedLaunchers) {
    // torchrun under srun: the agent's SLURM_LOCALID is 0 for all of its children.
    expectRank({{"SLURM_LOCALID", "0"}, {"LOCAL_RANK", "2"}}, 2, "LOCAL_RANK");
    // mpirun inside a Slurm allocation: the daemon's SLURM_LOCALID, the rank's OMPI variable.
    expectRank({{"SLURM_LOCALID", "0"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}}, 3,
               "OMPI_COMM_WORLD_LOCAL_RANK");
    // An empty variable counts as unset.
    expectRank({{"LOCAL_RANK", ""}, {"SLURM_LOCALID", "1"}}, 1, "SLURM_LOCALID");
}

TEST(LocalRank, ConfiguredWins) {
    auto r = resolve({{"LOCAL_RANK", "3"}}, 5);
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value().rank, 5);
    EXPECT_EQ(r.value().source, "configured");
    EXPECT_FALSE(resolve({}, kMaxLocalRank + 1).isOk());
}

TEST(LocalRank, BadLauncherValueIsAnErrorNotAFallThrough) {
    for (const char* bad : {"x", "-1", "1 ", "+2", "1024", "99999999999"}) {
        auto r = resolve({{"OMPI_COMM_WORLD_LOCAL_RANK", bad}, {"SLURM_LOCALID", "1"}});
        ASSERT_FALSE(r.isOk()) << bad;
        EXPECT_NE(r.status().message().find("OMPI_COMM_WORLD_LOCAL_RANK='"), std::string::npos)
            << r.status().message();
    }
}

TEST(LocalRank, GivesTheChannelNameOfThatRank) {
    auto r = resolve({{"SLURM_LOCALID", "3"}});
    ASSERT_TRUE(r.isOk());
    auto name = resolveChannelName(nullptr, r.value().rank);
    ASSERT_TRUE(name.isOk());
    EXPECT_EQ(name.value(), defaultChannelName(3));
}

}  // namespace
}  // namespace atlas::channel
