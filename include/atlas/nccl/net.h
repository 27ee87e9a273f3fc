// All supported ncclNet versions, with compile-time checks of the layouts NCCL reads.
// Offsets were derived from the field order of the published ABI on LP64.
#pragma once

#include "atlas/nccl/net_v10.h"
#include "atlas/nccl/net_v11.h"
#include "atlas/nccl/net_v8.h"
#include "atlas/nccl/net_v9.h"

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
#endif
