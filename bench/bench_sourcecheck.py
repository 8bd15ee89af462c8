#!/usr/bin/env python
"""What the start-up source check costs (issue 43), side by side with what it rides on (not a test).

On a release the version matrix has not seen, every vLLM process the plugin loads in runs
:func:`overlay.sourcecheck.check_installed_source` once. Measured in one run, each in fresh processes (cold
interpreter, files in the page cache as at a server start; the clock starts after the imports a vLLM process
already holds), round-robin:

* ``check vllm``          the check of the installed vLLM (as if its version were unseen): five functions cut out
                          of ``topk_topp_sampler.py`` and the 6,000-line ``gpu_model_runner.py`` and parsed;
* ``check vllm, whole``   the same with whole-file parses (what the cuts avoid);
* ``check vllm-ascend``   the same on vllm-ascend 0.30.0rc2's real files (the matrix's cache), as a FAKE install;
* ``import api_server``   ``import vllm.entrypoints.openai.api_server`` alone: a floor of every server start
                          (the whole start of the tiny model on this machine is ~35–45 s).

    .venv/bin/python bench/bench_sourcecheck.py --repeat 7
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHECK = """
import sys, time
sys.path.insert(0, {repo!r})
import ast, json, re  # already imported in every vLLM process
from overlay import sourcecheck
t = time.perf_counter()
v = sourcecheck.check_installed_source({dist!r}, "9.99.0", site={site}, whole={whole})
assert v.reason is None, v.reason
print(time.perf_counter() - t)
"""
IMPORT = """
import time
t = time.perf_counter()
import vllm.entrypoints.openai.api_server
print(time.perf_counter() - t)
"""


def ascend_site(tmp: Path) -> Path:
    """A FAKE vllm-ascend install of 0.30.0rc2's real files (from the matrix's cache / PyPI)."""
    sys.path.insert(0, str(REPO / "tools"))
    import overlay_matrix

    files = overlay_matrix.wheel("vllm-ascend", "0.30.0rc2")
    for path in ("vllm_ascend/sample/sampler.py", "vllm_ascend/worker/model_runner_v1.py"):
        (tmp / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp / path).write_bytes(files.read(path))
    return tmp


def run(code: str) -> float:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        site = ascend_site(Path(tmp))
        cases = {
            "check vllm": CHECK.format(repo=str(REPO), dist="vllm", site=None, whole=False),
            "check vllm, whole": CHECK.format(repo=str(REPO), dist="vllm", site=None, whole=True),
            "check vllm-ascend": CHECK.format(repo=str(REPO), dist="vllm-ascend", whole=False,
                                              site=f"__import__('pathlib').Path({str(site)!r})"),
            "import api_server": IMPORT,
        }
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.repeat):
            for name, code in cases.items():
                times[name].append(run(code))
    floor = statistics.median(times["import api_server"])
    print(f"| what | median ms (of {args.repeat}) | min ms | ÷ import api_server |")
    print("|---|---|---|---|")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"| {name} | {1000 * med:.1f} | {1000 * min(ts):.1f} | {med / floor:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
