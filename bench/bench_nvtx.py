"""What the overlay's NVTX ranges cost a step: no tool listening, and the real NVTX library with nsys's variable set.

Per step the overlay opens three spans (``expo_prof::exponential``, ``::forward``, ``::wait``:
``overlay.lanes.span``). This measures, round-robin in one process (so drift hits every configuration alike),
the time of those three spans per step:

* ``no tool``: the default — no torch profiler, no NVTX tool: ``span`` returns a ``nullcontext``;
* ``nvtx, no tool loaded``: spans as NVTX ranges (what the lane does when ``NVTX_INJECTION64_PATH`` is set),
  through NVIDIA's real NVTX v3 library — header-only, compiled here into a small shim from the CUDA toolkit's
  ``include/nvtx3`` — whose calls are no-ops while no tool library is loaded (here: the variable names a file
  that does not exist, so NVTX's one-time initialisation finds no tool, as on a machine without nsys);
* ``python no-op ranges``: the same spans with Python no-op push/pop (the overlay's own share, without NVTX).

With nsys really recording, each range costs what nsys's injection library spends on it (NVIDIA documents a
few hundred ns per range); that cannot be measured without nsys and a GPU.

    .venv/bin/python bench/bench_nvtx.py              # 200,000 steps per configuration
    .venv/bin/python bench/bench_nvtx.py --steps 50000 --cuda-include /usr/local/cuda/include
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHIM = r"""
#include <nvtx3/nvToolsExt.h>
int shim_push(const wchar_t *s) { return nvtxRangePushW(s); }
int shim_pop(void) { return nvtxRangePop(); }
"""


def build_shim(include: str | None) -> ctypes.CDLL | None:
    """NVIDIA's NVTX v3 (header-only) compiled into a shared library, or None without a compiler or headers."""
    cands = [include] if include else sorted(glob.glob("/usr/local/cuda*/include"), reverse=True)
    inc = next((c for c in cands if c and os.path.isfile(os.path.join(c, "nvtx3", "nvToolsExt.h"))), None)
    if inc is None:
        return None
    d = tempfile.mkdtemp(prefix="nvtx-shim-")
    src, lib = os.path.join(d, "shim.c"), os.path.join(d, "libshim.so")
    Path(src).write_text(SHIM)
    try:
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", f"-I{inc}", src, "-o", lib, "-ldl"], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    so = ctypes.CDLL(lib)
    so.shim_push.argtypes, so.shim_push.restype = [ctypes.c_wchar_p], ctypes.c_int
    so.shim_pop.argtypes, so.shim_pop.restype = [], ctypes.c_int
    return so


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=7, help="round-robin rounds; the median round is reported")
    ap.add_argument("--cuda-include", default=None, help="folder holding nvtx3/nvToolsExt.h")
    args = ap.parse_args()

    # NVTX reads the variable at its first call: a path that does not exist = no tool loads.
    os.environ["NVTX_INJECTION64_PATH"] = "/nonexistent/libToolsInjection64.so"
    import torch

    from overlay import lanes
    from overlay.contract import SPAN_EXPONENTIAL, SPAN_FORWARD, SPAN_WAIT

    shim = build_shim(args.cuda_include)
    configs: dict[str, tuple | None] = {"no tool": None}
    if shim is not None:
        push, pop = shim.shim_push, shim.shim_pop
        configs["nvtx, no tool loaded"] = (push, lambda _depth: pop())  # as overlay.lanes.device_ranges wraps it
    configs["python no-op ranges"] = (lambda _name: 0, lambda _depth: None)
    names = (SPAN_EXPONENTIAL, SPAN_FORWARD, SPAN_WAIT)
    span = lanes.span
    with span(SPAN_FORWARD):  # the lazy torch.autograd.profiler import, outside the timing
        pass

    def one(n: int) -> float:
        t0 = time.perf_counter_ns()
        for _ in range(n):
            for nm in names:
                with span(nm):
                    pass
        return (time.perf_counter_ns() - t0) / n

    per: dict[str, list[float]] = {k: [] for k in configs}
    for _ in range(args.rounds):
        for k, ranges in configs.items():
            lanes._tool_ranges = ranges
            per[k].append(one(args.steps))
    lanes._tool_ranges = None
    load = os.getloadavg()[0]
    print(f"torch {torch.__version__}, {os.cpu_count()} cpus (load {load:.2f}), {args.steps} steps x {args.rounds} "
          f"rounds, 3 spans per step; NVTX shim: {'built' if shim else 'not built (no cc or nvtx3 headers)'}")
    base = statistics.median(per["no tool"])
    print(f"{'configuration':<24} {'ns/step (median round)':>24} {'min':>8} {'max':>8} {'vs no tool':>11}")
    for k, v in per.items():
        m = statistics.median(v)
        print(f"{k:<24} {m:>24.0f} {min(v):>8.0f} {max(v):>8.0f} {m - base:>+9.0f} ns")


if __name__ == "__main__":
    main()
