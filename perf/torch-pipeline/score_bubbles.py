#!/usr/bin/env python3
"""Scores the plugin's bubble channel of a training run against ground truth.

Inputs: the channel as `atlas-bubbles record --out PREFIX` wrote it (PREFIX.json, format
atlas-bubbles-timeline) and one rank's pipeline_train.py JSON, whose "timeline" holds the
rank's compute intervals from CUDA events (mapped to CLOCK_MONOTONIC) and the idle gaps
between them: the ground truth of when that GPU waited.

The scoring itself is `atlas-bubbles stats` (one definition of coverage and precision,
docs/bubble-channel.md "Accuracy"). This script only rewrites timelines for it:

  PREFIX-vs-truth-predicted.json  the recorded prediction sets, observed := ground truth:
                                  how well the plugin's *predictions* matched the real idle
  PREFIX-vs-truth-measured.json   one set, published at the start, whose windows are the
                                  intervals the plugin *measured* as idle, observed := ground
                                  truth: how well the plugin's measurement matched it

With --atlas-bubbles it runs `stats --json` on both (and on the recording as is: predictions
vs the plugin's own measurement) and prints one JSON summary.
"""

import argparse
import json
import subprocess
import sys

FORMAT = "atlas-bubbles-timeline"


def load_recording(path):
    with open(path) as f:
        rec = json.load(f)
    if rec.get("format") != FORMAT:
        raise SystemExit("score_bubbles: %s is not an atlas-bubbles timeline" % path)
    if len(rec.get("channels", [])) != 1:
        raise SystemExit("score_bubbles: %s must hold exactly one channel (record --channel "
                         "NAME)" % path)
    return rec


def truth_intervals(rank_json):
    tl = rank_json.get("timeline")
    if not tl or tl.get("clock") != "CLOCK_MONOTONIC":
        raise SystemExit("score_bubbles: the rank JSON has no CLOCK_MONOTONIC timeline")
    return [{"start_ns": int(s), "end_ns": int(e), "iteration": int(it)}
            for s, e, it in tl["idle"] if e > s]


def with_truth(rec, truth, prediction_sets=None):
    out = json.loads(json.dumps(rec))  # deep copy
    ch = out["channels"][0]
    ch["observed"] = truth
    if prediction_sets is not None:
        ch["prediction_sets"] = prediction_sets
    if truth:
        out["recorded_from_ns"] = min(out["recorded_from_ns"], truth[0]["start_ns"])
        out["recorded_to_ns"] = max(out["recorded_to_ns"], truth[-1]["end_ns"])
    return out


def measured_as_prediction(rec, from_ns):
    """The plugin's measured idle intervals as one prediction set that reigns throughout."""
    windows = [{"start_ns": o["start_ns"], "end_ns": o["end_ns"], "confidence": 1.0,
                "iteration": o.get("iteration"), "source": "predictor"}
               for o in rec["channels"][0]["observed"]]
    return [{"generation": 1, "set_id": 1, "published_ns": from_ns, "windows": windows}]


def stats(exe, path, skip):
    out = subprocess.run([exe, "stats", "--from", path, "--json", "--skip-iterations",
                          str(skip)], check=True, capture_output=True, text=True).stdout
    ch = json.loads(out)["channels"][0]
    keep = ("coverage", "precision", "observed_idle_ns", "predicted_ns", "overlap_ns",
            "observed_intervals", "prediction_sets", "bubble_fraction")
    return {k: ch.get(k) for k in keep}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--recording", required=True, help="PREFIX.json from atlas-bubbles record")
    p.add_argument("--truth", required=True, help="pipeline_train.py JSON of the same rank")
    p.add_argument("--out-prefix", required=True, help="where the rewritten timelines go")
    p.add_argument("--skip-iterations", type=int, default=0,
                   help="passed to stats: complete iterations after the first prediction "
                        "left out (the predictor's warm-up)")
    p.add_argument("--atlas-bubbles", default=None, help="run stats with this binary")
    a = p.parse_args(argv)
    rec = load_recording(a.recording)
    with open(a.truth) as f:
        truth = truth_intervals(json.load(f))
    if not truth:
        raise SystemExit("score_bubbles: the ground truth has no idle interval")
    predicted = with_truth(rec, truth)
    start = min(truth[0]["start_ns"], rec["recorded_from_ns"])
    measured = with_truth(rec, truth, measured_as_prediction(rec, start))
    paths = {"predicted": a.out_prefix + "-vs-truth-predicted.json",
             "measured": a.out_prefix + "-vs-truth-measured.json"}
    for key, doc in (("predicted", predicted), ("measured", measured)):
        with open(paths[key], "w") as f:
            json.dump(doc, f)
    summary = {"files": paths, "truth_intervals": len(truth),
               "plugin_observed_intervals": len(rec["channels"][0]["observed"]),
               "prediction_sets": len(rec["channels"][0]["prediction_sets"])}
    if a.atlas_bubbles:
        summary["predictions_vs_truth"] = stats(a.atlas_bubbles, paths["predicted"],
                                                a.skip_iterations)
        summary["measurement_vs_truth"] = stats(a.atlas_bubbles, paths["measured"], 0)
        summary["predictions_vs_plugin_measurement"] = stats(a.atlas_bubbles, a.recording,
                                                             a.skip_iterations)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
