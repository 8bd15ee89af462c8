"""Export benchmark: ``expo-prof export`` (JSON, Perfetto) side by side with ``analyze`` on the same input.

Each measurement runs in a fresh subprocess (peak memory is that run's alone),
round-robin over the configurations (``--repeat`` times; best wall time kept):

* ``analyze``  — ``expo_prof.pipeline.run([path])``: reading and analysis, the floor every command pays;
* ``json``     — the same plus the JSON export written to a file (the source's bytes passed through);
* ``perfetto`` — the same plus the Perfetto protobuf export.

Columns: wall seconds, ratio to ``analyze`` in the same run, peak RSS growth over
the process' RSS before the call, output size, and the decompressed input size.
Inputs: real traces from ../shared/realtraces and, with ``--size-mb``, a trace
built by replicating the vLLM CPU trace with stacks (bench_ingest.build_synthetic).

    .venv/bin/python bench/bench_export.py                   # real traces, 3 repeats
    .venv/bin/python bench/bench_export.py --size-mb 300     # plus a ~300 MB synthetic Kineto trace
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ingest import REAL, REPO, build_synthetic  # noqa: E402

INPUTS = [
    ("nccl A100 (--op nccl)", "hta/tests/data/nccl_parser_config/nccl_data.json.gz", "nccl"),
    ("vLLM CPU fp64", "vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz", None),
    ("vLLM CPU with stack", "vllm-cpu/rank0-default-with-stack.pt.trace.json.gz", None),
    ("V100 216k events (--op elementwise)", "hta/tests/data/df_index_resolver/df_index_resolver.json.gz", "elementwise"),
]

_CHILD = r"""
import json, sys, time
mode, path, op, out = sys.argv[1], sys.argv[2], sys.argv[3] or None, sys.argv[4]
def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
from pathlib import Path
from expo_prof.pipeline import Options, run
from expo_prof import output
import expo_prof.export, expo_prof.export.chrome, expo_prof.export.perfetto, expo_prof.readers.chrome.reader
base = status("VmRSS"); t = time.perf_counter()
opts = Options.make(op=op)
size = 0
if mode == "analyze":
    run([path], opts)
else:
    from expo_prof.export import export_document
    doc = export_document([Path(path)], fmt=mode, options=opts)
    size = output.write_chunks(Path(out), doc.chunks)
dt = time.perf_counter() - t
print(json.dumps({"s": dt, "peak": max(0, status("VmHWM") - base), "size": size}))
"""


def measure(mode: str, path: Path, op: str | None, tmp: Path, timeout: int, code: Path = REPO) -> dict:
    out = tmp / ("out.pftrace" if mode == "perfetto" else "out.json")
    env = {**os.environ, "PYTHONPATH": str(code), "OPENBLAS_NUM_THREADS": "1"}
    try:
        p = subprocess.run([sys.executable, "-c", _CHILD, mode, str(path), op or "", str(out)], capture_output=True,
                           text=True, timeout=timeout, env=env, cwd=code)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {timeout}s"}
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:80]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def decompressed(path: Path) -> int:
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            return path.stat().st_size
    with gzip.open(path, "rb") as g:
        return sum(len(c) for c in iter(lambda: g.read(1 << 22), b""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size-mb", type=int, default=0, help="also a synthetic Kineto trace of this size (MB)")
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--code", type=Path, default=REPO, help="checkout whose expo_prof runs (default: this one)")
    ap.add_argument("--synthetic-only", action="store_true", help="only the --size-mb trace")
    a = ap.parse_args()
    inputs = [] if a.synthetic_only else [(n, REAL / p, op) for n, p, op in INPUTS]
    if a.size_mb:
        src = REAL / "vllm-cpu/rank0-default-with-stack.pt.trace.json.gz"
        inputs.append((f"synthetic {a.size_mb} MB (vLLM CPU with stack ×k)", build_synthetic("with-stack", src, a.size_mb),
                       None))
    modes = ["analyze", "json", "perfetto"]
    print(f"{'input':40} {'MB in':>7} {'mode':9} {'s':>7} {'×analyze':>9} {'peak MB':>8} {'out MB':>7}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, path, op in inputs:
            runs: dict[str, list[dict]] = {m: [] for m in modes}
            for _ in range(a.repeat):
                for m in modes:
                    runs[m].append(measure(m, path, op, tmp, a.timeout, a.code))
            best = {}
            for m, rs in runs.items():
                ok = [r for r in rs if "error" not in r]
                best[m] = ({**min(ok, key=lambda r: r["s"]), "peak": max(r["peak"] for r in ok)} if ok else rs[0])
            mb_in = decompressed(path) / 1e6
            for m in modes:
                r = best[m]
                if "error" in r:
                    print(f"{name:40} {mb_in:7.1f} {m:9} {r['error']}")
                    continue
                ratio = r["s"] / best["analyze"]["s"] if "s" in best["analyze"] else float("nan")
                print(f"{name:40} {mb_in:7.1f} {m:9} {r['s']:7.2f} {ratio:9.2f} {r['peak'] / 1e6:8.0f} "
                      f"{r['size'] / 1e6:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
