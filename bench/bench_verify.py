#!/usr/bin/env python
"""How long `expo-prof verify` takes on the built-in tiny model, per request budget (not a test).

For each ``--samples`` budget it runs the real command, as a user does —
``expo-prof verify --samples S -- python -m vllm.entrypoints.openai.api_server
--model TINY …`` (two server launches: overlay off, then on) — and prints, from
the session's ``verify.json`` and the run manifests: the time each server took
to be ready, the time each side's request set took, the whole wall time, the
share of it spent on requests (the rest is launching and stopping servers), and
the total variation the run could detect. Budgets run one after another on the
same machine, so neighbours' load hits them alike only roughly: read the
request-time column as the budget's cost.

    .venv/bin/python bench/bench_verify.py                    # default budget (2000) and 300
    .venv/bin/python bench/bench_verify.py --samples 300 2000 8000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from expo_prof.serving.launch import DEFAULT_ENV, free_port  # noqa: E402
from expo_prof.serving.tinymodel import build_tiny_llama  # noqa: E402


def one(samples: int, model: Path, work: Path) -> dict:
    out = work / f"s{samples}"
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--port",
            str(free_port()), "--dtype", "float32", "--max-model-len", "256", "--enforce-eager",
            "--shutdown-timeout", "10"]
    env = {**os.environ, **DEFAULT_ENV, "PYTHONPATH": str(REPO)}
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "expo_prof", "-q", "verify", "--samples", str(samples), "--json",
                          "--out", str(out), "--", *argv], env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    doc = json.loads((out / "verify.json").read_text())
    ready = [json.loads((out / d / "manifest.json").read_text()).get("ready_after_s") for d in ("01-off", "02-on")]
    sides = [doc["sides"][k]["seconds"] for k in ("off", "on")]
    return {"samples": samples, "rc": res.returncode, "ready": ready, "sides": sides, "wall": wall,
            "tv": doc["checks"]["distribution"].get("detectable_tv"), "verdict": doc["verdict"]["verdict"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, nargs="+", default=[2000, 300])
    args = ap.parse_args()
    model = build_tiny_llama()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        for s in args.samples:
            rows.append(one(s, model, Path(tmp)))
            print(f"done: --samples {s}", file=sys.stderr)
    print(f"{'samples':>8} {'rc':>3} {'ready off/on s':>15} {'requests off/on s':>18} {'wall s':>7} "
          f"{'requests/wall':>13} {'TV detectable':>13}  verdict")
    for r in rows:
        req = sum(r["sides"])
        print(f"{r['samples']:>8} {r['rc']:>3} {r['ready'][0]:>7.1f}/{r['ready'][1]:<7.1f} "
              f"{r['sides'][0]:>9.1f}/{r['sides'][1]:<8.1f} {r['wall']:>7.1f} {req / r['wall']:>13.2f} "
              f"{r['tv']:>13.3f}  {r['verdict']}")


if __name__ == "__main__":
    main()
