// Small helpers the GPU check programs share (atlas-nccl-check, atlas-nccl-sweep): where the
// plugin is, a free port for NCCL's bootstrap root, whether a log holds a line. POSIX only, no
// CUDA, so they build everywhere.
#pragma once

#include <string>

namespace atlas::gpucheck {

// The directory of the running executable ("." when /proc/self/exe is unreadable).
std::string exeDir();

// The plugin to load, as an absolute path: `given` if not empty, else $ATLAS_PLUGIN, else
// libnccl-net-atlas.so next to the program (a staged folder), else the build tree's
// (<build>/perf/gpu-check/ -> <build>/plugin/). "" when none is readable.
std::string findPlugin(const std::string& given);

// A TCP port that was free on 127.0.0.1 a moment ago (0 if none could be bound).
int freeLoopbackPort();

// Whether some line of the file contains `needle` (false when the file is unreadable).
bool fileContains(const std::string& path, const std::string& needle);

}  // namespace atlas::gpucheck
