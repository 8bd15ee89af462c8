"""Rows of plain tables (CSV, JSON list, JSON lines): one row per run, a column per metric.

Summary rows ("mean", "avg", "total" …) are skipped: means are always
computed from the runs. Unknown columns are named in a warning and ignored.
"""

from __future__ import annotations

import csv
import itertools
import math
import re
from pathlib import Path
from typing import Any

from expo_prof.abtest.metrics import DESCRIPTOR_COLUMNS, METRICS, canonical
from expo_prof.abtest.inputs.sides import Run
from expo_prof.errors import BadInput

_NUM = re.compile(r"^\s*([-+]?(?:\d[\d,_]*)?\.?\d+(?:[eE][-+]?\d+)?)\s*[A-Za-zµ/%()]*\s*$")
_SUMMARY = re.compile(r"^\s*(mean|avg|average|median|std|stdev|sd|total|sum|summary|min|max|improvement|change|diff)\b", re.I)
_LABEL_COLS = ("run", "label", "name", "round", "trial", "id")
#: Workload keys as spelled in tables → descriptor key.
_WORKLOAD_COLS = {
    "model": "model", "model_id": "model", "num_prompts": "num_prompts", "input_len": "input_len",
    "random_input_len": "input_len", "output_len": "output_len", "random_output_len": "output_len",
    "max_concurrency": "max_concurrency", "request_rate": "request_rate", "range_ratio": "range_ratio",
    "temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "dataset_name": "dataset", "dataset": "dataset",
}


def number(value: Any) -> float | None:
    """A float from a cell: numbers, "12,453.04", "12453.04 tok/s"; None for empty / text / non-finite."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    try:  # the common case, fast (a million rows): a plain number; "nan" / "inf" are refused as below
        v = float(value)
        return v if math.isfinite(v) else None
    except (TypeError, ValueError):
        pass
    m = _NUM.match(str(value))
    if not m:
        return None
    try:
        v = float(m.group(1).replace(",", "").replace("_", ""))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _norm(col: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", col.strip().lower()).strip("_")


#: Most run rows a table (or a side) may hold: compare judges benchmark runs, one row per run; a bigger table is
#: refused after reading this many rows, so a 10⁶-row file costs a second and bounded memory, not minutes.
MAX_ROWS = 10_000


def too_many_rows(source: str) -> BadInput:
    """The refusal of a table (or side) of more than :data:`MAX_ROWS` runs."""
    return BadInput(f"{source}: more than {MAX_ROWS:,} run rows; compare judges benchmark runs (one row per run), "
                    "not per-request samples: give one row per run")


def read_csv(path: Path) -> list[dict[str, Any]]:
    """The rows of a CSV file (header line first; comma, semicolon or tab separated), read as a stream: at most
    :data:`MAX_ROWS` rows are kept."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            lines = (ln for ln in f if ln.strip() and not ln.lstrip().startswith("#"))
            header = next(lines, None)
            if header is None:
                raise BadInput(f"{path}: a table needs a header line and at least one row")
            try:  # only the delimiter: from a header line the sniffer cannot tell how quotes are escaped
                delimiter = csv.Sniffer().sniff(header, delimiters=",;\t").delimiter
            except csv.Error:
                delimiter = ","
            rows: list[dict[str, Any]] = []
            # Quoting as spreadsheets and Python's csv write it: "…" around a cell, "" for a quote inside.
            reader = csv.DictReader(itertools.chain([header], lines), dialect=csv.excel, delimiter=delimiter)
            for r in reader:
                if None in r:  # more cells than header names
                    raise BadInput(f"{path}: a row has more cells than the header has columns")
                if len(rows) == MAX_ROWS:
                    raise too_many_rows(str(path))
                rows.append(r)
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read ({exc})") from None
    except csv.Error as exc:  # a field over csv's limit (128 KiB), a broken quote …
        raise BadInput(f"{path}: not a readable CSV table (row {len(rows) + 1}: {exc})") from None
    if not rows:
        raise BadInput(f"{path}: a table needs a header line and at least one row")
    return rows


def rows_to_runs(rows: list[dict[str, Any]], source: str, warnings: list[str]) -> list[Run]:
    """Runs from table rows; warns about summary rows and unknown columns, fails when nothing is usable."""
    if not rows:
        raise BadInput(f"{source}: no rows")
    if len(rows) > MAX_ROWS:
        raise too_many_rows(source)
    columns: list[str] = []
    for r in rows:
        for c in r:
            if c not in columns:
                columns.append(c)
    metric_cols = {c: name for c in columns if (name := canonical(c))}
    unknown = [c for c in columns if c not in metric_cols and _norm(c) not in DESCRIPTOR_COLUMNS]
    if not metric_cols:
        raise BadInput(
            f"{source}: no known metric column (columns: {', '.join(columns) or 'none'}); expected e.g. "
            "output_throughput, mean_ttft_ms, mean_tpot_ms (see docs/ab.md)"
        )
    if unknown:
        warnings.append(f"{source}: ignored column(s) that are not known metrics: {', '.join(unknown)}")
    label_col = next((c for c in columns if _norm(c) in _LABEL_COLS), None)
    workload_cols = [(col, key) for col in columns if (key := _WORKLOAD_COLS.get(_norm(col)))]
    runs: list[Run] = []
    for i, row in enumerate(rows, 1):
        label = str(row.get(label_col) or "").strip() if label_col else ""
        if label and _SUMMARY.match(label):
            warnings.append(f"{source}: summary row {label!r} ignored (means are computed from the runs)")
            continue
        values: dict[str, float] = {}
        for col, name in metric_cols.items():
            v = number(row.get(col))
            if v is not None and name not in values:
                values[name] = v
        if not values:
            if any(str(v).strip() for v in row.values() if v is not None):
                warnings.append(f"{source}: row {i} has no number in any metric column; skipped")
            continue
        workload = {}
        for col, key in workload_cols:
            if row.get(col) not in (None, ""):
                v = row[col]
                n = number(v)
                workload[key] = n if n is not None else str(v).strip()
        runs.append(Run(label=label or f"row {i}", source=f"{source}#{i}", values=values, workload=workload))
    if not runs:
        raise BadInput(f"{source}: no run rows with numbers in the metric columns")
    return runs


def split_by_side(rows: list[dict[str, Any]], source: str) -> tuple[list[dict], list[dict], str] | None:
    """Rows of one table holding both sides (a side/arm/overlay column): (A rows, B rows, column), or None."""
    if not rows:
        return None
    col = next((c for c in rows[0] if _norm(c) in ("side", "arm", "overlay", "mode", "variant", "group")), None)
    if col is None:
        return None
    a_words = {"off", "a", "baseline", "base", "0", "false", "disabled", "disable", "main", "before", "control"}
    b_words = {"on", "b", "candidate", "1", "true", "enabled", "enable", "pr", "after", "treatment", "async"}
    a_rows: list[dict] = []
    b_rows: list[dict] = []
    odd: list[str] = []
    for r in rows:
        v = str(r.get(col) or "").strip().lower()
        if v in a_words:
            a_rows.append(r)
        elif v in b_words:
            b_rows.append(r)
        else:
            odd.append(v)
    if odd:
        raise BadInput(
            f"{source}: column {col!r} has values {sorted(set(odd))} that name neither side "
            "(use off/on, baseline/candidate, a/b)"
        )
    return a_rows, b_rows, col


def known_metric_keys(data: dict) -> list[str]:
    """Keys of a dict that are known metrics with numbers."""
    return [k for k in data if k in METRICS and number(data[k]) is not None]
