"""``expo-prof analyze``'s tables with several ranks and with forward from different sources.

Ranks run a step in parallel: per step across ranks the tables give the mean of ranks and the slowest rank, as
the report's cards do, never a sum. Forward is named by its source in every table that prints it: a forward
span, or the compute lanes' busy time where the trace has none. Real inputs: msinsight's two-rank torch_npu
export (no forward span: compute-busy), the vLLM CPU trace (vLLM's execute_context span), HTA's A100 NCCL trace,
and two-rank runs recorded in the test session (tests/conftest.py).
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from expo_prof.words import fmt_ns
from support.analyze_cli import analyze_out

#: Each test here costs seconds of a core (a sweep over real traces): make test-fast leaves the module to make test.
pytestmark = pytest.mark.slow




def _row(out: str, label: str) -> list[str]:
    """The cells of the table row that starts with ``label`` (cells are separated by 2+ spaces)."""
    for line in out.splitlines():
        if line.startswith(label + "  "):
            return [c.strip() for c in line[len(label):].split("  ") if c.strip()]
    raise AssertionError(f"no row {label!r} in:\n{out}")


def _per_step(doc: dict, key: str) -> dict[int, list[int]]:
    """step → each rank's value of ``key`` (a rank's rows of one step add up)."""
    by: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for st in doc["steps"]:
        if st["step"] is not None and st[key] is not None:
            by[st["step"]][st["rank"]] += st[key]
    return {s: list(r.values()) for s, r in by.items()}


@pytest.mark.parametrize("source", ["msinsight-level1", "ranks-run"])
def test_across_ranks_gives_mean_and_slowest_rank_per_step(capsys, realtraces, request, source):
    """GIVEN a real two-rank recording (a torch_npu export with --op MatMul; a synchronous job recorded here)
    WHEN analyze prints its tables THEN "Across ranks" states exposed and forward per step as the mean of ranks
    and the slowest rank (averaged over steps), computed here from analyze --json's per-rank rows, never the sum
    of the ranks; and the summary counts the steps once, not once per rank."""
    if source == "msinsight-level1":
        args, fwd = [str(realtraces / "msinsight/test/data/pytorch/text/level1"), "--op", "MatMul"], "compute busy"
    else:
        args, fwd = [str(request.getfixturevalue("ranks_run"))], "forward"
    doc = json.loads(analyze_out(capsys, *args, "--json"))
    out = analyze_out(capsys, *args)
    for key, label in (("exposed_ns", "exposed per step"), ("forward_ns", f"{fwd} per step")):
        per = _per_step(doc, key)
        assert all(len(v) == 2 for v in per.values())
        mean = sum(sum(v) / 2 for v in per.values()) / len(per)
        slowest = sum(max(v) for v in per.values()) / len(per)
        total = sum(sum(v) for v in per.values()) / len(per)
        assert _row(out, label) == [fmt_ns(mean), fmt_ns(slowest)], label
        assert fmt_ns(total) not in _row(out, label)  # the ranks' sum per step is printed nowhere in the row
    steps = {st["step"] for st in doc["steps"] if st["step"] is not None}
    assert _row(out, "instances")[1] == f"2 ranks, {len(steps)} step{'s' if len(steps) > 1 else ''} " \
                                        f"({2 * len(steps)} rank-steps)"


@pytest.mark.parametrize("args, row, says", [
    (["vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz"], "forward", "the vLLM execute_context step span"),
    (["hta/tests/data/nccl_parser_config/nccl_data.json.gz", "--op", "nccl"], "compute busy",
     "no forward span: the compute lanes' busy time"),
], ids=["vllm-cpu", "hta-nccl"])
def test_forward_is_named_by_its_source(capsys, realtraces, args, row, says):
    """GIVEN a real trace with a forward span (vLLM's execute_context) or without one (an A100 trace, --op nccl)
    WHEN analyze prints its tables THEN the summary's forward row names the source beside its figure, and the
    distribution and worst-step tables call compute-busy time "compute busy", never "forward"."""
    out = analyze_out(capsys, str(realtraces / args[0]), *args[1:])
    assert _row(out, row)[1] == says
    dist = out[out.index("Distributions"):out.index("Per rank")]
    assert _row(dist, row)  # the per-step row has the same name
    worst = out[out.index("Worst steps"):]
    assert f"  {row}" in worst.splitlines()[1]  # the column header
    if row == "compute busy":
        assert not any(line.startswith("forward") for line in out.splitlines())


def test_mixed_sources_across_ranks_are_said(capsys, mixed_ranks_run):
    """GIVEN a real two-rank run where only rank 0 has the expo_prof::forward span WHEN analyze prints its tables
    and its JSON THEN the summary's forward row says the sources differ and a line names each rank's, and the JSON's
    summary says "mixed" (each rank's own source in ranks[])."""
    doc = json.loads(analyze_out(capsys, str(mixed_ranks_run), "--json"))
    assert doc["summary"]["forward_source"] == "mixed"
    assert {r["rank"]: r["forward_source"] for r in doc["ranks"]} == {0: "expo_prof::forward", 1: "compute-busy"}
    out = analyze_out(capsys, str(mixed_ranks_run))
    assert _row(out, "forward")[1] == "sources differ across ranks; summed over 2 ranks"
    flat = " ".join(out.split())
    assert ("forward: sources differ across ranks — rank 0: forward (expo_prof::forward span); "
            "rank 1: compute busy (no forward span)") in flat
