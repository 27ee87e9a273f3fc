// The told-rate congestion control's registration with the running kernel (docs/tcp-cc.md).
//
// atlas_rate (atlas_rate.bpf.c) is a BPF struct_ops program embedded in this library.
// registerToldRateCc() verifies and registers it; from then on any socket on the host may
// select it by name (TCP_CONGESTION, ATLAS_TCP_CC=atlas_rate) until unregisterToldRateCc()
// or a reboot. Registration needs CAP_BPF and CAP_NET_ADMIN (root) and a kernel with BTF
// (CONFIG_DEBUG_INFO_BTF) and BPF TCP congestion controls (Linux 5.6+); the errors name
// which is missing. Sockets that run it keep running it after it is unregistered.
#pragma once

#include <string>

#include "atlas/common/status.h"
#include "atlas/told_rate_cc.h"

namespace atlas::tcpcc {

// The name the kernel lists it under (net.ipv4.tcp_available_congestion_control).
inline constexpr const char* kName = ATLAS_TOLD_RATE_CC_NAME;

// Whether the kernel lists it now (registered by anyone, by this library or otherwise).
bool isRegistered();
// Registers it. *already = true (and nothing is done) when the kernel lists it already.
// kUnavailable: the kernel cannot (no BTF, no BPF congestion controls, not permitted), with
// the verifier's or libbpf's reason in the message.
Status registerToldRateCc(bool* already = nullptr);
// Unregisters every registration of it this library can find (struct_ops maps named
// atlas_rate). *found = false when there was none.
Status unregisterToldRateCc(bool* found = nullptr);

}  // namespace atlas::tcpcc
