#!/usr/bin/env python3
"""perf/torch-pipeline/score_bubbles.py against hand-computed numbers, scored by the real
`atlas-bubbles stats` (path in argv[1]).

Ground truth: iteration k (100 ms long) idles in [k*100, k*100 + 40) ms. The plugin measured
[k*100 + 2, k*100 + 40) (it saw the wait 2 ms late) and published one prediction set at 50 ms
with windows [k*100 + 5, k*100 + 35) for k = 1..4. Iterations 1..3 are the complete ones
after that set (4 has no successor), so against the truth the predictions cover 3 x 30 of
3 x 40 ms (75%) at precision 100%, and the measurement covers 38 of every 40 ms (95%) at
precision 100%. Against the plugin's own measurement the predictions would cover 30/38: the
rewrite must replace the observed intervals, or the numbers differ.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCORER = os.path.join(HERE, "..", "..", "perf", "torch-pipeline", "score_bubbles.py")
MS = 1_000_000
T0 = 10_000 * MS


def main():
    exe = sys.argv[1]
    observed = [{"start_ns": T0 + k * 100 * MS + 2 * MS, "end_ns": T0 + k * 100 * MS + 40 * MS,
                 "iteration": 1000 + k} for k in range(5)]
    windows = [{"start_ns": T0 + k * 100 * MS + 5 * MS, "end_ns": T0 + k * 100 * MS + 35 * MS,
                "confidence": 0.9, "iteration": 1000 + k, "source": "predictor"}
               for k in range(1, 5)]
    rec = {"format": "atlas-bubbles-timeline", "version": 1, "clock": "CLOCK_MONOTONIC",
           "unit": "ns", "recorded_from_ns": T0 + 1 * MS, "recorded_to_ns": T0 + 500 * MS,
           "channels": [{"name": "/test", "writers": [], "observed": observed,
                         "prediction_sets": [{"generation": 1, "set_id": 1,
                                              "published_ns": T0 + 50 * MS,
                                              "windows": windows}],
                         "states": [], "lost_observed": 0, "lost_windows": 0,
                         "incomplete_sets": 0, "invalid_records": 0}]}
    idle = [[T0 + k * 100 * MS, T0 + k * 100 * MS + 40 * MS, k] for k in range(5)]
    truth = {"timeline": {"clock": "CLOCK_MONOTONIC", "unit": "ns", "idle": idle,
                          "compute": []}}
    with tempfile.TemporaryDirectory() as d:
        rp, tp = os.path.join(d, "rec.json"), os.path.join(d, "truth.json")
        json.dump(rec, open(rp, "w"))
        json.dump(truth, open(tp, "w"))
        out = subprocess.run([sys.executable, SCORER, "--recording", rp, "--truth", tp,
                              "--out-prefix", os.path.join(d, "s"), "--atlas-bubbles", exe],
                             check=True, capture_output=True, text=True).stdout
        s = json.loads(out)
        failures = []

        def near(name, got, want):
            if got is None or abs(got - want) > 1e-9:
                failures.append("%s: got %r, want %r" % (name, got, want))

        near("predictions vs truth: coverage", s["predictions_vs_truth"]["coverage"], 0.75)
        near("predictions vs truth: precision", s["predictions_vs_truth"]["precision"], 1.0)
        near("measurement vs truth: coverage", s["measurement_vs_truth"]["coverage"], 0.95)
        near("measurement vs truth: precision", s["measurement_vs_truth"]["precision"], 1.0)
        near("predictions vs plugin: coverage",
             s["predictions_vs_plugin_measurement"]["coverage"], 30 / 38)
        if s["truth_intervals"] != 5 or s["plugin_observed_intervals"] != 5:
            failures.append("interval counts: %r" % s)
        # Bad input is refused with a message.
        json.dump({"format": "other"}, open(rp, "w"))
        bad = subprocess.run([sys.executable, SCORER, "--recording", rp, "--truth", tp,
                              "--out-prefix", os.path.join(d, "x")], capture_output=True,
                             text=True)
        if bad.returncode == 0 or "not an atlas-bubbles timeline" not in bad.stderr:
            failures.append("a foreign recording was accepted: %r" % bad.stderr)
    for f in failures:
        print("FAIL", f)
    print("score_bubbles_test:", "FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
