/* The name of atlas_rate, the told-rate TCP congestion control (docs/tcp-cc.md): what
 * tcpcc/atlas_rate.bpf.c registers (its .name, and the struct_ops map the loader looks up by
 * this name, which is its variable's), what the transport paces (only streams that run it)
 * and what ATLAS_TCP_CC=auto asks for. C, because the BPF program includes it too. */
#ifndef ATLAS_TOLD_RATE_CC_H
#define ATLAS_TOLD_RATE_CC_H

#define ATLAS_TOLD_RATE_CC_NAME "atlas_rate"

#endif
