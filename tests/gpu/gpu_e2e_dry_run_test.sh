#!/usr/bin/env bash
# scripts/gpu-e2e.sh --dry-run, reduced to its orchestration: setup, testbed (network
# namespaces when root, else the loopback fallback), the simulated sweep and the report,
# then a second run in the same OUT, forced onto the loopback fallback, whose sweep is given
# a 2 s budget and must be recorded as timed out while the report is still written. ~40 s.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(mktemp -d /tmp/gpu-e2e-dry-XXXXXX)
trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export ATLAS_WAN_PREFIX=ge2et$$
export ATLAS_BUILD=${ATLAS_TEST_BINARY_DIR:-$ROOT/build}
export GPU_E2E_NO_TORCH=1  # no torch phase here: tests/gpu/torch_pipeline_test.py covers it

"$ROOT/scripts/gpu-e2e.sh" --dry-run --out "$OUT" --phases sweep,report --budget 200 \
  >"$OUT/run.log" 2>&1 || { tail -n 30 "$OUT/run.log"; fail "the dry run exited $?"; }
python3 - "$OUT" <<'PY' || fail "summary check"
import json, sys
out = sys.argv[1]
s = json.load(open(out + "/summary.json"))
st = {p["phase"]: p["status"] for p in s["phases"]}
# the report's own status is written after it ran
assert st == {"setup": "pass", "testbed": "pass", "sweep": "pass"}, st
assert s["testbed"]["mode"] in ("netns", "loopback"), s["testbed"]
nets = s["sweep"]["nets"]
assert [n["net"] for n in nets][0] == "atlas" and nets[1]["net"].startswith("socket"), nets
for n in nets:
    assert n["pass"] and n["points"] and all(p["wrong"] == 0 for p in n["points"]), n["net"]
text = open(out + "/summary.md").read()
assert "## Collective sweep (item 3)" in text and "| atlas | True |" in text, text
print("dry run: phases", st, "testbed", s["testbed"]["mode"])
PY
# The sweep starts 10 s late (the script's test seam): past its 2 s budget however fast the
# machine (a simulated sweep on loopback can finish inside 2 s).
GPU_E2E_TESTBED=loopback GPU_E2E_BUDGET_SWEEP=2 GPU_E2E_TEST_DELAY_SWEEP=10 "$ROOT/scripts/gpu-e2e.sh" --dry-run --out "$OUT" --phases sweep,report \
  >"$OUT/run2.log" 2>&1 || fail "the second run exited $?"
python3 - "$OUT" <<'PY' || fail "timeout check"
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
st = {p["phase"]: p["status"] for p in s["phases"]}
assert st["sweep"] == "timeout" and st["testbed"] == "pass", st
assert s["testbed"]["mode"] == "loopback" and "GPU_E2E_TESTBED" in s["testbed"]["note"], s
print("budget: sweep", st["sweep"], "; testbed", s["testbed"]["note"])
PY
echo PASS
