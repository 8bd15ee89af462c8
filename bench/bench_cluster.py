"""Cluster benchmark (issue 15): ``analyze`` of many ranks with 1 worker and with all workers, side by side.

The inputs: ``--ranks`` Kineto traces of ``--size`` each (default 32 × 100 MB),
built from the events of a real vLLM CPU trace (../shared/realtraces,
``rank0-fp64-gumbel``: ``aten::exponential_`` draws in every step), replicated
with shifted timestamps and ids as bench_ingest.py does, one file per rank
(``distributedInfo.rank`` set per file). They are written uncompressed into a
cache folder outside the repository (``~/.cache/expo-prof/bench-cluster``,
``--cache DIR``) and reused by later runs.

``--gzip`` writes them gzipped instead (``rank{r}.pt.trace.json.gz``, one
gzip member each, as the profiler writes them; its own cache folder).

Each mode runs in a fresh subprocess (``expo_prof.pipeline.run`` with
``--jobs`` 1, then all cores, as ``analyze`` does: compact per-file results),
round-robin ``--repeat`` times; the best wall time is kept. The table shows
wall time, speed-up (1-worker time / N-worker time), the scaling ratio
(speed-up / N; goal ≥ 0.8), the peak RSS of the main process (its VmHWM) and
of each worker, how the workers started (fork / forkserver), and whether the
JSON documents are identical (sha256 of the msgspec-encoded document).

``--baseline REV`` runs the same modes, in the same round-robin, with the code
of git revision REV too (a detached worktree under ``.bench/worktrees/REV``,
made once and reused; its PYTHONPATH instead of this checkout's) and prints
its rows beside the new ones, with new / old wall-time ratios and whether the
old and new documents are identical. ``--hta`` also times
HolisticTraceAnalysis' parser (``parse_trace_dataframe(path, ParserConfig())``,
as bench_ingest.py) on rank 0, beside this checkout reading and analysing
rank 0 alone (``--jobs 1``), in the same round-robin.

    .venv/bin/python bench/bench_cluster.py                      # 32 ranks × 100 MB
    .venv/bin/python bench/bench_cluster.py --ranks 8 --size 20M # quick
    .venv/bin/python bench/bench_cluster.py --jobs 16            # N workers instead of all cores
    .venv/bin/python bench/bench_cluster.py --ranks 16 --size 120M --gzip   # ≈1500 draws per rank, gzipped
    .venv/bin/python bench/bench_cluster.py --ranks 8 --size 20M --baseline 74b8ef0 --hta --repeat 3
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

try:  # ISA-L compresses several times faster than zlib (an expo-prof dependency; zlib does the same job)
    from isal.igzip import compress as _gz_compress

    _GZ_LEVEL = 2
except ImportError:  # pragma: no cover
    from gzip import compress as _gz_compress  # type: ignore[assignment]

    _GZ_LEVEL = 6

REPO = Path(__file__).resolve().parents[1]
REAL = Path(os.environ.get("EXPO_PROF_REALTRACES") or (REPO / ".." / "shared" / "realtraces")).resolve()
SOURCE = "vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "expo-prof" / "bench-cluster"


def parse_size(text: str) -> int:
    sys.path.insert(0, str(REPO))
    from expo_prof.pipeline.options import parse_size as ps

    return ps(text)


def build(cache: Path, ranks: int, size: int, gz: bool = False) -> Path:
    """``ranks`` trace files of about ``size`` bytes each (uncompressed) under ``cache`` (reused when present);
    ``gz``: each gzipped, one member (as the profiler writes them)."""
    import orjson

    out = cache / f"{ranks}x{size // 1_000_000}MB{'-gz' if gz else ''}"
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
        data = head[:-1] + b',"traceEvents":[' + body + b"]}"
        if gz:
            (out / f"rank{r}.pt.trace.json.gz").write_bytes(_gz_compress(data, _GZ_LEVEL))
        else:
            (out / f"rank{r}.pt.trace.json").write_bytes(data)
    done.write_text(f"{copies} copies of {SOURCE}{' (gzipped)' if gz else ''}\n")
    return out


CHILD = r"""
import hashlib, json, os, resource, sys, time
sys.path.insert(0, {repo!r})
import msgspec
import expo_prof
from expo_prof.pipeline import Options, run
from expo_prof.pipeline import parallel
stats = {{}}
orig = parallel.collect
def collect(*a, **k):
    p = orig(*a, **k)
    stats.update(workers=p.workers, peak_rss=p.peak_rss)
    return p
parallel.collect = collect
def hwm():
    # VmHWM: this process image's own peak (ru_maxrss would carry the bench's peak across exec)
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
def main():
    m = getattr(parallel, "start_method", None)
    method = m() if m is not None and {jobs} > 1 else ("forkserver" if {jobs} > 1 else "")
    t = time.perf_counter()
    res = run([{path!r}], Options.make(jobs={jobs}, events=False))
    wall = time.perf_counter() - t
    doc = msgspec.json.encode(res.document)
    print(json.dumps(dict(wall=wall, main_rss=hwm(), code=os.path.dirname(os.path.dirname(expo_prof.__file__)),
                          ranks=len(res.document.ranks), sha=hashlib.sha256(doc).hexdigest(), method=method,
                          **stats)))
if __name__ == "__main__":
    main()
"""

HTA_CHILD = r"""
import json, logging, sys, time
logging.disable(logging.CRITICAL)
from hta.common.trace_parser import parse_trace_dataframe
from hta.configs.parser_config import ParserConfig
def hwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
t = time.perf_counter()
meta, df, sym = parse_trace_dataframe({path!r}, ParserConfig())
print(json.dumps(dict(wall=time.perf_counter() - t, main_rss=hwm(), events=len(df))))
"""


def _env(code: Path) -> dict:
    # PYTHONPATH: the workers must import this code's expo_prof, whatever the current directory.
    return dict(os.environ, EXPO_PROF_PARALLEL_MIN_BYTES="0", OPENBLAS_NUM_THREADS="1",
                PYTHONPATH=os.pathsep.join([str(code), os.environ.get("PYTHONPATH", "")]))


def measure(path: Path, jobs: int, code: Path = REPO) -> dict:
    """One ``run`` of ``path`` with ``jobs`` workers, in a fresh process importing expo_prof from ``code``."""
    p = subprocess.run([sys.executable, "-c", CHILD.format(repo=str(code), path=str(path), jobs=jobs)],
                       capture_output=True, text=True, env=_env(code), cwd=code)
    if p.returncode != 0:
        raise SystemExit(f"child failed (jobs={jobs}, code {code}):\n{p.stderr[-3000:]}")
    m = json.loads(p.stdout.strip().splitlines()[-1])
    if Path(m["code"]).resolve() != code.resolve():
        raise SystemExit(f"the child imported expo_prof from {m['code']}, not from {code}")
    if jobs > 1 and not m.get("workers"):
        # The pipeline falls back to one process when the pool cannot start: that would be no measurement.
        raise SystemExit(f"the worker pool did not run (jobs={jobs}):\n{p.stderr[-3000:]}")
    return m


def measure_hta(path: Path, timeout: float) -> dict:
    """HTA's parser on ``path`` in a fresh process (``{"error": ...}`` when it fails or runs out of time)."""
    try:
        p = subprocess.run([sys.executable, "-c", HTA_CHILD.format(path=str(path))], capture_output=True, text=True,
                           timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["failed"])[-1][:120]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def worktree(rev: str) -> Path:
    """A detached worktree of ``rev`` under ``.bench/worktrees`` (made once, reused)."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=REPO, capture_output=True,
                         text=True)
    if sha.returncode != 0:
        raise SystemExit(f"--baseline {rev}: not a revision of this repository ({sha.stderr.strip()})")
    where = REPO / ".bench" / "worktrees" / rev
    if not (where / "expo_prof").is_dir():
        where.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "worktree", "add", "--detach", str(where), rev], cwd=REPO, check=True,
                       capture_output=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True).stdout.strip()
    if head != sha.stdout.strip():
        raise SystemExit(f"{where} holds {head[:10]}, not {rev}: remove it (git worktree remove) and run again")
    return where


def _mb(n: float) -> str:
    return f"{n / 2**20:.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--size", default="100M", help="bytes per rank file, uncompressed (e.g. 100M, 20M)")
    ap.add_argument("--gzip", action="store_true", help="write the rank files gzipped")
    ap.add_argument("--jobs", type=int, default=0, help="workers of the parallel run (default: all cores)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--baseline", metavar="REV", help="also measure git revision REV's code (e.g. 74b8ef0)")
    ap.add_argument("--hta", action="store_true", help="also time HolisticTraceAnalysis' parser on rank 0")
    ap.add_argument("--hta-timeout", type=float, default=600)
    a = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from expo_prof.pipeline.parallel import cores, task_work
    from expo_prof.readers import detect, tasks

    n = a.jobs or cores()
    t = time.perf_counter()
    d = build(a.cache, a.ranks, parse_size(a.size), a.gzip)
    files = sorted(f for f in d.iterdir() if f.name.startswith("rank"))
    total = sum(f.stat().st_size for f in files)
    work = sum(task_work(tk) for tk in tasks(detect.plan([d])))
    print(f"inputs: {len(files)} ranks × {total / len(files) / 1e6:.1f} MB = {total / 1e9:.2f} GB on disk "
          f"({work / 1e9:.2f} GB to parse) in {d} ({(d / 'COMPLETE').read_text().strip()}; "
          f"ready in {time.perf_counter() - t:.1f} s); cores here: {os.cpu_count()}, usable: {cores()}, "
          f"load average: {os.getloadavg()[0]:.2f}")
    codes = {"new": REPO}
    if a.baseline:
        codes = {f"{a.baseline} (old)": worktree(a.baseline), "new": REPO}
    rank0 = min(files, key=lambda f: int("".join(c for c in f.name.split(".")[0] if c.isdigit()) or 0))
    best: dict[tuple[str, str], dict] = {}

    def keep(key: tuple[str, str], m: dict) -> None:
        """The fastest run of each configuration (an error only where none ran)."""
        if key not in best or "error" in best[key] or ("wall" in m and m["wall"] < best[key]["wall"]):
            best[key] = m

    for _ in range(a.repeat):
        for label, code in codes.items():
            for jobs in (1, n):
                keep((label, str(jobs)), measure(d, jobs, code))
        if a.hta:
            keep(("new", "rank 0"), measure(rank0, 1, REPO))
            keep(("HTA 0.5", "rank 0"), measure_hta(rank0, a.hta_timeout))
    print("\n| code | workers | wall s | speed-up | scaling (speed-up / workers) | new / old wall | "
          "main peak RSS MB | worker peak RSS MB (max / each) | workers start |")
    print("|---|---|---|---|---|---|---|---|---|")
    old_label = next((k for k in codes if k != "new"), None)
    for label in codes:
        one = best[(label, "1")]
        for jobs in (1, n):
            m = best[(label, str(jobs))]
            speedup = one["wall"] / m["wall"]
            vs = "–"
            if old_label and label == "new":
                vs = f"{m['wall'] / best[(old_label, str(jobs))]['wall']:.2f}"
            peaks = sorted((m.get("peak_rss") or {}).values())
            workers = (f"{_mb(peaks[-1])} / {', '.join(_mb(p) for p in peaks)}" if peaks
                       else "– (in the main process)")
            print(f"| {label} | {jobs} | {m['wall']:.2f} | {speedup:.2f} | {speedup / jobs:.2f} | {vs} | "
                  f"{_mb(m['main_rss'])} | {workers} | {m.get('method') or '–'} |")
    if a.hta:
        ours = best[("new", "rank 0")]
        h = best[("HTA 0.5", "rank 0")]
        print(f"| new, rank 0 alone (read + analysis) | 1 | {ours['wall']:.2f} | – | – | – | "
              f"{_mb(ours['main_rss'])} | – | – |")
        if "error" in h:
            print(f"| HTA 0.5 parse_trace_dataframe, rank 0 | 1 | {h['error']} | – | – | – | – | – | – |")
        else:
            print(f"| HTA 0.5 parse_trace_dataframe, rank 0 | 1 | {h['wall']:.2f} | – | – | "
                  f"HTA / new: {h['wall'] / ours['wall']:.1f} | {_mb(h['main_rss'])} | – | – |")
    new1, newn = best[("new", "1")], best[("new", str(n))]
    same = new1["sha"] == newn["sha"]
    speedup = new1["wall"] / newn["wall"]
    print(f"\nranks analysed: {new1['ranks']} / {newn['ranks']}; JSON documents identical (1 vs {n} workers): {same}; "
          f"goal: scaling ≥ 0.8 → {'met' if speedup / n >= 0.8 else 'NOT met'} ({speedup / n:.2f})")
    if old_label:
        old1, oldn = best[(old_label, "1")], best[(old_label, str(n))]
        same_old = old1["sha"] == oldn["sha"]
        old_new = old1["sha"] == new1["sha"]
        print(f"{old_label}: documents identical (1 vs {n} workers): {same_old}; old and new documents identical: "
              f"{old_new}; old scaling {old1['wall'] / oldn['wall'] / n:.2f}")
        same = same and same_old and old_new
    print(f"(load average after: {os.getloadavg()[0]:.2f})")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
