"""A run whose workers were killed before their summary line: one warning for the run, with the reason
(issue 33, item 7). Built from the committed switchback sample, its event log cut as a killed worker leaves it."""

from __future__ import annotations

import json
import shutil

import pytest
from shared_paths import REPO  # type: ignore[import-not-found]  (tests/ is on sys.path)

from expo_prof.cli.main import main

SAMPLE = REPO / "traces/samples/tiny-cpu-switchback"


def _killed_run(tmp_path, ranks: int):
    """The sample run with every summary line removed, its event log once per rank (header rank changed)."""
    run = tmp_path / "run"
    shutil.copytree(SAMPLE, run, ignore=shutil.ignore_patterns("analysis.json"))
    (log,) = (run / "overlay").glob("expo-prof-events-*.jsonl")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    log.unlink()
    for rank in range(ranks):
        kept = [{**o, "rank": rank} if o["type"] in ("header", "step") else o for o in lines if o["type"] != "summary"]
        (run / "overlay" / f"expo-prof-events-vm-{1000 + rank}.jsonl").write_text(
            "".join(json.dumps(o) + "\n" for o in kept))
    return run


@pytest.mark.parametrize("command", ["analyze", "report"])
def test_no_summary_warning_is_said_once_per_run_with_its_reason(tmp_path, capsys, command):
    """GIVEN a recorded run with two workers' event logs, both without a summary line (killed at shutdown)
    WHEN analyze or report reads it THEN the "no summary line" warning is printed once for the run, naming both
    logs and the reason (killed before it could write its summary, SIGKILL?), not once per file."""
    run = _killed_run(tmp_path, ranks=2)
    args = [command, str(run)] + (["-o", str(tmp_path / "r.html")] if command == "report" else [])
    with pytest.raises(SystemExit) as ei:
        main(args)
    out, err = capsys.readouterr()
    assert ei.value.code == 0, err
    said = [line for line in (out + err).splitlines() if "no summary line" in line]
    assert len(said) == 1, said
    assert "2 event logs" in said[0] and "killed before it could write its summary (SIGKILL?" in said[0]
