"""Helpers of the A/B tests (imported as ``ab_helpers``): the real CLI in a subprocess, and inputs in the documented formats.

Run directories written here follow the layout of ``expo_prof/record/rundir.py``
(manifest / workload.json) and carry ``analysis.json`` encoded from the real
analysis result model, so what the loaders read is what ``record`` and
``analyze`` write. The real end-to-end A/B (tests/e2e/test_switchback_vs_ab.py) checks the same
loaders on directories recorded from a live vLLM server.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec

DATA = Path(__file__).resolve().parent / "data"
CLI = [sys.executable, "-m", "expo_prof"]


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``expo-prof ARGS`` as a user runs it (wide console so tables are not cropped)."""
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def ok_json(proc: subprocess.CompletedProcess) -> dict:
    """The ``--json`` document of a compare that succeeded (its stderr shown when it did not)."""
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def metric(out: dict, name: str) -> dict:
    """One metric's entry of a compare ``--json`` document."""
    return {m["name"]: m for m in out["metrics"]}[name]


def one_clear_line(proc: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit 2 with one ``error:`` line on stderr (no traceback) that holds every needle."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    for n in needles:
        assert n in proc.stderr, proc.stderr


def write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def bench_result(path: Path, *, output_throughput: float, input_len: int = 1536, output_len: int = 2048,
                 completed: int = 48, model: str = "Qwen/Qwen3-32B", **extra) -> Path:
    """A ``vllm bench serve --save-result`` file (the keys vLLM 0.32 writes)."""
    data = {
        "date": "20251201-120000", "endpoint_type": "vllm", "backend": "vllm", "label": None, "model_id": model,
        "tokenizer_id": model, "num_prompts": completed, "request_rate": "inf", "burstiness": 1.0,
        "max_concurrency": None, "duration": 100.0, "completed": completed, "failed": 0,
        "total_input_tokens": input_len * completed, "total_output_tokens": output_len * completed,
        "request_throughput": output_throughput / output_len, "request_goodput": None,
        "output_throughput": output_throughput, "total_token_throughput": output_throughput * (1 + input_len / output_len),
        "mean_ttft_ms": 800.0, "median_ttft_ms": 790.0, "p99_ttft_ms": 1500.0,
        "mean_tpot_ms": 1e3 * completed / output_throughput, "median_tpot_ms": 40.0, "p99_tpot_ms": 45.0,
        **extra,
    }
    path.write_text(json.dumps(data))
    return path


def analysis_json(*, exposed_us: float, hidden_us: float, forward_us: float | None, steps: int = 100,
                  wait_us: float = 0.0, forward_source: str | None = None, rules: list[str] | None = None) -> dict:
    """An ``analyze --json`` result (built from the real result model) with the given per-step means, and
    ``summary.forward_source`` (where forward comes from; None: an analysis.json from before that key);
    ``rules``: one rank per entry, its ``rule`` (which recognition rule found the instances; None: no ranks).

    The critical path per step is exposed + wait (a wait after the draw ended: nothing to count once)."""
    from expo_prof.analysis import model as m

    def dist(mean_us: float) -> m.Dist:
        ns = int(mean_us * 1e3)
        return m.Dist(n=steps, mean=mean_us * 1e3, p50=ns, p99=ns, max=ns)

    zero = m.Dist(n=0, mean=0.0, p50=0, p99=0, max=0)
    exp_total = exposed_us + hidden_us
    per_step = m.StepDists(total_ns=dist(exp_total), hidden_ns=dist(hidden_us), exposed_ns=dist(exposed_us),
                           forward_ns=dist(forward_us) if forward_us is not None else zero,
                           wait_ns=dist(wait_us) if wait_us else zero, critical_ns=dist(exposed_us + wait_us))
    per_inst = m.InstanceDists(total_ns=dist(exp_total), hidden_ns=dist(hidden_us), exposed_ns=dist(exposed_us))
    tot = int(exp_total * 1e3) * steps
    hid = int(hidden_us * 1e3) * steps
    summary = m.Summary(
        instances=steps, total_ns=tot, hidden_ns=hid, exposed_ns=tot - hid, hidden_fraction=hid / tot if tot else None,
        forward_ns=int((forward_us or 0) * 1e3) * steps, wait_ns=int(wait_us * 1e3) * steps,
        critical_ns=tot - hid + int(wait_us * 1e3) * steps, wall_ns=tot, wall_hidden_ns=hid,
        wall_hidden_fraction=hid / tot if tot else None, ranks=1, per_instance=per_inst, per_step=per_step,
        # the count of rank-steps: "rank_steps" from schema 3 of analyze --json on, "steps" before (compare reads both)
        **{"rank_steps" if "rank_steps" in m.Summary.__struct_fields__ else "steps": steps},
        # which source measured the wait (None: unsaid, as its default was): required from issue 41 on
        **({"wait_source": None} if "wait_source" in m.Summary.__struct_fields__ else {}),
    )
    result = m.AnalysisResult(tool_version="test", op=None, inputs=["."], summary=summary, ranks=[], steps=[],
                              warnings=[], skipped=[])
    doc = json.loads(msgspec.json.encode(result))
    if forward_source is not None:
        doc["summary"]["forward_source"] = forward_source
    if rules is not None:  # the keys compare reads of a rank (a RankResult holds many more)
        doc["ranks"] = [{"rank": i, "rule": rule, "forward_source": forward_source} for i, rule in enumerate(rules)]
    return doc


def run_dir(path: Path, *, overlay: bool, metrics: dict, spec: dict | None = None, analysis: dict | None = None,
            status: str = "ok", started: str = "2025-12-01T00:00:00.000+00:00", model: str = "tiny") -> Path:
    """A run directory as ``expo-prof record`` leaves it."""
    path.mkdir(parents=True)
    spec = {"num_prompts": 48, "input_len": 1536, "output_len": 2048, "range_ratio": 0.0, "request_rate": "inf",
            "max_concurrency": None, "temperature": 1.0, **(spec or {})}
    manifest = {"schema": 1, "expo_prof": "test", "status": status, "command": ["vllm", "serve", model],
                "overlay": "on" if overlay else "off",
                "workload": {"builtin": True, **spec}, "started": started, "model": model, "metrics": metrics}
    (path / "manifest.json").write_text(json.dumps(manifest))
    (path / "workload.json").write_text(json.dumps({"spec": spec, "metrics": metrics, "notes": [], "requests": []}))
    if analysis is not None:
        (path / "analysis.json").write_text(json.dumps(analysis))
    return path


def session_dir(path: Path, runs: list[tuple[bool, dict, dict | None]], spec: dict | None = None) -> Path:
    """A session directory (``ab`` / ``record --overlay both``): runs in order, as (overlay, metrics, analysis)."""
    path.mkdir(parents=True)
    entries = []
    for i, (overlay, metrics, analysis) in enumerate(runs, 1):
        name = f"{i:02d}-{'on' if overlay else 'off'}"
        run_dir(path / name, overlay=overlay, metrics=metrics, spec=spec, analysis=analysis,
                started=f"2025-12-01T00:{i:02d}:00.000+00:00")
        entries.append({"dir": name, "overlay": overlay, "status": "ok"})
    (path / "session.json").write_text(json.dumps({"schema": 1, "command": ["vllm"], "runs": entries, "status": "ok"}))
    return path
