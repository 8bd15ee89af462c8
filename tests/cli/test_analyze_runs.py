"""``expo-prof analyze`` keeps different runs apart, even when their rank numbers match.

Real data: traces/samples/tiny-cpu-off-on holds two runs of vLLM's CPU server
recorded by ``expo-prof record``: 01-off (overlay off: the trace shows vLLM's
fused Gumbel op) and 02-on (overlay on: ``expo_prof::exponential`` spans and
an overlay event log). Both are rank 0.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from expo_prof.cli.main import main
from expo_prof.runs.labels import run_labels
from expo_prof.timeline import Timeline

SESSION = Path(__file__).resolve().parents[2] / "traces" / "samples" / "tiny-cpu-off-on"
OFF, ON = SESSION / "01-off", SESSION / "02-on"


def analyze_json(capsys, *paths) -> dict:
    with pytest.raises(SystemExit) as ei:
        main(["analyze", *map(str, paths), "--json"])
    out, err = capsys.readouterr()
    assert ei.value.code == 0, err
    return json.loads(out)


def analyze_tables(capsys, *paths) -> str:
    with pytest.raises(SystemExit) as ei:
        main(["analyze", *map(str, paths)])
    out, err = capsys.readouterr()
    assert ei.value.code == 0, err
    return out


def without_run(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k != "recording"}


def test_two_runs_of_rank_0_give_two_rows_each_as_analysed_alone(capsys):
    """GIVEN the real 01-off and 02-on run directories (both rank 0)
    WHEN analyze reads both at once, and each alone
    THEN there are two rank rows, one per run and labelled with its run directory, each equal to that run
    analysed alone; the steps likewise; alone, ``recording`` is null everywhere.
    """
    both = analyze_json(capsys, OFF, ON)
    alone = {str(OFF): analyze_json(capsys, OFF), str(ON): analyze_json(capsys, ON)}

    assert [(r["recording"], r["rank"]) for r in both["ranks"]] == [(str(OFF), 0), (str(ON), 0)]
    # What each run holds (checked, not assumed): the fused Gumbel op off, the overlay's spans on.
    assert both["ranks"][0]["rule"] == "cpu-fused-gumbel" and both["ranks"][1]["rule"] == "host-span"
    for row in both["ranks"]:
        one = alone[row["recording"]]
        assert [r["recording"] for r in one["ranks"]] == [None] and all(s["recording"] is None for s in one["steps"])
        assert without_run(row) == without_run(one["ranks"][0])
        mine = [without_run(s) for s in both["steps"] if s["recording"] == row["recording"]]
        assert mine == [without_run(s) for s in one["steps"]]
    # Two recordings: no combined summary (it would mix overlay off and on); each run entry carries its own,
    # equal to the run analysed alone, and names its overlay setting.
    assert both["summary"] is None
    assert [(r["label"], r["overlay"]) for r in both["recordings"]] == [(str(OFF), "off"), (str(ON), "on")]
    for entry in both["recordings"]:
        assert entry["summary"] == alone[entry["label"]]["summary"]
        assert entry["headline"] == alone[entry["label"]]["recordings"][0]["headline"]


def test_another_runs_export_is_never_dropped_as_a_duplicate(capsys):
    """GIVEN 01-off (a Kineto trace of rank 0) and only the overlay log of 02-on (rank 0 too)
    WHEN analysed together
    THEN both count: a kineto row for 01-off and an overlay-log row for 02-on — the choice between exports
    of one rank applies within a run only.
    """
    doc = analyze_json(capsys, OFF, ON / "overlay")

    assert [(r["recording"], r["fmt"]) for r in doc["ranks"]] == [(str(OFF), "kineto"), (str(ON), "overlay-log")]
    assert not any("ignored" in w for w in doc["warnings"])


def test_tables_show_one_block_per_recording(capsys):
    """GIVEN the two real runs
    WHEN analyze prints its tables for both, and for 02-on alone
    THEN with both there is one block per run, each headed by its run directory and overlay setting and ending
    with that run's own headline (the same line as alone); no line combines them.
    """
    both = analyze_tables(capsys, OFF, ON)
    one = analyze_tables(capsys, ON)
    one_head = [ln for ln in one.splitlines() if " instances, " in ln and "hidden; critical path" in ln]

    heads = [ln for ln in both.splitlines() if ln.startswith(str(OFF)) or ln.startswith(str(ON))]
    assert len(heads) == 2 and "(overlay off)" in heads[0] and "(overlay on)" in heads[1]
    lines = [ln for ln in both.splitlines() if " instances, " in ln and "hidden; critical path" in ln]
    assert len(lines) == 2 and lines[1] == one_head[0]
    assert lines[0].startswith("42 instances") and lines[1].startswith("33 instances")
    assert "1 rank, " in both and "rank(s)" not in both


def test_without_manifests_the_input_paths_are_the_runs(capsys, tmp_path):
    """GIVEN the two runs' rank-0 traces copied to two plain folders (no manifest.json), and both copied into
    one folder
    WHEN analyze reads the two folders, and the one folder
    THEN the two folders are two recordings labelled by the PATHs as given; the one folder holds two
    recordings too (two traces of rank 0 at different times are two profile windows, never merged), each
    labelled by its file.
    """
    a, b, ab = tmp_path / "a", tmp_path / "b", tmp_path / "ab"
    for d in (a, b, ab):
        d.mkdir()
    off_trace = next((OFF / "profiler").glob("rank0.*.pt.trace.json.gz"))
    on_trace = next((ON / "profiler").glob("rank0.*.pt.trace.json.gz"))
    shutil.copy(off_trace, a)
    shutil.copy(on_trace, b)
    shutil.copy(off_trace, ab)
    shutil.copy(on_trace, ab)

    two = analyze_json(capsys, a, b)
    one = analyze_json(capsys, ab)

    assert [(r["recording"], r["instances"]) for r in two["ranks"]] == [(str(a), 42), (str(b), 33)]
    assert [(Path(r["recording"]).parent, r["instances"]) for r in one["ranks"]] == [(ab, 42), (ab, 33)]
    assert [Path(r["label"]).name for r in one["recordings"]] == [off_trace.name, on_trace.name]


def _tl(source: Path) -> Timeline:
    import numpy as np

    z = np.empty(0, np.int64)
    return Timeline(rank=0, source=str(source), fmt="kineto", backend="cpu", lanes=[], names=[],
                    start=z, dur=z, lane=z.astype(np.int32), name=z.astype(np.int32), kind=z.astype(np.int8))


def test_run_labels_prefer_the_run_directory_then_the_outermost_input(tmp_path):
    """GIVEN sources under a run directory (an expo-prof manifest), under a folder with a foreign
    manifest.json, and under nested input PATHs
    WHEN run labels are worked out
    THEN the run directory wins wherever the source was given from; a manifest.json that is not expo-prof's
    does not make a run; otherwise the outermost input PATH holding the source is its run.
    """
    run = tmp_path / "run"
    (run / "profiler").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"schema": 1, "expo_prof": "test"}))
    web = tmp_path / "web" / "deep"
    web.mkdir(parents=True)
    (tmp_path / "web" / "manifest.json").write_text(json.dumps({"name": "an app", "icons": []}))

    labels = run_labels(
        [_tl(run / "profiler" / "r0.json"), _tl(run / "overlay.jsonl"), _tl(web / "r0.json"),
         _tl(tmp_path / "web" / "r1.json")],
        [run / "profiler", tmp_path / "web", web],
    )

    assert labels == [str(run), str(run), str(tmp_path / "web"), str(tmp_path / "web")]
