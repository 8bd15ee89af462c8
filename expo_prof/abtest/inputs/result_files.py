"""Result and table files as runs: ``vllm bench serve --save-result`` JSON (or JSON lines of them, from
``--append-result``), and CSV / JSON-list tables with one row per run."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from expo_prof.abtest.inputs import gaps, table_rows
from expo_prof.abtest.inputs.sides import Run
from expo_prof.errors import BadInput


def _bench_run(data: dict, source: str, label: str) -> Run:
    values = {k: float(v) for k in table_rows.known_metric_keys(data) if (v := table_rows.number(data[k])) is not None}
    workload: dict[str, Any] = {}
    derived: set[str] = set()
    if data.get("model_id"):
        workload["model"] = Path(str(data["model_id"]).rstrip("/")).name
    for k in ("num_prompts", "max_concurrency", "burstiness"):
        if data.get(k) is not None:
            workload[k] = data[k]
    if data.get("request_rate") is not None:
        workload["request_rate"] = math.inf if data["request_rate"] == "inf" else data["request_rate"]
    done = table_rows.number(data.get("completed"))
    if done:
        for total, key in (("total_input_tokens", "input_len"), ("total_output_tokens", "output_len")):
            t = table_rows.number(data.get(total))
            if t is not None:
                workload[key] = t / done
                derived.add(key)
    return Run(label=str(data.get("label") or label), source=source, values=values, workload=workload,
               derived=derived, started=data.get("date"), itl_s=gaps.from_bench(data))


def load_file(path: Path, warnings: list[str]) -> list[Run]:
    """Runs of a result / table file (CSV, JSON object, JSON list, JSON lines)."""
    suffix = path.suffix.lower()
    if suffix == ".csv" or suffix == ".tsv":
        return table_rows.rows_to_runs(table_rows.read_csv(path), str(path), warnings)
    if suffix not in (".json", ".jsonl"):
        raise BadInput(f"{path}: unknown input (expected a run directory, a .csv table or a .json / .jsonl result)")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read ({exc})") from None
    try:
        data = json.loads(text)
    except ValueError:
        try:  # JSON lines (vllm bench serve --append-result)
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as exc:
            raise BadInput(f"{path}: not JSON or JSON lines ({exc})") from None
    if isinstance(data, dict):
        if data.get("schema_name") == "expo-prof.analyze":
            raise BadInput(f"{path}: an analyze result, not a run; pass its run directory")
        if not table_rows.known_metric_keys(data):
            raise BadInput(f"{path}: no known metric (expected a vllm bench serve result with output_throughput …)")
        return [_bench_run(data, str(path), path.stem)]
    if isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
        if all(table_rows.known_metric_keys(r) and ("completed" in r or "model_id" in r) for r in data):
            return [_bench_run(r, f"{path}#{i}", f"{path.stem}#{i}") for i, r in enumerate(data, 1)]
        return table_rows.rows_to_runs(data, str(path), warnings)
    raise BadInput(f"{path}: expected an object or a non-empty list of objects")

