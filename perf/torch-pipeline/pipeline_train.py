#!/usr/bin/env python3
"""Pipeline-parallel training of a small decoder-only transformer, 2 stages, 1F1B.

Issue 15 item 4 (docs/gpu-check.md, "PyTorch pipeline training"). What a user's job does,
reduced to its communication pattern: the model is split into two stages, one process each,
and every activation and gradient crosses torch.distributed point-to-point ops the way
Megatron-LM's p2p_communication does (batched isend/irecv through batch_isend_irecv, wait on
every request, then torch.cuda.synchronize() as Megatron's batch_p2p_sync), scheduled as
Megatron's forward_backward_pipelining_without_interleaving (1F1B). With the NCCL backend and
NCCL_NET_PLUGIN pointing at Atlas, every one of those bytes goes through the plugin.

Modes:
  --rank R --master HOST:PORT ...   one stage (normally started by --launch)
  --reference ...                    the whole model in one process, same data, same order:
                                     the losses a correct pipeline must reproduce
  --launch --out DIR --label L ...   start both stages (each optionally in a network
                                     namespace, with an environment file per rank), wait with
                                     a timeout, summarise

Seeds are fixed and the math is deterministic (no TF32, deterministic algorithms, attention
written out), so the per-step loss is bit-identical between transports: P2P only copies.

Per rank it writes JSON: per-step iteration time and (last stage) loss, the p2p batches it
issued, and the ground-truth compute timeline: CUDA events around every forward, backward
and optimizer step (host clock on the CPU), mapped to CLOCK_MONOTONIC, so idle time can be
compared with what the plugin published on the bubble channel (pipeline_report.py).
"""

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = p.add_argument_group("mode")
    mode.add_argument("--rank", type=int, default=None, help="run this stage (0 or 1)")
    mode.add_argument("--reference", action="store_true", help="whole model, one process")
    mode.add_argument("--launch", action="store_true", help="start both stages and wait")
    p.add_argument("--master", default="127.0.0.1:29500", help="rank 0's HOST:PORT (TCP store)")
    p.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    p.add_argument("--warmup-steps", type=int, default=3,
                   help="first steps left out of the iteration-time summary (default 3)")
    p.add_argument("--microbatches", type=int, default=4, help="per step (default 4)")
    p.add_argument("--micro-batch", type=int, default=4, help="sequences per micro-batch")
    p.add_argument("--seq", type=int, default=128, help="tokens per sequence")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=4, help="split evenly over the 2 stages")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--dataset-steps", type=int, default=8,
                   help="distinct steps of data, cycled (default 8)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--min-idle-us", type=float, default=100.0,
                   help="ground truth: idle gaps shorter than this are not bubbles (default 100)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds (default 300)")
    p.add_argument("--json", default=None, help="write this rank's results here")
    # --launch
    p.add_argument("--out", default=None, help="--launch: directory for JSON and logs")
    p.add_argument("--label", default="run", help="--launch: name of this run (files, summary)")
    p.add_argument("--netns", default=None, help="--launch: NS0,NS1 (via 'ip netns exec')")
    p.add_argument("--env-file", action="append", default=[],
                   help="--launch: R:FILE, environment of rank R: KEY=VALUE lines set, -KEY "
                        "lines unset (atlas-nccl-sweep --print-env writes them)")
    a = p.parse_args(argv)
    if sum([a.rank is not None, a.reference, a.launch]) != 1:
        p.error("choose exactly one of --rank R, --reference, --launch")
    if a.rank is not None and a.rank not in (0, 1):
        p.error("--rank must be 0 or 1")
    if a.layers < 2 or a.layers % 2:
        p.error("--layers must be even and at least 2")
    if a.hidden % a.heads:
        p.error("--hidden must be a multiple of --heads")
    if a.steps < 1 or a.microbatches < 1 or a.dataset_steps < 1:
        p.error("--steps, --microbatches and --dataset-steps must be positive")
    if a.launch and not a.out:
        p.error("--launch needs --out DIR")
    return a


# ---------------------------------------------------------------------------------------------
# Model and data (torch imported lazily so --launch and --help work without it)

def build(a, torch):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(a.hidden)
            self.qkv = nn.Linear(a.hidden, 3 * a.hidden)
            self.proj = nn.Linear(a.hidden, a.hidden)
            self.ln2 = nn.LayerNorm(a.hidden)
            self.fc = nn.Linear(a.hidden, 4 * a.hidden)
            self.out = nn.Linear(4 * a.hidden, a.hidden)

        def forward(self, x):
            b, t, h = x.shape
            d = h // a.heads
            q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)
            q, k, v = (z.view(b, t, a.heads, d).transpose(1, 2) for z in (q, k, v))
            # Attention written out (no fused kernel), so it is deterministic everywhere.
            att = (q @ k.transpose(-2, -1)) * (d ** -0.5)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, h)
            x = x + self.proj(y)
            return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))

    class Stage0(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(a.vocab, a.hidden)
            self.pos = nn.Embedding(a.seq, a.hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(a.layers // 2))

        def forward(self, tokens):
            pos = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.tok(tokens) + self.pos(pos)
            for blk in self.blocks:
                x = blk(x)
            return x

    class Stage1(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(a.layers // 2))
            self.ln = nn.LayerNorm(a.hidden)
            self.head = nn.Linear(a.hidden, a.vocab, bias=False)

        def forward(self, x, targets):
            for blk in self.blocks:
                x = blk(x)
            logits = self.head(self.ln(x))
            return torch.nn.functional.cross_entropy(logits.view(-1, a.vocab), targets.view(-1))

    # Both stages are built in every process from the same seed, so each process (and the
    # reference) starts from identical weights; a stage process keeps its own half.
    torch.manual_seed(a.seed)
    return Stage0(), Stage1()


def batch(a, torch, step, mb):
    """Micro-batch `mb` of step `step`: the same tokens in every process. A learnable task:
    each sequence counts up by a per-sequence stride modulo the vocabulary."""
    g = torch.Generator().manual_seed(a.seed * 1000003 + (step % a.dataset_steps) * 1009 + mb)
    start = torch.randint(0, a.vocab, (a.micro_batch, 1), generator=g)
    stride = torch.randint(1, 8, (a.micro_batch, 1), generator=g)
    seq = (start + stride * torch.arange(a.seq + 1)) % a.vocab
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def setup_torch(a):
    # cuBLAS is deterministic only with a fixed workspace configuration (set before CUDA
    # initialises); nondeterministic ops then warn (warn_only), and the loss comparison of
    # the run says whether the result was still bit-identical.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    torch.use_deterministic_algorithms(True, warn_only=True)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("pipeline_train: --device cuda but torch sees no GPU")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.cuda.set_device(0)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    return torch


# ---------------------------------------------------------------------------------------------
# Ground truth: when this rank's device computes

class Timeline:
    """Compute intervals of this rank: CUDA events on the compute stream (mapped to
    CLOCK_MONOTONIC through a reference event), or the host clock on the CPU."""

    def __init__(self, torch, cuda):
        self.torch, self.cuda = torch, cuda
        self.spans = []  # (step, kind, mb, start, end): events or ns
        if cuda:
            self.ref, self.ref_ns = self._reference()

    def _reference(self):
        torch = self.torch
        torch.cuda.synchronize()
        ev = torch.cuda.Event(enable_timing=True)
        t0 = time.monotonic_ns()
        ev.record()
        ev.synchronize()
        t1 = time.monotonic_ns()
        return ev, (t0 + t1) // 2  # error bound: (t1 - t0) / 2, a few microseconds

    def begin(self):
        if self.cuda:
            ev = self.torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.monotonic_ns()

    def end(self, step, kind, mb, start):
        self.spans.append((step, kind, mb, start, self.begin()))

    def finish(self, min_idle_ns):
        compute = []
        align = {"method": "host clock"}
        if self.cuda:
            self.torch.cuda.synchronize()
            end_ref, end_ns = self._reference()
            to_ns = lambda ev: self.ref_ns + int(self.ref.elapsed_time(ev) * 1e6)
            # GPU clock vs CLOCK_MONOTONIC over the run (should be ~0).
            align = {"method": "cuda events", "drift_us": (to_ns(end_ref) - end_ns) / 1e3}
            for step, kind, mb, s, e in self.spans:
                compute.append([step, kind, mb, to_ns(s), to_ns(e)])
        else:
            compute = [list(x) for x in self.spans]
        compute.sort(key=lambda c: c[3])
        idle = []
        for prev, nxt in zip(compute, compute[1:]):
            if nxt[3] - prev[4] >= min_idle_ns:
                # A gap belongs to the step of the compute it precedes.
                idle.append([prev[4], nxt[3], nxt[0]])
        return {"clock": "CLOCK_MONOTONIC", "unit": "ns", "align": align,
                "min_idle_ns": min_idle_ns, "compute": compute, "idle": idle}


# ---------------------------------------------------------------------------------------------
# Megatron-style point-to-point communication

class P2P:
    """Megatron's _communicate with batch_p2p_comm=True: one batch_isend_irecv per call,
    wait on every request, then synchronize (batch_p2p_sync). Records every batch issued."""

    def __init__(self, torch, a, rank, shape):
        import torch.distributed as dist
        self.torch, self.dist, self.a, self.rank, self.shape = torch, dist, a, rank, shape
        self.prev = rank - 1 if rank > 0 else None
        self.next = rank + 1 if rank < 1 else None
        self.log = []  # per step: list of batches, each a list of "isend:peer" / "irecv:peer"
        self.device = torch.device(a.device, 0) if a.device == "cuda" else torch.device("cpu")

    def communicate(self, send_next=None, send_prev=None, recv_prev=False, recv_next=False):
        torch, dist = self.torch, self.dist
        recv_prev = recv_prev and self.prev is not None
        recv_next = recv_next and self.next is not None
        send_next = send_next if self.next is not None else None
        send_prev = send_prev if self.prev is not None else None
        mk = lambda: torch.empty(self.shape, device=self.device, requires_grad=True)
        t_prev = mk() if recv_prev else None
        t_next = mk() if recv_next else None
        ops, names = [], []
        # Megatron's order: send_prev, recv_prev, send_next, recv_next.
        for tensor, fn, peer, name in ((send_prev, dist.isend, self.prev, "isend"),
                                       (t_prev, dist.irecv, self.prev, "irecv"),
                                       (send_next, dist.isend, self.next, "isend"),
                                       (t_next, dist.irecv, self.next, "irecv")):
            if tensor is not None:
                ops.append(dist.P2POp(fn, tensor, peer))
                names.append("%s:%d" % (name, peer))
        if ops:
            for req in dist.batch_isend_irecv(ops):
                req.wait()
            if self.a.device == "cuda":
                torch.cuda.synchronize()
            self.log[-1].append(names)
        return t_prev, t_next

    # The named helpers of Megatron's schedules.
    def recv_forward(self):
        return self.communicate(recv_prev=True)[0]

    def send_forward(self, y):
        self.communicate(send_next=y)

    def send_forward_recv_backward(self, y):
        return self.communicate(send_next=y, recv_next=True)[1]

    def send_backward_recv_forward(self, dx):
        return self.communicate(send_prev=dx, recv_prev=True)[0]

    def recv_backward(self):
        return self.communicate(recv_next=True)[1]

    def send_backward(self, dx):
        self.communicate(send_prev=dx)


def run_stage(a):
    torch = setup_torch(a)
    import torch.distributed as dist
    from datetime import timedelta
    host, port = a.master.rsplit(":", 1)
    dist.init_process_group(a.backend, init_method="tcp://%s:%s" % (host, port), rank=a.rank,
                            world_size=2, timeout=timedelta(seconds=a.timeout))
    cuda = a.device == "cuda"
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    s0, s1 = build(a, torch)
    model = (s0 if a.rank == 0 else s1).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr)
    p2p = P2P(torch, a, a.rank, (a.micro_batch, a.seq, a.hidden))
    tl = Timeline(torch, cuda)
    M, P = a.microbatches, 2
    steps = []
    for step in range(a.steps):
        t0 = time.monotonic_ns()
        p2p.log.append([])
        opt.zero_grad(set_to_none=True)
        losses = []

        def forward(mb, x):
            tokens, targets = batch(a, torch, step, mb)
            ev = tl.begin()
            if a.rank == 0:
                y = model(tokens.to(dev))
            else:
                loss = model(x, targets.to(dev))
                losses.append(loss.detach())
                y = loss / M
            tl.end(step, "F", mb, ev)
            return y

        def backward(mb, x, y, dy):
            ev = tl.begin()
            if x is not None:
                x.retain_grad()
            torch.autograd.backward(y, grad_tensors=dy)
            tl.end(step, "B", mb, ev)
            return x.grad if x is not None else None

        # Megatron's forward_backward_pipelining_without_interleaving.
        warmup = min(P - a.rank - 1, M)
        remaining = M - warmup
        inputs, outputs = [], []
        for i in range(warmup):
            x = p2p.recv_forward()
            y = forward(i, x)
            p2p.send_forward(y)
            inputs.append(x)
            outputs.append(y)
        x = p2p.recv_forward() if remaining > 0 else None
        for i in range(remaining):
            last = i == remaining - 1
            y = forward(warmup + i, x)
            dy = p2p.send_forward_recv_backward(y)
            inputs.append(x)
            outputs.append(y)
            xb, yb = inputs.pop(0), outputs.pop(0)
            dx = backward(i, xb, yb, dy)
            if last:
                p2p.send_backward(dx)
                x = None
            else:
                x = p2p.send_backward_recv_forward(dx)
        for i in range(warmup):
            xb, yb = inputs.pop(0), outputs.pop(0)
            dy = p2p.recv_backward()
            dx = backward(remaining + i, xb, yb, dy)
            p2p.send_backward(dx)
        ev = tl.begin()
        opt.step()
        tl.end(step, "O", -1, ev)
        loss = None
        if losses:
            loss = float(torch.stack(losses).sum().item()) / M  # .item() synchronizes
        elif cuda:
            torch.cuda.synchronize()
        steps.append({"step": step, "iter_ms": (time.monotonic_ns() - t0) / 1e6,
                      "loss": loss, "loss_hex": None if loss is None else float.hex(loss)})
    timeline = tl.finish(int(a.min_idle_us * 1e3))
    dist.barrier()
    dist.destroy_process_group()
    return result(a, torch, steps, {"p2p_batches": p2p.log, "timeline": timeline})


def run_reference(a):
    """The same training without a pipeline: micro-batches in 1F1B's backward order (0..M-1),
    gradients accumulated in the same order, one optimizer step per step."""
    torch = setup_torch(a)
    dev = torch.device("cuda", 0) if a.device == "cuda" else torch.device("cpu")
    s0, s1 = (m.to(dev) for m in build(a, torch))
    opt0 = torch.optim.AdamW(s0.parameters(), lr=a.lr)
    opt1 = torch.optim.AdamW(s1.parameters(), lr=a.lr)
    M = a.microbatches
    steps = []
    for step in range(a.steps):
        t0 = time.monotonic_ns()
        opt0.zero_grad(set_to_none=True)
        opt1.zero_grad(set_to_none=True)
        losses = []
        for mb in range(M):
            tokens, targets = batch(a, torch, step, mb)
            act = s0(tokens.to(dev))
            # the stage boundary: a leaf, as a received activation is
            x = act.detach().requires_grad_(True)
            loss = s1(x, targets.to(dev))
            losses.append(loss.detach())
            (loss / M).backward()
            torch.autograd.backward(act, grad_tensors=x.grad)
        opt0.step()
        opt1.step()
        loss = float(torch.stack(losses).sum().item()) / M
        steps.append({"step": step, "iter_ms": (time.monotonic_ns() - t0) / 1e6, "loss": loss,
                      "loss_hex": float.hex(loss)})
    return result(a, torch, steps, {})


def result(a, torch, steps, extra):
    measured = [s["iter_ms"] for s in steps[a.warmup_steps:]] or [s["iter_ms"] for s in steps]
    measured.sort()
    r = {"tool": "pipeline_train", "rank": a.rank, "reference": a.reference,
         "backend": a.backend, "device": a.device, "torch": torch.__version__,
         "config": {k: getattr(a, k) for k in ("steps", "warmup_steps", "microbatches",
                                                 "micro_batch", "seq", "hidden", "layers",
                                                 "heads", "vocab", "lr", "seed",
                                                 "dataset_steps")},
         "iter_ms_median": measured[len(measured) // 2], "steps": steps}
    if a.device == "cuda":
        r["gpu"] = torch.cuda.get_device_name(0)
        try:
            v = torch.cuda.nccl.version()
            r["nccl_version"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
        except Exception:  # noqa: BLE001 - informational only
            r["nccl_version"] = None
    r.update(extra)
    return r


# ---------------------------------------------------------------------------------------------
# --launch: both stages, each in its namespace and environment, bounded in time

def read_env_file(path):
    sets, unsets = {}, []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            if line.startswith("-"):
                unsets.append(line[1:])
            elif "=" in line:
                k, v = line.split("=", 1)
                sets[k] = v
            else:
                raise SystemExit("pipeline_train: %s: bad line %r" % (path, line))
    return sets, unsets


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def launch(a, passthrough):
    os.makedirs(a.out, exist_ok=True)
    netns = a.netns.split(",") if a.netns else None
    if netns and len(netns) != 2:
        raise SystemExit("pipeline_train: --netns needs NS0,NS1")
    envs = {0: ({}, []), 1: ({}, [])}
    for spec in a.env_file:
        r, _, path = spec.partition(":")
        if r not in ("0", "1") or not path:
            raise SystemExit("pipeline_train: --env-file needs R:FILE with R 0 or 1")
        envs[int(r)] = read_env_file(path)
    host = a.master.rsplit(":", 1)[0]
    # Another port each run: a store still in TIME_WAIT must not block the next one.
    master = "%s:%d" % (host, free_port() if host == "127.0.0.1" else random.randint(20000, 40000))
    procs = []
    for r in (0, 1):
        env = dict(os.environ)
        sets, unsets = envs[r]
        for k in unsets:
            env.pop(k, None)
        env.update(sets)
        cmd = [sys.executable, os.path.abspath(__file__), "--rank", str(r), "--master", master,
               "--json", os.path.join(a.out, "%s-rank%d.json" % (a.label, r))] + passthrough
        if netns:
            cmd = ["ip", "netns", "exec", netns[r]] + cmd
        log = open(os.path.join(a.out, "%s-rank%d.log" % (a.label, r)), "w")
        procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))
    def stop(signum, _frame):
        # The stages run in their own sessions: take them down with us.
        for q in procs:
            try:
                os.killpg(q.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    deadline = time.monotonic() + a.timeout
    codes = [None, None]
    while None in codes and time.monotonic() < deadline:
        for i, p in enumerate(procs):
            if codes[i] is None:
                codes[i] = p.poll()
        if any(c not in (None, 0) for c in codes):
            deadline = min(deadline, time.monotonic() + 10)  # the peer gets 10 s to fail too
        time.sleep(0.1)
    for i, p in enumerate(procs):
        if codes[i] is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            codes[i] = "killed after the timeout"
    summary = {"label": a.label, "exit": codes, "master": master, "netns": netns}
    try:
        r0 = json.load(open(os.path.join(a.out, "%s-rank0.json" % a.label)))
        r1 = json.load(open(os.path.join(a.out, "%s-rank1.json" % a.label)))
        summary["iter_ms_median"] = max(r0["iter_ms_median"], r1["iter_ms_median"])
        summary["losses"] = [s["loss"] for s in r1["steps"]]
    except (OSError, ValueError, KeyError) as e:
        summary["error"] = "no results: %s" % e
    json.dump(summary, open(os.path.join(a.out, "%s-summary.json" % a.label), "w"), indent=1)
    print(json.dumps(summary))
    return 0 if codes == [0, 0] and "error" not in summary else 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    if a.launch:
        # Everything but the launcher's own flags goes to both stages.
        own = {"--launch", "--out", "--label", "--netns", "--env-file", "--master", "--timeout"}
        passthrough, skip = [], False
        for i, x in enumerate(argv):
            if skip:
                skip = False
                continue
            key = x.split("=", 1)[0]
            if key in own:
                skip = "=" not in x and key != "--launch"
                continue
            passthrough.append(x)
        passthrough += ["--timeout", str(a.timeout)]
        return launch(a, passthrough)
    t0 = time.monotonic()
    r = run_reference(a) if a.reference else run_stage(a)
    r["wall_s"] = time.monotonic() - t0
    text = json.dumps(r)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
