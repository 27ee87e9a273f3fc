# shellcheck shell=bash
# scripts/demo part 3: fair against temporal sharing of one emulated WAN link
# (docs/arbitration.md; the full benchmark with the DC-wide arbiter and repetitions is
# scripts/bench-sharing). Sourced by scripts/demo; needs the testbed's variables.

# The workload of scripts/bench-sharing, shortened to 4 measured iterations: D=4 pipelines x
# 2 stages (stage 0 in DC0, stage 1 in DC1), 1F1B, 4 micro-batches of 20/40 ms compute, 2.5 MiB
# activations and gradients (~21 ms on the wire at 1 Gbit/s + 25 ms one-way delay).
# --compute sleep: 8 spinning stages would starve the emulator on a small machine.
SHARING_ITERS=4

sharing_run() {  # MODE LABEL ENV...: one atlas-pipeline-bench run, its JSON in $OUT/LABEL.json
  local label=$2 iters=$SHARING_ITERS
  ((QUICK)) && iters=2
  shift 2
  "$PIPE_BENCH" -D 4 -P 2 -M 4 --schedule 1f1b --fwd-ms 20 --bwd-ms 40 --act-bytes 2560K \
    --compute sleep --iterations "$iters" --warmup 1 --netns "$DC0_NS,$DC1_NS" \
    --plugin "$PLUGIN" --env "ATLAS_DC_MAP=$DC0_SUBNET=dc0,$DC1_SUBNET=dc1" \
    --env ATLAS_LINK_GBPS=1 "$@" --timeout 120 --label "$label" --json "$OUT/$label.json" \
    --quiet >"$OUT/$label.txt" 2>&1 || { cat "$OUT/$label.txt" >&2; return 1; }
  # The iteration-time line; the per-stage table (8 rows) stays in $OUT/$label.txt.
  grep -m1 '^iteration time' "$OUT/$label.txt" | sed 's/^/   /'
  echo "   mean idle per stage $(mean_idle "$OUT/$label.json")%"
}

demo_sharing() {
  say "Part 3: temporal sharing of one WAN link (atlas-pipeline-bench, fair vs temporal)"
  echo "4 pipelines x 2 stages, 8 processes, each stage 0 in DC0 sending its activations to its"
  echo "stage 1 in DC1 over the same 1 Gbit/s link (1F1B, 4 micro-batches, 20/40 ms compute,"
  echo "2.5 MiB per transfer). fair: every transfer goes at once and TCP shares the link, so all"
  echo "four arrive late together. temporal: the plugins of this host take turns on the link"
  echo "through shared memory (ATLAS_SHARING=temporal, one transfer at full rate at a time), so"
  echo "the pipelines stagger: same bytes, shorter iterations."
  # Idle gaps between transfers must not reset the congestion window (as bench-sharing).
  local ns
  for ns in "$DC0_NS" "$DC1_NS"; do
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_slow_start_after_idle=0
  done
  local shm=atlasdemo$$-sharing
  trap 'rm -f /dev/shm/'"$shm"'.* 2>/dev/null || true' EXIT
  echo
  echo "-- fair (ATLAS_SHARING=fair)"
  sharing_run fair sharing-fair --env ATLAS_SHARING=fair || section_fail "the fair run failed (output above)"
  echo
  echo "-- temporal (ATLAS_SHARING=temporal, node-local arbitration, 250 ms slots)"
  sharing_run temporal sharing-temporal --env ATLAS_SHARING=temporal \
    --env "ATLAS_NODE_SHM=$shm" --env ATLAS_SLOT_MS=250 ||
    section_fail "the temporal run failed (output above)"

  local f t fidle tidle
  f=$(jget "$OUT/sharing-fair.json" mean_iteration_ms)
  t=$(jget "$OUT/sharing-temporal.json" mean_iteration_ms)
  [[ -n $f && -n $t ]] || section_fail "atlas-pipeline-bench wrote no mean_iteration_ms"
  fidle=$(mean_idle "$OUT/sharing-fair.json") tidle=$(mean_idle "$OUT/sharing-temporal.json")
  result sharing measured \
    "iteration time, fair / temporal" "$(awk -v f="$f" -v t="$t" 'BEGIN { printf "%.2f", f / t }')" x \
    "$(awk -v f="$f" -v t="$t" -v a="$fidle" -v b="$tidle" 'BEGIN {
        printf "fair %.0f ms, temporal %.0f ms per iteration; idle per stage %.0f%% vs %.0f%%", f, t, a, b }')"
}

mean_idle() {  # mean of stages[].idle_pct in an atlas-pipeline-bench JSON
  awk -f "$FLAT" "$1" | awk -F'\t' '$1 ~ /^stages\.[0-9]+\.idle_pct$/ { s += $2; n++ }
    END { if (n) printf "%.1f", s / n }'
}
