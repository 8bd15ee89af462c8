"""`expo-prof compare` on every kind of input and every edge case, through the real CLI.

Each test: GIVEN inputs in the formats users have (vllm bench serve result
files, CSV / JSON tables, run and session directories) WHEN compare runs
THEN the numbers, the design and the verdict are right, and bad input gets
one clear line and exit 2, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.stats as ss
from ab_helpers import bench_result, metric, ok_json, one_clear_line  # type: ignore[import-not-found]
from ab_helpers import run_dir, session_dir, write_csv  # type: ignore[import-not-found]


def test_one_run_per_side_shows_the_change_but_no_ci(tmp_path, cli):
    # GIVEN one vllm bench serve result per side
    a = bench_result(tmp_path / "off.json", output_throughput=1000.0)
    b = bench_result(tmp_path / "on.json", output_throughput=1023.0)
    # WHEN compared
    proc = cli("compare", str(a), str(b), "--json")
    out = ok_json(proc)
    tput = metric(out, "output_throughput")
    # THEN the change is shown, with no CI or test, and the verdict says why it cannot decide
    assert tput["change_pct"] == pytest.approx(2.3)
    assert tput["ci_pct"] is None and tput["t_test"] is None and tput["outcome"] == "not testable"
    assert any("one run per side" in n for n in tput["notes"])
    assert out["verdict"]["decision"] == "inconclusive"
    assert out["verdict"]["statement"].startswith("inconclusive: one run per side")
    assert "+2.30%" in out["verdict"]["statement"]
    # AND the table output says the same (never "no significant difference": nothing was tested)
    table = cli("compare", str(a), str(b))
    assert table.returncode == 0 and "verdict: inconclusive" in table.stdout
    assert "verdict: no significant difference" not in table.stdout
    assert "one run per side" in table.stdout


def test_zero_variance_never_decides_on_the_degenerate_t_test(tmp_path, cli):
    """GIVEN a perfectly deterministic benchmark: identical runs on each side, 100 vs 102 tok/s (GENERATED tables)
    WHEN compared with 3 runs per side THEN the degenerate t-test (p = 0) is reported and flagged but decides
    nothing: no point CI, and since the permutation test cannot go below p = 0.1 with 3 vs 3 runs, the verdict is
    inconclusive (before: "enable" on p = 0 and a CI of +2.00% to +2.00%);
    AND with 5 runs per side the permutation test decides alone (p = 2/C(10,5): the one split as extreme, both
    ways); AND identical sides give p = 1, no difference."""
    a = write_csv(tmp_path / "off.csv", ["run", "output_throughput"], [[1, 100.0], [2, 100.0], [3, 100.0]])
    b = write_csv(tmp_path / "on.csv", ["run", "output_throughput"], [[1, 102.0], [2, 102.0], [3, 102.0]])
    out = ok_json(cli("compare", str(a), str(b), "--json"))
    t = metric(out, "output_throughput")
    assert t["t_test"]["p"] == 0.0 and t["ci_pct"] is None and t["outcome"] == "not testable"
    assert t["decided_by"] is None and t["significant"] is None
    assert any("zero variance" in n for n in t["notes"])
    assert out["verdict"]["decision"] == "inconclusive" and out["verdict"]["p"] is None
    assert out["verdict"]["statement"].startswith("inconclusive: zero variance — output tok/s +2.00% observed")
    five_a = write_csv(tmp_path / "off5.csv", ["run", "output_throughput"], [[i, 100.0] for i in range(5)])
    five_b = write_csv(tmp_path / "on5.csv", ["run", "output_throughput"], [[i, 102.0] for i in range(5)])
    five = ok_json(cli("compare", str(five_a), str(five_b), "--json"))
    f = metric(five, "output_throughput")
    assert f["decided_by"] == "permutation" and f["outcome"] == "better" and f["ci_pct"] is None
    assert five["verdict"]["decision"] == "enable"
    assert five["verdict"]["p"] == pytest.approx(2 / 252) and five["verdict"]["test"] == "permutation"
    twin = write_csv(tmp_path / "twin.csv", ["run", "output_throughput"], [[1, 100.0], [2, 100.0], [3, 100.0]])
    same = ok_json(cli("compare", str(a), str(twin), "--json"))
    s = metric(same, "output_throughput")
    assert s["t_test"]["p"] == 1.0 and same["verdict"]["decision"] == "no significant difference"


def test_missing_and_partial_metrics(tmp_path, cli):
    # GIVEN TTFT only on side A, and one B run without TPOT
    a = write_csv(tmp_path / "off.csv", ["run", "output_throughput", "mean_ttft_ms", "mean_tpot_ms"],
                  [[1, 100, 50, 10.0], [2, 101, 52, 10.1], [3, 99, 51, 9.9]])
    b = write_csv(tmp_path / "on.csv", ["run", "output_throughput", "mean_tpot_ms"],
                  [[1, 104, 9.6], [2, 105, ""], [3, 103, 9.7]])
    out = ok_json(cli("compare", str(a), str(b), "--json"))
    # THEN TTFT is missing on B, TPOT is compared on the runs that have it (noted)
    ttft, tpot = metric(out, "mean_ttft_ms"), metric(out, "mean_tpot_ms")
    assert ttft["outcome"] == "missing" and ttft["b"]["n"] == 0 and ttft["change_pct"] is None
    assert tpot["b"]["values"] == [9.6, None, 9.7] and tpot["b"]["n"] == 2
    assert tpot["b"]["mean"] == pytest.approx(9.65)
    assert any("present in 2 of 3 runs" in n for n in tpot["notes"])
    assert tpot["t_test"]["p"] == pytest.approx(ss.ttest_ind([9.6, 9.7], [10.0, 10.1, 9.9], equal_var=False).pvalue)


def test_mismatched_workloads_are_refused_naming_the_difference(tmp_path, cli):
    # GIVEN result files of different workloads (prompt length 1536 vs 1024)
    a1 = bench_result(tmp_path / "off1.json", output_throughput=1000.0, input_len=1536)
    a2 = bench_result(tmp_path / "off2.json", output_throughput=1004.0, input_len=1536)
    b1 = bench_result(tmp_path / "on1.json", output_throughput=1030.0, input_len=1024)
    b2 = bench_result(tmp_path / "on2.json", output_throughput=1031.0, input_len=1024)
    proc = cli("compare", "-a", str(a1), "-a", str(a2), "-b", str(b1), "-b", str(b2))
    # THEN one clear line names the key, both values and where they come from
    one_clear_line(proc, "mismatched workloads", "input_len 1536", "vs 1024", "--allow-mismatch")
    # AND --allow-mismatch compares anyway, keeping the difference as a warning
    out = ok_json(cli("compare", "-a", str(a1), "-a", str(a2), "-b", str(b1), "-b", str(b2), "--allow-mismatch",
                    "--json"))
    assert any("input_len 1536" in w for w in out["warnings"])


def test_mismatched_models_in_run_directories(tmp_path, cli):
    # GIVEN run directories of two different models
    a = run_dir(tmp_path / "a", overlay=False, metrics={"output_throughput": 10.0}, model="Qwen3-32B")
    b = run_dir(tmp_path / "b", overlay=True, metrics={"output_throughput": 11.0}, model="Qwen3-30B-A3B")
    one_clear_line(cli("compare", str(a), str(b)), "model Qwen3-32B", "Qwen3-30B-A3B")


def test_csv_with_unknown_columns_and_a_summary_row(tmp_path, cli):
    # GIVEN tables with unknown columns, human-friendly metric names and a published "avg" row
    a = write_csv(tmp_path / "off.csv", ["round", "Output token throughput (tok/s)", "gpu_temp_c", "TPOT"],
                  [["r1", 1000.0, 61, 40.0], ["r2", 1010.0, 63, 39.6], ["r3", 995.0, 62, 40.3], ["avg", 9999.0, 62, 1.0]])
    b = write_csv(tmp_path / "on.csv", ["round", "Output token throughput (tok/s)", "gpu_temp_c", "TPOT"],
                  [["r1", 1030.0, 64, 38.9], ["r2", 1036.0, 65, 38.6], ["r3", 1024.0, 64, 39.1]])
    proc = cli("compare", str(a), str(b), "--json")
    out = ok_json(proc)
    t = metric(out, "output_throughput")
    # THEN the known columns are read under their canonical names, the summary row is not a run
    assert t["a"]["values"] == [1000.0, 1010.0, 995.0] and t["a"]["runs"] == ["r1", "r2", "r3"]
    assert t["a"]["mean"] == pytest.approx(np.mean([1000.0, 1010.0, 995.0]))
    assert metric(out, "mean_tpot_ms")["outcome"] == "better"  # lower TPOT is better
    # AND the warnings name the ignored column and the skipped summary row
    assert any("gpu_temp_c" in w for w in out["warnings"])
    assert any("summary row 'avg'" in w for w in out["warnings"])
    # AND a table with no known metric at all is refused clearly
    bad = write_csv(tmp_path / "bad.csv", ["run", "speed", "temp"], [[1, 5, 60], [2, 6, 61]])
    one_clear_line(cli("compare", str(bad), str(b)), "no known metric column", "speed, temp")


def test_one_table_with_a_side_column(tmp_path, cli):
    # GIVEN one JSON list holding both sides
    rows = [{"overlay": "off", "output_throughput": v} for v in (100.0, 101.0, 99.5)]
    rows += [{"overlay": "on", "output_throughput": v} for v in (97.0, 96.5, 97.4)]
    p = tmp_path / "both.json"
    p.write_text(json.dumps(rows))
    out = ok_json(cli("compare", str(p), "--json"))
    # THEN it is split by that column, unpaired, and a throughput drop means keep off
    assert out["design"]["paired"] is False and "'overlay' column" in out["design"]["reason"]
    assert out["verdict"]["decision"] == "keep off"
    off, on = np.mean([100.0, 101.0, 99.5]), np.mean([97.0, 96.5, 97.4])
    assert metric(out, "output_throughput")["change_pct"] == pytest.approx(100 * (on - off) / off)


def test_session_directory_is_paired_unless_told_otherwise(tmp_path, cli):
    # GIVEN a session of interleaved runs off, on, off, on, off, on
    vals = [(False, 100.0), (True, 103.0), (False, 97.0), (True, 100.2), (False, 104.0), (True, 106.9)]
    s = session_dir(tmp_path / "s", [(ov, {"output_throughput": v}, None) for ov, v in vals])
    out = ok_json(cli("compare", str(s), "--json"))
    t = metric(out, "output_throughput")
    # THEN runs are paired in run order and the paired t-test equals scipy's
    assert out["design"]["paired"] is True and out["design"]["pairs"] == 3
    assert t["a"]["runs"] == ["01-off", "03-off", "05-off"] and t["b"]["runs"] == ["02-on", "04-on", "06-on"]
    ref = ss.ttest_rel([103.0, 100.2, 106.9], [100.0, 97.0, 104.0])
    assert t["t_test"]["name"] == "paired t" and t["t_test"]["p"] == pytest.approx(ref.pvalue, rel=1e-9)
    # AND --unpaired switches to Welch
    out2 = ok_json(cli("compare", str(s), "--unpaired", "--json"))
    assert out2["design"]["paired"] is False and metric(out2, "output_throughput")["t_test"]["name"] == "Welch t"


def test_declared_pairing_needs_equal_counts(tmp_path, cli):
    a = write_csv(tmp_path / "a.csv", ["output_throughput"], [[1.0], [2.0], [3.0]])
    b = write_csv(tmp_path / "b.csv", ["output_throughput"], [[1.0], [2.0]])
    one_clear_line(cli("compare", str(a), str(b), "--paired"), "--paired needs as many runs", "off: 3", "on: 2")
    c = write_csv(tmp_path / "c.csv", ["output_throughput"], [[1.1], [2.2], [3.05]])
    out = ok_json(cli("compare", str(a), str(c), "--paired", "--json"))
    assert out["design"]["paired"] is True and "--paired" in out["design"]["reason"]


def test_failed_runs_are_left_out_with_a_warning(tmp_path, cli):
    # GIVEN a set of run directories, one of which crashed
    offs = tmp_path / "off"
    for i, v in enumerate((10.0, 10.2)):
        run_dir(offs / f"r{i}", overlay=False, metrics={"output_throughput": v}, started=f"2025-12-01T00:0{i}:00")
    run_dir(offs / "r9", overlay=False, metrics={}, status="crashed")
    ons = tmp_path / "on"
    for i, v in enumerate((10.5, 10.6)):
        run_dir(ons / f"r{i}", overlay=True, metrics={"output_throughput": v})
    out = ok_json(cli("compare", str(offs), str(ons), "--json"))
    assert metric(out, "output_throughput")["a"]["n"] == 2
    assert any("'crashed'" in w for w in out["warnings"])


@pytest.mark.parametrize(
    "args,needle",
    [
        (["nope-a", "nope-b"], "no such file or directory"),
        (["{bad}", "{b}"], "not JSON"),
        (["{b}"], "one input must be a session directory"),
        (["{b}", "{b}", "{b}"], "3 arguments"),
        (["{b}", "{c}", "--alpha", "0.7"], "--alpha 0.7"),
        (["{b}", "{c}", "--primary", "gpu_temp"], "--primary gpu_temp"),
        (["{b}", "{b}", "--labels", "x"], "--labels"),
        (["{b}", "{b}", "--json", "-o", "{b}"], "would overwrite an input"),
        (["{b}", "{b}", "--paired", "--unpaired"], "--paired and --unpaired contradict each other"),
        (["{b}", "{b}", "--format", "html"], "-o FILE.html"),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path, cli, args, needle):
    # GIVEN a broken input or option WHEN compare runs THEN exit 2 and one line naming the problem
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    b = bench_result(tmp_path / "b.json", output_throughput=5.0)
    c = bench_result(tmp_path / "c.json", output_throughput=5.5)  # another run: the same run twice is refused first
    argv = [a.format(bad=bad, b=b, c=c) for a in args]
    one_clear_line(cli("compare", *argv, cwd=tmp_path), needle)


def test_direction_awareness_for_latency_primary(tmp_path, cli):
    # GIVEN TPOT clearly lower with the overlay (better) and throughput unchanged
    cols = ["output_throughput", "mean_tpot_ms"]
    a = write_csv(tmp_path / "a.csv", cols, [[100, 40.1], [101, 40.3], [99, 39.9], [100, 40.0]])
    b = write_csv(tmp_path / "b.csv", cols, [[100, 38.0], [101, 38.2], [99, 37.9], [100.5, 38.1]])
    out = ok_json(cli("compare", str(a), str(b), "--primary", "TPOT", "--json"))
    # THEN a negative change of a lower-is-better metric is an improvement: enable
    assert out["primary_metric"] == "mean_tpot_ms" and out["verdict"]["decision"] == "enable"
    assert metric(out, "mean_tpot_ms")["change_pct"] < 0


def test_json_and_html_files(tmp_path, cli):
    # GIVEN a comparison written to files
    a = write_csv(tmp_path / "a.csv", ["output_throughput"], [[100.0], [101.0], [99.0]])
    b = write_csv(tmp_path / "b.csv", ["output_throughput"], [[104.0], [103.0], [105.0]])
    j, h = tmp_path / "ab.json", tmp_path / "ab.html"
    proc = cli("compare", str(a), str(b), "--json", "-o", str(j))
    assert proc.returncode == 0, proc.stderr
    proc = cli("compare", str(a), str(b), "--format", "html", "-o", str(h))
    assert proc.returncode == 0, proc.stderr
    # THEN the JSON is the versioned schema and the page holds the verdict and the figures
    out = json.loads(j.read_text())
    assert out["schema_name"] == "expo-prof.compare" and out["schema"] == 1
    page = h.read_text()
    assert "verdict: enable" in page and "plotly" in page.lower()
    # AND a second run may overwrite its own outputs but not a foreign file
    assert cli("compare", str(a), str(b), "--json", "-o", str(j)).returncode == 0
    foreign = Path(tmp_path / "notes.txt")
    foreign.write_text("my notes")
    proc = cli("compare", str(a), str(b), "--json", "-o", str(foreign))
    assert proc.returncode == 2 and "not an earlier compare output" in proc.stderr
    assert foreign.read_text() == "my notes"
