"""What follows a document, and NUL bytes (issue 42 items 5 and 6): reading time and peak memory, as ratios.

Each row reads one file with ``expo_prof.readers.load([path])`` in a fresh process (cold, as a CLI run is) and
reports the best wall time of ``--repeat`` runs, round-robin over the rows, and the process' peak RSS
(``VmHWM``). The rows are built in a temporary folder from a real trace of ../shared/realtraces (A):

* ``A``, ``cat A A`` (two documents), ``A + 600 KB`` of garbage made of JSON punctuation (``]``, ``}, {"``) —
  ratio to ``A``; the same three gzip'd: ``A.gz``, ``cat A.gz A.gz`` (two members), ``A.gz + 600 KB`` that
  are not gzip data — ratio to ``A.gz``. Before issue 42, ``cat A A`` of the 3.8 MB trace took 52 s (ratio
  ~130) and ``A + 600 KB`` 4.3 s on the issue's machine; the goal is a ratio near 1 (the second document and
  the garbage are not read).
* 1 GiB of NUL bytes (sparse files: nothing written to disk) as a Kineto trace, as an event log, and after A:
  refused (or read past) from the first window, peak ≤ 64 MB (before: 974 MB per 100 MB of NUL for the trace).

    .venv/bin/python bench/bench_trailing.py                       # the fp64 trace (3.8 MB), 5 repeats
    .venv/bin/python bench/bench_trailing.py --trace vllm-cpu/rank0-default-with-stack.pt.trace.json.gz --repeat 3
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REAL = (REPO / ".." / "shared" / "realtraces").resolve()
GiB = 1 << 30

_CHILD = """
import json, sys, time
from pathlib import Path
from expo_prof.errors import BadInput
from expo_prof.readers import load
t = time.perf_counter()
try:
    res = load([Path(sys.argv[1])])
    out = {"events": sum(len(tl) for tl in res.timelines), "warnings": res.warnings}
except BadInput as exc:
    out = {"refused": str(exc)}
out["s"] = time.perf_counter() - t
with open("/proc/self/status") as f:
    out["peak_mb"] = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")) / 1024
print(json.dumps(out))
"""


def _run(path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env,
                       timeout=900, check=True)
    return json.loads(p.stdout)


def _sparse(path: Path, size: int, prefix: bytes = b"") -> Path:
    with open(path, "wb") as f:
        f.write(prefix)
    os.truncate(path, size)
    return path


def _rows(trace: Path, d: Path) -> list[tuple[str, Path, str | None]]:
    """(row name, file, the row it is compared with)."""
    comp = trace.read_bytes()
    raw = gzip.decompress(comp) if comp[:2] == b"\x1f\x8b" else comp
    if comp is raw:
        comp = gzip.compress(raw)
    rng = random.Random(42)
    junk = b"@" + b"".join(rng.choice([b'}, {"', b"]", b"x", b" ", b'"', b"{"]) for _ in range(600_000))[:599_999]
    files = {
        "A": raw, "cat A A": raw + raw, "A + 600 KB": raw + junk,
        "A.gz": comp, "cat A.gz A.gz": comp + comp, "A.gz + 600 KB": comp + junk,
    }
    rows: list[tuple[str, Path, str | None]] = []
    for name, data in files.items():
        p = d / (name.replace(" ", "_").replace("+", "plus").replace(".gz", "") + ".pt.trace.json"
                 + (".gz" if ".gz" in name else ""))
        p.write_bytes(data)
        rows.append((name, p, None if name in ("A", "A.gz") else ("A.gz" if ".gz" in name else "A")))
    rows.append(("1 GiB NUL trace", _sparse(d / "nul.pt.trace.json", GiB), None))
    rows.append(("1 GiB NUL event log", _sparse(d / "expo-prof-events-nul.jsonl", GiB), None))
    rows.append(("A + 1 GiB NUL", _sparse(d / "a_nul.pt.trace.json", len(raw) + GiB, raw), "A"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz",
                    help="a real trace under ../shared/realtraces (default: %(default)s)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-trailing-") as tmp:
        rows = _rows(REAL / args.trace, Path(tmp))
        best: dict[str, dict] = {}
        for _ in range(args.repeat):
            for name, p, _ref in rows:
                got = _run(p)
                if name not in best or got["s"] < best[name]["s"]:
                    best[name] = {**got, "peak_mb": max(got["peak_mb"], best.get(name, {}).get("peak_mb", 0))}
        print(f"{args.trace}: best of {args.repeat}, each in a fresh process")
        print(f"{'row':<22} {'s':>8} {'ratio':>7} {'peak MB':>8}  result")
        for name, _p, ref in rows:
            b = best[name]
            ratio = f"{b['s'] / best[ref]['s']:.2f}" if ref else "-"
            what = b.get("refused") or f"{b['events']:,} events, {len(b['warnings'])} warning(s)"
            first = next((w for w in b.get("warnings", []) if "document" in w or "gzip" in w), "")
            print(f"{name:<22} {b['s']:>8.3f} {ratio:>7} {b['peak_mb']:>8.0f}  {what}"
                  + (f"\n{'':<48}{first[first.find(': ') + 2:][:110]}" if first else ""))


if __name__ == "__main__":
    main()
