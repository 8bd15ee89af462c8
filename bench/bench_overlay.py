#!/usr/bin/env python
"""CPU benchmark of the async exponential overlay (not a test).

Per sampling step: a real torch forward of transformer-like layers (QKV/O
projections and a SwiGLU MLP, batch ``--rows``) followed by sampling of
``q ~ Exp(1)`` of shape ``rows × vocab`` (48 × 152064 by default: Qwen's
vocabulary). Configurations, measured side by side (round-robin, one step of
each in turn, so drift and neighbours' load hit all of them alike):

* ``inline``          vLLM's native path: forward, then draw q, then argmax(probs / q)
* ``vllm fused``      vLLM 0.32 CPU's default: forward, then ``torch.ops._C.fused_gumbel_argmax``
                      (only when vLLM is importable)
* ``lane``            overlay.lanes.CpuThreadLane draws q on another core during the forward
* ``overlay +instr``  the full overlay (overlay.sampler.Overlay) with instrumentation and its event log
* ``overlay -instr``  the same with instrumentation off
* ``lane same core``  the lane thread pinned to the model thread's core — what happens
                      when the worker process is pinned to one core as a whole

The model thread is pinned to ``--model-core``, the lane to ``--lane-core``
(as vLLM CPU pins the worker's OpenMP threads and reserves a core). Every
thread runs single-threaded torch (OMP_NUM_THREADS=1), like a vLLM CPU worker
on a 2-core machine. A second table isolates the per-step cost of the
overlay's bookkeeping and instrumentation with a no-op forward and a tiny q.

    .venv/bin/python bench/bench_overlay.py                 # defaults
    .venv/bin/python bench/bench_overlay.py --sizes 1024x1 --repeats 10
"""

from __future__ import annotations

import os

# Before torch is imported: one intra-op thread per thread, like vLLM CPU's
# worker with one bound core (the lane then owns the other core).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from eventlog_stats import event_log_hidden, overlap  # noqa: E402  (bench/, this script's folder)


def die(msg: str) -> None:
    print(f"bench_overlay: {msg}", file=sys.stderr)
    sys.exit(2)


try:
    import torch
except ImportError:
    die("needs torch (pip install torch, or use the repository's .venv)")
try:
    from overlay.events import EventLog
    from overlay.lanes import CpuThreadLane
    from overlay.sampler import Overlay, overlay_random_sample
except ImportError as exc:
    die(f"needs the overlay package of this repository ({exc})")


# --------------------------------------------------------------------------- workload


class Forward:
    """``layers`` transformer-like blocks at ``hidden``: real matmuls, no attention scores."""

    def __init__(self, hidden: int, layers: int, rows: int, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        s = hidden**-0.5

        def w(i: int, o: int) -> torch.Tensor:
            return torch.randn(o, i, generator=g) * s

        self.layers = [
            (w(hidden, 3 * hidden), w(hidden, hidden), w(hidden, 8 * hidden), w(4 * hidden, hidden))
            for _ in range(layers)
        ]
        self.hidden = hidden
        self.x = torch.randn(rows, hidden, generator=g)

    def __call__(self) -> torch.Tensor:
        F = torch.nn.functional
        h = self.x
        for qkv, o, up, down in self.layers:
            a = F.linear(F.rms_norm(h, (self.hidden,)), qkv)
            h = h + F.linear(a[:, : self.hidden], o)
            gate, val = F.linear(F.rms_norm(h, (self.hidden,)), up).chunk(2, dim=-1)
            h = h + F.linear(F.silu(gate) * val, down)
        return h


def inline_random_sample(probs, generators, use_fp64_gumbel=False):
    """vLLM 0.32's ``random_sample``: draw q inline, argmax(probs / q)."""
    q = torch.empty_like(probs, dtype=torch.float64 if use_fp64_gumbel else probs.dtype)
    q.exponential_()
    for i, gen in generators.items():
        q[i].exponential_(generator=gen)
    return probs.div_(q).argmax(dim=-1).view(-1)


def lane_on(cores: set[int] | None) -> CpuThreadLane:
    """A CpuThreadLane whose thread is confined to ``cores`` (threads inherit their creator's affinity)."""
    box: dict = {}

    def make() -> None:
        if cores:
            os.sched_setaffinity(0, cores)
        box["lane"] = CpuThreadLane(seed=0)

    t = threading.Thread(target=make)
    t.start()
    t.join()
    return box["lane"]



# --------------------------------------------------------------------------- configurations


class Config:
    """One way to run a step; ``step()`` returns (seconds, hidden fraction or None, wait ns or None)."""

    name = ""

    def __init__(self, fwd: Forward, logits: torch.Tensor) -> None:
        self.fwd, self.logits = fwd, logits
        self.rows, self.vocab = logits.shape

    def step(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        pass


class Inline(Config):
    name = "inline"

    def step(self):
        t = time.perf_counter()
        self.fwd()
        probs = self.logits.softmax(dim=-1)
        inline_random_sample(probs, {})
        return time.perf_counter() - t, None, None


class Fused(Config):
    name = "vllm fused"

    def step(self):
        t = time.perf_counter()
        self.fwd()
        seeds = torch.randint(0, 2**31, (self.rows,), dtype=torch.long)
        torch.ops._C.fused_gumbel_argmax(self.logits, seeds)
        return time.perf_counter() - t, None, None


class Lane(Config):
    name = "lane"

    def __init__(self, fwd, logits, cores, name=None) -> None:
        super().__init__(fwd, logits)
        self.lane = lane_on(cores)
        if name:
            self.name = name

    def step(self):
        t = time.perf_counter()
        draw = self.lane.launch(self.rows, self.vocab, torch.float32, "cpu")
        f0 = time.monotonic_ns()
        self.fwd()
        f1 = time.monotonic_ns()
        probs = self.logits.softmax(dim=-1)
        q, w0, w1 = self.lane.wait(draw)
        probs.div_(q).argmax(dim=-1)
        dt = time.perf_counter() - t
        exp = draw.exp
        return dt, overlap(exp, (f0, f1)) / max(1, exp[1] - exp[0]), w1 - w0

    def close(self) -> None:
        self.lane.close()


class Full(Config):
    """The overlay as vLLM runs it: begin_step → forward → end_forward → overlay_random_sample."""

    def __init__(self, fwd, logits, cores, instrument: bool, out_dir: str | None) -> None:
        super().__init__(fwd, logits)
        self.name = "overlay +instr" if instrument else "overlay -instr"
        lane = lane_on(cores)
        self.ov = Overlay(EventLog(out_dir, instrument=instrument), instrument=instrument, lane_factory=lambda d, i: lane)

    def step(self):
        t = time.perf_counter()
        st = self.ov.begin_step(rows=self.rows, vocab=self.vocab, dtype=torch.float32, device="cpu",
                                all_greedy=False, seeded_rows=0)
        self.fwd()
        self.ov.end_forward(st)
        probs = self.logits.softmax(dim=-1)
        overlay_random_sample(probs, {}, False, inline=inline_random_sample, overlay=self.ov)
        dt = time.perf_counter() - t
        if st is not None and not st.used:
            raise SystemExit(f"bench_overlay: the overlay did not use its q (fallback {st.fallback!r})")
        return dt, None, None

    def close(self) -> None:
        self.ov.shutdown()



# --------------------------------------------------------------------------- runs


def stats(xs: list[float]) -> tuple[float, float]:
    return statistics.fmean(xs), statistics.median(xs)


def run_size(hidden: int, layers: int, args, model_core, lane_core, have_fused: bool) -> list[dict]:
    fwd = Forward(hidden, layers, args.rows)
    logits = torch.randn(args.rows, args.vocab, generator=torch.Generator().manual_seed(1))
    out_dir = tempfile.mkdtemp(prefix="bench-overlay-events-")
    configs: list[Config] = [Inline(fwd, logits)]
    if have_fused:
        configs.append(Fused(fwd, logits))
    configs += [
        Lane(fwd, logits, lane_core),
        Full(fwd, logits, lane_core, True, out_dir),
        Full(fwd, logits, lane_core, False, None),
    ]
    if model_core is not None:
        configs.append(Lane(fwd, logits, model_core, name="lane same core"))
    times: dict[str, list[float]] = {c.name: [] for c in configs}
    hidden_frac: dict[str, list[float]] = {c.name: [] for c in configs}
    waits: dict[str, list[float]] = {c.name: [] for c in configs}
    fwd_times = []
    for rep in range(args.warmup + args.repeats):
        t = time.perf_counter()
        fwd()
        fwd_t = time.perf_counter() - t
        for c in configs:
            dt, hf, w = c.step()
            if rep >= args.warmup:
                times[c.name].append(dt)
                if hf is not None:
                    hidden_frac[c.name].append(hf)
                    waits[c.name].append(w / 1e6)
        if rep >= args.warmup:
            fwd_times.append(fwd_t)
    for c in configs:
        c.close()
    log_hidden, log_wait, log_steps = event_log_hidden(out_dir)
    base_mean, base_p50 = stats(times["inline"])
    rows = []
    for c in configs:
        mean, p50 = stats(times[c.name])
        hf = hidden_frac[c.name]
        row = {
            "size": f"{hidden}x{layers}",
            "fwd_ms": statistics.median(fwd_times) * 1e3,
            "config": c.name,
            "mean_ms": mean * 1e3,
            "p50_ms": p50 * 1e3,
            "ratio_mean": mean / base_mean,
            "ratio_p50": p50 / base_p50,
            "hidden": statistics.fmean(hf) if hf else None,
            "wait_ms": statistics.fmean(waits[c.name]) if hf else None,
        }
        if c.name == "overlay +instr":
            # The overlay's own measurement, read back from its event log.
            row["hidden"], row["wait_ms"] = log_hidden, log_wait
            row["log_steps"] = log_steps
        rows.append(row)
    return rows


def overhead(args, lane_core) -> list[dict]:
    """Per-step cost of the overlay machinery alone: no-op forward, q of 1 × 16."""
    out_dir = tempfile.mkdtemp(prefix="bench-overlay-overhead-")
    probs0 = torch.full((1, 16), 1 / 16)
    variants = []
    for instrument, out in ((False, None), (True, None), (True, out_dir)):
        lane = lane_on(lane_core)
        variants.append((instrument, out, Overlay(EventLog(out, instrument=instrument), instrument=instrument,
                                                  lane_factory=lambda d, i, lane=lane: lane)))
    res = {i: [] for i in range(len(variants))}
    bare = []
    lane = lane_on(lane_core)
    for _ in range(args.overhead_reps):
        t = time.perf_counter_ns()
        d = lane.launch(1, 16, torch.float32, "cpu")
        lane.wait(d)
        bare.append(time.perf_counter_ns() - t)
        for k, (_, _, ov) in enumerate(variants):
            probs = probs0.clone()
            t = time.perf_counter_ns()
            st = ov.begin_step(rows=1, vocab=16, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
            ov.end_forward(st)
            overlay_random_sample(probs, {}, False, inline=inline_random_sample, overlay=ov)
            res[k].append(time.perf_counter_ns() - t)
    for _, _, ov in variants:
        ov.shutdown()
    lane.close()
    names = ["overlay -instr", "overlay +instr (no file)", "overlay +instr +event log"]
    base = statistics.median(res[0])
    out = [{"what": "bare lane launch+wait", "p50_us": statistics.median(bare) / 1e3, "mean_us": statistics.fmean(bare) / 1e3, "vs": None}]
    for k, name in enumerate(names):
        out.append({"what": name, "p50_us": statistics.median(res[k]) / 1e3, "mean_us": statistics.fmean(res[k]) / 1e3,
                    "vs": statistics.median(res[k]) / base})
    return out


def print_tables(rows: list[dict], over: list[dict], header: str) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # plain fallback
        print(header)
        for r in rows:
            print(r)
        for r in over:
            print(r)
        return
    con = Console(width=150)
    con.print(header)
    t = Table(title="step time per configuration (ratios vs inline, same run)")
    for col in ("size", "fwd ms", "config", "mean ms", "p50 ms", "mean/inline", "p50/inline", "hidden", "wait ms"):
        t.add_column(col, justify="left" if col in ("size", "config") else "right")
    last = None
    for r in rows:
        if last is not None and r["size"] != last:
            t.add_section()
        last = r["size"]
        t.add_row(
            r["size"], f"{r['fwd_ms']:.1f}", r["config"], f"{r['mean_ms']:.1f}", f"{r['p50_ms']:.1f}",
            f"{r['ratio_mean']:.2f}", f"{r['ratio_p50']:.2f}",
            "–" if r["hidden"] is None else f"{100 * r['hidden']:.0f}%",
            "–" if r["wait_ms"] is None else f"{r['wait_ms']:.1f}",
        )
    con.print(t)
    t2 = Table(title="overlay bookkeeping per step (no-op forward, q 1×16)")
    for col in ("what", "p50 µs", "mean µs", "p50 vs -instr"):
        t2.add_column(col, justify="left" if col == "what" else "right")
    for r in over:
        t2.add_row(r["what"], f"{r['p50_us']:.1f}", f"{r['mean_us']:.1f}", "–" if r["vs"] is None else f"{r['vs']:.2f}")
    con.print(t2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=48)
    ap.add_argument("--vocab", type=int, default=152064)
    ap.add_argument("--sizes", default="1024x1,2048x1", help="comma list of HIDDENxLAYERS forward sizes")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--overhead-reps", type=int, default=2000)
    ap.add_argument("--model-core", type=int, default=0)
    ap.add_argument("--lane-core", type=int, default=1)
    ap.add_argument("--no-pin", action="store_true", help="leave thread placement to the OS")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args()
    try:
        sizes = [tuple(int(v) for v in s.lower().split("x")) for s in args.sizes.split(",")]
        assert all(len(s) == 2 and s[0] > 0 and s[1] > 0 for s in sizes)
    except (ValueError, AssertionError):
        die(f"--sizes {args.sizes!r}: expected e.g. 1024x1,2048x2 (HIDDENxLAYERS)")
    if args.rows < 1 or args.vocab < 2 or args.repeats < 1:
        die("--rows, --vocab and --repeats must be positive")
    torch.set_num_threads(1)
    allowed = os.sched_getaffinity(0)
    model_core = lane_core = None
    if not args.no_pin:
        if {args.model_core, args.lane_core} <= allowed and args.model_core != args.lane_core:
            model_core, lane_core = {args.model_core}, {args.lane_core}
            os.sched_setaffinity(0, model_core)  # this (model) thread only
        else:
            print(f"bench_overlay: cores {args.model_core},{args.lane_core} not both usable "
                  f"(allowed {sorted(allowed)}); not pinning", file=sys.stderr)
    have_fused = False
    try:
        import vllm._C  # noqa: F401 - registers torch.ops._C.fused_gumbel_argmax

        have_fused = hasattr(torch.ops._C, "fused_gumbel_argmax")
    except Exception:  # noqa: BLE001 - the fused row is optional
        pass
    load = os.getloadavg()
    header = (f"torch {torch.__version__}, {os.cpu_count()} cpus (load {load[0]:.2f}), rows {args.rows} × vocab {args.vocab} "
              f"float32, {args.repeats} repeats (+{args.warmup} warm-up), model core {sorted(model_core or [])}, "
              f"lane core {sorted(lane_core or [])}")
    rows = []
    for hidden, layers in sizes:
        rows += run_size(hidden, layers, args, model_core, lane_core, have_fused)
    over = overhead(args, lane_core)
    print_tables(rows, over, header)
    if args.json:
        args.json.write_text(json.dumps({"header": header, "steps": rows, "overhead": over}, indent=1))


if __name__ == "__main__":
    main()
