// The five exported ncclNet tables, the only symbols libnccl-net-atlas.so exports
// (plugin/exports.map). NCCL picks the newest one it knows and uses v11/v12 directly (2.30+:
// v12, 2.28-2.29: v11); v8..v10 serve older NCCL releases through NCCL's version shims. Declared
// here for the unit tests, which link the internal library and call the tables like NCCL would.
#pragma once

#include "atlas/nccl/net.h"

#define ATLAS_PLUGIN_EXPORT __attribute__((visibility("default")))

extern "C" {
ATLAS_PLUGIN_EXPORT extern const ncclNet_v8_t ncclNetPlugin_v8;
ATLAS_PLUGIN_EXPORT extern const ncclNet_v9_t ncclNetPlugin_v9;
ATLAS_PLUGIN_EXPORT extern const ncclNet_v10_t ncclNetPlugin_v10;
ATLAS_PLUGIN_EXPORT extern const ncclNet_v11_t ncclNetPlugin_v11;
ATLAS_PLUGIN_EXPORT extern const ncclNet_v12_t ncclNetPlugin_v12;
}
