"""Long names in the outputs (issue 34 item 3): page / export size, time and peak RSS of each command on a
GENERATED Kineto trace whose draws carry 10 KB names — one name on every draw (``same``) or all different
(``distinct``) — beside the same events with a short name (``clean``). Each command runs once in a fresh process;
peak RSS is the child's ``ru_maxrss``.

    python bench/bench_long_names.py --events 100000            # the issue's case (a 1 GB trace)
    python bench/bench_long_names.py --events 20000 --code DIR  # the same with another checkout's code (before)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LONG = 10_240


def write_trace(path: Path, n: int, mode: str) -> None:
    """``n`` draws (``aten::exponential_`` + 10 KB) each under an ``aten::mm`` of another thread, in one step."""
    with open(path, "w") as f:
        f.write('{"traceEvents": [')
        f.write(json.dumps({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
                            "ts": 0, "dur": n * 10 + 100}))
        pad = "x" * LONG
        for i in range(n):
            name = "aten::exponential_" + ("" if mode == "clean" else pad if mode == "same" else f"{i:08d}" + pad[8:])
            f.write(f',{{"ph":"X","cat":"cpu_op","name":"{name}","pid":1,"tid":2,"ts":{10 + i * 10},"dur":5}}'
                    f',{{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{10 + i * 10},"dur":3}}')
        f.write('], "baseTimeNanoseconds": 0}')


def run_one(code: Path, args: list[str]) -> tuple[float, float, int]:
    """Seconds, peak RSS (MB) and exit status of ``expo-prof ARGS`` with ``code`` on PYTHONPATH."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "expo_prof", *args], env={**os.environ, "PYTHONPATH": str(code)},
                       cwd=code,  # ``-m`` puts the working directory first on sys.path
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return dt, max(peak, before) / 1024, r.returncode  # ru_maxrss of children: the largest so far


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--modes", default="clean,same,distinct")
    ap.add_argument("--code", type=Path, default=REPO, help="checkout whose expo_prof runs (default: this one)")
    ap.add_argument("--commands", default="timeline,report,export,perfetto,analyze")
    a = ap.parse_args()
    print(f"{a.events:,} draws with 10 KB names, code {a.code}, load avg {os.getloadavg()[0]:.1f}")
    print(f"{'case':9} {'command':10} {'input MB':>9} {'output MB':>10} {'s':>7} {'peak MB':>8} rc")
    for mode in a.modes.split(","):
        with tempfile.TemporaryDirectory() as d:
            src = Path(d) / f"{mode}.pt.trace.json"
            write_trace(src, a.events, mode)
            for cmd, out, more in (("timeline", "t.html", []), ("report", "r.html", []), ("export", "e.json", []),
                                   ("perfetto", "e.pftrace", ["--format", "perfetto"]), ("analyze", "a.json", [])):
                if cmd not in a.commands.split(","):
                    continue
                dest = Path(d) / out
                where = ["--json", "-o", str(dest)] if cmd == "analyze" else ["-o", str(dest)]
                # a fresh measuring parent per command: ru_maxrss of children is the largest of all of them
                wrap = subprocess.run([sys.executable, __file__, "--one", str(a.code), "export" if cmd == "perfetto" else cmd,
                                       str(src), "--op", "exponential", *where, *more],
                                      capture_output=True, text=True)
                s, peak, rc = wrap.stdout.split()
                size = dest.stat().st_size / 1e6 if dest.exists() else float("nan")
                print(f"{mode:9} {cmd:10} {src.stat().st_size / 1e6:9.0f} {size:10.1f} {float(s):7.1f} {float(peak):8.0f} {rc}")
                dest.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        dt, peak, rc = run_one(Path(sys.argv[2]), sys.argv[3:])
        print(f"{dt:.2f} {peak:.0f} {rc}")
        sys.exit(0)
    sys.exit(main())
