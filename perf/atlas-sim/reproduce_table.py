#!/usr/bin/env python3
"""Turns the JSON files written by reproduce.sh into table.md and summary.json.

Every figure is read from atlas-sim's own output; nothing here is computed beyond ratios
of two numbers of the same run (speed-ups, throughput ratios).
"""
import json
import re
import sys
from pathlib import Path


def load(out, name):
    return json.loads((out / f"{name}.json").read_text())


def variants(doc):
    return {v["variant"]: v["summary"] for v in doc["variants"]}


def wall_ms(out, name):
    m = re.search(r"wall (\d+) ms", (out / f"{name}.txt").read_text())
    return int(m.group(1)) if m else None


def it_ms(s):
    return s["iteration_ms"]["mean"]


def main():
    out = Path(sys.argv[1])
    rows = []

    def row(claim, scenario, paper, ours, extra):
        rows.append({"claim": claim, "scenario": scenario, "paper": paper, "atlas_sim": ours,
                     "detail": extra})

    # 1. Multi-stream vs single stream.
    t = variants(load(out, "testbed-transport"))
    single, multi = t["single-stream"], t["multi-stream"]
    for ls, lm in zip(single["links"], multi["links"]):
        if ls["from"] < ls["to"]:
            row("multi-stream vs one TCP stream (per-transfer rate)",
                f"testbed link {ls['from']}->{ls['to']}", "up to 20x",
                f"{lm['transfer_cap_gbps'] / ls['transfer_cap_gbps']:.1f}x",
                f"{ls['transfer_cap_gbps']:.3f} -> {lm['transfer_cap_gbps']:.3f} Gbit/s")
    row("multi-stream vs one TCP stream (iteration time)", "testbed 6 GPUs / 3 DCs, fair",
        "(largest single contributor)", f"{it_ms(single) / it_ms(multi):.2f}x",
        f"{it_ms(single):.1f} -> {it_ms(multi):.1f} ms/iteration")

    # 2. Temporal vs fair sharing.
    for name, label in (("testbed-sharing", "testbed 6 GPUs / 3 DCs"),
                        ("pipeline-bench", "4 GPipe pipelines x 4 stages, 1 Gbit/s hop"),
                        ("scale-sharing", "4,096 H100 / 3 DCs, 250 Gbit/s links")):
        v = variants(load(out, name))
        f, tt, w = it_ms(v["fair"]), it_ms(v["temporal"]), it_ms(v["workload"])
        row("temporal vs fair sharing", label, "up to 1.82x",
            f"temporal {f / tt:.2f}x, workload {f / w:.2f}x",
            f"fair {f:.1f}, temporal {tt:.1f}, workload {w:.1f} ms/iteration; "
            f"workload vs temporal {tt / w:.3f}x")

    # 3. Atlas vs Varuna-style.
    for name, label in (("testbed-atlas-vs-varuna", "testbed 6 GPUs / 3 DCs, loss 1e-5"),
                        ("scale-atlas-vs-varuna", "4,096 H100 / 3 DCs, loss 1e-5"),
                        ("scale-atlas-vs-varuna-noloss", "4,096 H100 / 3 DCs, loss 0")):
        v = variants(load(out, name))
        a, b = it_ms(v["varuna-style"]), it_ms(v["atlas"])
        row("Atlas vs Varuna-style (iteration time)", label, "up to 17x", f"{a / b:.2f}x",
            f"{a:.1f} -> {b:.1f} ms/iteration; utilization "
            f"{100 * v['varuna-style']['utilization']:.1f}% -> {100 * v['atlas']['utilization']:.1f}%")

    # 4. Utilization without / with BubbleTea.
    for name, label in (("testbed-bubbletea", "testbed"), ("scale-bubbletea", "4,096 H100")):
        v = variants(load(out, name))
        for vname, s in v.items():
            bt = s.get("bubbletea")
            if not bt:
                continue
            row("GPU utilization without -> with BubbleTea", f"{label}: {vname}",
                "<5% -> up to 94%",
                f"{100 * s['utilization']:.1f}% -> {100 * s['utilization_with_bubbletea']:.1f}%",
                f"windows {bt['windows']}, prefill {bt['prefill_tokens_per_s']:.0f} tok/s, "
                f"TTFT p50 {bt['ttft_p50_ms']:.0f} / p99 {bt['ttft_p99_ms']:.0f} ms, "
                f"{bt['completed']}/{bt['arrived']} done, "
                f"slowdown {100 * bt['training_slowdown']:.4f}%")
        if "varuna-style" in v:
            row("GPU utilization of the baseline", f"{label}: varuna-style", "<5%",
                f"{100 * v['varuna-style']['utilization']:.1f}%", "")

    # WorkloadAware vs TemporalFifo on the 100 Gbit/s scale configuration (no variants file).
    w = load(out, "scale-4096")["summary"]
    t = load(out, "scale-4096-temporal")["summary"]
    row("workload vs temporal sharing", "4,096 H100 / 3 DCs, 100 Gbit/s links (scale-4096)",
        "-", f"{it_ms(t) / it_ms(w):.3f}x",
        f"temporal {it_ms(t):.1f}, workload {it_ms(w):.1f} ms/iteration "
        f"(workload min {w['iteration_ms']['min']:.1f}, max {w['iteration_ms']['max']:.1f})")

    # scripts/bench-sharing's workloads on the emulated testbed (2 DCs at 50 ms and 1 Gbit/s,
    # chain3: 3 DCs, the second link 0.5 Gbit/s at 30 ms), TCP/IPv4 headers, the buffers the
    # bench gives the emulator: the figures docs/arbitration.md compares live runs with.
    for w, label in (("balanced", "default: 1F1B, 20/40 ms, 2.5 MiB"),
                     ("gpipe-link", "GPipe, 5/10 ms: the link is the bottleneck"),
                     ("hetero", "1F1B, unequal stages 10/20 and 30/60 ms"),
                     ("chain3", "3 DCs in a chain, unequal links")):
        v = variants(load(out, f"bench-{w}"))
        for suffix, buf in (("", "deep" if w != "chain3" else "1 BDP"), ("-shallow", "shallow")):
            if f"fair{suffix}" not in v:
                continue
            f = it_ms(v[f"fair{suffix}"])
            tt, wl = it_ms(v[f"temporal{suffix}"]), it_ms(v[f"workload{suffix}"])
            row("bench-sharing workload (testbed link)", f"{w} ({label}), {buf} buffer", "-",
                f"temporal {f / tt:.2f}x, workload {f / wl:.2f}x fair",
                f"fair {f:.1f}, temporal {tt:.1f}, workload {wl:.1f} ms/iteration; "
                f"workload vs temporal {wl / tt:.3f}x")

    # BubbleTea with predicted windows against the oracle's (docs/paper-reproduction.md,
    # "4."): what tests/sim's reproduction check holds the predictor to.
    sb = variants(load(out, "scale-bubbletea"))
    tb = variants(load(out, "testbed-bubbletea"))
    targets = {
        "scale_predicted_over_oracle_utilization":
            sb["atlas+bubbletea-predicted"]["utilization_with_bubbletea"] /
            sb["atlas+bubbletea-oracle"]["utilization_with_bubbletea"],
        "scale_predicted_slowdown": sb["atlas+bubbletea-predicted"]["bubbletea"]["training_slowdown"],
        "testbed_predicted_slowdown": tb["atlas+bubbletea"]["bubbletea"]["training_slowdown"],
    }

    # Simulator speed. The wall time varies by machine, so it stays out of table.md (which a
    # fresh run must reproduce exactly) and goes to summary.json.
    s = load(out, "scale-4096")["summary"]
    perf = {"gpus": s["layout"]["gpus"], "iterations": len(s["iteration_ms"]["all"]),
            "events": s["events"], "wall_ms": wall_ms(out, "scale-4096")}

    md = ["| claim | scenario | paper | atlas-sim | detail |", "|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['claim']} | {r['scenario']} | {r['paper']} | {r['atlas_sim']} | "
                  f"{r['detail']} |")
    md.append("")
    md.append("BubbleTea with predicted windows: 4,096 H100 utilization "
              f"{targets['scale_predicted_over_oracle_utilization']:.3f}x the oracle windows', "
              f"training slowdown {100 * targets['scale_predicted_slowdown']:.4f}%; testbed "
              f"slowdown {100 * targets['testbed_predicted_slowdown']:.4f}%.")
    md.append(f"Simulator work: {perf['gpus']} GPUs, {perf['iterations']} iterations, "
              f"{perf['events']} events (wall time: summary.json).")
    (out / "table.md").write_text("\n".join(md) + "\n")
    (out / "summary.json").write_text(json.dumps({"rows": rows, "bubbletea_targets": targets,
                                                  "simulator_speed": perf}, indent=2) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
