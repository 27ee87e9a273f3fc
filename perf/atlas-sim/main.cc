// atlas-sim: discrete-event simulator of geo-distributed training (docs/atlas-sim.md).
// The model lives in atlas_sim_core; this is only the process entry point.
#include <iostream>
#include <string>
#include <vector>

#include "perf/atlas-sim/cli.h"

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    return atlas::sim::runCli(args, std::cout, std::cerr);
}
