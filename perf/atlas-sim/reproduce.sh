#!/usr/bin/env bash
# Runs every scenario of docs/paper-reproduction.md with the committed configs and writes
# one JSON file per scenario plus table.md / summary.json (the figures the document quotes).
#
# usage: perf/atlas-sim/reproduce.sh [BUILD_DIR] [OUT_DIR]
#   BUILD_DIR  a build tree with the atlas-sim target built (default: build)
#   OUT_DIR    where results go (default: atlas-sim-results)
# Takes about 20 s on one core of a quiet machine; needs python3 for the table.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-build}"
out="${2:-atlas-sim-results}"
sim="$build/perf/atlas-sim/atlas-sim"
cfg="$root/perf/atlas-sim/configs"
[[ -x "$sim" ]] || { echo "reproduce.sh: $sim not built (cmake --build $build --target atlas-sim)" >&2; exit 2; }
mkdir -p "$out"

run() {  # name, then atlas-sim arguments
    local name="$1"
    shift
    local shown="$*"
    echo "== $name: atlas-sim ${shown//$root\//}" | tee "$out/$name.txt"
    local t0 t1
    t0=$(date +%s%N)
    "$sim" "$@" --json "$out/$name.json" >> "$out/$name.txt"
    t1=$(date +%s%N)
    echo "   wall $(( (t1 - t0) / 1000000 )) ms" | tee -a "$out/$name.txt"
}

run testbed-transport compare "$cfg/testbed-transport.json"
run testbed-sharing compare "$cfg/testbed-sharing.json"
run pipeline-bench compare "$cfg/pipeline-bench.json"
run scale-sharing compare "$cfg/scale-sharing.json"
run testbed-atlas-vs-varuna compare "$cfg/testbed-atlas-vs-varuna.json"
run scale-atlas-vs-varuna compare "$cfg/scale-atlas-vs-varuna.json"
run scale-atlas-vs-varuna-noloss compare "$cfg/scale-atlas-vs-varuna.json" \
    --set cluster.wan_default.loss=0
run testbed-bubbletea compare "$cfg/testbed-bubbletea.json"
run scale-bubbletea compare "$cfg/scale-bubbletea.json"
run scale-4096 run "$cfg/scale-4096.json"
run scale-4096-temporal run "$cfg/scale-4096.json" --set network.policy=temporal
run plan-3dc plan "$cfg/plan-3dc.json"
# The live benchmark's workloads (scripts/bench-sharing --workload W, docs/arbitration.md):
# what the simulator predicts for the runs scripts/sim-vs-real compares with.
for w in balanced gpipe-link hetero chain3; do
    run "bench-$w" compare "$cfg/bench-$w.json"
done

python3 "$root/perf/atlas-sim/reproduce_table.py" "$out"
