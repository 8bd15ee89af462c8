"""Refuse to compare runs of different workloads (the difference would be the workload's, not the overlay's)."""

from __future__ import annotations

import math
from typing import Any

from expo_prof.abtest.inputs.sides import Side
from expo_prof.errors import BadInput

#: Lengths derived from averages (total tokens / requests) may differ this much (random datasets).
DERIVED_RTOL = 0.02


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isinf(v):
            return "inf"
        if v == int(v):
            return str(int(v))
        return f"{v:.4g}"
    return str(v)


def _same(x: Any, y: Any, derived: bool) -> bool:
    if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
        if math.isinf(x) or math.isinf(y):
            return x == y
        tol = DERIVED_RTOL * max(abs(x), abs(y)) if derived else 1e-9 * max(1.0, abs(x), abs(y))
        return abs(x - y) <= tol
    return str(x) == str(y)


def check(a: Side, b: Side, *, allow: bool = False) -> tuple[dict[str, Any], list[str]]:
    """The workload both sides share, and warnings; BadInput on the first difference unless ``allow``.

    Only keys known for runs of both sides are compared (a CSV without a
    ``model`` column says nothing about the model).
    """
    runs = [(a.name, r) for r in a.runs] + [(b.name, r) for r in b.runs]
    keys_a = set().union(*(r.workload for r in a.runs)) if a.runs else set()
    keys_b = set().union(*(r.workload for r in b.runs)) if b.runs else set()
    common: dict[str, Any] = {}
    problems: list[str] = []
    for key in sorted(keys_a & keys_b):
        first = None  # (side, run) of the first run that knows the key
        for side, run in runs:
            if key not in run.workload:
                continue
            if first is None:
                first = (side, run)
                continue
            f_side, f_run = first
            x, y = f_run.workload[key], run.workload[key]
            if not _same(x, y, key in run.derived or key in f_run.derived):
                problems.append(f"{key} {_fmt(x)} ({f_side}: {f_run.label}) vs {_fmt(y)} ({side}: {run.label})")
                break
        else:
            if first is not None:
                common[key] = first[1].workload[key]
    warnings: list[str] = []
    if problems:
        msg = "mismatched workloads: " + "; ".join(problems)
        if not allow:
            raise BadInput(msg + " — compare runs of one workload (or pass --allow-mismatch)")
        warnings.append(msg + " (compared anyway: --allow-mismatch)")
    return common, warnings
