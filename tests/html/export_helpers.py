"""Shared by the export tests: running the command, a second rank made from a real trace, analyses to compare."""

from __future__ import annotations

import gzip
import re
import shutil
from pathlib import Path

from click.testing import CliRunner

from expo_prof.cli.main import cli
from expo_prof.pipeline import Options, run
from shared_paths import REPO  # type: ignore[import-not-found]  (tests/ is on sys.path)

#: A recorded vLLM CPU run with the overlay on: a Kineto trace of rank 0 and the overlay event log of the process.
RUN_WITH_LOG = REPO / "traces" / "samples" / "tiny-cpu-off-on" / "02-on"


def export(tmp_path: Path, *args: str, name: str = "annotated.json") -> tuple[Path, str]:
    """``expo-prof export ARGS -o tmp_path/name``; the written path and the command's output."""
    out = tmp_path / name
    r = CliRunner().invoke(cli, ["export", *args, "-o", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return out, r.output


def as_rank(src: Path, dst: Path, rank: int) -> Path:
    """The real trace ``src`` with its distributedInfo.rank set to ``rank`` (all other bytes unchanged)."""
    raw = gzip.decompress(src.read_bytes()) if src.name.endswith(".gz") else src.read_bytes()
    new, n = re.subn(rb'("distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*)\d+', rb"\g<1>" + str(rank).encode(), raw, count=1)
    assert n == 1, "no distributedInfo.rank in the source"
    dst.write_bytes(gzip.compress(new))
    return dst


def two_ranks(tmp_path: Path, src: Path) -> Path:
    """A folder holding the real trace as rank 0 and the same trace relabelled as rank 1 (one recording)."""
    d = tmp_path / "two-ranks"
    d.mkdir()
    shutil.copy(src, d / "rank0.pt.trace.json.gz")
    as_rank(src, d / "rank1.pt.trace.json.gz", 1)
    return d


def instances(paths: list[Path], op: str | None = None, source: str = "auto", start: bool = True) -> dict[str, list]:
    """Every counted instance (rank, step, start, total/hidden/exposed ns), sorted, as plain lists."""
    t = run(paths, Options.make(op=op, source=source)).instances()
    keys = ("rank", "start_ns", "step", "total_ns", "hidden_ns", "exposed_ns") if start else (
        "rank", "step", "total_ns", "hidden_ns", "exposed_ns")
    rows = sorted(zip(*(t[k].tolist() for k in keys)))
    return {"rows": rows, "n": len(rows)}
