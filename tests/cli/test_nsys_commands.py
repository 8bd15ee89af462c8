"""Every command on Nsight Systems exports: the exact figures of GENERATED exports (tests/nsys_gen.py).

GIVEN an export written with sqlite3 in nsys's schema, whose per-step draw, hidden part, forward and wait are
known by construction (the draw fully, half and not at all under the compute kernels), WHEN analyze, timeline,
report and export run through the real CLI, THEN analyze gives exactly those figures, the pages build, and the
export read back gives them again.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from nsys_gen import write_nsys_export  # type: ignore[import-not-found]

from expo_prof.cli.main import cli


def _cli(*args: str) -> str:
    """The command's output (stdout alone with --json: warnings go to stderr)."""
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.stdout if "--json" in args else r.output


def _figures(doc: dict) -> list[tuple]:
    return [(r["rank"], r["instances"], r["total_ns"], r["hidden_ns"], r["exposed_ns"], r["forward_ns"],
             r["wait_ns"], r["critical_ns"], r["rule"]) for r in doc["ranks"]]


def _steps(doc: dict) -> list[tuple]:
    return sorted((s["rank"], s["step"], s["total_ns"], s["hidden_ns"], s["exposed_ns"], s["forward_ns"],
                   s["wait_ns"], s["critical_ns"]) for s in doc["steps"])


def _expected(truth) -> tuple[list[tuple], list[tuple]]:
    n = len(truth.total_ns)
    ranks = [(r, n, sum(truth.total_ns), sum(truth.hidden_ns), sum(truth.exposed_ns), n * truth.forward_ns,
              n * truth.wait_ns, sum(truth.critical_ns), "overlay-span") for r in range(truth.ranks)]
    steps = sorted((r, k, truth.total_ns[k], truth.hidden_ns[k], truth.exposed_ns[k], truth.forward_ns,
                    truth.wait_ns, truth.critical_ns[k]) for r in range(truth.ranks) for k in range(n))
    return ranks, steps


@pytest.mark.parametrize("schema,processes", [("2022", 1), ("2024", 2)])
def test_analyze_gives_the_exact_figures_by_construction(tmp_path, schema, processes):
    # GIVEN a GENERATED export (2022 schema, one GPU process; 2024 schema, two)
    path = tmp_path / "gen.sqlite"
    truth = write_nsys_export(path, schema=schema, processes=processes)
    # WHEN analysed with --json
    doc = json.loads(_cli("analyze", path, "--json"))
    # THEN per rank and per step: the draws found as the overlay's spans on the side stream, hidden, exposed,
    # forward (its device window), wait and critical path exactly as built
    ranks, steps = _expected(truth)
    assert _figures(doc) == ranks
    assert _steps(doc) == steps
    assert {r["fmt"] for r in doc["ranks"]} == {"nsys"}
    ver = {"2022": "nsys 2022.2.1.31, export schema 2.9.1", "2024": "nsys 2024.6.2.225, export schema 3.16.1"}
    assert {r["fmt_version"] for r in doc["ranks"]} == {ver[schema]}
    assert {r["forward_source"] for r in doc["ranks"]} == {"expo_prof::forward"}
    # AND the table's Found block names the export's version
    assert ver[schema] in " ".join(_cli("analyze", path).split())


def test_timeline_report_and_export_work_and_the_export_reads_back_the_same(tmp_path):
    # GIVEN a GENERATED export
    path = tmp_path / "gen.sqlite"
    truth = write_nsys_export(path)
    headline = "3 instances, 53.6 % hidden"
    # WHEN the timeline and report pages are built THEN each is written and prints the same headline
    for cmd, name in (("timeline", "t.html"), ("report", "r.html")):
        out = _cli(cmd, path, "-o", tmp_path / name)
        assert headline in out and (tmp_path / name).stat().st_size > 100_000
        assert "expo_prof::exponential" in (tmp_path / name).read_text(errors="replace")
    # WHEN exported (Chrome JSON and Perfetto) THEN written; the JSON read back gives the same figures
    _cli("export", path, "-o", tmp_path / "e.json")
    _cli("export", path, "--format", "perfetto", "-o", tmp_path / "e.pftrace")
    assert (tmp_path / "e.pftrace").stat().st_size > 1000
    back = json.loads(_cli("analyze", tmp_path / "e.json", "--json"))
    ranks, steps = _expected(truth)
    assert [f[1:8] for f in _figures(back)] == [r[1:8] for r in ranks]
    assert _steps(back) == steps


def test_without_the_overlay_the_exponential_kernels_are_found_by_name(tmp_path):
    # GIVEN the same GENERATED serving loop without the overlay's NVTX ranges (vLLM drawing q itself, on a side
    # stream here so that the overlap is known): only vLLM's step annotations remain on the host
    import sqlite3

    path = tmp_path / "gen.sqlite"
    truth = write_nsys_export(path)
    con = sqlite3.connect(path)
    con.execute("DELETE FROM NVTX_EVENTS WHERE text LIKE 'expo_prof::%'")
    con.commit()
    con.close()
    # WHEN analysed
    doc = json.loads(_cli("analyze", path, "--json"))
    # THEN the draws are torch's exponential kernels (the device-kernel rule), each in the step that launched it,
    # hidden and exposed as built; no sampler wait is measured
    (rank,) = doc["ranks"]
    assert rank["rule"] == "device-kernel" and rank["wait_ns"] is None
    got = sorted((s["step"], s["total_ns"], s["hidden_ns"], s["exposed_ns"]) for s in doc["steps"])
    assert got == [(k, truth.total_ns[k], truth.hidden_ns[k], truth.exposed_ns[k]) for k in range(3)]
