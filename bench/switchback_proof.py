"""Switchback against `ab` on the real vLLM CPU server: the two configurations and how each is measured.

Shared by ``bench/bench_switchback.py`` (the table in the README) and
``tests/e2e/test_switchback_vs_ab.py`` (the proof in CI), so both measure the
same thing. Two configurations whose true effects have opposite signs:

* ``lane-free-fp64`` — vLLM's fp64-Gumbel path (``--use-fp64-gumbel``: vLLM
  draws ``q`` inline on the model's core) with the lane on the core vLLM
  leaves free (``EXPO_PROF_LANE_CPUS=auto``): the overlay takes the draw off
  the critical path — it should **win**;
* ``lane-shared-default`` — vLLM CPU's default fused Gumbel-argmax op with the
  lane forced onto the model's own core (``EXPO_PROF_LANE_CPUS`` = the core
  the forward is bound to): the draw only time-slices with the forward, and
  the overlay's native path costs more than the fused op — it should **lose**.

The model is a tiny random-weight Llama (hidden 512, 2 layers) with a
65,536-token vocabulary (built offline, ``pad_vocab``), serving 4 requests at
once: ``q`` is 4 × 65,536 per step, ~5 ms to draw on one core, well under the
forward and the logits (~15 ms: the LM head's 33M weights stream from memory
whatever the batch), so on a free core the draw hides with room to spare —
draw and forward of the same order, as on a real accelerator. Few requests
keep the API server's own work (detokenising, streaming) light on the core
the lane shares with it. Both effects are large (about +23 % and −14 % output
tok/s on this project's 2-core machine) so that `ab`'s few runs see their sign.

Each configuration is measured by ``expo-prof ab --repeat N`` (2·N server
launches) and by ``expo-prof ab --switchback`` (one launch), with the same
built-in workload; :func:`measure` returns both estimates of the output tok/s
change and the wall time of each method.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: The forward's core (vLLM binds its OpenMP threads here) and what the lane may use.
MODEL_CPU = "0"
CONFIGS: dict[str, dict] = {
    "lane-free-fp64": {
        "env": {"VLLM_CPU_OMP_THREADS_BIND": MODEL_CPU, "EXPO_PROF_LANE_CPUS": "auto"},
        "args": ["--use-fp64-gumbel"],
        "expect": +1,
        "what": "fp64-Gumbel path, lane on the free core",
    },
    "lane-shared-default": {
        "env": {"VLLM_CPU_OMP_THREADS_BIND": MODEL_CPU, "EXPO_PROF_LANE_CPUS": MODEL_CPU},
        "args": [],
        "expect": -1,
        "what": "default fused path, lane on the model's core",
    },
}
#: The tiny model: 64k vocabulary (the draw is rows × vocab), head_dim 64, an LM head of 33M weights.
MODEL = {"hidden": 512, "heads": 8, "layers": 2, "pad_vocab": 65536}
#: The built-in load of every run: 4 requests decoding 200 tokens (max-model-len 256).
WORKLOAD = ["--num-prompts", "4", "--input-len", "32", "--output-len", "200", "--warmup", "1"]
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1",
       "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


@dataclass
class Measured:
    """One configuration measured both ways."""

    config: str
    ab: dict  # compare --json of the ab session
    switchback: dict  # compare --json of the switchback run
    ab_wall_s: float
    switchback_wall_s: float
    ab_dir: Path
    switchback_dir: Path
    logs: list[str] = field(default_factory=list)

    @property
    def ab_tput(self) -> dict:
        """ab's output_throughput metric (change_pct, ci_pct, values …)."""
        return {m["name"]: m for m in self.ab["metrics"]}["output_throughput"]

    @property
    def saving(self) -> dict:
        """The switchback Saving of rank 0."""
        return self.switchback["saving"][0]


def model_dir() -> Path:
    """The tiny large-vocabulary model (built once, cached in .cache/tiny-llama)."""
    sys.path.insert(0, str(REPO))
    from expo_prof.serving.tinymodel import build_tiny_llama

    return build_tiny_llama(**MODEL)


def _server(model: Path, port: int, args: list[str]) -> list[str]:
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--dtype", "float32",
            "--max-model-len", "256", "--port", str(port), "--enforce-eager", "--shutdown-timeout", "10", *args]


def _cli(args: list[str], env: dict, cwd: Path, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "expo_prof", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    return proc, time.monotonic() - t0


def measure(config: str, work: Path, *, repeat: int = 3, block_steps: int = 8, timeout: float = 1800.0,
            model: Path | None = None) -> Measured:
    """Run ``ab --repeat`` and ``ab --switchback`` for ``config`` under ``work``; RuntimeError when one fails."""
    from expo_prof.serving.launch import free_port

    c = CONFIGS[config]
    model = model or model_dir()
    env = {**os.environ, **ENV, **c["env"], "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    for name in ("EXPO_PROF_ASYNC_EXPONENTIAL", "VLLM_ASCEND_ENABLE_ASYNC_EXPONENTIAL"):
        env.pop(name, None)
    work.mkdir(parents=True, exist_ok=True)
    ab_dir, sb_dir = work / f"{config}-ab", work / f"{config}-switchback"
    ab, ab_s = _cli(["-q", "ab", "--repeat", str(repeat), *WORKLOAD, "--session-dir", str(ab_dir), "--json",
                     "--", *_server(model, free_port(), c["args"])], env, work, timeout)
    if ab.returncode != 0:
        raise RuntimeError(f"{config}: ab failed ({ab.returncode}): {ab.stderr[-2000:]}")
    sb, sb_s = _cli(["-q", "ab", "--switchback", "--block-steps", str(block_steps), *WORKLOAD, "--session-dir",
                     str(sb_dir), "--json", "--", *_server(model, free_port(), c["args"])], env, work, timeout)
    if sb.returncode != 0:
        raise RuntimeError(f"{config}: ab --switchback failed ({sb.returncode}): {sb.stderr[-2000:]}")
    return Measured(config, json.loads(ab.stdout), json.loads(sb.stdout), ab_s, sb_s, ab_dir, sb_dir,
                    [ab.stderr, sb.stderr])


def inside(x: float, ci: list[float]) -> bool:
    """``x`` within the closed interval ``ci``."""
    return min(ci) <= x <= max(ci)
