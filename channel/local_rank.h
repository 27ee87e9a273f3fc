// This process's GPU index on its node: the number in the default bubble channel name
// (atlas/bubble_channel.h). The producer (the plugin) and the consumers (bubbletea,
// atlas-bubbles) resolve it with this one rule, so under any launcher they open the same
// channel:
//   1. `configured` when it is >= 0 (the plugin's ATLAS_LOCAL_RANK; bubbletea's --local-rank,
//      else ATLAS_LOCAL_RANK);
//   2. else the first of these launcher variables that is set and non-empty:
//        LOCAL_RANK                  torchrun / torch.distributed
//        OMPI_COMM_WORLD_LOCAL_RANK  Open MPI mpirun
//        SLURM_LOCALID               Slurm srun
//        MPI_LOCALRANKID             MPICH and Intel MPI (Hydra)
//        PMI_LOCAL_RANK              PMI-based launchers (MPICH with PMI, Cray PALS)
//        MV2_COMM_WORLD_LOCAL_RANK   MVAPICH2
//      torchrun first: under srun or mpirun it runs one agent per node whose children have
//      their own LOCAL_RANK while the launcher's variable describes the agent;
//   3. else 0.
// A set variable whose value is not an integer in 0..kMaxLocalRank is an error naming it:
// falling through to the next variable would silently pick another GPU's channel.
#pragma once

#include <string>

#include "atlas/common/env.h"
#include "atlas/common/status.h"

namespace atlas::channel {

inline constexpr int kMaxLocalRank = 1023;

// The launcher variables of rule 2, in precedence order (nullptr-terminated).
inline constexpr const char* kLocalRankVariables[] = {
    "LOCAL_RANK",     "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID",
    "PMI_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",  nullptr};

struct LocalRank {
    int rank = 0;
    std::string source;  // "configured", a variable name, or "default"
};

// Errors (kInvalidUsage): `configured` above kMaxLocalRank, or a bad launcher variable.
Result<LocalRank> resolveLocalRank(int configured, const EnvLookup& env);

}  // namespace atlas::channel
