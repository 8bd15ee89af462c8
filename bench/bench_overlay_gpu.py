#!/usr/bin/env python
"""CUDA benchmark of the async exponential overlay (not a test; plain torch, no vLLM).

The same step as ``bench_overlay.py``, on a GPU: a real forward of
transformer-like layers (QKV/O projections and a SwiGLU MLP, batch ``--rows``)
then sampling with ``q ~ Exp(1)`` of ``rows × vocab`` (48 × 152064 by
default). Configurations, side by side (round-robin, one step each in turn):

* ``inline``          forward, then draw q on the current stream, then argmax(probs / q)
* ``lane``            overlay.lanes.DeviceStreamLane: q drawn on a side stream that
                      waits for the current stream, consumer waits on its event
* ``overlay +instr``  the full overlay (overlay.sampler.Overlay) with event timing and
                      its event log (written into ``--trace-dir`` when given)
* ``overlay -instr``  the same without instrumentation

Step time is wall-clock around a fully synchronised step; hidden fraction and
sampler wait come from the lane's CUDA events (read after the step, no extra
sync inside it). With ``--trace-dir DIR`` a few steps of each configuration
are also recorded with ``torch.profiler`` (CPU + CUDA) into
``DIR/*.pt.trace.json`` — with the ``expo_prof::*`` annotations — for
``expo-prof analyze DIR``.

    python bench/bench_overlay_gpu.py --trace-dir traces/gpu-bench
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from eventlog_stats import event_log_hidden, overlap  # noqa: E402  (bench/, this script's folder)


def die(msg: str, code: int = 2) -> None:
    print(f"bench_overlay_gpu: {msg}", file=sys.stderr)
    sys.exit(code)


try:
    import torch
except ImportError:
    die("needs torch with CUDA (pip install torch)")
try:
    from overlay.contract import SPAN_FORWARD
    from overlay.events import EventLog
    from overlay.lanes import DeviceStreamLane
    from overlay.sampler import Overlay, overlay_random_sample
except ImportError as exc:
    die(f"needs the overlay package of this repository ({exc})")


class Forward:
    """``layers`` transformer-like blocks at ``hidden`` in ``dtype`` on ``device``."""

    def __init__(self, hidden: int, layers: int, rows: int, device, dtype, seed: int = 0) -> None:
        g = torch.Generator(device=device).manual_seed(seed)
        s = hidden**-0.5

        def w(i: int, o: int) -> torch.Tensor:
            return (torch.randn(o, i, generator=g, device=device) * s).to(dtype)

        self.layers = [
            (w(hidden, 3 * hidden), w(hidden, hidden), w(hidden, 8 * hidden), w(4 * hidden, hidden))
            for _ in range(layers)
        ]
        self.hidden = hidden
        self.x = torch.randn(rows, hidden, generator=g, device=device).to(dtype)

    def __call__(self) -> torch.Tensor:
        F = torch.nn.functional
        h = self.x
        with torch.autograd.profiler.record_function(SPAN_FORWARD):
            for qkv, o, up, down in self.layers:
                a = F.linear(F.rms_norm(h, (self.hidden,)), qkv)
                h = h + F.linear(a[:, : self.hidden], o)
                gate, val = F.linear(F.rms_norm(h, (self.hidden,)), up).chunk(2, dim=-1)
                h = h + F.linear(F.silu(gate) * val, down)
        return h


def inline_random_sample(probs, generators, use_fp64_gumbel=False):
    """vLLM's ``random_sample``: q drawn inline on the current stream."""
    q = torch.empty_like(probs, dtype=torch.float64 if use_fp64_gumbel else probs.dtype)
    q.exponential_()
    for i, gen in generators.items():
        q[i].exponential_(generator=gen)
    return probs.div_(q).argmax(dim=-1).view(-1)



class Inline:
    name = "inline"

    def __init__(self, fwd, logits) -> None:
        self.fwd, self.logits = fwd, logits

    def step(self):
        self.fwd()
        probs = self.logits.softmax(dim=-1)
        inline_random_sample(probs, {})
        return None

    def close(self) -> None:
        pass


class Lane(Inline):
    name = "lane"

    def __init__(self, fwd, logits, device) -> None:
        super().__init__(fwd, logits)
        self.lane = DeviceStreamLane(device, instrument=True)
        self.rows, self.vocab = logits.shape
        self.device = device

    def step(self):
        anchor = self.lane.anchor()
        draw = self.lane.launch(self.rows, self.vocab, self.logits.dtype, self.device)
        f0 = self.lane.stamp()
        self.fwd()
        f1 = self.lane.stamp()
        probs = self.logits.softmax(dim=-1)
        q, w0, w1 = self.lane.wait(draw)
        probs.div_(q).argmax(dim=-1)
        # Resolved by the caller after the step's synchronize().
        return lambda: self.lane.resolve(0, anchor, {"fwd": [f0, f1], "exp": draw.exp, "wait": [w0, w1]})


class Full(Inline):
    def __init__(self, fwd, logits, device, instrument: bool, out_dir: str | None) -> None:
        super().__init__(fwd, logits)
        self.name = "overlay +instr" if instrument else "overlay -instr"
        self.rows, self.vocab = logits.shape
        self.device = device
        self.ov = Overlay(EventLog(out_dir, instrument=instrument), instrument=instrument)

    def step(self):
        st = self.ov.begin_step(rows=self.rows, vocab=self.vocab, dtype=self.logits.dtype, device=self.device,
                                all_greedy=False, seeded_rows=0)
        self.fwd()
        self.ov.end_forward(st)
        probs = self.logits.softmax(dim=-1)
        overlay_random_sample(probs, {}, False, inline=inline_random_sample, overlay=self.ov)
        if st is not None and not st.used:
            die(f"the overlay did not use its q (fallback {st.fallback!r})", 1)
        return None

    def close(self) -> None:
        self.ov.shutdown()



def run_size(hidden, layers, args, device, dtype, trace_dir: Path | None) -> list[dict]:
    fwd = Forward(hidden, layers, args.rows, device, dtype)
    logits = torch.randn(args.rows, args.vocab, device=device, generator=torch.Generator(device=device).manual_seed(1))
    out_dir = str(trace_dir) if trace_dir else tempfile.mkdtemp(prefix="bench-gpu-events-")
    configs = [Inline(fwd, logits), Lane(fwd, logits, device), Full(fwd, logits, device, True, out_dir),
               Full(fwd, logits, device, False, None)]
    times = {c.name: [] for c in configs}
    hidden_frac: dict[str, list[float]] = {c.name: [] for c in configs}
    waits: dict[str, list[float]] = {c.name: [] for c in configs}
    fwd_ms = []
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for rep in range(args.warmup + args.repeats):
        torch.cuda.synchronize()
        ev0.record()
        fwd()
        ev1.record()
        torch.cuda.synchronize()
        if rep >= args.warmup:
            fwd_ms.append(ev0.elapsed_time(ev1))
        for c in configs:
            torch.cuda.synchronize()
            t = time.perf_counter()
            later = c.step()
            torch.cuda.synchronize()
            dt = time.perf_counter() - t
            if rep < args.warmup:
                continue
            times[c.name].append(dt)
            if later is not None:
                w = later()
                if w and w.get("exp") and w.get("fwd"):
                    e = w["exp"]
                    hidden_frac[c.name].append(overlap(e, w["fwd"]) / max(1, e[1] - e[0]))
                    waits[c.name].append((w["wait"][1] - w["wait"][0]) / 1e6)
    if trace_dir is not None:
        profile(configs, trace_dir / f"bench-{hidden}x{layers}")
    for c in configs:
        c.close()
    log_hidden, log_wait, _ = event_log_hidden(out_dir)
    base_mean, base_p50 = statistics.fmean(times["inline"]), statistics.median(times["inline"])
    rows = []
    for c in configs:
        mean, p50 = statistics.fmean(times[c.name]), statistics.median(times[c.name])
        hf = hidden_frac[c.name]
        row = {"size": f"{hidden}x{layers}", "fwd_ms": statistics.median(fwd_ms), "config": c.name,
               "mean_ms": mean * 1e3, "p50_ms": p50 * 1e3, "ratio_mean": mean / base_mean, "ratio_p50": p50 / base_p50,
               "hidden": statistics.fmean(hf) if hf else None, "wait_ms": statistics.fmean(waits[c.name]) if hf else None}
        if c.name == "overlay +instr":
            row["hidden"], row["wait_ms"] = log_hidden, log_wait
        rows.append(row)
    return rows


def profile(configs, trace_dir: Path, steps: int = 3) -> None:
    """A torch.profiler trace (CPU + CUDA) of ``steps`` steps of each configuration."""
    from torch.profiler import ProfilerActivity, profile as tprofile, record_function

    trace_dir.parent.mkdir(parents=True, exist_ok=True)
    with tprofile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for c in configs:
            for i in range(steps):
                with record_function(f"ProfilerStep#{i}"):
                    with record_function(f"bench::{c.name}"):
                        c.step()
                torch.cuda.synchronize()
    prof.export_chrome_trace(str(trace_dir) + ".pt.trace.json")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=48)
    ap.add_argument("--vocab", type=int, default=152064)
    ap.add_argument("--sizes", default="4096x4,4096x16", help="comma list of HIDDENxLAYERS forward sizes")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"], help="forward dtype (q is float32)")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--trace-dir", type=Path, help="write torch.profiler traces and the event log here")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        die(f"no CUDA device (torch {torch.__version__}, cuda {torch.version.cuda}); run it on a GPU machine, "
            "or use bench/bench_overlay.py on CPU", 1)
    try:
        sizes = [tuple(int(v) for v in s.lower().split("x")) for s in args.sizes.split(",")]
        assert all(len(s) == 2 and s[0] > 0 and s[1] > 0 for s in sizes)
    except (ValueError, AssertionError):
        die(f"--sizes {args.sizes!r}: expected e.g. 4096x4,4096x16 (HIDDENxLAYERS)")
    device = torch.device("cuda", torch.cuda.current_device())
    dtype = getattr(torch, args.dtype)
    if args.trace_dir:
        args.trace_dir.mkdir(parents=True, exist_ok=True)
    header = (f"torch {torch.__version__}, {torch.cuda.get_device_name(device)}, rows {args.rows} × vocab {args.vocab} "
              f"float32 q, forward {args.dtype}, {args.repeats} repeats (+{args.warmup} warm-up)")
    rows = []
    for hidden, layers in sizes:
        rows += run_size(hidden, layers, args, device, dtype, args.trace_dir)
    print(header)
    cols = ("size", "fwd_ms", "config", "mean_ms", "p50_ms", "ratio_mean", "ratio_p50", "hidden", "wait_ms")
    print(" | ".join(f"{c:>14}" for c in cols))
    for r in rows:
        cells = []
        for c in cols:
            v = r[c]
            if v is None:
                cells.append("–")
            elif c == "hidden":
                cells.append(f"{100 * v:.0f}%")
            elif isinstance(v, float):
                cells.append(f"{v:.3f}" if c.startswith("ratio") else f"{v:.2f}")
            else:
                cells.append(str(v))
        print(" | ".join(f"{x:>14}" for x in cells))
    if args.trace_dir:
        print(f"traces and event log in {args.trace_dir} (expo-prof analyze {args.trace_dir})")
    if args.json:
        args.json.write_text(json.dumps({"header": header, "steps": rows}, indent=1))


if __name__ == "__main__":
    main()
