#!/usr/bin/env bash
# shellcheck disable=SC2015  # "A && B || fail": fail when either fails
# scripts/demo's paths that need no network namespaces (tests/demo/CMakeLists.txt): the
# headline is made only from what the parts recorded, skipped parts say why, and a failed
# part shows as FAILED and makes the demo exit non-zero.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${ATLAS_TEST_BINARY_DIR:-$ROOT/build}
T=$(mktemp -d /tmp/demo-test-XXXXXX)
trap 'rm -rf "$T"' EXIT
FLAT=$ROOT/scripts/bench/json-flat.awk
fail() { echo "FAIL: $*"; exit 1; }
j() { awk -f "$FLAT" "$1" | awk -F'\t' -v k="$2" '$1 == k { print $2 }'; }
demo() { ATLAS_DEMO_BUILD_DIR=$1 "$ROOT/scripts/demo" --no-deps "${@:2}"; }

# 1. --dry-run: every part listed, nothing run, every row skipped.
demo "$BUILD" --dry-run --out "$T/dry" >"$T/dry.log" 2>&1 || { cat "$T/dry.log"; fail "--dry-run exited $?"; }
H=$T/dry/headline.json
[[ $(j "$H" ok) == true && $(j "$H" skipped) == 5 ]] || { cat "$H"; fail "dry run headline"; }
for i in 0 1 2 3 4; do
  [[ $(j "$H" "sections.$i.status") == skipped && $(j "$H" "sections.$i.reason") == --dry-run ]] ||
    fail "dry run: section $i"
done
grep -q "loopback   would run" "$T/dry.log" || { cat "$T/dry.log"; fail "dry run plan"; }

# 2. --no-wan --quick: part 1 measured from atlas-net-perf's JSON, the rest skipped.
demo "$BUILD" --no-wan --quick --out "$T/nowan" >"$T/nowan.log" 2>&1 ||
  { tail -n 40 "$T/nowan.log"; fail "--no-wan --quick exited $?"; }
H=$T/nowan/headline.json
[[ $(j "$H" ok) == true && $(j "$H" failed) == 0 && $(j "$H" skipped) == 4 ]] || { cat "$H"; fail "no-wan headline"; }
[[ $(j "$H" sections.0.key) == loopback && $(j "$H" sections.0.status) == measured ]] || { cat "$H"; fail "loopback row"; }
# The ratio is Atlas / one stream at 16 MiB (--quick) as atlas-net-perf wrote them.
want=$(awk -f "$FLAT" "$T/nowan/loopback.json" | awk -F'\t' '
  { v[$1] = $2 }
  END {
    for (c = 0; ("configs." c ".name") in v; c++)
      for (r = 0; ("configs." c ".rows." r ".size") in v; r++)
        if (v["configs." c ".rows." r ".size"] == 16777216) g[v["configs." c ".name"]] = v["configs." c ".rows." r ".gbps"]
    if (g["one-stream"] > 0) printf "%.2f", g["atlas"] / g["one-stream"]
  }')
got=$(j "$H" sections.0.value)
[[ -n $want ]] && awk -v a="$got" -v b="$want" 'BEGIN { exit !(a == b) }' ||
  fail "loopback value $got, atlas-net-perf's JSON gives $want"
for i in 1 2 3 4; do
  [[ $(j "$H" "sections.$i.status") == skipped ]] || fail "section $i not skipped"
  [[ $(j "$H" "sections.$i.reason") == *"--no-wan given"* ]] || fail "section $i: reason $(j "$H" "sections.$i.reason")"
done
grep -q "| *${want}x |" "$T/nowan/headline.md" || { cat "$T/nowan/headline.md"; fail "table and JSON differ"; }

# 3. A plugin that does not load: part 1 FAILED, the headline still written, exit status 1.
F=$T/broken
for f in perf/atlas-net-perf/atlas-net-perf perf/atlas-wanem/atlas-wanem \
         perf/atlas-pipeline-bench/atlas-pipeline-bench bubbletea/daemon/bubbletea \
         bubbletea/tools/atlas-bubbles perf/bubbletea-load/bubbletea-load; do
  mkdir -p "$F/$(dirname "$f")" && ln -s "$BUILD/$f" "$F/$f"
done
mkdir -p "$F/plugin" && : >"$F/plugin/libnccl-net-atlas.so"
demo "$F" --no-wan --quick --out "$T/fail" >"$T/fail.log" 2>&1
rc=$?
((rc == 1)) || { tail -n 20 "$T/fail.log"; fail "a failed part gave exit status $rc, not 1"; }
H=$T/fail/headline.json
[[ $(j "$H" ok) == false && $(j "$H" failed) == 1 && $(j "$H" sections.0.status) == failed ]] ||
  { cat "$H"; fail "failed headline"; }
grep -q "FAILED" "$T/fail/headline.md" || fail "the table does not say FAILED"

# 4. Bad input.
demo "$BUILD" --bogus >"$T/bad.log" 2>&1
rc=$?
((rc == 2)) && grep -q "unknown option '--bogus'" "$T/bad.log" || fail "unknown option: exit $rc"
echo "demo_no_wan_test: ok"
