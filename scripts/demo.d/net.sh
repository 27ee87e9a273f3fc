# shellcheck shell=bash
# scripts/demo parts 1 and 2: Atlas against one TCP stream, on loopback and across the
# emulated WAN (sourced by scripts/demo; uses NET_PERF, PLUGIN, OUT, FLAT and lib.sh).

# Gbit/s of configuration $2 at size $3 in atlas-net-perf JSON $1 (empty when missing).
gbps() {
  awk -f "$FLAT" "$1" | awk -F'\t' -v cfg="$2" -v size="$3" '
    { v[$1] = $2 }
    END {
      for (c = 0; ("configs." c ".name") in v; c++) {
        if (v["configs." c ".name"] != cfg || v["configs." c ".ok"] != "true") continue
        for (r = 0; ("configs." c ".rows." r ".size") in v; r++)
          if (v["configs." c ".rows." r ".size"] == size) print v["configs." c ".rows." r ".gbps"]
      }
    }'
}

# The headline's message size: 64 MiB (8 in flight, like NCCL's steps); --quick: 16 MiB.
net_size() { if ((QUICK)); then echo 16; else echo 64; fi; }

# net_result KEY JSON [NOTE]: the Atlas / one-stream ratio at net_size as a result line.
net_result() {
  local a o t mib bytes
  mib=$(net_size) bytes=$(($(net_size) << 20))
  a=$(gbps "$2" atlas $bytes) o=$(gbps "$2" one-stream $bytes) t=$(gbps "$2" tcp $bytes)
  [[ -n $a && -n $o ]] || section_fail "atlas-net-perf reported no $mib MiB figure for atlas or one-stream ($2)"
  result "$1" measured "Atlas / one TCP stream, $mib MiB messages" \
    "$(awk -v a="$a" -v o="$o" 'BEGIN { printf "%.2f", a / o }')" x \
    "$(awk -v a="$a" -v o="$o" -v t="$t" -v note="${3:-}" 'BEGIN {
        printf "Atlas %.2f Gbit/s, one stream %.2f", a, o
        if (t != "") printf ", plain TCP socket %.2f", t
        if (note != "") printf "; %s", note }')"
}

demo_loopback() {
  say "Part 1: loopback, two processes through the plugin"
  echo "A server and a client process each dlopen the plugin (as NCCL does), connect, and move"
  echo "messages; first every byte is checked, then bandwidth is measured. Configurations, each"
  echo "in fresh processes: atlas (defaults), one-stream (ATLAS_NSTREAMS=1, the baseline), tcp"
  echo "(one plain TCP socket, no plugin)."
  local sizes=64K,1M,16M,64M iters=(--iters 20 --warmup 3)
  if ((QUICK)); then  # one short run, checked
    sizes=4097,16M iters=(--iters 1 --warmup 1 --check)
  else
    "$NET_PERF" local --plugin "$PLUGIN" --check --sizes 1,4097,1M,16M --iters 4 --warmup 1 \
      --config atlas: --quiet
  fi
  "$NET_PERF" local --plugin "$PLUGIN" --sizes "$sizes" "${iters[@]}" \
    --config atlas: --config one-stream:ATLAS_NSTREAMS=1 --config tcp:raw \
    --baseline one-stream --json "$OUT/loopback.json" --quiet
  net_result loopback "$OUT/loopback.json"
}

demo_wan_net() {
  say "Part 2: across an emulated WAN (scripts/wan-up -n 2: 50 ms RTT, 1 Gbit/s)"
  echo "Two datacenters are network namespaces joined by atlas-wanem (userspace link emulator:"
  echo "delay, 1 Gbit/s bottleneck, 1 BDP drop-tail buffer). Hosts have stock TCP buffers"
  echo "(tcp_wmem max 4 MiB), so one stream can keep only ~4 MiB in flight per 50 ms round trip."
  echo
  echo "Atlas is told the WAN rate (ATLAS_LINK_GBPS=1): the TUN device reports 10 Gbit/s,"
  echo "which says nothing about the bottleneck. Congestion control in force: $DC0_CC."
  ATLAS_SOCKET_IFNAME=to-dc "$NET_PERF" local --plugin "$PLUGIN" \
    --server-netns "$DC1_NS" --client-netns "$DC0_NS" --sizes 16M,64M \
    --iters $((QUICK ? 1 : 8)) --warmup $((QUICK ? 1 : 2)) \
    --config atlas:ATLAS_LINK_GBPS=1 --config one-stream:ATLAS_NSTREAMS=1 --config tcp:raw \
    --baseline one-stream --json "$OUT/wan.json" --quiet
  net_result wan "$OUT/wan.json" "cc $DC0_CC"
}
