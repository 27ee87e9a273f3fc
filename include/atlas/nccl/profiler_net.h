// Network events for NCCL's profiler (v10+): what a net plugin passes to the
// ncclProfilerCallback_t it receives in init. Written from NCCL's profiler plugin interface
// (plugins/profiler/README.md, the net_socket_v1 descriptor) and checked with static_asserts.
//
// Protocol (NCCL's side, src/plugin/profiler.cc):
//  - callback(&eHandle, ncclProfilerNetEventStart, pHandle, pluginId, &descr) opens an event
//    under the proxy step `pHandle` (the phandle NCCL passed to isend/irecv). NCCL dereferences
//    pHandle, so a plugin must never start an event with a NULL pHandle. NCCL copies what it
//    needs from `descr` during the call; the descriptor may live on the caller's stack.
//  - callback(&eHandle, ncclProfilerNetEventStop, NULL, 0, NULL) closes it;
//    ...Update / UpdateAndStop pass a new descriptor as extData.
//  - pluginId: the descriptor's version in the low 16 bits, the net type above them.
//
// Atlas's events use their own net type (ATLAS_PROFILER_NET_TYPE, 'A' << 16) because an
// Atlas request is striped over many streams and has no single fd; the request descriptor
// keeps the socket transport's {stream-or-fd, op, length} prefix so a profiler that prints
// socket events can print these the same way. docs/nccl-abi.md section 6 has the rules.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The callback's `type` argument.
enum {
    ncclProfilerNetEventStart = 0,
    ncclProfilerNetEventStop = 1,
    ncclProfilerNetEventUpdate = 2,
    ncclProfilerNetEventUpdateAndStop = 3,
};

#define NCCL_PROFILER_NET_VER_BITS 16
#define NCCL_PROFILER_NET_VER_MASK (~0U >> NCCL_PROFILER_NET_VER_BITS)
#define NCCL_PROFILER_NET_TYPE_MASK (~0U << NCCL_PROFILER_NET_VER_BITS)
#define NCCL_PROFILER_NET_TYPE_IB (1U << NCCL_PROFILER_NET_VER_BITS)
#define NCCL_PROFILER_NET_TYPE_SOCK (2U << NCCL_PROFILER_NET_VER_BITS)

// NCCL's socket transport descriptor (pluginId NCCL_PROFILER_NET_TYPE_SOCK | 1), for reference
// and for the layout check of Atlas's request prefix below.
typedef struct {
    uint8_t type;  // 1 << 0: a socket event
    union {
        struct {
            int fd;
            int op;  // 0 send, 1 receive
            size_t length;
        } sock;
    };
} ncclProfilerNetSockDescr_v1_t;

#define ATLAS_PROFILER_NET_TYPE (0x41U << NCCL_PROFILER_NET_VER_BITS)
#define ATLAS_PROFILER_NET_VER 1
#define ATLAS_PROFILER_NET_ID (ATLAS_PROFILER_NET_TYPE | ATLAS_PROFILER_NET_VER)

enum {
    atlasProfileRequest = 1 << 0,  // one isend/irecv, from post to test() done
    atlasProfileStream = 1 << 1,   // a stream-level event (reset, rejoin) under a request
};
enum { atlasProfileOpSend = 0, atlasProfileOpRecv = 1 };
// atlasProfileStream kinds: a stream lost (reset, closed, stalled) / a lost stream rejoined.
enum { atlasStreamReset = 1, atlasStreamRejoin = 2 };
// `stream` of a request: the control stream (small messages travel inline on it), or
// "striped": pieces on the data streams, each to the least-loaded one.
#define ATLAS_PROFILER_STREAM_CONTROL 0
#define ATLAS_PROFILER_STREAM_STRIPED (-1)

typedef struct {
    uint8_t type;  // atlasProfileRequest or atlasProfileStream
    union {
        struct {
            int stream;     // ATLAS_PROFILER_STREAM_CONTROL / _STRIPED
            int op;         // atlasProfileOpSend / atlasProfileOpRecv
            size_t length;  // Start: send size or receive capacity; Update: bytes moved
            int nstreams;   // data streams of the comm
            int dev;        // net device index
            uint64_t seq;   // message number on its comm (0, 1, ...)
        } req;
        struct {
            int stream;       // 1..nstreams: the data stream; 0: the control stream
            int event;        // atlasStreamReset / atlasStreamRejoin
            uint64_t frames;  // reset at the sender: unconfirmed frames resent on the other
                              // streams; otherwise 0
        } stream;
    };
} atlasProfilerNetDescr_v1_t;

#ifdef __cplusplus
}  // extern "C"
#include <cstddef>
static_assert(offsetof(ncclProfilerNetSockDescr_v1_t, sock.fd) == 8);
static_assert(offsetof(ncclProfilerNetSockDescr_v1_t, sock.length) == 16);
// Atlas's request prefix sits where a socket descriptor has {fd, op, length}.
static_assert(offsetof(atlasProfilerNetDescr_v1_t, req.stream) ==
              offsetof(ncclProfilerNetSockDescr_v1_t, sock.fd));
static_assert(offsetof(atlasProfilerNetDescr_v1_t, req.op) ==
              offsetof(ncclProfilerNetSockDescr_v1_t, sock.op));
static_assert(offsetof(atlasProfilerNetDescr_v1_t, req.length) ==
              offsetof(ncclProfilerNetSockDescr_v1_t, sock.length));
static_assert(sizeof(atlasProfilerNetDescr_v1_t) == 40);
#endif
