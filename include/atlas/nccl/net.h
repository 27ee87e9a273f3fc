// All supported ncclNet versions, with compile-time checks of the layouts NCCL reads.
// Offsets were derived from the field order of the published ABI on LP64.
#pragma once

#include "atlas/nccl/net_v10.h"
#include "atlas/nccl/net_v11.h"
#include "atlas/nccl/net_v12.h"
#include "atlas/nccl/net_v8.h"
#include "atlas/nccl/net_v9.h"
#include "atlas/nccl/profiler_net.h"

#ifdef __cplusplus
#include <cstddef>

static_assert(sizeof(void*) == 8, "Atlas targets LP64 only");
static_assert(sizeof(ncclNetDeviceHandle_v11_t) == 32);
static_assert(sizeof(ncclNetProperties_v8_t) == 64);
static_assert(offsetof(ncclNetProperties_v8_t, speed) == 32);
static_assert(offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56);
static_assert(sizeof(ncclNetProperties_v9_t) == 104);
static_assert(offsetof(ncclNetProperties_v9_t, vProps) == 64);
static_assert(offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88);
static_assert(sizeof(ncclNetProperties_v10_t) == sizeof(ncclNetProperties_v9_t));
static_assert(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104);
static_assert(sizeof(ncclNetProperties_v11_t) == 112);
static_assert(sizeof(ncclNetAttr_v11_t) == 44);
// Function tables: name + N function pointers, no padding.
static_assert(sizeof(ncclNet_v8_t) == 8 * (1 + 18));
static_assert(sizeof(ncclNet_v9_t) == 8 * (1 + 19));
static_assert(sizeof(ncclNet_v10_t) == 8 * (1 + 19));
static_assert(sizeof(ncclNet_v11_t) == 8 * (1 + 21));
static_assert(offsetof(ncclNet_v11_t, finalize) == 8 * 20);
// v12: 8 devices per vNIC move every property after vProps by 16 bytes; railId and planeId
// take the 4 bytes v11 left as tail padding after maxMultiRequestSize.
static_assert(sizeof(ncclNetVDeviceProps_v12_t) == 36);
static_assert(offsetof(ncclNetProperties_v12_t, vProps) == 64);
static_assert(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104);
static_assert(offsetof(ncclNetProperties_v12_t, maxCollBytes) == 112);
static_assert(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120);
static_assert(offsetof(ncclNetProperties_v12_t, railId) == 124);
static_assert(offsetof(ncclNetProperties_v12_t, planeId) == 126);
static_assert(sizeof(ncclNetProperties_v12_t) == 128);
static_assert(sizeof(ncclNetAttr_v12_t) == 44);
static_assert(offsetof(ncclNetAttr_v12_t, op) == 32);
static_assert(sizeof(ncclNetCommConfig_v12_t) == 4);
// The v12 function table is the v11 one, entry for entry.
static_assert(sizeof(ncclNet_v12_t) == sizeof(ncclNet_v11_t));
static_assert(offsetof(ncclNet_v12_t, finalize) == offsetof(ncclNet_v11_t, finalize));
static_assert(offsetof(ncclNet_v12_t, setNetAttr) == 8 * 21);
#endif
