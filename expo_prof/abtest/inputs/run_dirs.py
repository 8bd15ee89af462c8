"""A run directory of ``expo-prof record`` as one run: workload metrics from ``workload.json`` (or the manifest),
the mechanism per step from the same pipeline every command uses (or the saved ``analysis.json``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from expo_prof.abtest.inputs import gaps, table_rows
from expo_prof.abtest.inputs.sides import Run
from expo_prof.abtest.metrics import METRICS
from expo_prof.errors import BadInput, ExpoProfError
from expo_prof.runs.layout import inside
from expo_prof.runs.manifest import read_manifest
from expo_prof.words import common_forward_source, forward_sources_by_rank

#: Workload keys of a run directory's spec compared between runs.
_SPEC_KEYS = (
    "num_prompts", "input_len", "output_len", "range_ratio", "max_concurrency", "request_rate", "burstiness",
    "temperature", "top_p", "top_k", "ignore_eos", "per_request_seed",
)


def read_json(path: Path) -> Any:
    """The JSON document of a file (BadInput when missing or unreadable)."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"{path}: not readable JSON ({exc})") from None


def own_file(run_dir: Path, name: str, warnings: list[str]) -> Path | None:
    """The run directory's file ``name`` when it is a regular file inside it; None when absent, and None with a
    warning when it is a symbolic link leading out of the run directory (never read)."""
    try:
        p = inside(run_dir, name, name)
    except BadInput as exc:
        warnings.append(f"{exc}; left out")
        return None
    return p if p.is_file() else None


def _spec_workload(spec: dict | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in _SPEC_KEYS:
        if spec and spec.get(k) is not None:
            v = spec[k]
            out[k] = math.inf if v == "inf" else v
    return out


def mechanism_values(analysis: dict) -> tuple[dict[str, float], dict[str, Any]]:
    """Per-step mechanism metrics (µs) from an ``analyze --json`` result, and facts about them."""
    summary = analysis.get("summary") or {}
    per_step = summary.get("per_step") or {}
    values: dict[str, float] = {}
    # Schema 3 counts rank-steps as rank_steps; an analysis.json that record saved before it says steps.
    rank_steps = summary.get("rank_steps", summary.get("steps"))
    if not rank_steps:
        return values, {}
    for key, name in (
        ("critical_ns", "critical_us_per_step"),
        ("exposed_ns", "exposed_exp_us_per_step"),
        ("hidden_ns", "hidden_exp_us_per_step"),
        ("total_ns", "exp_us_per_step"),
        ("forward_ns", "forward_us_per_step"),
        ("wait_ns", "wait_us_per_step"),
    ):
        d = per_step.get(key) or {}  # null: not measured in this run (unknown, not zero)
        if d.get("n"):
            values[name] = float(d["mean"]) / 1e3
    ranks = analysis.get("ranks") or []
    by_rank = [(r.get("rank"), r.get("forward_source")) for r in ranks if r.get("forward_source")]
    info = {
        "steps": rank_steps,
        "rule": ranks[0].get("rule") if ranks else None,
        # What every rank's instances are (each rank's rule, "+"-joined where several applied) and the --op
        # target if any: two sides whose instances differ are not one measure (judging/likeness.py).
        "rules": sorted({p for r in ranks if r.get("rule") for p in str(r["rule"]).split("+")}),
        "op": analysis.get("op"),
        # The run's source ("mixed" when its ranks' differ; an analysis.json from before the summary-level key
        # has it per rank only): never the first rank's alone, a mix is said.
        "forward_source": summary.get("forward_source") or common_forward_source(s for _, s in by_rank),
        "forward_by_rank": forward_sources_by_rank(by_rank) if len({s for _, s in by_rank}) > 1 else None,
        "backend": ranks[0].get("backend") if ranks else None,
    }
    return values, info


def run_mechanism(path: Path, warnings: list[str]) -> tuple[dict[str, float], dict[str, Any]]:
    """The mechanism figures of a run directory, from the same pipeline every command uses (its traces and
    overlay logs). A run whose traces are gone (or were never kept) falls back to its ``analysis.json``, the
    pipeline's document saved by ``record``; a run that traced nothing has none."""
    import msgspec

    from expo_prof.pipeline import run

    traced = any(d.is_dir() and any(d.iterdir()) for d in read_manifest(path).trace_dirs)
    if traced:
        try:
            return mechanism_values(msgspec.to_builtins(run([path]).document))
        except ExpoProfError as exc:
            warnings.append(f"{path}: no mechanism figures ({exc})")
            return {}, {}
    saved = own_file(path, "analysis.json", warnings)
    if saved is not None:
        return mechanism_values(read_json(saved))
    return {}, {}


#: The folder of a run directory the user's load command ran in (``record --load-cmd``: expo_prof/record/loadcmd.py).
_LOAD_DIR = "load"


def run_gaps(path: Path, wl: Any) -> np.ndarray | None:
    """The inter-token gaps (s) of a run's measured requests: the built-in load's ``workload.json``, or the
    ``vllm bench serve`` result a user's load command left in the run's ``load/`` folder (its ``itls``, kept
    with ``--save-detailed``); None when the run kept none (the token-arrival check is then not measurable)."""
    if not isinstance(wl, dict):
        return None
    if wl.get("source") != "load-cmd":
        return gaps.from_workload(wl)
    result_file = wl.get("result_file")
    if not isinstance(result_file, str) or not Path(result_file).name:
        return None
    # Only the file's name is taken from the record, and only inside this run's load folder: a run directory
    # received from elsewhere may name any path.
    try:
        saved = own_file(path, f"{_LOAD_DIR}/{Path(result_file).name}", [])
        return gaps.from_bench(read_json(saved)) if saved is not None else None
    except BadInput:  # unreadable: the gaps are an extra, not what the run is compared on
        return None


def load_run_dir(path: Path, warnings: list[str]) -> Run | None:
    """One run directory; None (with a warning) when the run did not end ok."""
    m = read_manifest(path)
    manifest = m.raw
    status = m.status
    if status != "ok":
        warnings.append(f"{path}: run status {status!r}; left out")
        return None
    workload_file = own_file(path, "workload.json", warnings)
    wl = read_json(workload_file) if workload_file is not None else {}
    metrics = (wl.get("metrics") if isinstance(wl, dict) else None) or manifest.get("metrics") or {}
    values = {k: float(v) for k, v in metrics.items() if k in METRICS and table_rows.number(v) is not None}
    spec = (wl.get("spec") if isinstance(wl, dict) else None) or manifest.get("workload")
    workload = _spec_workload(spec)
    model = m.model
    if model:
        workload["model"] = model
    info: dict[str, Any] = {"overlay": manifest.get("overlay"), "device": manifest.get("device")}
    mech, facts = run_mechanism(path, warnings)
    values.update(mech)
    info.update(facts)
    if not values:
        warnings.append(f"{path}: no workload metrics and no analysis (recorded with --no-load?); left out")
        return None
    return Run(label=path.name, source=str(path), values=values, workload=workload,
               started=manifest.get("started"), info=info, manifest=manifest, itl_s=run_gaps(path, wl))

