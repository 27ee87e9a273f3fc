# Sourced by the WAN benchmarks: makes atlas_rate, the told-rate TCP congestion control
# (docs/tcp-cc.md), available for the run, as a host that uses it would have it
# (`atlas-tcp-cc register`, once per host). The streams run it only when asked:
# `-- --env ATLAS_TCP_CC=auto` (flows that take turns) or `=atlas_rate`; the default is BBR.
#   tcp_cc_up BUILD_DIR   registers it when the build has atlas-tcp-cc and the kernel does
#                         not list it yet; prints one line saying what the run will use
#   tcp_cc_down           unregisters it if tcp_cc_up registered it (call it from a trap)
TCP_CC_REGISTERED_HERE=0

tcp_cc_up() {
  local tool=$1/tcpcc/atlas-tcp-cc
  if [[ ! -x $tool ]]; then
    echo "== atlas_rate: not built here (needs clang and libbpf-dev)"
    return 0
  fi
  if "$tool" status >/dev/null 2>&1; then
    echo "== atlas_rate: registered already (ATLAS_TCP_CC=auto or atlas_rate selects it)"
    return 0
  fi
  local why
  if why=$("$tool" register 2>&1); then
    TCP_CC_REGISTERED_HERE=1
    echo "== atlas_rate: registered for this run (ATLAS_TCP_CC=auto or atlas_rate selects it)"
  else
    echo "== atlas_rate: could not be registered (${why%%$'\n'*})"
  fi
}

tcp_cc_down() {
  if ((TCP_CC_REGISTERED_HERE)); then
    "${1:-$BUILD}"/tcpcc/atlas-tcp-cc unregister >/dev/null 2>&1 || true
    TCP_CC_REGISTERED_HERE=0
  fi
}
