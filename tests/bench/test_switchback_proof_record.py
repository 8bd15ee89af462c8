"""The switchback-vs-ab proof's record is current: the code it measured is the code here, and it agreed.

The proof is an experiment (`make proof`, ~17 min of real vLLM servers with
nothing else on the machine), not a unit test; its dated record
(``bench/results/switchback_proof.json``) holds a content hash of the code the
two estimates depend on (``PROOF_FILES`` in ``bench/switchback_proof.py``).
GIVEN that record, THEN the hash recomputed from the files here equals it, the
record is a whole proof in which ab saw the expected signs, and docs/ab.md shows
its table, and that both configurations agreed; otherwise the test fails naming
`make proof`. The checker itself is tested on a temporary copy of those files.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import switchback_proof as proof  # noqa: E402


def test_the_recorded_proof_is_current(need):
    # GIVEN the committed record of the last `make proof`
    path = REPO / proof.RECORD
    need(path.is_file(), f"{proof.RECORD}: run `make proof` (nothing else on the machine) and commit it")
    record = json.loads(path.read_text(encoding="utf-8"))
    # WHEN its hash and its configurations are checked against the code here
    fix = "run `make proof` (nothing else on the machine) and commit bench/results/switchback_proof.json"
    # THEN it measured this very code, as a whole proof; docs/ab.md shows its table, verdicts included
    assert record["code_hash"] == proof.code_hash(), f"the code the proof depends on changed since: {fix}"
    assert record["files"] == list(proof.PROOF_FILES)
    rows = {r["config"]: r for r in record["rows"]}
    assert set(rows) == set(proof.CONFIGS) and record["repeat"] >= proof.PROOF_REPEAT, f"not a whole proof: {fix}"
    assert all(r["ab_sees_expected_sign"] for r in rows.values()), "ab missed the expected sign: find out why"
    # and the two methods agreed on both configurations (switchback's estimate inside ab's 95 % CI, same sign)
    disagreed = [name for name, r in rows.items() if not r["agree"]]
    assert not disagreed, f"the record says switchback and ab disagreed on {disagreed}: find out why, then {fix}"
    assert proof.doc_table() == proof.table(record), "docs/ab.md's table is not the record's: run `make proof`"


def _row(config: str, ab: float, ci: list[float], sb: float, agree: bool) -> dict:
    expect = proof.CONFIGS[config]["expect"]
    return {"config": config, "what": proof.CONFIGS[config]["what"], "expect": expect,
            "ab": {"change_pct": ab, "ci_pct": ci, "decision": "enable", "wall_s": 600.0},
            "switchback": {"change_pct": sb, "ci_pct": [sb - 1, sb + 1], "decision": "enable", "wall_s": 100.0},
            "ab_sees_expected_sign": ab * expect > 0, "agree": agree}


@pytest.fixture
def copy(tmp_path) -> Path:
    """The files the proof depends on, copied to a temporary tree laid out like the repository."""
    for rel in proof.PROOF_FILES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, tmp_path / rel)
    return tmp_path


def _record(repo: Path, **over) -> dict:
    rows = [_row("lane-free-fp64", 20.0, [10.0, 30.0], 22.0, True),
            _row("lane-shared-default", -14.0, [-20.0, -8.0], -12.0, True)]
    return {"schema": "expo-prof.switchback-proof/1", "date": "2026-12-04T00:00:00Z", "commit": "0" * 40,
            "code_hash": proof.code_hash(repo), "files": list(proof.PROOF_FILES), "repeat": proof.PROOF_REPEAT,
            "block_steps": 8, "rows": rows, **over}


def test_the_checker_passes_a_record_of_this_code(copy):
    # GIVEN a record made of the copied code, both configurations agreeing
    record = _record(copy)
    # THEN it is current
    assert proof.staleness(record, copy) == []


def test_a_one_line_change_to_the_estimator_makes_the_record_stale(copy):
    # GIVEN a record of the copied code
    record = _record(copy)
    # WHEN one line of the switchback estimator changes
    est = copy / "expo_prof/analysis/saving/switchback.py"
    est.write_text(est.read_text(encoding="utf-8") + "# one line\n", encoding="utf-8")
    # THEN the record is stale, and the message names `make proof`
    (problem,) = proof.staleness(record, copy)
    assert "changed since it was recorded" in problem and "make proof" in problem
    # AND a new proof (a record of the changed code) is current again
    assert proof.staleness(_record(copy), copy) == []


@pytest.mark.parametrize("rel", proof.PROOF_FILES)
def test_every_listed_file_counts(copy, rel):
    # GIVEN a record of the copied code WHEN any one listed file changes by a byte THEN the hash changes
    before = proof.code_hash(copy)
    (copy / rel).write_bytes((copy / rel).read_bytes() + b"\n")
    assert proof.code_hash(copy) != before


def test_a_record_of_disagreement_fails(copy):
    # GIVEN a current record in which switchback fell outside ab's CI for one configuration
    rows = _record(copy)["rows"]
    rows[1] = _row("lane-shared-default", -14.0, [-20.0, -8.0], -2.0, False)
    # THEN the checker names that configuration and `make proof`
    (problem,) = proof.staleness(_record(copy, rows=rows), copy)
    assert problem.startswith("lane-shared-default:") and "disagreed" in problem and "make proof" in problem


def test_a_short_run_is_not_a_proof(copy):
    # GIVEN a record of one configuration at ab --repeat 1 (a short try, not the proof)
    record = _record(copy, repeat=1, rows=_record(copy)["rows"][:1])
    # THEN it does not count as a current proof
    (problem,) = proof.staleness(record, copy)
    assert "not a whole proof" in problem and "make proof" in problem


def test_agree_needs_the_sign_and_the_ci():
    # GIVEN ab's change +20 % with CI [10, 30] THEN switchback at +22 agrees, at +35 (outside) or -5 does not,
    # and with no CI nothing agrees
    t = {"change_pct": 20.0, "ci_pct": [10.0, 30.0]}
    assert proof.agree(t, {"tokps_change_pct": 22.0})
    assert not proof.agree(t, {"tokps_change_pct": 35.0})
    assert not proof.agree({"change_pct": 2.0, "ci_pct": [-10.0, 30.0]}, {"tokps_change_pct": -5.0})
    assert not proof.agree({**t, "ci_pct": None}, {"tokps_change_pct": 22.0})


def test_the_table_is_written_into_the_docs(copy):
    # GIVEN a copy of docs/ab.md with the proof's markers
    (copy / "docs").mkdir()
    shutil.copyfile(REPO / proof.DOC, copy / proof.DOC)
    record = _record(copy)
    # WHEN the record's table is written there
    proof.write_doc_table(record, copy)
    # THEN docs/ab.md shows it, rows of both configurations, and the rest of the page is unchanged
    assert proof.doc_table(copy) == proof.table(record)
    assert "| lane-free-fp64 (" in proof.doc_table(copy) and "+22.0%" in proof.doc_table(copy)
    before, after = (REPO / proof.DOC).read_text(), (copy / proof.DOC).read_text()
    assert before.split(proof.DOC_BEGIN)[0] == after.split(proof.DOC_BEGIN)[0]
    assert before.split(proof.DOC_END)[1] == after.split(proof.DOC_END)[1]
