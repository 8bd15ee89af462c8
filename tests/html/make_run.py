"""Record a real run directory with the real torch profiler (CPU): a small forward pass per
step and the exponential draw ``q`` of vLLM's Gumbel-max sampler, either inline after the
forward (``--overlay off``) or on a spare thread during it (``--overlay on``, what the
overlay does), inside the overlay's span names. Used by the HTML tests as a recorded run
that is cheap enough to make in every test session (no vLLM server needed).

``--world N`` records a synchronous N-rank job instead: N processes in a ``torch.distributed``
(gloo) group, each rank profiled by its own profiler (the trace names its rank in
``distributedInfo``, as a real multi-rank trace does), every step ending in an all-reduce so
that the ranks run their steps in parallel and wait for each other, as tensor-parallel ranks do.
``--bare-ranks 1`` leaves rank 1's forward without the ``expo_prof::forward`` span (a worker
without the overlay's instrumentation): its forward time is then the busy time of its threads.

Run as a script (torch stays out of the pytest process):
``python tests/html/make_run.py OUT --overlay on [--steps N] [--evil-names] [--world N [--bare-ranks R,…]]``.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import platform
import queue
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

#: Names that must never become markup in a page (the escaping tests look for them). No double
#: quote: Kineto writes names unescaped, so a '"' would make the trace itself invalid JSON.
EVIL = ("<script>alert('xss-script')</script><!--", "'><img src=x onerror=alert('xss-img')></td></tr>")

#: An OS thread name (15 bytes at most) that plotly would render as markup if labels were not escaped.
EVIL_THREAD = "<br><b>lane</b>"


def _name_os_thread(name: str) -> None:
    """Set the calling thread's OS name (Linux prctl), which the profiler records as the thread's name."""
    import ctypes

    try:
        ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--overlay", choices=("on", "off"), default="on")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--evil-names", action="store_true", help="wrap steps in spans named like markup")
    ap.add_argument("--world", type=int, default=1, help="ranks of a synchronous job (torch.distributed, gloo)")
    ap.add_argument("--bare-ranks", default="", help="ranks (comma-separated) whose forward has no forward span")
    ap.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)  # set for the ranks' own processes
    a = ap.parse_args()
    if a.world > 1 and a.rank is None:
        return _launch_ranks(a)

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    dist = None
    if a.rank is not None:
        import torch.distributed as dist

        # Before the profiler starts: it records the group (rank, world size) in the trace's distributedInfo.
        dist.init_process_group("gloo", init_method=f"file://{a.out / '.store'}", rank=a.rank, world_size=a.world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    hidden = 512
    layers = [torch.randn(hidden, hidden) / hidden**0.5 for _ in range(6)]
    head = torch.randn(hidden, a.vocab) / hidden**0.5
    x = torch.randn(a.rows, hidden)

    bare = a.rank is not None and str(a.rank) in a.bare_ranks.split(",")

    def forward() -> torch.Tensor:
        with contextlib.nullcontext() if bare else record_function("expo_prof::forward"):
            h = x
            for w in layers:
                h = torch.tanh(h @ w)
            return h @ head

    # The spare lane: one persistent worker thread, as the overlay's CpuThreadLane.
    jobs: queue.Queue = queue.Queue()

    def lane() -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            out, done = job
            with record_function("expo_prof::exponential"):
                out.append(torch.empty(a.rows, a.vocab).exponential_())
            done.set()

    worker = threading.Thread(target=lane, daemon=True)
    worker.start()
    if a.evil_names:
        # The model thread: the profiler reads its name when profiling starts (other threads' names it
        # reads racily).
        _name_os_thread(EVIL_THREAD)

    def sample(logits: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return (logits.softmax(-1) / q).argmax(-1)

    a.out.mkdir(parents=True, exist_ok=True)
    prof_dir = a.out / "profiler"
    prof_dir.mkdir(exist_ok=True)
    (a.out / "overlay").mkdir(exist_ok=True)
    started = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    tokens = 0
    # profile_all_threads: the spare thread's draw is recorded too (as vLLM's traces show it);
    # the schedule makes step() write ProfilerStep#N markers (one warm-up step first).
    cfg = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    sched = schedule(wait=0, warmup=1, active=a.steps, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched, experimental_config=cfg) as prof:
        for step in range(a.steps + 1):
            span = record_function(EVIL[step % 2]) if a.evil_names else None
            if span is not None:
                span.__enter__()
            if step == 1:
                t0 = time.perf_counter()
            q: list = []
            done = threading.Event()
            if a.overlay == "on":
                jobs.put((q, done))
                logits = forward()
                with record_function("expo_prof::wait"):
                    done.wait()
            else:
                logits = forward()
                with record_function("expo_prof::exponential"):
                    q.append(torch.empty(a.rows, a.vocab).exponential_())
            if step:  # step 0 is the profiler's warm-up
                tokens += int(sample(logits, q[0]).numel())
            if dist is not None:
                # The step ends when every rank has sampled, as a tensor-parallel step waits for its slowest rank.
                dist.all_reduce(torch.ones(1))
            if span is not None:
                span.__exit__(None, None, None)
            prof.step()
    dt = time.perf_counter() - t0
    rank = a.rank or 0
    raw = prof_dir / f"trace.{rank}.json"  # one name per rank: the ranks export side by side
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as f, gzip.open(prof_dir / f"rank{rank}.{os.getpid()}.pt.trace.json.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    raw.unlink()
    jobs.put(None)  # only now: the profiler names threads from the live process when it writes the trace
    if dist is not None:
        dist.destroy_process_group()
        if rank:
            return 0  # rank 0 writes the manifest (its metrics stand for the job's)
    manifest = {
        "schema": 1,
        "expo_prof": "test",
        "status": "ok",
        "command": [sys.executable, *sys.argv],
        "versions": {"torch": torch.__version__, "python": platform.python_version()},
        "host": {"hostname": platform.node(), "machine": platform.machine()},
        "device": "cpu",
        "overlay": a.overlay,
        "profiler": "torch",
        "profiler_dir": "profiler",
        "workload": {"builtin": False, "steps": a.steps, "rows": a.rows, "vocab": a.vocab, "world": a.world},
        "started": started,
        "ended": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        "metrics": {
            "completed": a.rows,
            "failed": 0,
            "total_output_tokens": tokens,
            "duration": dt,
            "output_throughput": tokens / dt,
            "median_tpot_ms": 1e3 * dt / a.steps,
        },
        "notes": ["recorded by tests/html/make_run.py (real torch profiler, CPU)"],
    }
    (a.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return 0


def _launch_ranks(a: argparse.Namespace) -> int:
    """Run this script once per rank (``--rank r``), in parallel, and wait for all of them."""
    a.out.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, __file__, str(a.out), "--overlay", a.overlay, "--steps", str(a.steps), "--rows",
            str(a.rows), "--vocab", str(a.vocab), "--world", str(a.world), "--bare-ranks", a.bare_ranks,
            *(["--evil-names"] if a.evil_names else [])]
    procs = [subprocess.Popen([*argv, "--rank", str(r)]) for r in range(a.world)]
    codes = [p.wait(timeout=600) for p in procs]
    (a.out / ".store").unlink(missing_ok=True)
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
