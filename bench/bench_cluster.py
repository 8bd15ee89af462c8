"""Cluster benchmark (issue 15): ``analyze`` of many ranks with 1 worker and with all workers, side by side.

The inputs: ``--ranks`` Kineto traces of ``--size`` each (default 32 × 100 MB),
built from the events of a real vLLM CPU trace (../shared/realtraces,
``rank0-fp64-gumbel``: ``aten::exponential_`` draws in every step), replicated
with shifted timestamps and ids as bench_ingest.py does, one file per rank
(``distributedInfo.rank`` set per file). They are written uncompressed into a
cache folder outside the repository (``~/.cache/expo-prof/bench-cluster``,
``--cache DIR``) and reused by later runs.

Each mode runs in a fresh subprocess (``expo_prof.pipeline.run`` with
``--jobs`` 1, then all cores, as ``analyze`` does: compact per-file results),
round-robin ``--repeat`` times; the best wall time is kept. The table shows
wall time, speed-up (1-worker time / N-worker time), the scaling ratio
(speed-up / N; goal ≥ 0.8), the peak RSS of the main process and of each
worker, and whether the two JSON documents are identical.

    .venv/bin/python bench/bench_cluster.py                      # 32 ranks × 100 MB
    .venv/bin/python bench/bench_cluster.py --ranks 8 --size 20M # quick
    .venv/bin/python bench/bench_cluster.py --jobs 16            # N workers instead of all cores
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REAL = Path(os.environ.get("EXPO_PROF_REALTRACES") or (REPO / ".." / "shared" / "realtraces")).resolve()
SOURCE = "vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "expo-prof" / "bench-cluster"


def parse_size(text: str) -> int:
    sys.path.insert(0, str(REPO))
    from expo_prof.pipeline.options import parse_size as ps

    return ps(text)


def build(cache: Path, ranks: int, size: int) -> Path:
    """``ranks`` trace files of about ``size`` bytes each under ``cache`` (reused when present)."""
    import orjson

    out = cache / f"{ranks}x{size // 1_000_000}MB"
    done = out / "COMPLETE"
    if done.exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    doc = orjson.loads(gzip.decompress((REAL / SOURCE).read_bytes()))
    events = doc.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    lo = min(e["ts"] for e in timed)
    hi = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    span = hi - lo + 1000.0
    max_id = max([0] + [e["args"][k] for e in events for k in ("correlation", "External id")
                        if isinstance((e.get("args") or {}).get(k), int)]
                 + [e["id"] for e in events if isinstance(e.get("id"), int)])
    one = len(orjson.dumps(events))
    copies = max(1, round(size / one))
    parts = []
    for k in range(copies):
        rep = []
        for e in events:
            if k:
                e = dict(e)
                ts = e.get("ts")
                if isinstance(ts, (int, float)):
                    e["ts"] = (round(ts * 1000) + round(k * span * 1000)) / 1000
                a = e.get("args")
                if a and any(isinstance(a.get(x), int) for x in ("correlation", "External id")):
                    a = dict(a)
                    for x in ("correlation", "External id"):
                        if isinstance(a.get(x), int) and a[x] > 0:
                            a[x] += k * (max_id + 1)
                    e["args"] = a
                if isinstance(e.get("id"), int):
                    e["id"] += k * (max_id + 1)
            rep.append(e)
        parts.append(orjson.dumps(rep)[1:-1])
    body = b",".join(parts)
    for r in range(ranks):
        d = dict(doc)
        di = dict(d.get("distributedInfo") or {})
        di.update(rank=r, world_size=ranks)
        d["distributedInfo"] = di
        head = orjson.dumps(d)
        (out / f"rank{r}.pt.trace.json").write_bytes(head[:-1] + b',"traceEvents":[' + body + b"]}")
    done.write_text(f"{copies} copies of {SOURCE}\n")
    return out


CHILD = r"""
import hashlib, json, os, resource, sys, time
sys.path.insert(0, {repo!r})
import msgspec
from expo_prof.pipeline import Options, run
from expo_prof.pipeline import parallel
stats = {{}}
orig = parallel.collect
def collect(*a, **k):
    p = orig(*a, **k)
    stats.update(workers=p.workers, peak_rss=p.peak_rss)
    return p
parallel.collect = collect
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
res = run([{path!r}], Options.make(jobs={jobs}, events=False))
wall = time.perf_counter() - t
doc = msgspec.json.encode(res.document)
print(json.dumps(dict(wall=wall, main_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      ranks=len(res.document.ranks), sha=hashlib.sha256(doc).hexdigest(), **stats)))
"""


def measure(path: Path, jobs: int) -> dict:
    # PYTHONPATH: the workers must import this checkout's expo_prof, whatever the current directory.
    env = dict(os.environ, EXPO_PROF_PARALLEL_MIN_BYTES="0", OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", CHILD.format(repo=str(REPO), path=str(path), jobs=jobs)],
                       capture_output=True, text=True, env=env, cwd=REPO)
    if p.returncode != 0:
        raise SystemExit(f"child failed (jobs={jobs}):\n{p.stderr[-3000:]}")
    m = json.loads(p.stdout.strip().splitlines()[-1])
    if jobs > 1 and not m.get("workers"):
        # The pipeline falls back to one process when the pool cannot start: that would be no measurement.
        raise SystemExit(f"the worker pool did not run (jobs={jobs}):\n{p.stderr[-3000:]}")
    return m


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--size", default="100M", help="bytes per rank file (e.g. 100M, 20M)")
    ap.add_argument("--jobs", type=int, default=0, help="workers of the parallel run (default: all cores)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    a = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from expo_prof.pipeline.parallel import cores

    n = a.jobs or cores()
    t = time.perf_counter()
    d = build(a.cache, a.ranks, parse_size(a.size))
    files = sorted(d.glob("*.json"))
    total = sum(f.stat().st_size for f in files)
    print(f"inputs: {len(files)} ranks × {total / len(files) / 1e6:.0f} MB = {total / 1e9:.2f} GB in {d} "
          f"(ready in {time.perf_counter() - t:.1f} s); cores here: {os.cpu_count()}, "
          f"usable: {cores()}, load average: {os.getloadavg()[0]:.2f}")
    best: dict[int, dict] = {}
    for _ in range(a.repeat):
        for jobs in (1, n):
            m = measure(d, jobs)
            if jobs not in best or m["wall"] < best[jobs]["wall"]:
                best[jobs] = m
    one, many = best[1], best[n]
    speedup = one["wall"] / many["wall"]
    print("\n| workers | wall s | speed-up | scaling (speed-up / workers) | main peak RSS MB | "
          "worker peak RSS MB (max / each) |")
    print("|---|---|---|---|---|---|")
    print(f"| 1 | {one['wall']:.2f} | 1.00 | 1.00 | {one['main_rss'] / 2**20:.0f} | – (in the main process) |")
    peaks = sorted(many.get("peak_rss", {}).values())
    each = ", ".join(f"{p / 2**20:.0f}" for p in peaks)
    print(f"| {n} | {many['wall']:.2f} | {speedup:.2f} | {speedup / n:.2f} | {many['main_rss'] / 2**20:.0f} | "
          f"{(peaks[-1] if peaks else 0) / 2**20:.0f} / {each} |")
    same = one["sha"] == many["sha"]
    print(f"\nranks analysed: {one['ranks']} / {many['ranks']}; JSON documents identical: {same}; "
          f"goal: scaling ≥ 0.8 → {'met' if speedup / n >= 0.8 else 'NOT met'} "
          f"(load average after: {os.getloadavg()[0]:.2f})")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
