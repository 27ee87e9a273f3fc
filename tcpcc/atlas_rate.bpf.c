// SPDX-License-Identifier: GPL-2.0
// atlas_rate: a TCP congestion control that sends at the rate its socket is told.
//
// Contract (docs/tcp-cc.md):
//   - Told: the socket's SO_MAX_PACING_RATE is set (not ~0). The kernel paces the stream at
//     that rate (it caps its pacing rate at SO_MAX_PACING_RATE, and setting the option turns
//     TCP's own pacing on), and the window is two smoothed RTTs at it (kWindowRtts), so the
//     pace, not the window, bounds a grant's transfer. It learns no bandwidth of its own: the
//     plugin tells each stream its share of the grant's pace (twice the WAN link's measured
//     rate) while its flow holds the link (CommCore::paceStreams). After an idle spell the
//     window is whole again at once: a grant's first bytes leave at the told rate, not at a
//     restart window's.
//   - Loss while told: the window drops to a quarter of its target for the recovery
//     (the kernel's proportional rate reduction walks it down), which slows the pace to
//     about 0.6 of the told rate (the kernel paces at 1.2 x window / RTT below the cap);
//     the first ACK after recovery restores it. The rate itself is the plugin's to lower:
//     it follows the measured path rate.
//   - Not told (SO_MAX_PACING_RATE unset): CUBIC, Linux's default, through the kernel's own
//     functions (kfuncs), so a stream that no one paces (before the link's rate is known, an
//     unarbitrated comm, an arbiter that failed open) is as safe as any standard TCP.
// The kernel runs this code; a verifier checks it before registration. Registered once per
// host by `atlas-tcp-cc register` (CAP_BPF and CAP_NET_ADMIN); any process may then select
// it with TCP_CONGESTION (TCP_CONG_NON_RESTRICTED).

// Minimal kernel types, relocated by name against the running kernel's BTF (CO-RE), so the
// object builds without the kernel's headers and loads on any kernel with BTF.
typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "atlas/told_rate_cc.h"

#define CORE __attribute__((preserve_access_index))

struct sock {
    unsigned long sk_pacing_rate;
    unsigned long sk_max_pacing_rate;
    __u32 sk_pacing_status;  // u32 since Linux 5.x (u8 before)
} CORE;

struct tcp_sock {
    __u32 snd_cwnd;
    __u32 snd_cwnd_clamp;
    __u32 snd_ssthresh;
    __u32 srtt_us;  // smoothed RTT << 3, in us
    __u32 mss_cache;
} CORE;

enum tcp_ca_event {
    CA_EVENT_TX_START,
    CA_EVENT_CWND_RESTART,
    CA_EVENT_COMPLETE_CWR,
    CA_EVENT_LOSS,
    CA_EVENT_ECN_NO_CE,
    CA_EVENT_ECN_IS_CE,
};

struct ack_sample {
    __u32 pkts_acked;
    __s32 rtt_us;
    __u32 in_flight;
} CORE;

struct tcp_congestion_ops {
    __u32 (*ssthresh)(struct sock* sk);
    void (*cong_avoid)(struct sock* sk, __u32 ack, __u32 acked);
    void (*set_state)(struct sock* sk, __u8 new_state);
    void (*cwnd_event)(struct sock* sk, enum tcp_ca_event ev);
    void (*pkts_acked)(struct sock* sk, const struct ack_sample* sample);
    __u32 (*undo_cwnd)(struct sock* sk);
    void (*init)(struct sock* sk);
    __u32 flags;
    char name[16];
} CORE;

#define TCP_CONG_NON_RESTRICTED 0x1
#define SK_PACING_NEEDED 1

// The kernel's CUBIC (tcp_cubic.c), for streams that are not told a rate. Its state lives
// in the socket's congestion-control area, which the told mode does not use.
extern void cubictcp_init(struct sock* sk) __ksym;
extern __u32 cubictcp_recalc_ssthresh(struct sock* sk) __ksym;
extern void cubictcp_cong_avoid(struct sock* sk, __u32 ack, __u32 acked) __ksym;
extern void cubictcp_state(struct sock* sk, __u8 new_state) __ksym;
extern void cubictcp_cwnd_event(struct sock* sk, enum tcp_ca_event ev) __ksym;
extern void cubictcp_acked(struct sock* sk, const struct ack_sample* sample) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock* sk) __ksym;  // CUBIC's own undo

char LICENSE[] SEC("license") = "GPL";

#define kWindowRtts 2   // window = told rate x smoothed RTT x this
#define kLossDivisor 4  // window during loss recovery = target / this

#define kMinWindow 4          // segments
#define kUnknownRttUs 100000  // before the first RTT sample: assume 100 ms

static __always_inline struct tcp_sock* tcpSk(struct sock* sk) {
    return (struct tcp_sock*)sk;
}

// The told rate in bytes/s, 0 when none (SO_MAX_PACING_RATE unset is ~0UL).
static __always_inline __u64 toldRate(struct sock* sk) {
    unsigned long r = sk->sk_max_pacing_rate;
    return r == ~0UL ? 0 : r;
}

// Segments in kWindowRtts smoothed round trips at `rate`. (A window of one minimum RTT at
// the link's share, which would keep a flow that never pauses at the link's rate, was
// measured slower: docs/tcp-cc.md.)
static __always_inline __u32 targetWindow(struct sock* sk, __u64 rate) {
    struct tcp_sock* tp = tcpSk(sk);
    __u64 rtt_us = tp->srtt_us >> 3;
    __u64 mss = tp->mss_cache;
    if (rtt_us == 0) {
        rtt_us = kUnknownRttUs;
    }
    if (mss == 0) {
        mss = 1460;
    }
    __u64 w = rate * rtt_us * kWindowRtts / (1000000ULL * mss);
    if (w < kMinWindow) {
        w = kMinWindow;
    }
    if (w > tp->snd_cwnd_clamp) {
        w = tp->snd_cwnd_clamp;
    }
    return (__u32)w;
}

// Whole window and the pace at the told rate at once (the kernel recomputes the pace on
// the next ACK; until then a raised cap would not show, as setting the option only lowers).
static __always_inline void applyRate(struct sock* sk, __u64 rate) {
    tcpSk(sk)->snd_cwnd = targetWindow(sk, rate);
    sk->sk_pacing_rate = rate;
}

SEC("struct_ops/atlas_rate_init")
void BPF_PROG(atlas_rate_init, struct sock* sk) {
    cubictcp_init(sk);
    const __u64 rate = toldRate(sk);
    if (rate != 0) {
        sk->sk_pacing_status = SK_PACING_NEEDED;
        applyRate(sk, rate);
    }
}

SEC("struct_ops/atlas_rate_cong_avoid")
void BPF_PROG(atlas_rate_cong_avoid, struct sock* sk, __u32 ack, __u32 acked) {
    const __u64 rate = toldRate(sk);
    if (rate == 0) {
        cubictcp_cong_avoid(sk, ack, acked);
        return;
    }
    tcpSk(sk)->snd_cwnd = targetWindow(sk, rate);
}

SEC("struct_ops/atlas_rate_ssthresh")
__u32 BPF_PROG(atlas_rate_ssthresh, struct sock* sk) {
    const __u64 rate = toldRate(sk);
    if (rate == 0) {
        return cubictcp_recalc_ssthresh(sk);
    }
    __u32 w = targetWindow(sk, rate) / kLossDivisor;
    return w < kMinWindow ? kMinWindow : w;
}

SEC("struct_ops/atlas_rate_undo_cwnd")
__u32 BPF_PROG(atlas_rate_undo_cwnd, struct sock* sk) {
    const __u64 rate = toldRate(sk);
    if (rate == 0) {
        return tcp_reno_undo_cwnd(sk);
    }
    return targetWindow(sk, rate);
}

SEC("struct_ops/atlas_rate_cwnd_event")
void BPF_PROG(atlas_rate_cwnd_event, struct sock* sk, enum tcp_ca_event ev) {
    // TX_START: the first send after the pipe ran empty. The idle restart (RFC 5681 4.1,
    // net.ipv4.tcp_slow_start_after_idle) has just cut the window; a told stream sends its
    // grant at the told rate from the first byte instead.
    const __u64 rate = toldRate(sk);
    if (rate == 0) {
        cubictcp_cwnd_event(sk, ev);
    } else if (ev == CA_EVENT_TX_START) {
        applyRate(sk, rate);
    }
}

SEC("struct_ops/atlas_rate_set_state")
void BPF_PROG(atlas_rate_set_state, struct sock* sk, __u8 new_state) {
    cubictcp_state(sk, new_state);  // CUBIC's bookkeeping only: it resets on loss
}

SEC("struct_ops/atlas_rate_pkts_acked")
void BPF_PROG(atlas_rate_pkts_acked, struct sock* sk, const struct ack_sample* sample) {
    if (toldRate(sk) == 0) {
        cubictcp_acked(sk, sample);  // CUBIC's delay tracking (HyStart) for its slow start
    }
}

// The variable's name is the struct_ops map's, which the loader looks up by the same name.
SEC(".struct_ops")
struct tcp_congestion_ops atlas_rate = {
    .init = (void*)atlas_rate_init,
    .ssthresh = (void*)atlas_rate_ssthresh,
    .cong_avoid = (void*)atlas_rate_cong_avoid,
    .undo_cwnd = (void*)atlas_rate_undo_cwnd,
    .cwnd_event = (void*)atlas_rate_cwnd_event,
    .set_state = (void*)atlas_rate_set_state,
    .pkts_acked = (void*)atlas_rate_pkts_acked,
    .flags = TCP_CONG_NON_RESTRICTED,
    .name = ATLAS_TOLD_RATE_CC_NAME,
};
