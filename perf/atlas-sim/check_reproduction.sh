#!/usr/bin/env bash
# Keeps the committed reproduction honest (ctest sim_reproduction, label sim): reruns
# reproduce.sh from the committed configs into a scratch directory and fails when
#  - results/table.md differs from the fresh table (the code or a config changed the figures
#    and the committed results were not regenerated: rerun reproduce.sh into results/), or
#  - BubbleTea with predicted windows misses what the predictor is held to (issue 13): at
#    4,096 H100 at least 0.9x the oracle windows' utilization with a training slowdown of at
#    most 1%, and at most 1% slowdown on the testbed.
#
# usage: perf/atlas-sim/check_reproduction.sh BUILD_DIR
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:?usage: check_reproduction.sh BUILD_DIR}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
t0=$(date +%s%N)
if ! "$root/perf/atlas-sim/reproduce.sh" "$build" "$scratch" >"$scratch/log" 2>&1; then
    cat "$scratch/log" >&2
    echo "check_reproduction: reproduce.sh failed" >&2
    exit 1
fi
echo "reproduction: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
if ! diff -u "$root/perf/atlas-sim/results/table.md" "$scratch/table.md"; then
    echo "check_reproduction: perf/atlas-sim/results/table.md is stale (the diff above is" \
         "committed -> fresh); regenerate: perf/atlas-sim/reproduce.sh $build" \
         "perf/atlas-sim/results" >&2
    exit 1
fi
python3 - "$scratch/summary.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["bubbletea_targets"]
fails = []
if not t["scale_predicted_over_oracle_utilization"] >= 0.9:
    fails.append(f"4,096 H100: predicted {t['scale_predicted_over_oracle_utilization']:.3f}x "
                 "the oracle's utilization (< 0.9x)")
if not t["scale_predicted_slowdown"] <= 0.01:
    fails.append(f"4,096 H100: training slowdown {100 * t['scale_predicted_slowdown']:.3f}% (> 1%)")
if not t["testbed_predicted_slowdown"] <= 0.01:
    fails.append(f"testbed: training slowdown {100 * t['testbed_predicted_slowdown']:.3f}% (> 1%)")
for f in fails:
    print(f"check_reproduction: {f}", file=sys.stderr)
sys.exit(1 if fails else 0)
PY
echo "table.md matches a fresh run; BubbleTea targets met"
