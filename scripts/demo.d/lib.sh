# shellcheck shell=bash
# Shared pieces of scripts/demo (sourced, not run): output, the section runner and the
# results file the headline is made from.
#
# Every section is a shell function run by run_section in a subshell with `set -e`, so a
# failed step ends that section only. A section reports through $RESULTS (one line per
# figure, tab-separated, written by `result`): the headline (headline.awk) is made from that
# file alone, so the table shows exactly what the tools printed. A section that ends with a
# non-zero status and wrote no `failed` line of its own gets one, with the reason it gave
# through `section_fail` (or its exit status); the demo then exits non-zero.

if [[ -t 1 ]]; then bold=$'\033[1m' plain=$'\033[0m'; else bold="" plain=""; fi
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }

# The headline's rows, in order: one figure per key (sections may report several keys).
# shellcheck disable=SC2034  # read by scripts/demo
KEYS=(loopback wan sharing bubbles bubbletea)
declare -A TITLE=(
  [loopback]="loopback (no bandwidth-delay product)"
  [wan]="emulated WAN, 50 ms RTT, 1 Gbit/s"
  [sharing]="temporal sharing, 4 pipelines, 1 link"
  [bubbles]="bubble channel (stage 0's GPU waits)"
  [bubbletea]="bubbletea prefill in the windows"
)

# result KEY STATUS FIGURE VALUE UNIT DETAIL
#   STATUS measured | skipped | failed; VALUE a number (empty unless measured); DETAIL the
#   supporting figures, or why the section was skipped or failed.
result() {
  local f
  (($# == 6)) || { echo "demo: result takes 6 fields, got $#" >&2; return 1; }
  [[ -n ${TITLE[$1]:-} ]] || { echo "demo: unknown result key '$1'" >&2; return 1; }
  for f in "$@"; do
    [[ $f != *$'\t'* && $f != *$'\n'* ]] || { echo "demo: a result field holds a tab or newline" >&2; return 1; }
  done
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "${TITLE[$1]}" "${@:2}" >>"$RESULTS"
}
has_result() { awk -F'\t' -v k="$1" '$1 == k { f = 1 } END { exit !f }' "$RESULTS"; }

# section_fail REASON: ends the current section as failed, with REASON in the headline.
section_fail() {
  printf '%s\n' "$*" >"$OUT/.reason"
  echo "demo: $*" >&2
  exit 1
}

# JSON value at PATH (json-flat.awk's dotted path) of FILE; empty when absent or null.
jget() {
  awk -f "$FLAT" "$1" | awk -F'\t' -v k="$2" '!f && $1 == k && $2 != "null" { print $2; f = 1 }'
}

# A Prometheus sample's value (first series of NAME) from a /metrics text file.
metric() {
  awk -v n="$2" '$1 == n || index($1, n "{") == 1 { print $2; exit }' "$1"
}

# run_section FUNCTION KEY...: runs FUNCTION in a subshell with errexit. When it fails, the
# first of its KEYs without a result gets the reason (section_fail's, else the exit status),
# the others "not reached"; the failure is counted (the demo exits non-zero).
run_section() {
  local fn=$1 rc key why t0=$SECONDS
  shift
  if [[ -n $ONLY && ,$ONLY, != *,$1,* ]]; then
    for key in "$@"; do result "$key" skipped "" "" "" "not in --only $ONLY"; done
    return 0
  fi
  rm -f "$OUT/.reason"
  set +e
  # A signal ends the subshell through exit, so the part's EXIT trap stops what it started
  # (its background processes were started with SIGINT ignored, as async jobs are).
  (set -e; trap 'exit 130' INT TERM; "$fn")
  rc=$?
  set -e
  for key in "$@"; do printf '%s\t%d\n' "$key" $((SECONDS - t0)) >>"$OUT/seconds.tsv"; done
  echo "(${*}: $((SECONDS - t0)) s)"
  ((rc != 0)) || return 0
  why="exit status $rc (output above)"
  [[ -s $OUT/.reason ]] && why=$(tr '\t\n' '  ' <"$OUT/.reason")
  for key in "$@"; do
    has_result "$key" && continue
    result "$key" failed "" "" "" "$why"
    why="not reached: an earlier step of its section failed"
  done
  echo "demo: ${bold}FAILED${plain}: $*: $(head -c 300 "$OUT/.reason" 2>/dev/null || echo "exit status $rc")" >&2
  failures=$((failures + 1))
}

# wait_http URL PID [TENTHS]: until URL answers (any status), or PID exits, or the bound.
wait_http() {
  local i
  for ((i = 0; i < ${3:-600}; i++)); do
    curl -s -o /dev/null "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# stop_pid PID: TERM, then KILL after 5 s; reaps it.
stop_pid() {
  local i
  [[ -n ${1:-} ]] || return 0
  kill -TERM "$1" 2>/dev/null || return 0
  for ((i = 0; i < 50; i++)); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
