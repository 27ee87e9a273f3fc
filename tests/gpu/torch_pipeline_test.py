#!/usr/bin/env python3
"""perf/torch-pipeline/pipeline_train.py on the CPU: gloo backend, two stage processes over
loopback (--launch), and the one-process reference. Checks what the GPU run relies on:

- the per-step loss of the 2-stage pipeline is bit-identical to the reference (so a
  transport can only change it by corrupting data), and it falls;
- every step issues Megatron's 1F1B pattern of batched isend/irecv (stage 0: one warm-up
  forward, then send-forward-recv-backward pairs, then the last backward; stage 1 the
  mirror image);
- the ground-truth timeline has 2M+1 compute intervals per step and idle gaps that lie
  between them, in order, on the CLOCK_MONOTONIC scale.

Exit 77 (ctest: skipped) when `import torch` fails: install Debian's python3-torch with
`scripts/deps --torch`. Takes about 15 s on a loaded 2-core machine.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..", "..", "perf", "torch-pipeline", "pipeline_train.py")
STEPS, M = 3, 4
MODEL = ["--backend", "gloo", "--device", "cpu", "--steps", str(STEPS), "--warmup-steps", "1",
         "--microbatches", str(M), "--micro-batch", "2", "--seq", "16", "--hidden", "32",
         "--heads", "4", "--layers", "2", "--vocab", "128", "--lr", "1e-2",
         "--dataset-steps", "1"]


def main():
    try:
        import torch  # noqa: F401
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_gloo_available():
            raise ImportError("torch.distributed with gloo is not available")
    except ImportError as e:
        print("SKIP: PyTorch is not importable by %s (%s); install it with scripts/deps --torch"
              % (sys.executable, e))
        return 77
    failures = []
    with tempfile.TemporaryDirectory() as d:
        ref_path = os.path.join(d, "ref.json")
        ref_proc = subprocess.Popen([sys.executable, TRAIN, "--reference", "--json", ref_path]
                                    + MODEL)  # alongside the pipeline: the test runs faster
        run = subprocess.run([sys.executable, TRAIN, "--launch", "--out", d, "--label", "cpu",
                              "--timeout", "120"] + MODEL, capture_output=True, text=True)
        ref_rc = ref_proc.wait(timeout=120)
        if run.returncode != 0:
            for r in (0, 1):
                p = os.path.join(d, "cpu-rank%d.log" % r)
                if os.path.exists(p):
                    print("--- rank %d log\n%s" % (r, open(p).read()[-3000:]))
            print("FAIL: --launch exited %d: %s %s" % (run.returncode, run.stdout, run.stderr))
            return 1
        ranks = [json.load(open(os.path.join(d, "cpu-rank%d.json" % r))) for r in (0, 1)]
        if ref_rc != 0:
            print("FAIL: --reference exited %d" % ref_rc)
            return 1
        ref = json.load(open(ref_path))
    got = [s["loss_hex"] for s in ranks[1]["steps"]]
    want = [s["loss_hex"] for s in ref["steps"]]
    if got != want:
        failures.append("pipeline losses %s differ from the reference %s" % (got, want))
    losses = [s["loss"] for s in ranks[1]["steps"]]
    if not losses[-1] < losses[0]:
        failures.append("the loss did not fall: %s" % losses)
    if any(s["loss"] is not None for s in ranks[0]["steps"]):
        failures.append("stage 0 reported a loss")
    # Megatron's 1F1B for P = 2: stage 0 warms up with one forward.
    pattern = {0: [["isend:1"]] + [["isend:1", "irecv:1"]] * (M - 1) + [["irecv:1"]],
               1: [["irecv:0"]] + [["isend:0", "irecv:0"]] * (M - 1) + [["isend:0"]]}
    for r in (0, 1):
        for step, batches in enumerate(ranks[r]["p2p_batches"]):
            if batches != pattern[r]:
                failures.append("rank %d step %d: p2p batches %s, expected %s"
                                % (r, step, batches, pattern[r]))
        tl = ranks[r]["timeline"]
        if tl["clock"] != "CLOCK_MONOTONIC" or len(tl["compute"]) != STEPS * (2 * M + 1):
            failures.append("rank %d: %d compute intervals, expected %d"
                            % (r, len(tl["compute"]), STEPS * (2 * M + 1)))
        now = time.monotonic_ns()
        spans = sorted((c[3], c[4]) for c in tl["compute"])
        if not all(0 < s <= e <= now for s, e in spans):
            failures.append("rank %d: compute intervals off the monotonic clock" % r)
        for (s, e, step) in tl["idle"]:
            if not (spans[0][0] <= s < e <= spans[-1][1]) or not 0 <= step < STEPS:
                failures.append("rank %d: idle gap %s outside the run" % (r, [s, e, step]))
            if any(cs < e and s < ce for cs, ce in spans):
                failures.append("rank %d: idle gap %s overlaps compute" % (r, [s, e]))
        if not all(st["iter_ms"] > 0 for st in ranks[r]["steps"]):
            failures.append("rank %d: non-positive iteration time" % r)
    for f in failures:
        print("FAIL", f)
    print("torch_pipeline_test:", "FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
