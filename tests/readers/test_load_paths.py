"""load(): many files and directories at once, ranks, skipped files, progress, and every real file."""

from __future__ import annotations

from pathlib import Path

import pytest

from expo_prof.errors import BadInput
from expo_prof.readers import load


def _all_files(rt: Path) -> list[Path]:
    return sorted(p for p in rt.rglob("*") if p.is_file())


def test_every_real_file_is_loaded_or_rejected_with_a_clear_message(rt):
    """GIVEN each file under ../shared/realtraces on its own
    WHEN loaded THEN it yields Timelines, or a one-line BadInput that names the file and says why
    (never another exception, never an internal error)."""
    loaded, rejected = [], []
    for p in _all_files(rt):
        try:
            res = load([p])
        except BadInput as exc:
            msg = str(exc)
            assert "\n" not in msg and str(p) in msg and "internal error" not in msg, msg
            rejected.append((p.name, msg))
            continue
        assert res.timelines and all(len(tl) > 0 for tl in res.timelines)
        loaded.append(p)
    # Every trace-bearing file named in PROVENANCE.md loads; the rest are summaries / settings.
    not_traces = {
        "PROVENANCE.md", "step_trace_time.csv", "op_statistic.csv", "api_statistic.csv", "operator_details.csv",
        "communication.json", "communication_matrix.json", "profiler_info_0.json", "profiler_info_1.json",
        "profiler_metadata.json", "analysis.db", "frontend-async-llm.pt.trace.json.gz", "LICENSE",
    }
    assert {n for n, _ in rejected} <= not_traces
    assert set(loaded) == {p for p in _all_files(rt) if p.name not in not_traces}
    front = [m for n, m in rejected if n == "frontend-async-llm.pt.trace.json.gz"]
    assert front and "python_function" in front[0]  # only Python frames: said so


def test_whole_tree_loads_many_ranks_at_once(rt):
    """GIVEN the whole ../shared/realtraces tree WHEN loaded as one directory THEN one Timeline per rank per
    source comes back (Ascend profile directories read once, from their richest file), ranks come from the files,
    and the alternatives are listed as skipped with the file that was read instead."""
    seen = []
    res = load([rt], progress=lambda done, total: seen.append((done, total)))
    fmts = sorted(tl.fmt for tl in res.timelines)
    assert fmts.count("ascend-trace-view") == 4 and fmts.count("ascend-db") == 2
    # test_rank_0/1 and level2 ranks 0/2 only have kernel_details.csv; msprof-analyze has two more.
    assert fmts.count("ascend-kernel-csv") == 6
    assert fmts.count("kineto") == 22 and fmts.count("msprof-db") == 1 and fmts.count("msprof-op-summary") == 1
    assert fmts.count("nsys") == 1  # the pipit export, found by its tables
    ranks = {(Path(tl.source).parent.parent.name, tl.rank) for tl in res.timelines if tl.fmt.startswith("ascend")}
    assert ("rank_2_ascend_pt", 2) in ranks and ("rank1_ascend_pt", 1) in ranks and ("test_rank_1", 1) in ranks
    skipped = {p.name: why for p, why in res.skipped}
    assert "trace_view.json" in skipped["kernel_details.csv"] or "ascend_pytorch_profiler" in skipped["kernel_details.csv"]
    # Progress: monotone, ends at the total of the files read.
    assert seen and seen[-1][0] == seen[-1][1] and all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))


def test_multiple_paths_and_ranks(rt):
    """GIVEN two rank directories of one job WHEN loaded together THEN ranks 0 and 1 come back, in input order."""
    base = rt / "msinsight/test/data/pytorch/text/level1"
    res = load([base / "rank0_ascend_pt", base / "rank1_ascend_pt"])
    assert [tl.rank for tl in res.timelines] == [0, 1]
    assert all("step_trace_time" in tl.meta for tl in res.timelines)


def test_string_path_and_no_paths(rt):
    """GIVEN a single str path, or nothing WHEN loaded THEN the str works and nothing is BadInput."""
    assert load(str(rt / "hta/tests/data/trace_compare/base/base.json.gz")).timelines[0].rank == 1
    with pytest.raises(BadInput, match="no input path"):
        load([])


def test_a_file_named_twice_is_read_once(rt):
    """GIVEN a profile directory and one of its files both on the command line WHEN loaded THEN one Timeline."""
    d = rt / "msinsight/test/data/pytorch/text/level1/rank0_ascend_pt"
    res = load([d, d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"])
    assert len(res.timelines) == 1
