#!/usr/bin/env python3
"""The analysis half of scripts/gpu-e2e.sh (docs/gpu-check.md, "scripts/gpu-e2e.sh").

Subcommands (each reads what a phase left under OUT and writes JSON plus a markdown table):
  facts OUT [--python PY] [--nccl LIB]   host, GPU (read-only nvidia-smi queries), RDMA and NIC
                                         facts (item 6), in a few seconds
  tune-pick TUNE.json                    the socket setting with the highest mean busbw
  sweep OUT                              headline of the collective sweep (item 3)
  torch OUT                              iteration times, loss identity, bubble scores (item 4)
  bubbletea OUT                          slowdown, fill, overruns, prefill rate (item 5)
  summary OUT                            every phase's status and table: OUT/summary.md/.json
Standard library only: it runs with whatever python3 the GPU machine has.
"""

import glob
import json
import os
import re
import statistics
import subprocess
import sys

TARGETS = {"slowdown_median_max": 0.01, "slowdown_worst_max": 0.02, "fill_min": 0.70,
           "overrun_fraction_max": 0.01}
VENDORS = {"0x15b3": "Mellanox/NVIDIA (ConnectX, BlueField)", "0x1d0f": "Amazon (ENA/EFA)",
           "0x8086": "Intel", "0x14e4": "Broadcom", "0x1ae0": "Google (gVNIC)",
           "0x1af4": "virtio", "0x10de": "NVIDIA", "0x1924": "Solarflare/AMD",
           "0x177d": "Cavium/Marvell", "0x1dd8": "AMD Pensando"}


def load(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def run(cmd, timeout=10):
    """(exit code or None when absent/timed out, output)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, (p.stdout + p.stderr).strip()
    except FileNotFoundError:
        return None, "not installed"
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s" % timeout


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def pct(x):
    return "n/a" if x is None else "%.1f%%" % (100 * x)


# ---------------------------------------------------------------------------------------------
# facts

def rdma_facts():
    base = "/sys/class/infiniband"
    devs = {}
    for d in sorted(glob.glob(base + "/*")):
        name = os.path.basename(d)
        ports = {}
        for p in sorted(glob.glob(d + "/ports/*")):
            ports[os.path.basename(p)] = {k: read(os.path.join(p, k)) for k in
                                          ("state", "phys_state", "rate", "link_layer")}
        devs[name] = {"node_type": read(d + "/node_type"), "fw_ver": read(d + "/fw_ver"),
                      "hca_type": read(d + "/hca_type"), "board_id": read(d + "/board_id"),
                      "pci": os.path.basename(os.path.realpath(d + "/device")),
                      "ports": ports}
    rc, ibv = run(["ibv_devices"], 5)
    rc2, rdma_link = run(["rdma", "link", "show"], 5)
    return {"sys_class_infiniband": devs,
            "sys_class_infiniband_exists": os.path.isdir(base),
            "dev_infiniband": sorted(os.listdir("/dev/infiniband"))
            if os.path.isdir("/dev/infiniband") else [],
            "ibv_devices": ibv, "rdma_link_show": rdma_link}


def nic_facts():
    nics = []
    for d in sorted(glob.glob("/sys/class/net/*")):
        name = os.path.basename(d)
        dev = os.path.join(d, "device")
        vendor = read(dev + "/vendor")
        nics.append({"name": name, "vendor": vendor, "vendor_name": VENDORS.get(vendor or ""),
                     "device": read(dev + "/device"),
                     "driver": os.path.basename(os.path.realpath(dev + "/driver"))
                     if os.path.exists(dev + "/driver") else None,
                     "pci": os.path.basename(os.path.realpath(dev)) if os.path.exists(dev)
                     else None,
                     "speed_mbit": read(d + "/speed"), "mtu": read(d + "/mtu"),
                     "operstate": read(d + "/operstate")})
    rc, lspci = run(["lspci", "-nn"], 5)
    if rc == 0:
        lspci = "\n".join(l for l in lspci.splitlines()
                          if re.search(r"ethernet|infiniband|network|fabric", l, re.I))
    return nics, lspci


def cmd_facts(out, python=None, nccl=None):
    f = {"uname": " ".join(os.uname()), "cpus": os.cpu_count(), "uid": os.getuid()}
    osr = read("/etc/os-release") or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)', osr, re.M)
    f["os"] = m.group(1) if m else None
    mem = read("/proc/meminfo") or ""
    m = re.search(r"MemTotal:\s+(\d+)", mem)
    f["mem_gib"] = round(int(m.group(1)) / 2**20, 1) if m else None
    # Read-only queries: nothing here changes a GPU setting.
    q = "name,driver_version,memory.total,memory.used,compute_mode,mig.mode.current," \
        "clocks.max.sm,power.limit,pci.bus_id"
    rc, smi = run(["nvidia-smi", "--query-gpu=" + q, "--format=csv,noheader"], 15)
    f["gpu"] = [dict(zip(q.split(","), (x.strip() for x in line.split(","))))
                for line in smi.splitlines()] if rc == 0 else smi
    f["nccl_lib"] = nccl
    if python:
        rc, tv = run([python, "-c", "import torch,sys;print(torch.__version__);"
                      "print(torch.version.cuda);v=torch.cuda.nccl.version() if "
                      "torch.cuda.is_available() else None;print(v)"], 90)
        f["torch"] = tv.splitlines()[:3] if rc == 0 else tv
    f["rdma"] = rdma_facts()
    f["nics"], f["lspci_network"] = nic_facts()
    f["dev_net_tun"] = os.path.exists("/dev/net/tun")
    write(os.path.join(out, "facts.json"), f)
    lines = ["## Machine and RDMA facts", "",
             "- host: %s; %s CPUs, %s GiB; uid %s" % (f["os"], f["cpus"], f["mem_gib"], f["uid"]),
             "- GPU: %s" % (", ".join("%s (driver %s, %s, MIG %s, compute mode %s)" % (
                 g.get("name"), g.get("driver_version"), g.get("memory.total"),
                 g.get("mig.mode.current"), g.get("compute_mode")) for g in f["gpu"])
                 if isinstance(f["gpu"], list) else f["gpu"]),
             "- PyTorch: %s" % (f.get("torch"),), "- NCCL library: %s" % nccl, ""]
    r = f["rdma"]
    if r["sys_class_infiniband"]:
        lines.append("| RDMA device | PCI | type | firmware | ports (state, rate, link layer) |")
        lines.append("|---|---|---|---|---|")
        for name, d in r["sys_class_infiniband"].items():
            ports = "; ".join("%s: %s, %s, %s" % (p, v["state"], v["rate"], v["link_layer"])
                              for p, v in d["ports"].items())
            lines.append("| %s | %s | %s | %s | %s |" % (name, d["pci"], d["hca_type"] or
                                                        d["board_id"], d["fw_ver"], ports))
    else:
        lines.append("- RDMA: /sys/class/infiniband %s; no RDMA device is visible" %
                     ("is empty" if r["sys_class_infiniband_exists"] else "does not exist"))
    lines.append("- /dev/infiniband: %s" % (r["dev_infiniband"] or "absent"))
    lines.append("- ibv_devices: %s" % r["ibv_devices"].replace("\n", " / "))
    lines.append("- rdma link show: %s" % r["rdma_link_show"].replace("\n", " / "))
    lines += ["", "| interface | PCI | vendor | device | driver | speed Mbit/s | MTU | state |",
              "|---|---|---|---|---|---|---|---|"]
    for n in f["nics"]:
        lines.append("| %s | %s | %s %s | %s | %s | %s | %s | %s |" % (
            n["name"], n["pci"] or "-", n["vendor"] or "-", n["vendor_name"] or "",
            n["device"] or "-", n["driver"] or "-", n["speed_mbit"] or "-", n["mtu"],
            n["operstate"]))
    lines += ["", "lspci (network controllers): %s" % (f["lspci_network"] or "none listed")]
    with open(os.path.join(out, "facts.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


# ---------------------------------------------------------------------------------------------
# sweep

def busbw(points):
    vals = [p["busbw_GBps"] for p in points if p.get("busbw_GBps") is not None]
    return sum(vals) / len(vals) if vals else 0.0


def cmd_tune_pick(path):
    doc = load(path, {})
    best, best_bw = None, -1.0
    for net in doc.get("nets", []):
        if not net.get("pass") or not net.get("points"):
            continue
        bw = busbw(net["points"])
        if bw > best_bw:
            best, best_bw = net["net"], bw
    if best is None:
        return 1
    print(best)
    return 0


def sweep_section(out):
    doc = load(os.path.join(out, "sweep", "sweep.json"))
    tune = load(os.path.join(out, "sweep", "tune.json"))
    lines = ["## Collective sweep (item 3)", ""]
    if tune:
        lines += ["Socket setting chosen by the tuning run (sendrecv and all_reduce, 32 MiB):", "",
                  "| setting | mean busbw GB/s | pass |", "|---|---:|---|"]
        for n in tune.get("nets", []):
            lines.append("| %s | %.4f | %s |" % (n["net"], busbw(n.get("points", [])), n["pass"]))
        lines.append("")
    if not doc:
        return lines + ["No sweep results (see sweep/sweep.log)."], None
    nets = doc["nets"]
    lines += ["| net | pass | points | skipped (budget) | wrong elements | log check | wall s |",
              "|---|---|---:|---:|---:|---|---:|"]
    for n in nets:
        wrong = sum(p["wrong"] for p in n["points"])
        logs = ", ".join("rank %d %s" % (c["rank"], "found" if c["found"] else "MISSING")
                         for c in n["log_checks"]) or "-"
        lines.append("| %s | %s | %d | %d | %d | %s | %.0f |" % (
            n["net"], n["pass"], len(n["points"]), len(n["skipped"]), wrong, logs, n["wall_s"]))
    if len(nets) >= 2:
        a, b = nets[0], nets[1]
        lines += ["", "busbw (GB/s) at the largest size both nets measured, per op:", "",
                  "| op | size B | %s busbw | %s busbw | ratio | %s time us | %s time us |"
                  % (a["net"], b["net"], a["net"], b["net"]), "|---|---:|---:|---:|---:|---:|---:|"]
        for op in ("all_reduce", "all_gather", "reduce_scatter", "sendrecv", "alltoall"):
            pa = {p["requested_B"]: p for p in a["points"] if p["op"] == op}
            pb = {p["requested_B"]: p for p in b["points"] if p["op"] == op}
            both = sorted(set(pa) & set(pb))
            if not both:
                continue
            x, y = pa[both[-1]], pb[both[-1]]
            ratio = x["busbw_GBps"] / y["busbw_GBps"] if y["busbw_GBps"] else float("nan")
            lines.append("| %s | %d | %.4f | %.4f | %.2f | %.0f | %.0f |" % (
                op, x["size_B"], x["busbw_GBps"], y["busbw_GBps"], ratio, x["time_us"],
                y["time_us"]))
        lines += ["", "Full nccl-tests tables per op and net: sweep/sweep.txt."]
    return lines, doc


# ---------------------------------------------------------------------------------------------
# torch

def runs_net(torch_dir):
    """The NCCL log label of the socket run: the setting the sweep chose (socket:4x4 ->
    socket-4x4, as atlas-nccl-sweep names the files)."""
    choice = read(os.path.join(os.path.dirname(torch_dir), "sweep", "socket-choice.txt"))
    return (choice or "socket:4x4").replace(":", "-")


def torch_section(out):
    d = os.path.join(out, "torch")
    lines = ["## PyTorch pipeline training (item 4)", ""]
    runs = {}
    for label in ("atlas", "socket"):
        r = [load(os.path.join(d, "%s-rank%d.json" % (label, k))) for k in (0, 1)]
        if all(r):
            runs[label] = r
    if not runs:
        return lines + ["No training results (see torch/*.log)."], {}
    lines += ["| transport | steps | iteration ms (median after warm-up) | first loss | last loss |"
              " backend | NCCL |", "|---|---:|---:|---:|---:|---|---|"]
    res = {}
    for label, (r0, r1) in runs.items():
        losses = [s["loss"] for s in r1["steps"]]
        it = max(r0["iter_ms_median"], r1["iter_ms_median"])
        res[label] = {"iter_ms_median": it, "losses_hex": [s["loss_hex"] for s in r1["steps"]]}
        lines.append("| %s | %d | %.1f | %.6f | %.6f | %s | %s |" % (
            label, len(losses), it, losses[0], losses[-1], r0["backend"],
            r0.get("nccl_version")))
    for label in runs:
        want = "Using network Atlas" if label == "atlas" else "Using network Socket"
        found = []
        for k in (0, 1):
            text = read(os.path.join(d, "logs", "nccl-%s-rank%d.log" % (
                label if label == "atlas" else runs_net(d), k))) or ""
            found.append(want in text)
        res[label]["nccl_log"] = {"line": want, "found": found}
        if runs[label][0]["backend"] == "nccl":
            lines.append("")
            lines.append("NCCL log of the %s run, \"%s\": rank 0 %s, rank 1 %s" % (
                label, want, *("found" if f else "MISSING" for f in found)))
    if len(runs) == 2:
        a, b = res["atlas"]["losses_hex"], res["socket"]["losses_hex"]
        same = a == b
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
        res["losses_identical"] = same
        lines += ["", "Per-step loss identical between the transports (bit for bit): **%s**%s"
                  % ("yes" if same else "NO", "" if same else " (first difference at step %s)"
                     % first)]
    for r in (0, 1):
        s = load(os.path.join(d, "atlas-bubbles-rank%d-score.json" % r))
        if not s or "predictions_vs_truth" not in s:
            continue
        res.setdefault("bubbles", {})[r] = s
        if r == 0 or "bubble_table" not in res:
            lines += ["", "Bubble channel against CUDA-event ground truth (Atlas run):", "",
                      "| rank | scored | coverage | precision | truth idle ms | window ms |",
                      "|---:|---|---:|---:|---:|---:|"]
            res["bubble_table"] = True
        for key, name in (("predictions_vs_truth", "predicted windows vs truth"),
                          ("measurement_vs_truth", "measured idle vs truth"),
                          ("predictions_vs_plugin_measurement", "predicted vs measured")):
            x = s[key]
            lines.append("| %d | %s | %s | %s | %.1f | %.1f |" % (
                r, name, pct(x["coverage"]), pct(x["precision"]),
                (x["observed_idle_ns"] or 0) / 1e6, (x["predicted_ns"] or 0) / 1e6))
    note = os.path.join(d, "bubbles-note.txt")
    if os.path.exists(note):
        lines += ["", read(note)]
    res.pop("bubble_table", None)
    return lines, res


# ---------------------------------------------------------------------------------------------
# bubbletea

def metrics(path):
    vals = {}
    for line in (read(path) or "").splitlines():
        m = re.match(r"^([a-z_]+)(?:\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m:
            vals[m.group(1)] = float(m.group(2))
    return vals


def run_median(doc):
    it = doc.get("iteration_ms") or []
    return statistics.median(it) if it else doc.get("mean_iteration_ms")


def cmd_bubbletea(out):
    d = os.path.join(out, "bubbletea")
    pairs = []
    k = 1
    while os.path.exists(os.path.join(d, "without-%d.json" % k)) and \
            os.path.exists(os.path.join(d, "with-%d.json" % k)):
        a = load(os.path.join(d, "without-%d.json" % k))
        b = load(os.path.join(d, "with-%d.json" % k))
        before = metrics(os.path.join(d, "with-%d-metrics-before.txt" % k))
        after = metrics(os.path.join(d, "with-%d-metrics-after.txt" % k))
        delta = {m: after.get(m, 0.0) - before.get(m, 0.0) for m in after}
        wall = load(os.path.join(d, "with-%d-wall.json" % k), {}).get("seconds")
        chunks = delta.get("bubbletea_chunks_total", 0.0)
        win = delta.get("bubbletea_window_seconds_total", 0.0)
        bwin = delta.get("bubbletea_backlogged_window_seconds_total", 0.0)
        p = {"pair": k, "without_ms": run_median(a), "with_ms": run_median(b),
             "without_mean_ms": a.get("mean_iteration_ms"), "with_mean_ms": b.get("mean_iteration_ms"),
             "stage0_idle_pct_without": a["stages"][0]["idle_pct"] if a.get("stages") else None,
             "chunks": chunks, "overruns": delta.get("bubbletea_chunk_overruns_total", 0.0),
             "prefill_tokens": delta.get("bubbletea_prompt_tokens_total", 0.0),
             "completions": delta.get("bubbletea_completions_total", 0.0),
             "window_s": win,
             "window_fill": delta.get("bubbletea_window_busy_seconds_total", 0.0) / win
             if win > 0 else None,
             "backlogged_window_fill":
                 delta.get("bubbletea_backlogged_window_busy_seconds_total", 0.0) / bwin
                 if bwin > 0 else None,
             "wall_s": wall}
        p["slowdown"] = p["with_ms"] / p["without_ms"] - 1 if p["without_ms"] else None
        p["slowdown_of_means"] = (p["with_mean_ms"] / p["without_mean_ms"] - 1
                                  if p["without_mean_ms"] else None)
        p["overrun_fraction"] = p["overruns"] / chunks if chunks else None
        p["tokens_per_s"] = p["prefill_tokens"] / wall if wall else None
        pairs.append(p)
        k += 1
    res = {"pairs": pairs, "targets": TARGETS, "config": load(os.path.join(d, "config.json"), {})}
    if pairs:
        sl = [p["slowdown"] for p in pairs if p["slowdown"] is not None]
        chunks = sum(p["chunks"] for p in pairs)
        wins = sum(p["window_s"] for p in pairs)
        busy = sum((p["window_fill"] or 0) * p["window_s"] for p in pairs)
        walls = sum(p["wall_s"] or 0 for p in pairs)
        res["slowdown_median"] = statistics.median(sl) if sl else None
        res["slowdown_worst"] = max(sl) if sl else None
        res["window_fill"] = busy / wins if wins else None
        res["overrun_fraction"] = sum(p["overruns"] for p in pairs) / chunks if chunks else None
        res["tokens_per_s"] = sum(p["prefill_tokens"] for p in pairs) / walls if walls else None
        res["met"] = {
            "slowdown_median": res["slowdown_median"] is not None and
            res["slowdown_median"] <= TARGETS["slowdown_median_max"],
            "slowdown_worst": res["slowdown_worst"] is not None and
            res["slowdown_worst"] <= TARGETS["slowdown_worst_max"],
            "window_fill": res["window_fill"] is not None and
            res["window_fill"] >= TARGETS["fill_min"],
            "overruns": res["overrun_fraction"] is not None and
            res["overrun_fraction"] < TARGETS["overrun_fraction_max"]}
    write(os.path.join(d, "results.json"), res)
    return res


def bubbletea_section(out):
    res = cmd_bubbletea(out) if os.path.isdir(os.path.join(out, "bubbletea")) else None
    lines = ["## bubbletea on a GPU that trains (item 5)", ""]
    if not res or not res["pairs"]:
        return lines + ["No bubbletea results (see bubbletea/*.log)."], res
    cfg = res.get("config") or {}
    if cfg:
        lines += ["Setup: %s" % cfg.get("description", ""), ""]
    lines += ["| pair | iteration ms without (median) | with bubbletea | slowdown | chunks | "
              "overruns | window fill | prefill tokens | tokens/s |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in res["pairs"]:
        lines.append("| %d | %.1f | %.1f | %+.2f%% | %.0f | %.0f (%s) | %s | %.0f | %s |" % (
            p["pair"], p["without_ms"], p["with_ms"], 100 * (p["slowdown"] or 0), p["chunks"],
            p["overruns"], pct(p["overrun_fraction"]), pct(p["window_fill"]),
            p["prefill_tokens"], "%.0f" % p["tokens_per_s"] if p["tokens_per_s"] else "n/a"))
    met = res["met"]
    ok = lambda b: "met" if b else "NOT met"
    lines += ["", "| measure | result | target | |", "|---|---:|---:|---|",
              "| slowdown, median of pairs | %+.2f%% | <= 1%% | %s |"
              % (100 * res["slowdown_median"], ok(met["slowdown_median"])),
              "| slowdown, worst pair | %+.2f%% | <= 2%% | %s |"
              % (100 * res["slowdown_worst"], ok(met["slowdown_worst"])),
              "| window fill | %s | >= 70%% | %s |" % (pct(res["window_fill"]), ok(met["window_fill"])),
              "| chunk overruns | %s | < 1%% | %s |" % (pct(res["overrun_fraction"]), ok(met["overruns"])),
              "| prefill tokens/s (with runs) | %s | - | |"
              % ("%.0f" % res["tokens_per_s"] if res["tokens_per_s"] else "n/a")]
    return lines, res


# ---------------------------------------------------------------------------------------------
# summary

def cmd_summary(out):
    phases = []
    for path in sorted(glob.glob(os.path.join(out, "phases", "*.json"))):
        phases.append(load(path, {}))
    phases.sort(key=lambda p: p.get("order", 0))
    tb = load(os.path.join(out, "testbed.json"), {})
    lines = ["# gpu-e2e results", "",
             "Testbed: **%s**%s" % (tb.get("mode", "?"), " (%s)" % tb["note"] if tb.get("note")
                                    else ""), "",
             "| phase | status | seconds | budget s | note |", "|---|---|---:|---:|---|"]
    for p in phases:
        lines.append("| %s | %s | %.0f | %s | %s |" % (p.get("phase"), p.get("status"),
                                                       p.get("seconds", 0), p.get("budget", "-"),
                                                       p.get("note", "")))
    lines.append("")
    facts = read(os.path.join(out, "facts.md"))
    if facts:
        lines += [facts, ""]
    summary = {"phases": phases, "testbed": tb}
    for section in (sweep_section, torch_section, bubbletea_section):
        sec, res = section(out)
        lines += sec + [""]
        summary[section.__name__.replace("_section", "")] = res
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    write(os.path.join(out, "summary.json"), summary)
    print(text)
    return 0


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    cmd, rest = argv[1], argv[2:]
    if cmd == "facts":
        opts = dict(zip(rest[1::2], rest[2::2]))
        cmd_facts(rest[0], opts.get("--python"), opts.get("--nccl"))
        return 0
    if cmd == "tune-pick":
        return cmd_tune_pick(rest[0])
    if cmd == "bubbletea":
        print(json.dumps(cmd_bubbletea(rest[0]), indent=1))
        return 0
    if cmd == "summary":
        return cmd_summary(rest[0])
    print("gpu_e2e_report: unknown command %r\n%s" % (cmd, __doc__), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
